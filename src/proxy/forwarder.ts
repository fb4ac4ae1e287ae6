// Streams an authorized request to the upstream MCP endpoint over an undici connection pool, both
// ways and unbuffered: request bodies as they arrive, responses (SSE included) chunk by chunk with
// backpressure. A client that goes away ends the upstream request; an upstream that sends no headers in
// time gets a 504, one that cannot be reached a 502. Nothing here bounds a response once its headers
// have arrived: SSE streams may idle forever.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { Transform, type Readable } from 'node:stream';
import { Pool, errors, type Dispatcher } from 'undici';
import { HttpError, storeUnavailable, writeError } from '../http/errors.ts';
import { StoreUnavailableError } from '../store/shared.ts';
import type { ClientBody } from '../policy/jsonrpc.ts';
import { connectionOptions, isHopByHop } from './hop-by-hop.ts';
import type { ProxyRequest } from './request.ts';

export interface ForwarderOptions {
  upstreamUrl: string;
  headersTimeoutMs: number;
  maxSockets: number;
  /**
   * Cap on a chunked request body (0: none): past it the request is cut, on both sides, and the
   * upstream never gets a complete request. A declared Content-Length is checked before forwarding.
   */
  maxBodyBytes?: number;
  /** Called once per forwarded request when the upstream answered (status) or failed (error). */
  onUpstreamResult?: (status: number | 'error', req: IncomingMessage) => void;
  /** An SSE response (GET stream or POST reply) started streaming to the client. */
  onStreamOpen?: (req: ProxyRequest, res: ServerResponse) => void;
  onStreamClose?: () => void;
  /** Called for every request answered 502, with the cause. */
  onError?: (err: Error, req: IncomingMessage) => void;
  /**
   * The store failed after the upstream answered (recording a session or task id it handed out): the
   * response is answered 503 before its headers went out, cut after.
   */
  onStoreUnavailable?: (err: Error, req: IncomingMessage) => void;
}

/**
 * How a response body is rewritten on its way to the client (per-tool policy filters list answers):
 * `whole` bodies are read in full (within `maxBytes`) and replaced, `stream` bodies are fed chunk by
 * chunk and what `feed` returns is written in their place. Undefined for a content type: untouched.
 */
export type BodyRewriter =
  | { kind: 'whole'; maxBytes: number; rewrite(body: Buffer): string | Buffer | Promise<string | Buffer> }
  | { kind: 'stream'; feed(chunk: Buffer): string | Promise<string>; end(): string };

export interface ForwardOptions {
  /**
   * The request body, already read and decided on by the listener (canonical JSON): sent instead of
   * streaming `req`, as `application/json` with its own length and no Content-Encoding.
   */
  body?: Buffer;
  /** Chooses a rewriter by the upstream's Content-Type; responses it declines stream untouched. */
  rewriteResponse?: (contentType: string) => BodyRewriter | undefined;
  /** The request body, already read whole and found fit to pass as it came: sent with the client's own headers. */
  bodyAsSent?: Buffer;
  /**
   * Sees each part of a streamed request body before it goes on; throwing refuses the request: before
   * anything was sent, the thrown HttpError is the answer; once it streams, the body is cut on both sides.
   */
  inspectBody?: (chunk: Buffer) => void;
  /**
   * Called with the upstream's status and headers before they go to the client; a promise holds the
   * response (and pauses the upstream) until it settles, and a rejection answers 503 (a store outage)
   * or 502 instead of the upstream's answer.
   */
  beforeResponse?: (status: number, rawHeaders: readonly Buffer[]) => Promise<void> | undefined;
}

/** Forwarding options with what the listener parsed of the body on the way (its messages; the forwarder never reads it). */
export interface DecidedOptions extends ForwardOptions {
  parsed?: ClientBody;
}

export interface Forwarder {
  /** Path of the upstream endpoint (e.g. `/mcp`); the client's query string is appended. */
  readonly upstreamPath: string;
  /** Records the upstream's answer on `req` (`upstreamStatus`). */
  forward(req: ProxyRequest, res: ServerResponse, query: string, options?: ForwardOptions): void;
  /** Ends open SSE responses cleanly (a client may resume elsewhere with Last-Event-ID). `GET` only, or all. */
  endStreams(which: 'get' | 'all'): number;
  /** Ends one open SSE response cleanly and tears down its upstream request; false if it is not one. */
  endStream(res: ServerResponse): boolean;
  /** Requests still waiting for or streaming an upstream response. */
  inFlight(): number;
  /** Resolves once no forwarded request is in flight. */
  whenIdle(): Promise<void>;
  close(): void;
}

