// Small real HTTP servers on loopback that play a misbehaving or observable upstream: an echo server
// that reports what the proxy forwarded, one that resets, one that never answers, one that streams SSE
// under the test's control. Each one is a real socket; nothing is mocked.

import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Server as NetServer, Socket } from 'node:net';
import { Server as TlsServer } from 'node:tls';

export interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  rawHeaders: string[];
  bodyBytes: number;
}

export interface FakeUpstream {
  url: string;
  /** Requests received, in order. */
  seen: Seen[];
  server: Server;
  close(): Promise<void>;
}

/**
 * Listens on a free loopback port; returns the `/mcp` URL (`https:` for a TLS server) and a close()
 * that destroys every open socket first (held SSE streams included), so it never waits on a client.
 */
export async function serveOnLoopback(server: NetServer): Promise<{ url: string; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const url = await listen(server, sockets);
  return { url, close: closer(server, sockets) };
}

async function listen(server: NetServer, sockets: Set<Socket>): Promise<string> {
  // A TLS server's 'connection' is the raw TCP socket, which is what must be destroyed on close.
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const scheme = server instanceof TlsServer ? 'https' : 'http';
  return `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
}

function closer(server: NetServer, sockets: Set<Socket>) {
  return async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  };
}

/**
 * Answers every request with JSON describing it, after reading the whole body (counting bytes). With
 * `mintSessions`, an `initialize` without a session gets a new `Mcp-Session-Id`, as a stateful MCP
 * server's answer does.
 */
export async function startEchoUpstream(options: { mintSessions?: boolean } = {}): Promise<FakeUpstream> {
  const seen: Seen[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    let bodyBytes = 0;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => {
      bodyBytes += c.length;
      if (options.mintSessions) chunks.push(c);
    });
    req.on('end', () => {
      const entry: Seen = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, rawHeaders: req.rawHeaders, bodyBytes };
      seen.push(entry);
      const body = JSON.stringify(entry);
      // As an MCP server does: the request's session echoed back, none minted for a request without one.
      let session = req.headers['mcp-session-id'];
      if (session === undefined && options.mintSessions && isInitialize(Buffer.concat(chunks))) session = randomUUID();
      res.writeHead(200, { 'content-type': 'application/json', ...(session !== undefined ? { 'mcp-session-id': session } : {}) });
      res.end(body);
    });
  });
  const url = await listen(server, sockets);
  return { url, seen, server, close: closer(server, sockets) };
}

function isInitialize(body: Buffer): boolean {
  try {
    return (JSON.parse(body.toString('utf8')) as { method?: unknown }).method === 'initialize';
  } catch {
    return false;
  }
}

/** Accepts the connection, then destroys it as soon as a request arrives (ECONNRESET / hang up). */
export async function startResettingUpstream(): Promise<FakeUpstream> {
  const sockets = new Set<Socket>();
  const seen: Seen[] = [];
  const server = createServer((req) => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, rawHeaders: req.rawHeaders, bodyBytes: 0 });
    req.socket.destroy();
  });
  const url = await listen(server, sockets);
  return { url, seen, server, close: closer(server, sockets) };
}

/** Reads the request, never sends headers. */
export async function startSilentUpstream(): Promise<FakeUpstream> {
  const sockets = new Set<Socket>();
  const seen: Seen[] = [];
  const server = createServer((req) => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, rawHeaders: req.rawHeaders, bodyBytes: 0 });
    req.resume();
  });
  const url = await listen(server, sockets);
  return { url, seen, server, close: closer(server, sockets) };
}

export interface SseUpstream extends FakeUpstream {
  /** Resolves with the next SSE response the upstream opened. */
  nextStream(): Promise<{ req: IncomingMessage; res: ServerResponse; closed: Promise<void> }>;
}

/** Opens an SSE stream for each request and lets the test write events and observe closing. */
export async function startSseUpstream(): Promise<SseUpstream> {
  const sockets = new Set<Socket>();
  const seen: Seen[] = [];
  const waiting: Array<(s: { req: IncomingMessage; res: ServerResponse; closed: Promise<void> }) => void> = [];
  const ready: Array<{ req: IncomingMessage; res: ServerResponse; closed: Promise<void> }> = [];
  const server = createServer((req, res) => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, rawHeaders: req.rawHeaders, bodyBytes: 0 });
    req.resume();
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.flushHeaders();
    const closed = new Promise<void>((r) => res.once('close', () => r()));
    const stream = { req, res, closed };
    const waiter = waiting.shift();
    if (waiter) waiter(stream);
    else ready.push(stream);
  });
  const url = await listen(server, sockets);
  return {
    url,
    seen,
    server,
    close: closer(server, sockets),
    nextStream() {
      const s = ready.shift();
      return s ? Promise.resolve(s) : new Promise((r) => waiting.push(r));
    },
  };
}

/** A URL on which nothing listens (connection refused). */
export async function refusedUrl(): Promise<string> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((r) => server.close(() => r()));
  return `http://127.0.0.1:${port}/mcp`;
}
