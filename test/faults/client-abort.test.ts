// Clients that go away early, on raw sockets: one that drops while its token is being looked up
// (the lookup held back until the client is gone), one that sends a broken chunk after forwarding began. Each is
// logged as aborted with the status the client saw, the forwarder's in-flight count returns to 0, and
// the upstream request is torn down at once (nothing is forwarded for a client already gone).

import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { serveOnLoopback } from '../support/fake-upstreams.ts';
import { startStack, type Stack } from '../support/stack.ts';
import type { TokenStore } from '../../src/store/types.ts';

interface Held {
  req: IncomingMessage;
  res: ServerResponse;
  closed: Promise<void>;
}

/** Records each request as its headers arrive and holds it (never answers) until the test looks. */
async function startHoldingUpstream() {
  const held: Held[] = [];
  const waiters: Array<(h: Held) => void> = [];
  const server = createServer((req, res) => {
    req.resume();
    const h = { req, res, closed: new Promise<void>((r) => res.once('close', () => r())) };
    held.push(h);
    waiters.shift()?.(h);
  });
  const { url, close } = await serveOnLoopback(server);
  return {
    url,
    held,
    next: () => new Promise<Held>((r) => waiters.push(r)),
    close,
  };
}

describe('clients that leave early', () => {
  let upstream: Awaited<ReturnType<typeof startHoldingUpstream>>;
  let stack: Stack;
  let port: number;
  let token: string;
  // While set, every token lookup (on real Redis) waits for this gate; `entered` fires as one starts.
  let gate: { open: Promise<void>; entered: () => void } | undefined;

  beforeAll(async () => {
    upstream = await startHoldingUpstream();
    const wrapStore = (inner: TokenStore): TokenStore =>
      new Proxy(inner, {
        get(target, prop) {
          if (prop === 'lookupToken') {
            return async (tokenHash: string) => {
              const g = gate;
              if (g) {
                g.entered();
                await g.open;
              }
              return target.lookupToken(tokenHash);
            };
          }
          const value = Reflect.get(target, prop, target);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
    stack = await startStack({ upstreamUrl: upstream.url, wrapStore, config: { proxy: { allowedHosts: ['x'] } } });
    port = Number(new URL(stack.proxyUrl).port);
    token = (await stack.issueOAuthToken()).token;
  });
  afterEach(() => {
    gate = undefined;
  });
  afterAll(async () => {
    await stack.close();
    await upstream.close();
  });

  /** Access-log lines written from `from` on. */
  function accessLines(from: number): Array<Record<string, unknown>> {
    return stack.logs
      .slice(from)
      .map((l) => JSON.parse(l))
      .filter((l) => l.msg === 'request');
  }

  /** The sidecar's side of the next request: resolves when its response closes. */
  function nextServerResponse(): Promise<ServerResponse> {
    return new Promise((resolve) =>
      stack.sidecar.proxyServer.once('request', (_req: IncomingMessage, res: ServerResponse) => resolve(res)),
    );
  }

  it('a client that drops during the token lookup: nothing forwarded, logged as aborted, in-flight back to 0', async () => {
    const before = upstream.held.length;
    const logsFrom = stack.logs.length;
    let release!: () => void;
    let entered!: () => void;
    const lookupStarted = new Promise<void>((r) => (entered = r));
    gate = { open: new Promise<void>((r) => (release = r)), entered };
    const serverRes = nextServerResponse();
    const socket = connect({ port, host: '127.0.0.1' });
    await once(socket, 'connect');
    // A complete request (an SSE GET): its client then leaves without a word.
    socket.write(`GET /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nAccept: text/event-stream\r\n\r\n`);
    await lookupStarted;
    const res = await serverRes;
    socket.destroy();
    await once(res, 'close');
    gate = undefined;
    release();
    // A later request: its lookup runs after the held one resumed, so by its answer the dropped
    // request has been decided (and, without the fix, forwarded).
    const later = fetch(`${stack.mcpUrl}?later`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: '{}' });
    const held = await upstream.next();
    expect(held.req.url).toBe('/mcp?later');
    held.res.end('{}');
    expect((await later).status).toBe(200);
    expect(upstream.held.length).toBe(before + 1);
    expect(stack.sidecar.forwarder.inFlight()).toBe(0);
    const [dropped] = accessLines(logsFrom);
    expect(dropped).toMatchObject({ method: 'GET', path: '/mcp', aborted: true });
    // The client never saw a status line.
    expect(dropped!.status).toBeUndefined();
  });

  it('a broken chunk after forwarding began: 400 as the client saw it, aborted, upstream request torn down, in-flight back to 0', async () => {
    const logsFrom = stack.logs.length;
    const socket = connect({ port, host: '127.0.0.1' });
    await once(socket, 'connect');
    const received: Buffer[] = [];
    socket.on('data', (c: Buffer) => received.push(c));
    const closed = once(socket, 'close');
    const forwarded = upstream.next();
    socket.write(
      `POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nb\r\n{"jsonrpc":\r\n`,
    );
    const held = await forwarded;
    socket.write('zz\r\nnot a chunk\r\n');
    await closed;
    expect(Buffer.concat(received).toString('latin1')).toMatch(/^HTTP\/1\.1 400 /);
    await held.closed;
    await stack.sidecar.forwarder.whenIdle();
    expect(stack.sidecar.forwarder.inFlight()).toBe(0);
    const [line] = accessLines(logsFrom);
    expect(line).toMatchObject({ method: 'POST', path: '/mcp', status: 400, aborted: true });
    expect(line!.upstreamStatus).toBeUndefined();
  });
});
