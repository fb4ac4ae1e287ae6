// WORKERS=2 as real processes against real Redis and the reference upstream: the SDK client through
// the shared proxy port, requests served by both workers, /metrics summed over them, a stream revoked
// through the primary's admin listener ending on a worker, a killed worker restarted, SIGTERM draining
// an in-flight call; and the start-up failures that stop the group once instead of a restart loop.

import { request } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startUpstream, type RunningUpstream } from '../../examples/upstream/server.ts';
import { generateToken } from '../../src/model/credentials.ts';
import { redisUrl } from '../support/redis.ts';
import { rawSession } from '../support/sse.ts';
import { sigtermDuringCall, spawnProcess, startProcess, startSidecarProcess, type SidecarProcess } from '../support/process.ts';
import { nodeTs } from '../support/node-ts.ts';

const SIDECAR = nodeTs('src/entry/main.ts');

function env(extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    HOST: '127.0.0.1',
    PORT: '0',
    ADMIN_PORT: '0',
    LOG_LEVEL: 'info',
    LOG_FORMAT: 'json',
    ...extra,
  };
}

/** The JSON log lines of the output (other lines: the two "listening" lines). */
function logLines(output: string): Record<string, unknown>[] {
  return output
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** One request on its own connection (no keep-alive), so the cluster hands each to the next worker. */
function getOnNewConnection(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', reject);
    req.end();
  });
}

/** The sum of every `mcp_auth_requests_total` series in a scrape. */
function requestsTotal(scrape: string): number {
  return scrape
    .split('\n')
    .filter((l) => l.startsWith('mcp_auth_requests_total{'))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

describe('WORKERS=2 against real Redis', () => {
  let upstream: RunningUpstream;
  let sidecar: SidecarProcess;
  let proxyUrl: string;
  let adminUrl: string;

  const admin = async (op: string, body: Record<string, unknown>) => {
    const answer = await sidecar.admin(op, body);
    expect(answer.status).toBeLessThan(300);
    return answer.body;
  };
  const newToken = async () => {
    const { clientId } = await admin('createClient', { clientName: 'workers-test' });
    const { accessToken } = await admin('createAccessToken', { clientId, lifetimeSeconds: 600 });
    return { clientId: clientId!, accessToken: accessToken! };
  };

  beforeAll(async () => {
    upstream = await startUpstream({ host: '127.0.0.1', port: 0 });
    sidecar = await startSidecarProcess('workers', SIDECAR, env({ UPSTREAM_URL: upstream.url, WORKERS: '2' }));
    ({ proxyUrl, adminUrl } = sidecar);
  });

  afterAll(async () => {
    await sidecar?.cleanup();
    await upstream?.close();
  });

  it('prints the real shared port (PORT=0), is ready, and the SDK client works through it', async () => {
    expect(proxyUrl).toMatch(/^http:\/\/127\.0\.0\.1:[1-9]\d*$/);
    expect((await fetch(`${adminUrl}/readyz`)).status).toBe(200);
    const { accessToken } = await newToken();
    const client = new Client({ name: 'workers-test', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${proxyUrl}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${accessToken}` } },
      }),
    );
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('echo');
    const result = await client.callTool({ name: 'echo', arguments: { text: 'through a worker' } });
    expect(JSON.stringify(result.content)).toContain('through a worker');
    await client.close();
  });

  it('serves requests from both workers and /metrics counts the sum over them', async () => {
    const before = requestsTotal(await (await fetch(`${adminUrl}/metrics`)).text());
    const logged = logLines(sidecar.output()).filter((l) => l.msg === 'request').length;
    const k = 12;
    for (let i = 0; i < k; i++) expect(await getOnNewConnection(`${proxyUrl}/mcp`)).toBe(401);
    const scrape = await (await fetch(`${adminUrl}/metrics`)).text();
    expect(requestsTotal(scrape) - before).toBe(k);
    // One exposition, not three glued together: each metric once; the store is up in every process.
    const types = scrape.split('\n').filter((l) => l.startsWith('# TYPE '));
    expect(new Set(types).size).toBe(types.length);
    expect(types).toContain('# TYPE mcp_auth_requests_total counter');
    expect(scrape).toMatch(/^mcp_auth_store_up 1$/m);
    // Access log lines are written asynchronously: wait for all k of them, then read their worker ids.
    await sidecar.waitFor((out) => logLines(out).filter((l) => l.msg === 'request').length >= logged + k);
    const served = logLines(sidecar.output())
      .filter((l) => l.msg === 'request')
      .slice(logged);
    expect(new Set(served.map((l) => l.worker))).toEqual(new Set([1, 2]));
    expect(logLines(sidecar.output()).every((l) => typeof l.worker === 'number')).toBe(true);
  });

  it('ends an open stream on a worker when its token is revoked through the primary', async () => {
    const { clientId, accessToken } = await newToken();
    const session = await rawSession(`${proxyUrl}/mcp`, { authorization: `Bearer ${accessToken}` });
    const get = await fetch(`${proxyUrl}/mcp`, { headers: session.headers() });
    expect(get.status).toBe(200);
    const ended = get.body!.pipeTo(new WritableStream()).then(
      () => 'ended',
      () => 'reset',
    );
    // The stream is open on a worker once its metric counts it (the summed gauge).
    const streams = async () => (await (await fetch(`${adminUrl}/metrics`)).text()).match(/^mcp_auth_open_sse_streams (\d+)/m)?.[1];
    while ((await streams()) !== '1') await new Promise((r) => setImmediate(r));
    await admin('deleteClient', { clientId });
    expect(await ended).toBe('ended');
    // The worker that held the stream says why it ended (its access log line is written as it closes).
    await sidecar.waitFor((out) =>
      logLines(out).some((l) => l.msg === 'request' && l.endedBy === 'revoked' && (l.worker === 1 || l.worker === 2)),
    );
  });

  it('answers /metrics 503 while a worker cannot send its metrics (stopped), not a partial sum', async () => {
    const worker = logLines(sidecar.output()).find((l) => l.msg === 'worker listening' && l.listeningWorker === 2)!;
    process.kill(worker.pid as number, 'SIGSTOP');
    try {
      const res = await fetch(`${adminUrl}/metrics`);
      expect(res.status).toBe(503);
      expect(await res.text()).not.toContain('mcp_auth_requests_total');
    } finally {
      process.kill(worker.pid as number, 'SIGCONT');
    }
    expect((await fetch(`${adminUrl}/metrics`)).status).toBe(200);
  });

  it('restarts a worker killed with SIGKILL (the back-off doubling), and requests keep working', async () => {
    const listening = logLines(sidecar.output()).filter((l) => l.msg === 'worker listening');
    const victim = listening.find((l) => l.listeningWorker === 1)!;
    process.kill(victim.pid as number, 'SIGKILL');
    await sidecar.waitFor((out) => logLines(out).some((l) => l.msg === 'worker listening' && l.listeningWorker === 3));
    const died = logLines(sidecar.output()).find((l) => l.msg === 'worker died: restarting it')!;
    expect(died).toMatchObject({ level: 50, exitedWorker: 1, code: null, signal: 'SIGKILL' });
    // A second death within the minute waits twice as long before its restart.
    const second = logLines(sidecar.output()).find((l) => l.msg === 'worker listening' && l.listeningWorker === 3)!;
    process.kill(second.pid as number, 'SIGKILL');
    await sidecar.waitFor((out) => logLines(out).some((l) => l.msg === 'worker listening' && l.listeningWorker === 4));
    expect(
      logLines(sidecar.output())
        .filter((l) => l.msg === 'worker died: restarting it')
        .map((l) => [l.exitedWorker, l.restartInMs]),
    ).toEqual([
      [1, 100],
      [3, 200],
    ]);
    expect((await fetch(`${adminUrl}/readyz`)).status).toBe(200);
    const { accessToken } = await newToken();
    const client = new Client({ name: 'workers-after-kill', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${proxyUrl}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${accessToken}` } },
      }),
    );
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
    await client.close();
    for (let i = 0; i < 4; i++) expect(await getOnNewConnection(`${proxyUrl}/mcp`)).toBe(401);
  });

  it('on SIGTERM lets the in-flight call finish on its worker, and the primary exits 0', async () => {
    const { accessToken } = await newToken();
    const session = await rawSession(`${proxyUrl}/mcp`, { authorization: `Bearer ${accessToken}` });
    await sigtermDuringCall(sidecar, `${proxyUrl}/mcp`, session.headers());
    expect(await sidecar.exit).toBe(0);
    const lines = logLines(sidecar.output());
    // Every worker and the primary stopped gracefully; no line of any process was cut by another's.
    expect(
      lines
        .filter((l) => l.msg === 'shut down')
        .map((l) => l.worker)
        .sort(),
    ).toEqual([0, 2, 4]);
    expect(
      sidecar
        .output()
        .split('\n')
        .filter((l) => l !== '' && !l.startsWith('{') && !/^(proxy|admin) listening on /.test(l)),
    ).toEqual([]);
    await expect(fetch(`${proxyUrl}/mcp`)).rejects.toThrow();
  });
});

