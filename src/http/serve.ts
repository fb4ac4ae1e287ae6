// The HTTP boundary every listener shares: `serve()` over a route table (path, methods, handler), with
// one 405 (and its Allow header), one 404 catch-all and one error mapper per listener (a refusal as it
// is, a store outage as 503, a bug as 500 with an error log).

import { createServer, IncomingMessage, type Server, type ServerOptions, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { HttpError, httpErrorFor, methodNotAllowed, writeError } from './errors.ts';
import { describe, type Logger } from '../observability/logger.ts';

export type Method = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS';

export interface Route<Req extends IncomingMessage = IncomingMessage> {
  /** An exact path, or a prefix followed by `*` (`/oauth/*` answers `/oauth/` and everything under it). */
  path: string;
  /** The methods the path answers (`GET` answers `HEAD` too), or `any` for a path that passes every method on. */
  methods: readonly Method[] | 'any';
  /** `path` is the request's path without its query. Throws (or rejects) to answer with an error. */
  handler: (req: Req, res: ServerResponse<Req>, path: string) => Promise<void> | void;
}

export interface ServeOptions<C extends typeof IncomingMessage> {
  /** Names the listener in log lines. */
  name: string;
  routes: readonly Route<InstanceType<C>>[];
  logger: Logger;
  /** The request class, when requests carry state (Node builds one per request). */
  request?: C;
  /** node:http settings: timeouts, header size. */
  http: ServerOptions;
  /** Called once for each request refused because the store is unavailable (for the metrics). */
  onStoreUnavailable(req: InstanceType<C>): void;
  /** Called for every error answer, after mapping (for the metrics). */
  onErrorAnswer?(answer: HttpError, path: string, req: InstanceType<C>): void;
  /** Called when a request's response has closed (sent, or cut off). */
  onClose?(req: InstanceType<C>, res: ServerResponse<InstanceType<C>>): void;
  /** The answer as a path's protocol shapes its errors (SCIM's error schema), when it does. */
  answerAs?(answer: HttpError, path: string): HttpError;
  /** Called for a request whose path no route has (it is answered 404). */
  onNotFound?(req: InstanceType<C>): void;
  /**
   * Called for what Node's HTTP server refuses itself on a connection with no request in flight, before
   * any request object exists (headers over the size bound, a broken request line, headers that never
   * end), with the status of the answer Node writes: 431, 400 or 408. A refusal while a request is in
   * flight reaches onClose on that request instead.
   */
  onEarlyRefusal?(status: CannedStatus): void;
}

/** The status of Node's own (canned) answer to a request it could not read, sent with `Connection: close`. */
export type CannedStatus = 400 | 408 | 413 | 431;

/** A connection's responses not yet closed (onEarlyRefusal only). */
const OPEN = Symbol('open responses');
type Tracked = Socket & { [OPEN]?: number };

interface CompiledRoute<Req extends IncomingMessage> extends Route<Req> {
  /** The Allow header of a 405. */
  allow: string;
  accepts: ReadonlySet<string> | undefined;
}

/** Builds the listener; it is not listening yet. */
export function serve<C extends typeof IncomingMessage = typeof IncomingMessage>(options: ServeOptions<C>): Server<C> {
  type Req = InstanceType<C>;
  const { logger, name } = options;
  const exact = new Map<string, CompiledRoute<Req>>();
  const prefixes: Array<[prefix: string, route: CompiledRoute<Req>]> = [];
  for (const route of options.routes) {
    const methods = route.methods === 'any' ? undefined : route.methods.includes('GET') ? [...route.methods, 'HEAD'] : route.methods;
    const compiled = { ...route, allow: methods ? [...new Set(methods)].join(', ') : '', accepts: methods && new Set<string>(methods) };
    if (route.path.endsWith('*')) prefixes.push([route.path.slice(0, -1), compiled]);
    else exact.set(route.path, compiled);
  }

  function find(path: string): CompiledRoute<Req> | undefined {
    const route = exact.get(path);
    if (route !== undefined) return route;
    for (const [prefix, candidate] of prefixes) if (path.startsWith(prefix)) return candidate;
    return undefined;
  }

  function mapError(err: unknown, path: string, req: Req): HttpError {
    const answer = httpErrorFor(err);
    if (answer !== err) {
      if (answer.code === 'temporarily_unavailable') {
        options.onStoreUnavailable(req);
        logger.warn({ err: describe(err), listener: name, path: loggedPath(path) }, 'store unavailable: answering 503 (fail closed)');
      } else {
        logger.error(
          { err: describe(err, true), listener: name, path: loggedPath(path) },
          `unexpected error on the ${name} listener: answering 500`,
        );
      }
    }
    options.onErrorAnswer?.(answer, path, req);
    return options.answerAs ? options.answerAs(answer, path) : answer;
  }

  // One async function a request, no closure: routing adds no allocation to the proxy's hot path.
  async function dispatch(req: Req, res: ServerResponse<Req>): Promise<void> {
    const path = pathOf(req.url);
    try {
      // No listener speaks a protocol upgrade (WebSocket, h2c), and Node stops parsing a connection once
      // it has handed an upgrade request over: refuse any request naming one, before anything else, and
      // close the connection, rather than pass it on and leave the client hanging.
      if (req.headers.upgrade !== undefined)
        throw new HttpError('invalid_request', 'protocol upgrades are not supported', { headers: { connection: 'close' } });
      const route = find(path);
      if (route === undefined) {
        options.onNotFound?.(req);
        throw new HttpError('not_found');
      }
      if (route.accepts !== undefined && !route.accepts.has(req.method ?? '')) throw methodNotAllowed(route.allow);
      await route.handler(req, res, path);
    } catch (err) {
      try {
        // A refused request's body is never read: it is answered, then its connection closed.
        answerError(req, res, mapError(err, path, req));
      } catch {
        res.destroy();
      }
    }
  }

  const { onClose, onEarlyRefusal } = options;
  // One listener function for every response (`this` is the response): no closure a request.
  function closed(this: ServerResponse<Req>): void {
    const socket = this.req.socket as Tracked | null;
    if (onEarlyRefusal && socket !== null) socket[OPEN]!--;
    onClose?.(this.req, this);
  }
  const http: ServerOptions<C> = { ...options.http, IncomingMessage: options.request ?? (IncomingMessage as C) };
  const server = createServer<C>(http, (req, res) => {
    if (onEarlyRefusal) {
      const socket = req.socket as Tracked;
      socket[OPEN] = (socket[OPEN] ?? 0) + 1;
    }
    if (onClose || onEarlyRefusal) res.on('close', closed);
    void dispatch(req, res);
  });
  if (onEarlyRefusal) {
    // Node answers a connection it cannot read, then destroys it with the error: the socket's 'error'
    // comes before any of its responses' 'close', so a response still open is the one that error cut.
    const socketError = function (this: Tracked, err: NodeJS.ErrnoException): void {
      if ((this[OPEN] ?? 0) > 0) return;
      const status = cannedStatus(err.code);
      if (status !== undefined) onEarlyRefusal(status);
    };
    server.on('connection', (socket: Socket) => socket.on('error', socketError));
  }
  // No socket inactivity timeout: requestTimeout and headersTimeout bound what a client may hold back,
  // and a response may rightly stay idle for long (an SSE stream with nothing to say).
  server.timeout = 0;
  return server;
}

/**
 * The status of the answer Node's HTTP server writes for a connection error (lib/_http_server.js,
 * socketOnError): 408 for a request timeout, 431 and 413 for its two overflows, 400 for any other
 * parse error; undefined for an error with no answer (the client went away).
 */
export function cannedStatus(code: string | undefined): CannedStatus | undefined {
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return 408;
  if (code === undefined || !code.startsWith('HPE_')) return undefined;
  if (code === 'HPE_HEADER_OVERFLOW') return 431;
  if (code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW') return 413;
  return 400;
}

/** Writes an error answer; a request whose body was not read is answered, then its connection closed. */
function answerError(req: IncomingMessage, res: ServerResponse, answer: HttpError): void {
  if (!req.complete && !res.headersSent) res.setHeader('connection', 'close');
  writeError(res, answer);
}

/**
 * A path as logs record it: a connect link (`/connect/<link>`) works as a capability until it is used
 * and expires, so it is never written down; `/connect/callback` carries nothing in its path.
 */
export function loggedPath(path: string): string {
  return path.startsWith('/connect/') && path !== '/connect/callback' ? '/connect/…' : path;
}

/** The path of a request target, without its query. */
export function pathOf(url: string | undefined): string {
  const target = url ?? '/';
  const q = target.indexOf('?');
  return q === -1 ? target : target.slice(0, q);
}
