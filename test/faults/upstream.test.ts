// Upstream faults with real sockets: refused, reset before and in the middle of a response, headers that
// never come, SSE streams closed cleanly or cut. Each answer is 502/504 or a clean (or visibly broken)
// stream end; the sidecar stays up, and no socket or in-flight request is left behind on either side.

import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSseUpstream, type SseUpstream } from '../support/fake-upstreams.ts';
import { addressOf, startFaultProxy, type FaultProxy } from '../support/fault-proxy.ts';
import { startStack, type Stack } from '../support/stack.ts';

interface RawAnswer {
  status: number;
  body: string;
  /** The response arrived whole (false: the connection broke in the middle of it). */
  complete: boolean;
  error?: string;
}

/** One request on its own connection (Connection: close), so that nothing is pooled on the client side. */
function send(
  url: string,
  token: string,
  options: { method?: string; body?: string; headers?: Record<string, string> } = {},
): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const req = request(
      url,
      {
        method: options.method ?? 'POST',
        agent: false,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...options.headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        const done = (error?: string) =>
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString('utf8'),
            complete: res.complete,
            ...(error ? { error } : {}),
          });
        res.on('end', () => done());
        res.on('error', (err) => done(err.message));
        res.on('aborted', () => done('aborted'));
      },
    );
    req.on('error', (err) => resolve({ status: 0, body: '', complete: false, error: err.message }));
    req.end(options.body ?? '{"jsonrpc":"2.0","id":1,"method":"ping"}');
  });
}

/** Tracks the sidecar's client connections so a test can wait (on events) until all have closed. */
function trackConnections(server: Server): { idle(): Promise<void> } {
  const open = new Set<Socket>();
  server.on('connection', (s: Socket) => {
    open.add(s);
    s.once('close', () => open.delete(s));
  });
  return {
    async idle() {
      // A socket leaves the set on 'close'; `destroyed` is set earlier (at destroy()), before the
      // server has run its own close handlers (the response's 'close', the in-flight count).
      await Promise.all([...open].map((s) => once(s, 'close')));
    },
  };
}

async function connections(server: Server): Promise<number> {
  return new Promise((resolve, reject) => server.getConnections((err, n) => (err ? reject(err) : resolve(n))));
}