const TIMEOUTS = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT', 'ETIMEDOUT']);

/**
 * Request headers undici sets itself or refuses (it frames the body and names the upstream's host);
 * the listener has already removed the hop-by-hop ones and those the client named in `Connection`.
 */
const SET_BY_POOL = new Set(['host', 'transfer-encoding', 'expect', 'connection', 'keep-alive', 'upgrade']);

/** Request headers for the upstream: the client's (already rewritten) minus what the pool sets itself. */
function upstreamHeaders(req: IncomingMessage, options: ForwardOptions | undefined): Record<string, string | string[]> {
  const headers = req.headers;
  const out: Record<string, string | string[]> = {};
  for (const name in headers) {
    if (SET_BY_POOL.has(name)) continue;
    const value = headers[name];
    if (value !== undefined) out[name] = value;
  }
  if (options?.body !== undefined) {
    // A decided body is sent as it was decided: canonical JSON, UTF-8, no coding, its own length.
    out['content-length'] = String(options.body.length);
    out['content-type'] = 'application/json';
    delete out['content-encoding'];
  }
  // A body that is to be rewritten must come uncompressed: the sidecar reads it.
  if (options?.rewriteResponse !== undefined) delete out['accept-encoding'];
  return out;
}

/**
 * Response headers for the client, as the upstream spelled them (raw pairs), without its hop-by-hop
 * ones (its `Keep-Alive: timeout=5` is not the client's business) and without its framing: whether the
 * client's connection stays open is what the client asked for, which Node works out (and says).
 */
function clientHeaders(raw: Buffer[]): { headers: string[]; eventStream: boolean } {
  const headers: string[] = [];
  let eventStream = false;
  let named: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toString('latin1');
    const lower = name.toLowerCase();
    const value = raw[i + 1]!.toString('latin1');
    if (lower === 'connection') named = connectionOptions(value);
    if (lower === 'transfer-encoding' || isHopByHop(lower)) continue;
    if (lower === 'content-type' && value.startsWith('text/event-stream')) eventStream = true;
    headers.push(name, value);
  }
  if (named.length === 0) return { headers, eventStream };
  const kept: string[] = [];
  for (let i = 0; i < headers.length; i += 2) if (!named.includes(headers[i]!.toLowerCase())) kept.push(headers[i]!, headers[i + 1]!);
  return { headers: kept, eventStream };
}

/**
 * A body that has already arrived whole (the usual case for an MCP message: it comes in the same reads
 * as the headers, and the token lookup gives it time to): taken as it lies in the request's buffer and
 * sent with the headers in one write, instead of through the stream machinery chunk by chunk. Nothing
 * waits for it and nothing is buffered that Node had not already buffered; a body still arriving
 * (large, or sent slowly) streams as before.
 */
export function arrived(req: IncomingMessage): Buffer | undefined {
  if (!req.complete || req.readableFlowing !== null || req.readableLength === 0) return undefined;
  const body = req.read() as Buffer | null;
  if (body === null) return undefined;
  // Lets the request reach its end (Node then knows the body was consumed) without more reads.
  req.resume();
  return body;
}

/**
 * The body to send on: none when the request has none (no length, no transfer coding: RFC 9112 §6),
 * the request itself, or for a chunked body under a cap, the request through a counter that fails
 * the body (so the upstream's copy is cut, never terminated) and the client's request past the cap.
 */
export function bodyOf(req: IncomingMessage, maxBodyBytes: number, inspect?: (chunk: Buffer) => void): Readable | Buffer | null {
  const chunked = req.headers['transfer-encoding'] !== undefined;
  if (!chunked) {
    const length = req.headers['content-length'];
    if (length === undefined || length === '0') return null;
    const whole = arrived(req);
    if (whole !== undefined) {
      inspect?.(whole);
      return whole;
    }
    if (inspect === undefined) return req;
  } else if (maxBodyBytes === 0 && inspect === undefined) return req;
  const cap = chunked ? maxBodyBytes : 0;
  let seen = 0;
  const counted = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      seen += chunk.length;
      let err: Error | undefined;
      if (cap !== 0 && seen > cap) err = new Error('request body over the configured limit');
      else {
        try {
          inspect?.(chunk);
        } catch (refused) {
          err = refused as Error;
        }
      }
      if (err === undefined) return done(null, chunk);
      req.destroy(err);
      done(err);
    },
  });
  req.on('error', (err) => counted.destroy(err));
  return req.pipe(counted);
}

