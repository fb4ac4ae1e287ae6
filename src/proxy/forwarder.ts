// Streams an authorized request to the upstream MCP endpoint with http-proxy over a keep-alive agent,
// and closes the two gaps http-proxy 1.18 leaves: a client that goes away (an SSE reader closing its
// tab) now tears down the upstream request, and an upstream that never sends headers gets a 504.
// Nothing here bounds a response once its headers have arrived: SSE streams may idle forever.

import { Agent as HttpAgent, type IncomingMessage, type ServerResponse, type ClientRequest } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import httpProxy from 'http-proxy';
import { HttpError, writeError } from '../errors.ts';
import { removeHopByHop } from './hop-by-hop.ts';

export interface ForwarderOptions {
  upstreamUrl: string;
  headersTimeoutMs: number;
  maxSockets: number;
  /** Called once per forwarded request when the upstream answered (status) or failed (error). */
  onUpstreamResult?: (status: number | 'error', req: IncomingMessage) => void;
  onStreamOpen?: () => void;
  onStreamClose?: () => void;
  /** Called for every request answered 502, with the cause. */
  onError?: (err: Error, req: IncomingMessage) => void;
}

export interface Forwarder {
  /** Path of the upstream endpoint (e.g. `/mcp`); the client's query string is appended. */
  readonly upstreamPath: string;
  forward(req: IncomingMessage, res: ServerResponse, query: string): void;
  /** Ends open SSE responses cleanly (a client may resume elsewhere with Last-Event-ID). `GET` only, or all. */
  endStreams(which: 'get' | 'all'): number;
  /** Requests still waiting for or streaming an upstream response. */
  inFlight(): number;
  /** Resolves once no forwarded request is in flight. */
  whenIdle(): Promise<void>;
  close(): void;
}

const GATEWAY_TIMEOUT = Symbol('gatewayTimeout');
const UPSTREAM_STATUS = Symbol('upstreamStatus');
type TimedRequest = IncomingMessage & { [GATEWAY_TIMEOUT]?: boolean; [UPSTREAM_STATUS]?: number | 'error' };

/** The upstream's answer to a forwarded request (its status, or `error`); undefined if not forwarded. */
export function upstreamStatusOf(req: IncomingMessage): number | 'error' | undefined {
  return (req as TimedRequest)[UPSTREAM_STATUS];
}