/** A scripted HTTP upstream: the test decides what each request gets. */
async function scriptedUpstream(handler: (req: IncomingMessage, res: import('node:http').ServerResponse) => void) {
  const sockets = new Set<Socket>();
  const server = createServer(handler);
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: `http://127.0.0.1:${port}/mcp`,
    sockets,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

describe('upstream faults', () => {
  let stack: Stack | undefined;
  let cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    await stack?.close();
    stack = undefined;
    for (const c of cleanup.reverse()) await c();
    cleanup = [];
  });

  /** Leak check after a fault: nothing in flight, no client connection left, the sidecar still answers. */
  async function expectNoLeaks(s: Stack, tracker: { idle(): Promise<void> }): Promise<void> {
    await tracker.idle();
    expect(s.sidecar.forwarder.inFlight()).toBe(0);
    expect(await connections(s.sidecar.proxyServer)).toBe(0);
    expect((await s.sidecar.metrics.openStreams.get()).values[0]?.value ?? 0).toBe(0);
    const health = await fetch(`${s.adminUrl}/livez`);
    expect(health.status).toBe(200);
  }

  it('upstream refusing connections: 502 for every request, nothing left open, fine again when it is back', async () => {
    const upstream = await scriptedUpstream((req, res) => {
      req.resume();
      req.on('end', () => res.end('{"ok":true}'));
    });
    cleanup.push(() => upstream.close());
    const fault = await startFaultProxy({ host: '127.0.0.1', port: upstream.port }, 'down');
    cleanup.push(() => fault.close());
    stack = await startStack({ upstreamUrl: fault.url('http', '/mcp') });
    const tracker = trackConnections(stack.sidecar.proxyServer);
    const { token } = await stack.issueOAuthToken();
    const answers = await Promise.all(Array.from({ length: 20 }, () => send(stack!.mcpUrl, token)));
    for (const a of answers) {
      expect(a.status).toBe(502);
      expect(JSON.parse(a.body).error).toBe('bad_gateway');
    }
    await expectNoLeaks(stack, tracker);
    await fault.setMode('pass');
    expect((await send(stack.mcpUrl, token)).status).toBe(200);
  });

  it('upstream resetting each connection on accept: 502, nothing left open', async () => {
    const upstream = await scriptedUpstream((req, res) => res.end());
    cleanup.push(() => upstream.close());
    const fault = await startFaultProxy({ host: '127.0.0.1', port: upstream.port }, 'reset');
    cleanup.push(() => fault.close());
    stack = await startStack({ upstreamUrl: fault.url('http', '/mcp') });
    const tracker = trackConnections(stack.sidecar.proxyServer);
    const { token } = await stack.issueOAuthToken();
    const answers = await Promise.all(Array.from({ length: 20 }, () => send(stack!.mcpUrl, token)));
    for (const a of answers) expect(a.status).toBe(502);
    await expectNoLeaks(stack, tracker);
  });

  it('upstream resetting in the middle of a response body: the client sees a broken response, not a complete one', async () => {
    const upstream = await scriptedUpstream((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100000' });
      res.write(Buffer.alloc(1000, 0x61), () => req.socket.resetAndDestroy());
    });
    cleanup.push(() => upstream.close());
    stack = await startStack({ upstreamUrl: upstream.url });
    const tracker = trackConnections(stack.sidecar.proxyServer);
    const { token } = await stack.issueOAuthToken();
    const answers = await Promise.all(Array.from({ length: 20 }, () => send(stack!.mcpUrl, token)));
    for (const a of answers) {
      // Depending on whether the reset overtook the headers: 502, or the 200 broken off. Never a
      // response that looks whole, never a hang.
      if (a.status === 502) expect(JSON.parse(a.body).error).toBe('bad_gateway');
      else {
        expect(a.status).toBe(200);
        expect(a.complete).toBe(false);
        expect(a.body.length).toBeLessThan(100000);
      }
    }
    await expectNoLeaks(stack, tracker);
    expect(upstream.sockets.size).toBe(0);
  });

  it('upstream resetting a chunked response midway: the client sees a broken response', async () => {
    const upstream = await scriptedUpstream((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"partial":', () => req.socket.resetAndDestroy());
    });
    cleanup.push(() => upstream.close());
    stack = await startStack({ upstreamUrl: upstream.url });
    const tracker = trackConnections(stack.sidecar.proxyServer);
    const { token } = await stack.issueOAuthToken();
    const answers = await Promise.all(Array.from({ length: 10 }, () => send(stack!.mcpUrl, token)));
    for (const a of answers) {
      if (a.status === 502) expect(JSON.parse(a.body).error).toBe('bad_gateway');
      else expect(a.complete).toBe(false);
    }
    await expectNoLeaks(stack, tracker);
  });

  it('upstream never answering headers (blackholed): 504 within upstream.headersTimeoutMs, upstream sockets closed', async () => {
    const upstream = await scriptedUpstream((req, res) => res.end());
    cleanup.push(() => upstream.close());
    const fault = await startFaultProxy({ host: '127.0.0.1', port: upstream.port }, 'blackhole');
    cleanup.push(() => fault.close());
    const headersTimeoutMs = 300;
    stack = await startStack({ upstreamUrl: fault.url('http', '/mcp'), config: { upstream: { headersTimeoutMs } } });
    const tracker = trackConnections(stack.sidecar.proxyServer);
    const { token } = await stack.issueOAuthToken();
    const started = performance.now();
    const answers = await Promise.all(Array.from({ length: 20 }, () => send(stack!.mcpUrl, token)));
    for (const a of answers) {
      expect(a.status).toBe(504);
      expect(JSON.parse(a.body).error).toBe('gateway_timeout');
    }
    // The headers timeout answered them (not an earlier failure), and no later timeout did: the next
    // one in play is the test's own.
    const elapsed = performance.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(headersTimeoutMs);
    expect(elapsed).toBeLessThan(10 * headersTimeoutMs);
    await expectNoLeaks(stack, tracker);
    // The sidecar destroyed every upstream request it gave up on: the middlebox holds no link any more.
    await fault.whenNoConnections();
    expect(fault.openConnections()).toBe(0);
  });
});