export function createForwarder(options: ForwarderOptions): Forwarder {
  const target = new URL(options.upstreamUrl);
  const upstreamPath = target.pathname;
  const maxBodyBytes = options.maxBodyBytes ?? 0;
  // bodyTimeout 0: an SSE stream may be silent for as long as it likes. The headers bound covers the
  // connect too (a blackholed upstream answers 504 in the same time as one that accepts and stays mute).
  const pool = new Pool(target.origin, {
    connections: options.maxSockets,
    pipelining: 1,
    headersTimeout: options.headersTimeoutMs,
    bodyTimeout: 0,
    connectTimeout: options.headersTimeoutMs,
    // HTTP/1.1 always (newer undici would negotiate h2 with a TLS upstream): the upstream's raw headers
    // are passed on as spelled, and maxSockets counts connections as it always has.
    allowH2: false,
  });

  const shared: Shared = { options, streams: new Map(), inFlight: new InFlight() };

  return {
    upstreamPath,
    forward(req, res, query, options) {
      shared.inFlight.started();
      const exchange = new Exchange(req, res, shared, options?.rewriteResponse, options?.beforeResponse);
      pool.dispatch(
        {
          path: query === '' ? upstreamPath : `${upstreamPath}${query}`,
          method: req.method as Dispatcher.HttpMethod,
          headers: upstreamHeaders(req, options),
          body: options?.body ?? options?.bodyAsSent ?? bodyOf(req, maxBodyBytes, options?.inspectBody),
        },
        exchange,
      );
    },
    endStreams(which) {
      let ended = 0;
      for (const [res, exchange] of shared.streams) {
        if (which === 'get' && exchange.req.method !== 'GET') continue;
        shared.streams.delete(res);
        exchange.end();
        ended++;
      }
      return ended;
    },
    endStream(res) {
      const exchange = shared.streams.get(res);
      if (exchange === undefined) return false;
      shared.streams.delete(res);
      exchange.end();
      return true;
    },
    inFlight: () => shared.inFlight.count,
    whenIdle: () => shared.inFlight.whenIdle(),
    close() {
      void pool.destroy();
    },
  };
}

/** What every exchange of one forwarder shares. */
interface Shared {
  readonly options: ForwarderOptions;
  /** Responses streaming SSE, for endStreams. */
  readonly streams: Map<ServerResponse, Exchange>;
  readonly inFlight: InFlight;
}

/** Forwarded requests still waiting for or streaming an upstream response, and who waits for none. */
class InFlight {
  count = 0;
  #idleWaiters: Array<() => void> = [];

  started(): void {
    this.count++;
  }

  finished(): void {
    this.count--;
    if (this.count === 0 && this.#idleWaiters.length > 0) {
      const waiters = this.#idleWaiters;
      this.#idleWaiters = [];
      for (const wake of waiters) wake();
    }
  }

  whenIdle(): Promise<void> {
    return this.count === 0 ? Promise.resolve() : new Promise<void>((resolve) => this.#idleWaiters.push(resolve));
  }
}

/**
 * One forwarded request: undici's handler for it (the controller API: `onRequestStart` hands over the
 * controller that aborts the upstream request and pauses or resumes its body), writing the upstream's
 * answer to `res`.
 */
class Exchange implements Dispatcher.DispatchHandler {
  readonly #shared: Shared;
  /** undici's handle on the upstream request: abort it, pause and resume its body. */
  #controller: Dispatcher.DispatchController | undefined;
  #waitingForDrain = false;
  #clientGone = false;
  /** Something of the body went to the client (with the headers, in the same write). */
  #bodyStarted = false;
  /** The rewriter this response's body goes through, once its headers have chosen one. */
  #rewriter: BodyRewriter | undefined;
  /** A `whole` rewrite: the status, headers and body held until the body is complete. */
  #held: { status: number; statusText: string; headers: string[]; chunks: Buffer[]; size: number } | undefined;

  readonly req: ProxyRequest;
  readonly res: ServerResponse;
  readonly #rewriterFor: ((contentType: string) => BodyRewriter | undefined) | undefined;
  readonly #beforeResponse: ForwardOptions['beforeResponse'];

  constructor(
    req: ProxyRequest,
    res: ServerResponse,
    shared: Shared,
    rewriterFor?: (contentType: string) => BodyRewriter | undefined,
    beforeResponse?: ForwardOptions['beforeResponse'],
  ) {
    this.req = req;
    this.res = res;
    this.#shared = shared;
    this.#rewriterFor = rewriterFor;
    this.#beforeResponse = beforeResponse;
    res.once('close', () => {
      shared.inFlight.finished();
      // A client that goes away (an SSE reader closing its tab, a POST cut short) ends the upstream request.
      if (res.writableFinished) return;
      this.#clientGone = true;
      this.#abort();
    });
  }