describe('WORKERS=2: failures that stop the group', () => {
  const base = () => env({ BEARER_SECRET_MASTER: generateToken(), UPSTREAM_URL: 'http://127.0.0.1:9/mcp', WORKERS: '2' });

  it('on SIGTERM a worker that does not stop is killed after the grace period and the group exits 1', async () => {
    const run = await startProcess([...SIDECAR, '--proxy.shutdownGraceMs', '0'], { ...base(), REDIS_URL: redisUrl() }, [
      /admin listening on/,
    ]);
    const worker = logLines(run.output()).find((l) => l.msg === 'worker listening')!;
    process.kill(worker.pid as number, 'SIGSTOP');
    run.child.kill('SIGTERM');
    expect(await run.exit).toBe(1);
    const lines = logLines(run.output());
    expect(lines.filter((l) => l.msg === 'workers did not stop within the grace period: killing them')).toHaveLength(1);
    expect(
      lines
        .filter((l) => l.msg === 'shut down')
        .map((l) => l.worker)
        .sort(),
    ).toEqual([0, worker.listeningWorker === 1 ? 2 : 1]);
  });

  it('Redis refused: exit 2 with one paragraph, before any worker is started', async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const run = spawnProcess(SIDECAR, { ...base(), REDIS_URL: `redis://127.0.0.1:${port}` });
    expect(await run.exit).toBe(2);
    expect(run.output().match(/cannot reach Redis/g)).toHaveLength(1);
    expect(run.output()).not.toContain('worker started');
  });

  it('a worker that cannot open the proxy port stops every worker and the group exits 1, without restarts', async () => {
    const taken = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    try {
      const run = spawnProcess(SIDECAR, { ...base(), REDIS_URL: redisUrl(), PORT: String((taken.address() as AddressInfo).port) });
      expect(await run.exit).toBe(1);
      const lines = logLines(run.output());
      expect(lines.filter((l) => l.msg === 'worker failed at start-up: stopping every worker')).toHaveLength(1);
      expect(lines.filter((l) => l.msg === 'worker started')).toHaveLength(2);
      expect(lines.some((l) => l.msg === 'worker died: restarting it')).toBe(false);
      expect(run.output()).not.toContain('proxy listening on');
    } finally {
      await new Promise((r) => taken.close(r));
    }
  });
});