export function createForwarder(options: ForwarderOptions): Forwarder {
  const target = new URL(options.upstreamUrl);
  const upstreamPath = target.pathname;
  // noDelay: Node sets TCP_NODELAY on accepted sockets but not on an agent's outgoing ones, so a
  // request written in two pieces (headers, then a body chunk) would wait on Nagle for the upstream's ACK.
  const agentOptions = { keepAlive: true, noDelay: true, maxSockets: options.maxSockets, maxFreeSockets: 256, scheduling: 'lifo' as const };
  const agent = target.protocol === 'https:' ? new HttpsAgent(agentOptions) : new HttpAgent(agentOptions);
  const proxy = httpProxy.createProxyServer({
    target: target.origin,
    agent,
    changeOrigin: true,
    xfwd: false,
    ws: false,
    secure: true,
  });

  const streams = new Map<ServerResponse, { method: string; proxyRes: IncomingMessage }>();
  let active = 0;
  let idleWaiters: Array<() => void> = [];
  const finished = () => {
    active--;
    if (active === 0 && idleWaiters.length > 0) {
      const waiters = idleWaiters;
      idleWaiters = [];
      for (const wake of waiters) wake();
    }
  };

  proxy.on('proxyReq', (proxyReq: ClientRequest, req: IncomingMessage, res: ServerResponse) => {
    const timer = setTimeout(() => {
      (req as TimedRequest)[GATEWAY_TIMEOUT] = true;
      proxyReq.destroy(new Error('upstream sent no response headers in time'));
    }, options.headersTimeoutMs);
    // Registered after http-proxy's own 'response' listener, so the headers are already copied to res.
    proxyReq.once('response', (proxyRes: IncomingMessage) => {
      clearTimeout(timer);
      const status = proxyRes.statusCode ?? 0;
      (req as TimedRequest)[UPSTREAM_STATUS] = status;
      options.onUpstreamResult?.(status, req);
      const type = proxyRes.headers['content-type'];
      if (typeof type === 'string' && type.startsWith('text/event-stream')) streamOpened(req, res, proxyRes);
      // An upstream that breaks off a response after its headers: http-proxy's pipe never ends `res`,
      // so the client would wait forever (and the request stay in flight). Break the client's response
      // off too, so it sees an incomplete message rather than a hang.
      proxyRes.once('close', () => {
        if (!proxyRes.complete && !res.writableEnded) res.destroy();
      });
    });
    proxyReq.once('close', () => clearTimeout(timer));
    // http-proxy only aborts on the request's 'aborted', which a finished GET never emits: an SSE
    // reader going away must also close the upstream stream, or it leaks there.
    res.once('close', () => {
      if (!res.writableFinished) proxyReq.destroy();
    });
  });

  function streamOpened(req: IncomingMessage, res: ServerResponse, proxyRes: IncomingMessage): void {
    // An SSE response may carry no event for a long time: the client must get the headers even then.
    // Usually the first event arrived with them and goes out in the same write (pipe() flows on the
    // next tick, before this check); only a stream with nothing to send yet gets its headers alone.
    // Events are never held back: the server socket has Nagle off (http.Server noDelay, the default).
    setImmediate(() => {
      if (!res.headersSent && !res.destroyed) res.flushHeaders();
    });
    streams.set(res, { method: req.method ?? 'GET', proxyRes });
    options.onStreamOpen?.();
    res.once('close', () => {
      streams.delete(res);
      options.onStreamClose?.();
    });
  }

  // Emitted before http-proxy copies the upstream's headers to the client: its hop-by-hop headers
  // (`Keep-Alive: timeout=5` of its own server) are not the client's business. Whether the client's
  // connection stays open is what the client asked for (`Connection: close`, HTTP/1.0), which Node
  // has already worked out; http-proxy would otherwise copy the upstream's `keep-alive`, and Node
  // would honour that over the client's `close`.
  proxy.on('proxyRes', (proxyRes: IncomingMessage, _req: IncomingMessage, res: ServerResponse) => {
    removeHopByHop(proxyRes.headers);
    proxyRes.headers.connection = res.shouldKeepAlive ? 'keep-alive' : 'close';
  });

  // Client-side resets while streaming are not errors of ours; http-proxy reports them separately.
  proxy.on('econnreset', () => undefined);

  const onProxyError = (err: Error, req: IncomingMessage, res: ServerResponse | import('node:net').Socket) => {
    const response = res as ServerResponse;
    if (response.destroyed || response.writableEnded) return; // the client has gone: nothing to answer
    if (response.headersSent) {
      // The stream broke mid-response: end it abruptly so the client sees an incomplete message.
      response.destroy();
      return;
    }
    (req as TimedRequest)[UPSTREAM_STATUS] = 'error';
    options.onUpstreamResult?.('error', req);
    const code = (err as NodeJS.ErrnoException).code;
    if ((req as TimedRequest)[GATEWAY_TIMEOUT] || code === 'ETIMEDOUT') {
      writeError(response, new HttpError('gateway_timeout', 'the upstream did not answer in time'));
      return;
    }
    // Every cause, connection failures included: they are what a misconfigured UPSTREAM_URL produces.
    options.onError?.(err, req);
    writeError(response, new HttpError('bad_gateway', 'the upstream could not be reached'));
  };

  return {
    upstreamPath,
    forward(req, res, query) {
      req.url = query === '' ? upstreamPath : `${upstreamPath}${query}`;
      active++;
      res.once('close', finished);
      proxy.web(req, res, undefined, onProxyError);
    },
    endStreams(which) {
      let ended = 0;
      for (const [res, stream] of streams) {
        if (which === 'get' && stream.method !== 'GET') continue;
        streams.delete(res);
        stream.proxyRes.unpipe(res);
        stream.proxyRes.destroy();
        res.end();
        ended++;
      }
      return ended;
    },
    inFlight() {
      return active;
    },
    whenIdle() {
      return active === 0 ? Promise.resolve() : new Promise<void>((resolve) => idleWaiters.push(resolve));
    },
    close() {
      proxy.close();
      agent.destroy();
    },
  };
}