  #abort(reason?: Error): void {
    this.#controller?.abort(reason ?? new errors.RequestAbortedError());
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    if (this.#clientGone) this.#abort();
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, _headers: unknown, statusText = ''): void {
    if (statusCode < 200) return; // interim answers stay on this hop
    // The upstream's own spelling and order of its headers (HTTP/1.1: name, value, ... as received).
    const rawHeaders = controller.rawHeaders as Buffer[];
    const held = this.#beforeResponse?.(statusCode, rawHeaders);
    if (held === undefined) {
      if (!this.#start(statusCode, rawHeaders, statusText)) controller.pause();
      return;
    }
    // Nothing goes to the client, and nothing more is read from the upstream, until it has settled.
    controller.pause();
    held.then(
      () => {
        if (this.#start(statusCode, rawHeaders, statusText)) controller.resume();
      },
      (err: Error) => this.#breakOff(err),
    );
  }

  /** False: pause the upstream's body (the client went, or it is being refused). */
  #start(statusCode: number, rawHeaders: Buffer[], statusText: string): boolean {
    const { req, res } = this;
    req.upstreamStatus = statusCode;
    this.#shared.options.onUpstreamResult?.(statusCode, req);
    if (res.destroyed) return false;
    let { headers, eventStream } = clientHeaders(rawHeaders);
    if (this.#rewriterFor !== undefined) {
      const rewriter = this.#chooseRewriter(headers);
      if (rewriter === 'refuse') return false;
      this.#rewriter = rewriter;
      if (rewriter !== undefined) headers = withoutHeader(headers, 'content-length');
      if (rewriter?.kind === 'whole') {
        this.#held = { status: statusCode, statusText, headers, chunks: [], size: 0 };
        return true;
      }
    }
    try {
      res.writeHead(statusCode, statusText, headers);
    } catch (err) {
      // Header bytes Node refuses to send on: a broken upstream, answered as one.
      this.#abort(err as Error);
      return false;
    }
    if (eventStream) this.#streamOpened();
    return true;
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (!this.#take(chunk)) controller.pause();
  }

  /** False: pause the upstream until the client has drained what it was given. */
  #take(chunk: Buffer): boolean {
    const res = this.res;
    // Destroyed: the client left. Ended: the stream was ended here (endStream), maybe as it opened.
    if (res.destroyed || res.writableEnded) return false;
    const rewriter = this.#rewriter;
    if (rewriter !== undefined) {
      if (rewriter.kind === 'whole') return this.#hold(chunk, rewriter.maxBytes);
      let out: string | Promise<string>;
      try {
        out = rewriter.feed(chunk);
      } catch (err) {
        this.#breakOff(err as Error);
        return false;
      }
      if (typeof out === 'string') return out.length === 0 || this.#write(out);
      // Held until it settles (the upstream paused meanwhile): what it returns goes out in its place.
      out.then(
        (text) => {
          if (this.res.destroyed || this.res.writableEnded) return;
          if (text.length === 0 || this.#write(text)) this.#controller?.resume();
        },
        (err: Error) => this.#breakOff(err),
      );
      return false;
    }
    return this.#write(chunk);
  }

  #write(chunk: Buffer | string): boolean {
    const res = this.res;
    this.#bodyStarted = true;
    if (res.write(chunk)) return true;
    if (!this.#waitingForDrain) {
      this.#waitingForDrain = true;
      res.once('drain', () => {
        this.#waitingForDrain = false;
        this.#controller?.resume();
      });
    }
    return false;
  }

  onResponseEnd(): void {
    const res = this.res;
    if (res.destroyed || res.writableEnded) return;
    const rewriter = this.#rewriter;
    const held = this.#held;
    if (rewriter?.kind === 'whole' && held !== undefined) {
      let body: string | Buffer | Promise<string | Buffer>;
      try {
        body = rewriter.rewrite(Buffer.concat(held.chunks, held.size));
      } catch (err) {
        this.#breakOff(err as Error);
        return;
      }
      const send = (text: string | Buffer) => {
        if (res.destroyed || res.writableEnded) return;
        res.writeHead(held.status, held.statusText, [...held.headers, 'Content-Length', String(Buffer.byteLength(text))]);
        res.end(text);
      };
      if (typeof body === 'string' || Buffer.isBuffer(body)) send(body);
      else body.then(send, (err: Error) => this.#breakOff(err));
      return;
    }
    if (rewriter?.kind === 'stream') {
      let rest: string;
      try {
        rest = rewriter.end();
      } catch (err) {
        this.#breakOff(err as Error);
        return;
      }
      res.end(rest);
      return;
    }
    res.end();
  }

  /** `refuse` for a body that must be rewritten but cannot be read (compressed): nothing unfiltered passes. */
  #chooseRewriter(headers: string[]): BodyRewriter | undefined | 'refuse' {
    let contentType = '';
    let encoding = '';
    for (let i = 0; i < headers.length; i += 2) {
      const name = headers[i]!.toLowerCase();
      if (name === 'content-type') contentType = headers[i + 1]!.toLowerCase();
      else if (name === 'content-encoding') encoding = headers[i + 1]!.toLowerCase();
    }
    const rewriter = this.#rewriterFor!(contentType);
    if (rewriter === undefined || encoding === '' || encoding === 'identity') return rewriter;
    this.#breakOff(new Error(`an upstream response to rewrite came with Content-Encoding ${encoding}`));
    return 'refuse';
  }

  #hold(chunk: Buffer, maxBytes: number): boolean {
    const held = this.#held!;
    held.size += chunk.length;
    if (held.size > maxBytes) {
      this.#breakOff(new Error(`an upstream response to rewrite is larger than ${maxBytes} bytes`));
      return false;
    }
    held.chunks.push(chunk);
    return true;
  }

