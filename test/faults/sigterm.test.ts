// SIGTERM on the real process (`node src/entry/main.ts`, as a supervisor starts it) while 100 SSE
// streams are open and POSTs are in flight: the GET streams end cleanly (clients resume elsewhere), the
// in-flight POSTs (plain and streamed) finish within the grace period, new connections are refused, and
// the process exits 0.

import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROBE_USER_AGENT } from '../../src/proxy/upstream-check.ts';
import { serveOnLoopback } from '../support/fake-upstreams.ts';
import { startRedisServer, type RedisServer } from '../support/redis-server.ts';
import { RUN_TS } from '../support/node-ts.ts';

const STREAMS = 100;
const PLAIN_POSTS = 5;
const STREAMED_POSTS = 5;

interface Held {
  req: IncomingMessage;
  res: ServerResponse;
}

/** GET -> an SSE stream left open; POST -> held until the test releases it (plain JSON or an SSE reply). */
async function startHoldingUpstream() {
  const gets: Held[] = [];
  const posts: Held[] = [];
  const waiters: Array<() => void> = [];
  const changed = () => {
    for (const w of waiters.splice(0)) w();
  };
  const server = createServer((req, res) => {
    req.resume();
    // The sidecar's start-up probe is answered as an MCP server answers a session-less GET, and not held.
    if (req.headers['user-agent'] === PROBE_USER_AGENT) {
      res.writeHead(400).end();
      return;
    }
    if (req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.write('id: 1\ndata: open\n\n');
      gets.push({ req, res });
    } else {
      if (req.headers['x-test-reply'] === 'sse') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('id: 1\ndata: working\n\n');
      }
      posts.push({ req, res });
    }
    changed();
  });
  const { url, close } = await serveOnLoopback(server);
  return {
    url,
    gets,
    posts,
    async until(predicate: () => boolean): Promise<void> {
      while (!predicate()) await new Promise<void>((r) => waiters.push(r));
    },
    close,
  };
}

/** Starts the sidecar process; resolves with its URLs once it printed both "listening" lines. */
async function startSidecar(
  env: Record<string, string>,
): Promise<{ child: ChildProcess; proxyUrl: string; adminUrl: string; output: () => string }> {
  const child = spawn(process.execPath, [...RUN_TS, 'src/entry/main.ts'], {
    cwd: process.cwd(),
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const urls = await new Promise<{ proxyUrl: string; adminUrl: string }>((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const proxy = /proxy listening on (\S+)/.exec(out);
      const admin = /admin listening on (\S+)/.exec(out);
      if (proxy && admin) resolve({ proxyUrl: proxy[1]!, adminUrl: admin[1]! });
    });
    child.once('exit', (code) => reject(new Error(`sidecar exited (${code}) before listening: ${err.slice(-500)}`)));
  });
  return { child, ...urls, output: () => out + err };
}