describe('upstream faults: SSE streams', () => {
  let sse: SseUpstream;
  let fault: FaultProxy;
  let stack: Stack;
  let token: string;
  let tracker: { idle(): Promise<void> };

  beforeAll(async () => {
    sse = await startSseUpstream();
    fault = await startFaultProxy(addressOf(sse.url));
    stack = await startStack({ upstreamUrl: fault.url('http', '/mcp') });
    tracker = trackConnections(stack.sidecar.proxyServer);
    ({ token } = await stack.issueOAuthToken());
  });
  afterAll(async () => {
    await stack.close();
    await fault.close();
    await sse.close();
  });

  /** Opens `n` GET SSE streams through the sidecar; resolves once each has received its first event. */
  async function openStreams(n: number) {
    const streams = await Promise.all(
      Array.from({ length: n }, async () => {
        const clientSide = new Promise<IncomingMessage>((resolve, reject) => {
          const req = request(
            stack.mcpUrl,
            { method: 'GET', agent: false, headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } },
            resolve,
          );
          req.on('error', reject);
          req.end();
        });
        const [res, upstream] = await Promise.all([clientSide, sse.nextStream()]);
        return { res, upstream };
      }),
    );
    for (const { res, upstream } of streams) {
      expect(res.statusCode).toBe(200);
      const first = once(res, 'data');
      upstream.res.write('id: 1\ndata: hello\n\n');
      expect(String((await first)[0])).toBe('id: 1\ndata: hello\n\n');
    }
    return streams.map(({ res, upstream }) => ({
      res,
      upstream,
      /** 'end' (clean end of the chunked body) or 'broken' (connection closed in the middle). */
      outcome: new Promise<'end' | 'broken'>((resolve) => {
        res.on('end', () => resolve(res.complete ? 'end' : 'broken'));
        res.on('aborted', () => resolve('broken'));
        res.on('error', () => resolve('broken'));
        res.resume();
      }),
    }));
  }

  it('the upstream closing its SSE streams: each client stream ends cleanly, nothing left open', async () => {
    const streams = await openStreams(10);
    expect((await stack.sidecar.metrics.openStreams.get()).values[0]?.value).toBe(10);
    for (const s of streams) s.upstream.res.end();
    expect(await Promise.all(streams.map((s) => s.outcome))).toEqual(Array(10).fill('end'));
    await tracker.idle();
    expect(stack.sidecar.forwarder.inFlight()).toBe(0);
    expect(await connections(stack.sidecar.proxyServer)).toBe(0);
    expect((await stack.sidecar.metrics.openStreams.get()).values[0]?.value).toBe(0);
  });

  it('the upstream connections reset in the middle of SSE streams: each client sees a broken stream, the sidecar lives on', async () => {
    const streams = await openStreams(10);
    fault.resetAll();
    expect(await Promise.all(streams.map((s) => s.outcome))).toEqual(Array(10).fill('broken'));
    await tracker.idle();
    expect(stack.sidecar.forwarder.inFlight()).toBe(0);
    expect(await connections(stack.sidecar.proxyServer)).toBe(0);
    expect((await stack.sidecar.metrics.openStreams.get()).values[0]?.value).toBe(0);
    // Still serving.
    const again = await openStreams(1);
    again[0]!.upstream.res.end();
    expect(await again[0]!.outcome).toBe('end');
  });

  it('clients going away from SSE streams: every upstream stream is closed too', async () => {
    const streams = await openStreams(10);
    for (const s of streams) s.res.destroy();
    await Promise.all(streams.map((s) => s.upstream.closed));
    await tracker.idle();
    expect(stack.sidecar.forwarder.inFlight()).toBe(0);
    expect((await stack.sidecar.metrics.openStreams.get()).values[0]?.value).toBe(0);
  });
});