  /** A response that cannot be rewritten is not passed on as it is: 502 before the headers, cut after. */
  #breakOff(err: Error): void {
    const { req, res } = this;
    if (err instanceof StoreUnavailableError) this.#shared.options.onStoreUnavailable?.(err, req);
    if (res.headersSent) {
      this.#abort(err);
      res.destroy();
      return;
    }
    // Answered first: aborting the upstream request reports its error to onResponseError at once, which
    // must find the response ended (else it would answer its own 502 in place of this one).
    if (err instanceof StoreUnavailableError) writeError(res, storeUnavailable(err));
    else {
      this.#shared.options.onError?.(err, req);
      writeError(res, err instanceof HttpError ? err : new HttpError('bad_gateway', 'the upstream answer could not be filtered'));
    }
    this.#abort(err);
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    const { req, res } = this;
    if (res.destroyed || res.writableEnded) return; // the client has gone, or the stream was ended here
    if (res.headersSent) {
      // The upstream broke off mid-response: end abruptly so the client sees an incomplete message.
      res.destroy();
      return;
    }
    req.upstreamStatus = 'error';
    this.#shared.options.onUpstreamResult?.('error', req);
    const code = (err as NodeJS.ErrnoException).code ?? '';
    if (TIMEOUTS.has(code)) {
      writeError(res, new HttpError('gateway_timeout', 'the upstream did not answer in time'));
      return;
    }
    // Every cause, connection failures included: they are what a misconfigured UPSTREAM_URL produces.
    // undici wraps a socket's own error (ECONNRESET, ...) in its SocketError: report the socket's.
    const cause = (err as { cause?: unknown }).cause;
    this.#shared.options.onError?.(
      code === 'UND_ERR_SOCKET' && cause instanceof Error && (cause as NodeJS.ErrnoException).code ? cause : err,
      req,
    );
    writeError(res, new HttpError('bad_gateway', 'the upstream could not be reached'));
  }

  #streamOpened(): void {
    const res = this.res;
    // An SSE response may carry no event for a long time: the client must get the headers even then.
    // Usually the first event arrived with them and goes out in the same write; only a stream with
    // nothing to send yet by the next turn gets its headers alone. Events are never held back: the
    // server socket has Nagle off (http.Server noDelay, the default).
    setImmediate(() => {
      if (!this.#bodyStarted && !res.destroyed) res.flushHeaders();
    });
    const { streams, options } = this.#shared;
    streams.set(res, this);
    options.onStreamOpen?.(this.req, res);
    res.once('close', () => {
      streams.delete(res);
      options.onStreamClose?.();
    });
  }

  /** Ends the client's stream cleanly and the upstream's. */
  end(): void {
    this.res.end();
    this.#abort();
  }
}

function withoutHeader(headers: string[], lowerName: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < headers.length; i += 2) if (headers[i]!.toLowerCase() !== lowerName) out.push(headers[i]!, headers[i + 1]!);
  return out;
}