describe('SIGTERM on the real process', () => {
  let redis: RedisServer;
  let dir: string;

  beforeAll(async () => {
    redis = await startRedisServer();
    dir = mkdtempSync(join(tmpdir(), 'mcp-bearer-proxy-sigterm-'));
  });
  afterAll(async () => {
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The sidecar process with its own config file (in the temp dir), this Redis and the upstream. */
  function startSidecarWith(file: string, yaml: string, master: string, upstreamUrl: string) {
    const configPath = join(dir, file);
    writeFileSync(configPath, yaml);
    return startSidecar({
      MCP_AUTH_CONFIG: configPath,
      BEARER_SECRET_MASTER: master,
      REDIS_URL: redis.url,
      UPSTREAM_URL: upstreamUrl,
      HOST: '127.0.0.1',
      PORT: '0',
      ADMIN_PORT: '0',
      LOG_LEVEL: 'warn',
    });
  }

  it(`drains ${STREAMS} open SSE streams and in-flight POSTs, then exits 0`, async () => {
    const upstream = await startHoldingUpstream();
    const master = randomBytes(32).toString('hex');
    const sidecar = await startSidecarWith(
      'config.yaml',
      'redis:\n  keyPrefix: "sigterm:"\nproxy:\n  shutdownGraceMs: 20000\n',
      master,
      upstream.url,
    );
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      sidecar.child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    try {
      // An OAuth token too, so the store is really in use.
      const created = await fetch(`${sidecar.adminUrl}/oauth/createClient`, {
        method: 'POST',
        headers: { authorization: `Bearer ${master}`, 'content-type': 'application/json' },
        body: '{"clientName":"sigterm"}',
      });
      const { clientId } = (await created.json()) as { clientId: string };
      const issued = await fetch(`${sidecar.adminUrl}/oauth/createAccessToken`, {
        method: 'POST',
        headers: { authorization: `Bearer ${master}`, 'content-type': 'application/json' },
        body: JSON.stringify({ clientId, lifetimeSeconds: 600 }),
      });
      const { accessToken } = (await issued.json()) as { accessToken: string };

      const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
      const open = (method: string, token: string, headers: Record<string, string> = {}) =>
        new Promise<IncomingMessage>((resolve, reject) => {
          const req = request(
            `${sidecar.proxyUrl}/mcp`,
            { method, agent, headers: { authorization: `Bearer ${token}`, ...headers } },
            resolve,
          );
          req.on('error', reject);
          req.end(method === 'POST' ? '{"jsonrpc":"2.0","id":1,"method":"tools/call"}' : undefined);
        });
      /** Collects a response to its end: 'end' when complete, 'broken' when cut. */
      const collect = (res: IncomingMessage) =>
        new Promise<{ status: number; outcome: 'end' | 'broken'; body: string }>((resolve) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, outcome: res.complete ? 'end' : 'broken', body }));
          res.on('error', () => resolve({ status: res.statusCode ?? 0, outcome: 'broken', body }));
        });

      // 100 GET streams, half of them with the OAuth token; each has its first event.
      const streams = await Promise.all(
        Array.from({ length: STREAMS }, (_, i) => open('GET', i % 2 === 0 ? master : accessToken, { accept: 'text/event-stream' })),
      );
      await upstream.until(() => upstream.gets.length === STREAMS);
      const streamResults = streams.map(collect);
      // In-flight POSTs: some still waiting for headers, some streaming an SSE reply.
      const plain = Array.from({ length: PLAIN_POSTS }, () => open('POST', accessToken).then(collect));
      const streamed = Array.from({ length: STREAMED_POSTS }, () =>
        open('POST', master, { 'x-test-reply': 'sse', accept: 'text/event-stream' }).then(collect),
      );
      await upstream.until(() => upstream.posts.length === PLAIN_POSTS + STREAMED_POSTS);

      sidecar.child.kill('SIGTERM');

      // The GET streams end cleanly (a clean end of the chunked body, not a cut connection).
      const ended = await Promise.all(streamResults);
      for (const s of ended) {
        expect(s.status).toBe(200);
        expect(s.outcome).toBe('end');
        expect(s.body).toContain('data: open');
      }
      // No new connections once draining has begun.
      const refused = await fetch(`${sidecar.proxyUrl}/mcp`, { headers: { authorization: `Bearer ${master}` } }).then(
        (r) => `status ${r.status}`,
        (e: Error) => `error ${(e.cause as { code?: string } | undefined)?.code ?? e.message}`,
      );
      expect(refused).toBe('error ECONNREFUSED');
      expect(sidecar.child.exitCode).toBeNull(); // still draining the POSTs

      // The in-flight POSTs finish inside the grace period.
      for (const { res } of upstream.posts) {
        if (res.headersSent) res.end('id: 2\ndata: done\n\n');
        else {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end('{"jsonrpc":"2.0","id":1,"result":{}}');
        }
      }
      const finished = await Promise.all([...plain, ...streamed]);
      for (const p of finished) {
        expect(p.status).toBe(200);
        expect(p.outcome).toBe('end');
      }
      expect(finished.slice(0, PLAIN_POSTS).map((p) => p.body)).toEqual(Array(PLAIN_POSTS).fill('{"jsonrpc":"2.0","id":1,"result":{}}'));
      for (const p of finished.slice(PLAIN_POSTS)) expect(p.body).toBe('id: 1\ndata: working\n\nid: 2\ndata: done\n\n');

      const exit = await exited;
      expect(exit, sidecar.output()).toEqual({ code: 0, signal: null });
      // Every upstream stream the sidecar held was closed by it.
      for (const g of upstream.gets) if (!g.res.destroyed) await once(g.res, 'close');
      agent.destroy();
    } finally {
      if (sidecar.child.exitCode === null && sidecar.child.signalCode === null) sidecar.child.kill('SIGKILL');
      await upstream.close();
    }
  }, 60_000);

  it('a POST that outlives shutdownGraceMs is cut, and the process still exits 0', async () => {
    const upstream = await startHoldingUpstream();
    const master = randomBytes(32).toString('hex');
    const sidecar = await startSidecarWith('grace.yaml', 'proxy:\n  shutdownGraceMs: 300\n', master, upstream.url);
    const exited = new Promise<number | null>((resolve) => sidecar.child.once('exit', (code) => resolve(code)));
    try {
      const answer = new Promise<string>((resolve) => {
        const req = request(
          `${sidecar.proxyUrl}/mcp`,
          { method: 'POST', agent: false, headers: { authorization: `Bearer ${master}` } },
          (res) => {
            res.resume();
            res.on('end', () => resolve(`complete ${res.statusCode}`));
            res.on('error', () => resolve('cut'));
          },
        );
        req.on('error', () => resolve('cut'));
        req.end('{}');
      });
      await upstream.until(() => upstream.posts.length === 1);
      sidecar.child.kill('SIGTERM');
      expect(await answer).toBe('cut');
      expect(await exited).toBe(0);
      // The upstream request was torn down with it.
      const held = upstream.posts[0]!;
      if (!held.res.destroyed) await once(held.res, 'close');
    } finally {
      if (sidecar.child.exitCode === null && sidecar.child.signalCode === null) sidecar.child.kill('SIGKILL');
      await upstream.close();
    }
  });
});
