// `npm run bench`: direct-to-upstream vs through the sidecar and its alternatives, in one run, on loopback.
//
// Starts everything itself: a private redis-server (temp dir, no persistence), the upstreams, the
// sidecar, plain pass-throughs and nginx, each in a process of its own so RSS and CPU are per process.
// The headline scenario (bench/fast.ts) puts a fast upstream behind the sidecar, the nginx
// `auth_request` peer, nginx `proxy_pass` and plain Node pass-throughs, with wrk as the load generator.
// The realistic scenarios use the reference MCP upstream (official SDK). Their targets, alternated
// round-robin within every scenario:
//   (a) upstream direct   (b) sidecar + OAuth token   (c) sidecar + user-grade token
//   (d) sidecar, unknown token (401)   (e) plain pass-through on the sidecar's engine, no auth
// Scenarios: fast-upstream `ping` POSTs at 1/32 connections; JSON-RPC `tools/call echo` POSTs at
// 1/32/256 connections; an SSE stream of 10,000 small events; 1,000 idle open SSE streams (memory per
// stream); a soak (RSS start/end). Prints a markdown report and writes it to bench/results/latest.md.
//
// Environment: BENCH_QUICK=1 (smoke run), BENCH_SOAK_SECONDS (60), BENCH_ROUNDS (3),
// BENCH_CELL_SECONDS (2, per target per round), BENCH_ONLY=fast,policy,observability,upstream-credentials,post,sse,idle,soak,
// BENCH_FAST_TARGETS (direct,nginx,peer,forward-auth,forward-auth-cache,http-proxy,undici,sidecar,sidecar-warn,sidecar-cache,sidecar-assertion; also sidecar-user,
// auth-floor, baseline), BENCH_FAST_CONNECTIONS (1,32), BENCH_FAST_ROUNDS (3), BENCH_WARMUP_MAX_SECONDS (30: the fast, policy and
// cost scenarios warm each target until its rate settles, at most this long; see warmUp in bench/wrk.ts),
// BENCH_TARGETS=a,b,c,d,e (POST scenario only), BENCH_CONNECTIONS=1,32,256, BENCH_CPU_PROF=1 (sidecar child under --cpu-prof, profile in bench/results/profiles/),
// BENCH_HEAP_SNAPSHOTS=<dir> (heap snapshots around the idle-stream scenario), BENCH_LOG_LEVEL (sidecar log level, default info as in production; the log goes to a temp file).

import { execSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, closeSync, symlinkSync } from 'node:fs';
import { request as httpRequest, type IncomingMessage, type ClientRequest } from 'node:http';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { Redis } from 'ioredis';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { startRedisServer, type RedisServer } from '../test/support/redis-server.ts';
import type { ProcessStats } from './child-ipc.ts';
import { SIDECAR_ENGINE, fastChecks, fastReport, fastScenario, type FastKey, type FastResults } from './fast.ts';
import { policyChecks, policyReport, policyScenario, type PolicyResults } from './policy.ts';
import { observabilityReport, observabilityScenario, type ObservabilityResults } from './observability.ts';
import { upstreamCredentialsReport, upstreamCredentialsScenario, type UpstreamCredentialsResults } from './upstream-credentials.ts';
import { Child, fmt, percentile, procCpuMicros, sortedCopy, table } from './lib.ts';

const BENCH_DIR = dirname(fileURLToPath(import.meta.url));
const ROOT = dirname(BENCH_DIR);
const env = process.env;
const QUICK = env.BENCH_QUICK === '1';
const SOAK_SECONDS = Number(env.BENCH_SOAK_SECONDS ?? (QUICK ? 3 : 60));
const ROUNDS = Number(env.BENCH_ROUNDS ?? (QUICK ? 1 : 2));
// autocannon stops on its one-second tick: durations are whole seconds.
const CELL_SECONDS = Math.max(1, Math.round(Number(env.BENCH_CELL_SECONDS ?? (QUICK ? 1 : 2))));
// Responses in the first part of a cell (connections opening, pipelines filling) are not counted.
const RAMP_SECONDS = Math.min(0.5, CELL_SECONDS / 4);
const WARMUP_SECONDS = 1;
const CONNECTIONS = (env.BENCH_CONNECTIONS ?? '1,32,256').split(',').map(Number);
const SSE_EVENTS = QUICK ? 1000 : 10_000;
const SSE_ROUNDS = QUICK ? 1 : 3;
const IDLE_STREAMS = Number(env.BENCH_IDLE_STREAMS ?? (QUICK ? 100 : 1000));
const CPU_PROF = env.BENCH_CPU_PROF === '1';
const ONLY = new Set((env.BENCH_ONLY ?? 'fast,policy,post,sse,idle,soak').split(',').map((s) => s.trim()));
const FAST_TARGETS = (
  env.BENCH_FAST_TARGETS ??
  `direct,nginx,peer,forward-auth,forward-auth-cache,http-proxy,undici,sidecar,sidecar-warn,sidecar-cache,sidecar-assertion${env.BENCH_BASELINE ? ',baseline' : ''}`
)
  .split(',')
  .map((s) => s.trim()) as FastKey[];
const FAST_CONNECTIONS = (env.BENCH_FAST_CONNECTIONS ?? '1,32').split(',').map(Number);
const FAST_ROUNDS = Number(env.BENCH_FAST_ROUNDS ?? (QUICK ? 1 : 3));
// BENCH_BASELINE=<git ref>: a second sidecar built from that commit's src/, measured as target (f).
// BENCH_BASELINE_LOOKUP_CACHE (off, tracking): the baseline's lookup-cache mode; unset, that commit's
// default (which caches on one node where the key exists, while the sidecar target is strict).
const BASELINE_LOOKUP_CACHE = env.BENCH_BASELINE_LOOKUP_CACHE;
// BENCH_TARGETS with g: the same pass-through as (e) on http-proxy-3 (the maintained fork), side by side.
const BASELINE = env.BENCH_BASELINE;
const TARGETS = new Set((env.BENCH_TARGETS ?? (BASELINE ? 'a,b,c,d,e,f' : 'a,b,c,d,e')).split(',').map((s) => s.trim()));
const PARTIAL =
  QUICK ||
  ONLY.size < 6 ||
  env.BENCH_FAST_TARGETS !== undefined ||
  env.BENCH_FAST_CONNECTIONS !== undefined ||
  TARGETS.size < 5 ||
  BASELINE !== undefined ||
  env.BENCH_CONNECTIONS !== undefined;

type TargetKey = 'a' | 'b' | 'c' | 'd' | 'e' | 'f' | 'g';
interface Target {
  key: TargetKey;
  label: string;
  /** Base URL of the MCP endpoint this target sends to. */
  url: string;
  authorization?: string;
  /** The process between the client and the upstream, if any. */
  proxy?: Child;
  expectStatus: number;
  sessionId?: string;
}

const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);
const now = () => performance.now();

// ---------------------------------------------------------------------------------------------------
// Set-up

const tmp = mkdtempSync(join(tmpdir(), 'mcp-bearer-proxy-bench-'));
const children: Child[] = [];
let redisServer: RedisServer | undefined;
let redis: Redis | undefined;

async function cleanup(): Promise<void> {
  await Promise.allSettled(children.map((c) => c.stop()));
  await redis?.quit().catch(() => redis?.disconnect());
  await redisServer?.stop().catch(() => undefined);
  rmSync(tmp, { recursive: true, force: true });
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void cleanup().finally(() => process.exit(130));
  });
}
// Nothing here may hang a CI job: past this bound the run fails (and cleans up).
const WATCHDOG_MS = Number(env.BENCH_WATCHDOG_SECONDS ?? 600) * 1000;
setTimeout(() => {
  process.stderr.write(`bench: still running after ${WATCHDOG_MS / 1000} s, giving up\n`);
  void cleanup().finally(() => process.exit(1));
}, WATCHDOG_MS).unref();

async function setUp() {
  redisServer = await startRedisServer();
  redis = new Redis(redisServer.url, { lazyConnect: true });
  await redis.connect();
  const masterToken = randomBytes(32).toString('hex');

  const upstream = await Child.start('upstream', join(BENCH_DIR, 'upstream-child.ts'));
  children.push(upstream);
  const upstreamUrl = upstream.urls.url!;

  const profileDir = join(BENCH_DIR, 'results', 'profiles');
  if (CPU_PROF) mkdirSync(profileDir, { recursive: true });
  let baselineSrc: string | undefined;
  if (BASELINE) {
    const dir = join(tmp, 'baseline');
    mkdirSync(dir);
    execSync(`git archive ${JSON.stringify(BASELINE)} src | tar -x -C ${JSON.stringify(dir)}`, { cwd: ROOT });
    // The baseline's imports resolve against this checkout's dependencies.
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
    baselineSrc = join(dir, 'src');
  }
  /** A sidecar child (this tree's src/, or the baseline's); its log goes to a file in the temp dir. */
  const spawnSidecar = async (
    name: string,
    options: {
      srcDir?: string;
      profile?: boolean;
      upstreamUrl?: string;
      logLevel?: string;
      policy?: object;
      workers?: number;
      lookupCache?: string;
      assertion?: boolean;
      forwardAuth?: boolean;
      env?: Record<string, string>;
    } = {},
  ) => {
    const logFd = openSync(join(tmp, 'sidecar.log'), 'a');
    try {
      const child = await Child.start(name, join(BENCH_DIR, 'sidecar-child.ts'), {
        env: {
          ...(options.srcDir ? { BENCH_SRC_DIR: options.srcDir } : {}),
          BENCH_MASTER_TOKEN: masterToken,
          BENCH_REDIS_URL: redisServer!.url,
          BENCH_UPSTREAM_URL: options.upstreamUrl ?? upstreamUrl,
          BENCH_LOG_LEVEL: options.logLevel ?? env.BENCH_LOG_LEVEL ?? 'info',
          ...(options.policy ? { BENCH_POLICY: JSON.stringify(options.policy) } : {}),
          ...(options.workers ? { BENCH_WORKERS: String(options.workers) } : {}),
          // Every target names its lookup-cache mode (the default, auto, would cache): strict unless it
          // is a cache target. A baseline from another commit keeps that commit's default.
          ...((options.lookupCache ?? (options.srcDir ? undefined : 'off')) ? { BENCH_LOOKUP_CACHE: options.lookupCache ?? 'off' } : {}),
          ...(options.assertion ? { BENCH_ASSERTION: '1' } : {}),
          ...(options.forwardAuth ? { BENCH_FORWARD_AUTH: '1' } : {}),
          ...options.env,
        },
        execArgv: options.profile ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : [],
        stdout: logFd,
      });
      children.push(child);
      return child;
    } finally {
      closeSync(logFd);
    }
  };
  const spawnPassthrough = async (name: string, lib: 'http-proxy' | 'http-proxy-3' | 'undici' = SIDECAR_ENGINE, to = upstreamUrl) => {
    const child = await Child.start(name, join(BENCH_DIR, 'passthrough-child.ts'), {
      env: { BENCH_UPSTREAM_URL: to, BENCH_PROXY_LIB: lib },
    });
    children.push(child);
    return child;
  };
  const [sidecar, passthrough, baseline, passthrough3] = await Promise.all([
    spawnSidecar('sidecar', { profile: CPU_PROF }),
    spawnPassthrough('passthrough'),
    baselineSrc ? spawnSidecar('baseline sidecar', { srcDir: baselineSrc }) : undefined,
    TARGETS.has('g') ? spawnPassthrough('http-proxy-3 passthrough', 'http-proxy-3') : undefined,
  ]);

  // (b) an OAuth access token, through the admin listener as an operator would get one.
  const admin = async (op: string, body: Record<string, unknown>, adminUrl = sidecar.urls.adminUrl!) => {
    const res = await fetch(`${adminUrl}/oauth/${op}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${masterToken}` },
      body: JSON.stringify(body),
    });
    if (res.status !== 201) throw new Error(`admin ${op}: ${res.status} ${await res.text()}`);
    return (await res.json()) as Record<string, string>;
  };
  const client = await admin('createClient', { clientName: 'bench' });
  const oauthToken = (await admin('createAccessToken', { clientId: client.clientId, lifetimeSeconds: 3600 })).accessToken!;
  // The baseline's own client and token, minted through its admin listener: a commit of another store
  // layout writes (and finds) its records under that layout's keys.
  let baselineToken: string | undefined;
  if (baseline) {
    const baselineClient = await admin('createClient', { clientName: 'bench-baseline' }, baseline.urls.adminUrl);
    baselineToken = (await admin('createAccessToken', { clientId: baselineClient.clientId, lifetimeSeconds: 3600 }, baseline.urls.adminUrl))
      .accessToken!;
  }

  // (c) a user-grade token, written the way docs/storage.md documents the record.
  const userToken = randomBytes(32).toString('hex');
  const key = `mcpauth:userBearerTokens:${createHash('sha256').update(userToken).digest('hex')}`;
  const createdAt = Date.now();
  const expiresAt = createdAt + 3_600_000;
  await redis
    .multi()
    .hset(key, {
      tokenHash: createHash('sha256').update(userToken).digest('hex'),
      subject: 'bench-user',
      issuer: 'https://idp.bench.invalid',
      revoked: 'false',
      createdAt: String(createdAt),
      expiresAt: String(expiresAt),
    })
    .pexpireat(key, expiresAt)
    .exec();

  const sidecarMcp = `${sidecar.urls.proxyUrl}/mcp`;
  const targets: Target[] = [
    { key: 'a', label: '(a) upstream direct', url: upstreamUrl, expectStatus: 200 },
    {
      key: 'b',
      label: '(b) sidecar, OAuth token',
      url: sidecarMcp,
      authorization: `Bearer ${oauthToken}`,
      proxy: sidecar,
      expectStatus: 200,
    },
    {
      key: 'c',
      label: '(c) sidecar, user-grade token',
      url: sidecarMcp,
      authorization: `Bearer ${userToken}`,
      proxy: sidecar,
      expectStatus: 200,
    },
    {
      key: 'd',
      label: '(d) sidecar, unknown token: 401',
      url: sidecarMcp,
      authorization: `Bearer ${randomBytes(32).toString('hex')}`,
      proxy: sidecar,
      expectStatus: 401,
    },
    {
      key: 'e',
      label: `(e) plain ${SIDECAR_ENGINE} pass-through, no auth`,
      url: `${passthrough.urls.proxyUrl}/mcp`,
      proxy: passthrough,
      expectStatus: 200,
    },
  ];
  if (passthrough3) {
    targets.push({
      key: 'g',
      label: '(g) plain http-proxy-3, no auth',
      url: `${passthrough3.urls.proxyUrl}/mcp`,
      proxy: passthrough3,
      expectStatus: 200,
    });
  }
  if (baseline) {
    targets.push({
      key: 'f',
      label: `(f) sidecar at ${BASELINE}, OAuth token`,
      url: `${baseline.urls.proxyUrl}/mcp`,
      authorization: `Bearer ${baselineToken!}`,
      proxy: baseline,
      expectStatus: 200,
    });
  }
  // One MCP session per target, opened through that target: the upstream is stateful.
  for (const t of targets) {
    if (t.key === 'd') continue;
    t.sessionId = await openSession(t);
  }
  targets.find((t) => t.key === 'd')!.sessionId = targets.find((t) => t.key === 'b')!.sessionId;
  return { upstream, sidecar, passthrough, targets, spawnSidecar, spawnPassthrough, baselineSrc, oauthToken, baselineToken, userToken };
}

function mcpHeaders(t: Target): Record<string, string> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': LATEST_PROTOCOL_VERSION,
  };
  if (t.sessionId) headers['mcp-session-id'] = t.sessionId;
  if (t.authorization) headers.authorization = t.authorization;
  return headers;
}

async function openSession(t: Target): Promise<string> {
  const init = await fetch(t.url, {
    method: 'POST',
    headers: mcpHeaders(t),
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'bench', version: '1.0.0' } },
    }),
  });
  const sessionId = init.headers.get('mcp-session-id');
  await init.text();
  if (init.status !== 200 || !sessionId) throw new Error(`${t.label}: initialize answered ${init.status}`);
  const withSession = { ...t, sessionId };
  const done = await fetch(t.url, {
    method: 'POST',
    headers: mcpHeaders(withSession),
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
  });
  await done.text();
  if (done.status !== 202) throw new Error(`${t.label}: notifications/initialized answered ${done.status}`);
  return sessionId;
}

// ---------------------------------------------------------------------------------------------------
// Scenario 1: small JSON-RPC POSTs

interface Cell {
  requests: number;
  unexpected: number;
  errors: number;
  seconds: number;
  /** Every response of the cell, ramp included, and its whole wall time: the CPU figures' base. */
  allResponses: number;
  wallSeconds: number;
  latencies: number[];
  proxyCpuMicros: number;
  upstreamCpuMicros: number;
  redisCpuMicros: number;
  proxyRss: number;
}

const emptyCell = (): Cell => ({
  requests: 0,
  unexpected: 0,
  errors: 0,
  seconds: 0,
  allResponses: 0,
  wallSeconds: 0,
  latencies: [],
  proxyCpuMicros: 0,
  upstreamCpuMicros: 0,
  redisCpuMicros: 0,
  proxyRss: 0,
});

/** redis-server's user + system CPU in µs, from /proc (Linux); NaN elsewhere. */
function redisCpuMicros(): number {
  const pid = redisServer?.process.pid;
  return pid === undefined ? Number.NaN : procCpuMicros([pid]);
}

// The JSON-RPC id must be unique per request within a session; autocannon puts a fresh id in `[<id>]`.
const ECHO_BODY = '{"jsonrpc":"2.0","id":"[<id>]","method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}';

async function loadCell(t: Target, connections: number, seconds: number, upstream: Child, into?: Cell): Promise<void> {
  const [proxyBefore, upstreamBefore] = await Promise.all([t.proxy?.stats(), upstream.stats()]);
  const redisBefore = redisCpuMicros();
  const started = now();
  const countFrom = started + RAMP_SECONDS * 1000;
  let lastResponse = countFrom;
  const instance = autocannon({
    url: t.url,
    connections,
    duration: seconds,
    method: 'POST',
    headers: mcpHeaders(t),
    body: ECHO_BODY,
    idReplacement: true,
    timeout: 10,
  });
  let requests = 0;
  let unexpected = 0;
  const latencies: number[] = [];
  let allResponses = 0;
  instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
    allResponses++;
    const at = now();
    if (at < countFrom) return;
    lastResponse = at;
    if (status === t.expectStatus) {
      requests++;
      latencies.push(ms);
    } else unexpected++;
  });
  const result = await instance;
  const elapsed = (lastResponse - countFrom) / 1000;
  const wall = (now() - started) / 1000;
  const [proxyAfter, upstreamAfter] = await Promise.all([t.proxy?.stats(), upstream.stats()]);
  const redisAfter = redisCpuMicros();
  if (!into) return;
  into.requests += requests;
  into.unexpected += unexpected;
  into.errors += result.errors + result.timeouts;
  into.seconds += elapsed;
  into.allResponses += allResponses;
  into.wallSeconds += wall;
  for (const l of latencies) into.latencies.push(l);
  if (proxyBefore && proxyAfter) {
    into.proxyCpuMicros += proxyAfter.cpuMicros - proxyBefore.cpuMicros;
    into.proxyRss = Math.max(into.proxyRss, proxyAfter.rss);
  }
  into.upstreamCpuMicros += upstreamAfter.cpuMicros - upstreamBefore.cpuMicros;
  into.redisCpuMicros += redisAfter - redisBefore;
}

interface CellSummary {
  rps: number;
  p50: number;
  p99: number;
  p999: number;
  requests: number;
  unexpected: number;
  errors: number;
  proxyCpuPercent: number;
  proxyCpuPerRequest: number;
  upstreamCpuPerRequest: number;
  redisCpuPerRequest: number;
  proxyRss: number;
}

function summarize(cell: Cell): CellSummary {
  const sorted = sortedCopy(cell.latencies);
  return {
    rps: cell.requests / cell.seconds,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    p999: percentile(sorted, 0.999),
    requests: cell.requests,
    unexpected: cell.unexpected,
    errors: cell.errors,
    proxyCpuPercent: cell.proxyRss ? (cell.proxyCpuMicros / (cell.wallSeconds * 1e6)) * 100 : Number.NaN,
    proxyCpuPerRequest: cell.proxyRss ? cell.proxyCpuMicros / Math.max(1, cell.allResponses) : Number.NaN,
    upstreamCpuPerRequest: cell.upstreamCpuMicros / Math.max(1, cell.allResponses),
    redisCpuPerRequest: cell.redisCpuMicros / Math.max(1, cell.allResponses),
    proxyRss: cell.proxyRss || Number.NaN,
  };
}

async function postScenario(targets: Target[], upstream: Child): Promise<Map<number, Map<TargetKey, CellSummary>>> {
  const results = new Map<number, Map<TargetKey, CellSummary>>();
  log(`warm-up: ${WARMUP_SECONDS} s per target`);
  for (const t of targets) await loadCell(t, 32, WARMUP_SECONDS, upstream);
  for (const connections of CONNECTIONS) {
    const cells = new Map<TargetKey, Cell>(targets.map((t) => [t.key, emptyCell()]));
    for (let round = 0; round < ROUNDS; round++) {
      // Rotate the starting target each round so no target always runs first (or right after another).
      const order = targets.map((_, i) => targets[(i + round) % targets.length]!);
      for (const t of order) await loadCell(t, connections, CELL_SECONDS, upstream, cells.get(t.key));
      log(`POST ${connections} conn: round ${round + 1}/${ROUNDS} done`);
    }
    results.set(connections, new Map([...cells].map(([k, c]) => [k, summarize(c)])));
  }
  return results;
}

// ---------------------------------------------------------------------------------------------------
// SSE helpers

function openSse(t: Target, query: string): { req: ClientRequest; response: Promise<IncomingMessage> } {
  const url = new URL(t.url);
  const headers: Record<string, string> = { accept: 'text/event-stream' };
  if (t.authorization) headers.authorization = t.authorization;
  let req!: ClientRequest;
  const response = new Promise<IncomingMessage>((resolve, reject) => {
    req = httpRequest(
      { host: url.hostname, port: url.port, path: `${url.pathname}?${query}`, method: 'GET', headers, agent: false },
      resolve,
    );
    req.on('error', reject);
    req.end();
  });
  return { req, response };
}

interface SseRun {
  firstEventMs: number;
  totalMs: number;
  events: number;
  gaps: number[];
  latencies: number[];
  reads: number;
}

/** Reads one stream of `n` synthetic events; times are taken when each chunk arrives. */
async function sseRun(t: Target, n: number): Promise<SseRun> {
  const started = now();
  const { response } = openSse(t, `events=${n}`);
  const res = await response;
  if (res.statusCode !== 200) throw new Error(`${t.label}: SSE answered ${res.statusCode}`);
  res.setEncoding('utf8');
  const gaps: number[] = [];
  const latencies: number[] = [];
  let buffer = '';
  let events = 0;
  let reads = 0;
  let first = Number.NaN;
  let last = Number.NaN;
  for await (const chunk of res as AsyncIterable<string>) {
    const arrived = now();
    const epoch = performance.timeOrigin + arrived;
    reads++;
    buffer += chunk;
    let cut: number;
    while ((cut = buffer.indexOf('\n\n')) !== -1) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const at = block.indexOf('"t":');
      if (at === -1) continue; // the opening comment
      const sentAt = Number(block.slice(at + 4, block.indexOf('}', at)));
      latencies.push(epoch - sentAt);
      if (events === 0) first = arrived;
      else gaps.push(arrived - last);
      last = arrived;
      events++;
    }
  }
  return { firstEventMs: first - started, totalMs: last - started, events, gaps, latencies, reads };
}

interface SseSummary {
  totalMs: number;
  firstEventMs: number;
  eventsPerSecond: number;
  gapP50: number;
  gapP99: number;
  gapMax: number;
  latencyP50: number;
  latencyP99: number;
  latencyMax: number;
  eventsPerRead: number;
  complete: boolean;
}

async function sseScenario(targets: Target[]): Promise<Map<TargetKey, SseSummary>> {
  const streamTargets = targets.filter((t) => t.key !== 'd');
  const runs = new Map<TargetKey, SseRun[]>(streamTargets.map((t) => [t.key, []]));
  for (const t of streamTargets) await sseRun(t, Math.min(1000, SSE_EVENTS)); // warm-up
  for (let round = 0; round < SSE_ROUNDS; round++) {
    const order = streamTargets.map((_, i) => streamTargets[(i + round) % streamTargets.length]!);
    for (const t of order) runs.get(t.key)!.push(await sseRun(t, SSE_EVENTS));
    log(`SSE ${SSE_EVENTS} events: round ${round + 1}/${SSE_ROUNDS} done`);
  }
  const out = new Map<TargetKey, SseSummary>();
  for (const [key, list] of runs) {
    const gaps = sortedCopy(list.flatMap((r) => r.gaps));
    const latencies = sortedCopy(list.flatMap((r) => r.latencies));
    const totals = sortedCopy(list.map((r) => r.totalMs));
    const median = percentile(totals, 0.5);
    out.set(key, {
      totalMs: median,
      firstEventMs: percentile(sortedCopy(list.map((r) => r.firstEventMs)), 0.5),
      eventsPerSecond: SSE_EVENTS / (median / 1000),
      gapP50: percentile(gaps, 0.5),
      gapP99: percentile(gaps, 0.99),
      gapMax: gaps[gaps.length - 1] ?? Number.NaN,
      latencyP50: percentile(latencies, 0.5),
      latencyP99: percentile(latencies, 0.99),
      latencyMax: latencies[latencies.length - 1] ?? Number.NaN,
      eventsPerRead: list.reduce((s, r) => s + r.events, 0) / list.reduce((s, r) => s + r.reads, 0),
      complete: list.every((r) => r.events === SSE_EVENTS),
    });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Scenario 3: idle open SSE streams

interface IdleSummary {
  before: ProcessStats;
  open: ProcessStats;
  closed: ProcessStats;
  streams: number;
}

/** Opens `count` idle streams through `t` (each past its `: open` comment), measures, closes them. */
async function holdIdleStreams(t: Target, count: number): Promise<{ requests: ClientRequest[]; responses: IncomingMessage[] }> {
  const requests: ClientRequest[] = [];
  const responses: IncomingMessage[] = [];
  const BATCH = 100;
  for (let i = 0; i < count; i += BATCH) {
    const batch = Array.from({ length: Math.min(BATCH, count - i) }, async () => {
      const { req, response } = openSse(t, 'events=0');
      requests.push(req);
      const res = await response;
      if (res.statusCode !== 200) throw new Error(`${t.label}: idle stream answered ${res.statusCode}`);
      responses.push(res);
      await new Promise<void>((resolve) => res.once('data', () => resolve())); // the ': open' comment
    });
    await Promise.all(batch);
  }
  return { requests, responses };
}

type Spawn = { sidecar: () => Promise<Child>; passthrough: () => Promise<Child>; baseline?: () => Promise<Child> };

/**
 * Each proxy is measured in a process of its own started for this (a process that has already run
 * the load scenarios has free heap and RSS to spare, and would show next to nothing per stream).
 */
async function idleScenario(targets: Target[], spawn: Spawn): Promise<Map<TargetKey, IdleSummary>> {
  const out = new Map<TargetKey, IdleSummary>();
  const plan: Array<[TargetKey, () => Promise<Child>]> = [
    ['b', spawn.sidecar],
    ['e', spawn.passthrough],
  ];
  if (spawn.baseline) plan.push(['f', spawn.baseline]);
  for (const [key, start] of plan) {
    const proxy = await start();
    const template = targets.find((x) => x.key === key)!;
    const t: Target = { ...template, url: `${proxy.urls.proxyUrl}/mcp`, proxy };
    // A first round so that one-off allocations (buffers, JIT, agent sockets) are not billed to the streams.
    const warm = await holdIdleStreams(t, Math.min(100, IDLE_STREAMS));
    await closeAll(warm.requests, t);
    // BENCH_HEAP_SNAPSHOTS=dir: heap snapshots before and with the streams open (diagnosis only).
    const snapshot = (when: string) =>
      env.BENCH_HEAP_SNAPSHOTS ? join(env.BENCH_HEAP_SNAPSHOTS, `${key}-${when}.heapsnapshot`) : undefined;
    const before = await proxy.stats(true, snapshot('before'));
    const held = await holdIdleStreams(t, IDLE_STREAMS);
    const open = await proxy.stats(true, snapshot('open'));
    await closeAll(held.requests, t);
    const closed = await proxy.stats(true);
    await proxy.stop();
    out.set(key, { before, open, closed, streams: IDLE_STREAMS });
    log(`idle streams: ${IDLE_STREAMS} through ${t.label} measured`);
  }
  return out;
}

async function closeAll(requests: ClientRequest[], t: Target): Promise<void> {
  await Promise.all(
    requests.map(
      (req) =>
        new Promise<void>((resolve) => {
          const socket = req.socket;
          if (!socket || socket.destroyed) return resolve();
          socket.once('close', () => resolve());
          req.destroy();
        }),
    ),
  );
  // The proxy learns of each close asynchronously; one request through it afterwards runs after
  // those events on its loop (the streams it held are gone when this answers).
  const { response } = openSse(t, 'events=1');
  const res = await response;
  res.resume();
  await new Promise((resolve) => res.once('end', resolve));
}

// ---------------------------------------------------------------------------------------------------
// Scenario 4: soak

interface SoakSummary {
  seconds: number;
  samples: Array<{ t: number; rss: number }>;
  heapStart: number;
  heapEnd: number;
  /** Heap after a forced GC at each quarter of the soak (start and end included): a leak grows along. */
  heaps: Array<{ t: number; heap: number }>;
  rssStart: number;
  rssMid: number;
  rssEnd: number;
  rssMax: number;
  requests: number;
  streams: number;
}

async function soakScenario(targets: Target[], sidecar: Child): Promise<SoakSummary> {
  const by = (k: TargetKey) => targets.find((t) => t.key === k)!;
  const heapStart = (await sidecar.stats(true)).heapUsed;
  const samples: Array<{ t: number; rss: number }> = [];
  const started = now();
  const sample = async () => samples.push({ t: (now() - started) / 1000, rss: (await sidecar.stats()).rss });
  await sample();
  let requests = 0;
  const load = [
    [by('b'), 16],
    [by('c'), 8],
    [by('d'), 8],
  ] as const;
  const instances = load.map(([t, connections]) => {
    const instance = autocannon({
      url: t.url,
      connections,
      duration: SOAK_SECONDS,
      method: 'POST',
      headers: mcpHeaders(t),
      body: ECHO_BODY,
      idReplacement: true,
      timeout: 10,
    });
    instance.on('response', () => void requests++);
    return instance;
  });
  // Streams come and go all along: every second, 20 short SSE streams of 100 events through (b).
  let streams = 0;
  let running = true;
  const streamLoop = (async () => {
    while (running) {
      const tick = new Promise((resolve) => setTimeout(resolve, 1000));
      await Promise.all(Array.from({ length: 20 }, () => sseRun(by('b'), 100).then(() => void streams++)));
      await tick;
    }
  })();
  const sampler = setInterval(() => void sample(), Math.max(500, (SOAK_SECONDS * 1000) / 30));
  const heaps = [{ t: 0, heap: heapStart }];
  const quarters = [1, 2, 3].map((q) =>
    setTimeout(
      () => void sidecar.stats(true).then((st) => heaps.push({ t: (now() - started) / 1000, heap: st.heapUsed })),
      (SOAK_SECONDS * 1000 * q) / 4,
    ),
  );
  await Promise.all(instances);
  running = false;
  clearInterval(sampler);
  for (const timer of quarters) clearTimeout(timer);
  await streamLoop;
  await sample();
  const heapEnd = (await sidecar.stats(true)).heapUsed;
  heaps.push({ t: (now() - started) / 1000, heap: heapEnd });
  const rss = samples.map((s) => s.rss);
  const mid = samples.reduce((best, s) => (Math.abs(s.t - SOAK_SECONDS / 2) < Math.abs(best.t - SOAK_SECONDS / 2) ? s : best), samples[0]!);
  return {
    seconds: SOAK_SECONDS,
    samples,
    heapStart,
    heapEnd,
    heaps,
    rssStart: rss[0]!,
    rssMid: mid.rss,
    rssEnd: rss[rss.length - 1]!,
    rssMax: Math.max(...rss),
    requests,
    streams,
  };
}

// ---------------------------------------------------------------------------------------------------
// Report

function machine(): string[] {
  const model = /model name\s*:\s*(.*)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? cpus()[0]?.model ?? 'unknown';
  let nproc = String(cpus().length);
  try {
    nproc = execSync('nproc', { encoding: 'utf8' }).trim();
  } catch {
    /* cpus() it is */
  }
  let redisVersion = 'unknown';
  try {
    redisVersion = execSync('redis-server --version', { encoding: 'utf8' }).trim();
  } catch {
    /* unknown */
  }
  return [`nproc ${nproc}, ${model}`, `node ${process.version}, ${redisVersion}`];
}

function uptime(): string {
  try {
    return execSync('uptime', { encoding: 'utf8' }).trim();
  } catch {
    return `load average: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(', ')}`;
  }
}

interface Results {
  fast?: FastResults;
  policy?: PolicyResults;
  observability?: ObservabilityResults;
  upstreamCredentials?: UpstreamCredentialsResults;
  post?: Map<number, Map<TargetKey, CellSummary>>;
  sse?: Map<TargetKey, SseSummary>;
  idle?: Map<TargetKey, IdleSummary>;
  soak?: SoakSummary;
}

function report(
  targets: Target[],
  results: Results,
  meta: { date: string; loadBefore: string; loadAfter: string; wallSeconds: number },
): string {
  const label = (k: TargetKey) => targets.find((t) => t.key === k)!.label;
  const out: string[] = [];
  out.push('## Benchmark results', '');
  out.push(`- date: ${meta.date}`);
  const settings = [
    'QUICK',
    'ONLY',
    'BASELINE',
    'FAST_TARGETS',
    'FAST_CONNECTIONS',
    'FAST_ROUNDS',
    'TARGETS',
    'CONNECTIONS',
    'ROUNDS',
    'CELL_SECONDS',
    'SOAK_SECONDS',
    'LOG_LEVEL',
    'CPU_PROF',
    'WARMUP_MAX_SECONDS',
  ]
    .filter((k) => env[`BENCH_${k}`] !== undefined)
    .map((k) => `BENCH_${k}=${env[`BENCH_${k}`]} `)
    .join('');
  out.push(`- command: \`${settings}npm run bench\` (whole run ${meta.wallSeconds.toFixed(0)} s)`);
  if (results.post || results.sse || results.soak)
    out.push(
      `- MCP upstream POSTs: ${ROUNDS} rounds × ${CELL_SECONDS} s per target per connection count, targets alternated round-robin, the first ${RAMP_SECONDS} s of each cell not counted; SSE: ${SSE_ROUNDS} rounds; soak ${SOAK_SECONDS} s`,
    );
  for (const m of machine()) out.push(`- machine: ${m}`);
  out.push(`- load before: \`${meta.loadBefore}\``, `- load after: \`${meta.loadAfter}\``);
  out.push(
    '- everything on loopback, one process each: load generators (wrk for the fast upstream, autocannon in this process for the MCP upstream), upstreams, sidecar, plain proxies, nginx, auth service, redis-server; ' +
      `sidecar log level ${env.BENCH_LOG_LEVEL ?? 'info'} (access log to a file), failed-auth rate limit off`,
  );
  out.push('');
  if (results.fast) out.push(...fastReport(results.fast, 1));
  if (results.policy) out.push(...policyReport(results.policy));
  if (results.observability) out.push(...observabilityReport(results.observability));
  if (results.upstreamCredentials) out.push(...upstreamCredentialsReport(results.upstreamCredentials));

  if (results.post) {
    out.push('### MCP SDK upstream: JSON-RPC POSTs (`tools/call echo` in an MCP session, SSE-framed answer), the realistic scenario', '');
    out.push(
      'Latency in ms, measured by the load generator per request; proxy CPU and RSS are those of the process between client and upstream; redis CPU is that of redis-server (from /proc), which shares the same two cores.',
      '',
    );
    const rows: string[][] = [];
    for (const [connections, cells] of results.post) {
      for (const [key, s] of cells) {
        rows.push([
          String(connections),
          label(key),
          fmt.int(s.rps),
          fmt.ms(s.p50),
          fmt.ms(s.p99),
          fmt.ms(s.p999),
          s.unexpected + s.errors === 0 ? '0' : `${s.unexpected} status, ${s.errors} errors`,
          Number.isFinite(s.proxyCpuPercent) ? `${s.proxyCpuPercent.toFixed(0)}%` : '—',
          Number.isFinite(s.proxyCpuPerRequest) ? s.proxyCpuPerRequest.toFixed(0) : '—',
          fmt.mib(s.proxyRss),
          s.upstreamCpuPerRequest.toFixed(0),
          Number.isFinite(s.redisCpuPerRequest) ? s.redisCpuPerRequest.toFixed(0) : '—',
        ]);
      }
    }
    out.push(
      table(
        [
          'conns',
          'target',
          'req/s',
          'p50',
          'p99',
          'p99.9',
          'unexpected',
          'proxy CPU',
          'proxy CPU µs/req',
          'proxy RSS MiB',
          'upstream CPU µs/req',
          'redis CPU µs/req',
        ],
        rows,
      ),
      '',
    );
    out.push('Ratios and added latency (sidecar with an OAuth token, (b), against the others):', '');
    const ratioRows: string[][] = [];
    const missing: CellSummary = {
      rps: NaN,
      p50: NaN,
      p99: NaN,
      p999: NaN,
      requests: 0,
      unexpected: 0,
      errors: 0,
      proxyCpuPercent: NaN,
      proxyCpuPerRequest: NaN,
      upstreamCpuPerRequest: NaN,
      redisCpuPerRequest: NaN,
      proxyRss: NaN,
    };
    for (const [connections, cells] of results.post) {
      const a = cells.get('a') ?? missing;
      const b = cells.get('b') ?? missing;
      const c = cells.get('c') ?? missing;
      const e = cells.get('e') ?? missing;
      ratioRows.push([
        String(connections),
        fmt.ratio(b.rps / a.rps),
        fmt.ratio(b.rps / e.rps),
        fmt.ratio(c.rps / e.rps),
        fmt.signedMs(b.p50 - e.p50),
        fmt.signedMs(b.p99 - e.p99),
        fmt.signedMs(b.p50 - a.p50),
        fmt.signedMs(b.p99 - a.p99),
      ]);
    }
    out.push(
      table(
        [
          'conns',
          '(b)/(a) req/s',
          '(b)/(e) req/s',
          '(c)/(e) req/s',
          'added p50 vs (e)',
          'added p99 vs (e)',
          'added p50 vs (a)',
          'added p99 vs (a)',
        ],
        ratioRows,
      ),
      '',
    );
  }

  if (results.sse) {
    out.push(
      `### One SSE stream of ${SSE_EVENTS.toLocaleString('en-US')} small events (median of ${SSE_ROUNDS} runs; gaps and latency over all runs)`,
      '',
    );
    out.push('The upstream writes one event per event-loop turn, stamped with its send time; latency = arrival − send time.', '');
    const rows = [...results.sse].map(([key, s]) => [
      label(key),
      fmt.ms(s.totalMs),
      fmt.ms(s.firstEventMs),
      fmt.int(s.eventsPerSecond),
      fmt.ms(s.gapP50),
      fmt.ms(s.gapP99),
      fmt.ms(s.gapMax),
      fmt.ms(s.latencyP50),
      fmt.ms(s.latencyP99),
      fmt.ms(s.latencyMax),
      s.eventsPerRead.toFixed(1),
      s.complete ? 'yes' : 'NO',
    ]);
    out.push(
      table(
        [
          'target',
          'delivery ms',
          'first event ms',
          'events/s',
          'gap p50 ms',
          'gap p99 ms',
          'gap max ms',
          'latency p50 ms',
          'latency p99 ms',
          'latency max ms',
          'events per read',
          'all delivered',
        ],
        rows,
      ),
      '',
    );
  }

  if (results.idle) {
    out.push(`### ${IDLE_STREAMS.toLocaleString('en-US')} idle open SSE streams (after a forced GC)`, '');
    const rows = [...results.idle].map(([key, s]) => [
      label(key),
      fmt.mib(s.before.rss),
      fmt.mib(s.open.rss),
      fmt.mib(s.closed.rss),
      fmt.kib((s.open.rss - s.before.rss) / s.streams),
      fmt.kib((s.open.heapUsed + s.open.external - s.before.heapUsed - s.before.external) / s.streams),
    ]);
    out.push(
      table(
        [
          'through',
          'RSS before MiB',
          'RSS with streams open MiB',
          'RSS after close MiB',
          'RSS per stream KiB',
          'JS heap + external per stream KiB',
        ],
        rows,
      ),
      '',
    );
  }

  if (results.soak) {
    const s = results.soak;
    out.push(`### Soak: ${s.seconds} s through the sidecar`, '');
    out.push(
      `(b) 16 + (c) 8 + (d) 8 connections of POSTs, plus 20 SSE streams of 100 events opened and read every second. ${s.requests.toLocaleString('en-US')} requests, ${s.streams.toLocaleString('en-US')} streams.`,
      '',
    );
    out.push(
      table(
        [
          'RSS start MiB',
          `RSS at ${(s.seconds / 2).toFixed(0)} s MiB`,
          'RSS end MiB',
          'RSS max MiB',
          'heap after GC start MiB',
          'heap after GC end MiB',
        ],
        [[fmt.mib(s.rssStart), fmt.mib(s.rssMid), fmt.mib(s.rssEnd), fmt.mib(s.rssMax), fmt.mib(s.heapStart), fmt.mib(s.heapEnd)]],
      ),
      '',
    );
    out.push(
      `Heap after a forced GC along the soak: ${s.heaps.map((h) => `${fmt.mib(h.heap)} MiB at ${h.t.toFixed(0)} s`).join(', ')}.`,
      '',
    );
  }

  out.push('### Against the targets', '');
  const checks: string[][] = [...(results.fast ? fastChecks(results.fast) : []), ...(results.policy ? policyChecks(results.policy) : [])];
  const one = results.post?.get(1);
  if (results.post) {
    for (const [connections, cells] of results.post) {
      const r = (cells.get('b')?.rps ?? NaN) / (cells.get('e')?.rps ?? NaN);
      checks.push([`(b) >= 0.9x (e) throughput, ${connections} conn`, fmt.ratio(r), r >= 0.9 ? 'met' : 'not met']);
    }
  }
  if (one) {
    const p50 = (k: TargetKey) => one.get(k)?.p50 ?? NaN;
    const added = p50('b') - p50('e');
    checks.push(['added p50 < 0.5 ms at 1 conn (vs (e))', `${fmt.signedMs(added)} ms`, added < 0.5 ? 'met' : 'not met']);
    const addedA = p50('b') - p50('a');
    checks.push(['added p50 < 0.5 ms at 1 conn (vs (a))', `${fmt.signedMs(addedA)} ms`, addedA < 0.5 ? 'met' : 'not met']);
  }
  if (results.sse) {
    const b = results.sse.get('b')!;
    const e = results.sse.get('e')!;
    checks.push([
      'SSE: no added batching delay (latency p99, (b) vs (e))',
      `${fmt.ms(b.latencyP99)} vs ${fmt.ms(e.latencyP99)} ms`,
      b.complete ? 'see table' : 'events lost',
    ]);
  }
  if (results.idle) {
    const s = results.idle.get('b')!;
    // Judged on the JS heap and buffers the streams hold: RSS also moves with what the allocator keeps
    // or hands back around the forced GC (it has gone down while 1,000 streams opened).
    const heap = (s.open.heapUsed + s.open.external - s.before.heapUsed - s.before.external) / s.streams;
    const rss = (s.open.rss - s.before.rss) / s.streams;
    checks.push([
      '< 20 KiB per idle SSE stream (sidecar JS heap + buffers; RSS beside it)',
      `${fmt.kib(heap)} KiB (RSS ${fmt.kib(rss)} KiB)`,
      heap < 20 * 1024 ? 'met' : 'not met',
    ]);
  }
  if (results.soak) {
    const s = results.soak;
    // The heap after a forced GC is what a leak moves; RSS also follows the allocator and buffer pools
    // (it goes up and down with the load), so it is shown, not judged.
    const warm = s.heaps[1] ?? s.heaps[0]!;
    const growth = (s.heapEnd - warm.heap) / warm.heap;
    checks.push([
      `no heap growth over the ${s.seconds} s soak (heap after GC, first quarter to end)`,
      `${fmt.mib(warm.heap)} → ${fmt.mib(s.heapEnd)} MiB (${(growth * 100).toFixed(1)}%); RSS ${fmt.mib(s.rssStart)} → ${fmt.mib(s.rssEnd)} MiB, max ${fmt.mib(s.rssMax)}`,
      growth <= 0.05 ? 'met (≤ 5%)' : 'not met',
    ]);
  }
  out.push(table(['target', 'measured', 'verdict'], checks), '');
  if (!TARGETS.has('g')) {
    out.push(
      '`http-proxy-3` (1.23, the maintained fork; 2.x needs Node ≥ 22) side by side with the same pass-through: `BENCH_ONLY=post BENCH_TARGETS=b,e,g npm run bench`.',
      '',
    );
  }
  return out.join('\n');
}

// ---------------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const startedAt = now();
  const date = new Date().toISOString();
  const loadBefore = uptime();
  log(`setting up in ${tmp}`);
  const { upstream, sidecar, targets, spawnSidecar, spawnPassthrough, baselineSrc, oauthToken, baselineToken, userToken } = await setUp();
  log(`upstream ${upstream.urls.url}, sidecar ${sidecar.urls.proxyUrl} (pid ${sidecar.pid})`);
  const results: Results = {};
  if (ONLY.has('fast')) {
    const fastChildren: Child[] = [];
    const keep = (c: Child) => (fastChildren.push(c), children.push(c), c);
    try {
      results.fast = await fastScenario({
        tmp,
        redisUrl: redisServer!.url,
        redisPid: redisServer!.process.pid,
        oauthToken,
        baselineToken,
        userToken,
        connections: FAST_CONNECTIONS,
        rounds: FAST_ROUNDS,
        seconds: CELL_SECONDS,
        keys: FAST_TARGETS,
        sidecarProcesses: 1,
        startUpstream: async () => keep(await Child.start('fast upstream', join(BENCH_DIR, 'fast-upstream-child.ts'))),
        startAuthService: async (processes = 1, noCheck = false) =>
          keep(
            await Child.start(
              `auth service${processes > 1 ? ` ×${processes}` : ''}${noCheck ? ', no check' : ''}`,
              join(BENCH_DIR, 'auth-service-child.ts'),
              {
                env: {
                  BENCH_REDIS_URL: redisServer!.url,
                  BENCH_AUTH_PROCESSES: String(processes),
                  ...(noCheck ? { BENCH_AUTH_NO_CHECK: '1' } : {}),
                },
              },
            ),
          ),
        startPassthrough: async (lib, to) => keep(await spawnPassthrough(`fast ${lib} pass-through`, lib, to)),
        startSidecar: async (key, to) =>
          keep(
            await spawnSidecar(`fast ${key}`, {
              upstreamUrl: to,
              ...(key === 'baseline' && baselineSrc ? { srcDir: baselineSrc } : {}),
              ...(key === 'baseline' && BASELINE_LOOKUP_CACHE ? { lookupCache: BASELINE_LOOKUP_CACHE } : {}),
              ...(key === 'sidecar-warn' ? { logLevel: 'warn' } : {}),
              ...(key === 'sidecar-2w' ? { workers: 2 } : {}),
              ...(key === 'sidecar-cache' || key === 'forward-auth-cache' ? { lookupCache: 'tracking' } : {}),
              ...(key === 'sidecar-assertion' ? { assertion: true } : {}),
              ...(key === 'forward-auth' || key === 'forward-auth-cache' ? { forwardAuth: true } : {}),
              // BENCH_CPU_PROF_TARGET: which fast target's sidecar is profiled (default sidecar; e.g. forward-auth).
              profile: CPU_PROF && key === (env.BENCH_CPU_PROF_TARGET ?? 'sidecar'),
            }),
          ),
        log,
      });
    } finally {
      // The fast scenario's processes stop here: the MCP scenarios that follow get the cores to themselves.
      await Promise.allSettled(fastChildren.map((c) => c.stop()));
    }
  }
  if (ONLY.has('policy')) {
    const policyChildren: Child[] = [];
    const keep = (c: Child) => (policyChildren.push(c), children.push(c), c);
    try {
      results.policy = await policyScenario({
        tmp,
        oauthToken,
        connections: FAST_CONNECTIONS,
        rounds: FAST_ROUNDS,
        seconds: CELL_SECONDS,
        startUpstream: async () => keep(await Child.start('policy fast upstream', join(BENCH_DIR, 'fast-upstream-child.ts'))),
        startSidecar: async (name, to, policy) => keep(await spawnSidecar(name, { upstreamUrl: to, ...(policy ? { policy } : {}) })),
        log,
      });
    } finally {
      await Promise.allSettled(policyChildren.map((c) => c.stop()));
    }
  }
  if (ONLY.has('observability')) {
    const observabilityChildren: Child[] = [];
    const keep = (c: Child) => (observabilityChildren.push(c), children.push(c), c);
    try {
      results.observability = await observabilityScenario({
        tmp,
        oauthToken,
        connections: FAST_CONNECTIONS,
        rounds: FAST_ROUNDS,
        seconds: CELL_SECONDS,
        startUpstream: async () => keep(await Child.start('observability fast upstream', join(BENCH_DIR, 'fast-upstream-child.ts'))),
        startSidecar: async (name, to, options) => keep(await spawnSidecar(name, { upstreamUrl: to, ...options })),
        baselineSrc,
        log,
      });
    } finally {
      await Promise.allSettled(observabilityChildren.map((c) => c.stop()));
    }
  }
  if (ONLY.has('upstream-credentials')) {
    const credentialChildren: Child[] = [];
    const keep = (c: Child) => (credentialChildren.push(c), children.push(c), c);
    try {
      results.upstreamCredentials = await upstreamCredentialsScenario({
        tmp,
        redisUrl: redisServer!.url,
        connections: FAST_CONNECTIONS,
        rounds: FAST_ROUNDS,
        seconds: CELL_SECONDS,
        startUpstream: async () => keep(await Child.start('credentials fast upstream', join(BENCH_DIR, 'fast-upstream-child.ts'))),
        startSidecar: async (name, config, srcDir) =>
          keep(
            await Child.start(name, join(BENCH_DIR, 'upstream-credentials-child.ts'), {
              env: { BENCH_CONFIG: JSON.stringify(config), ...(srcDir ? { BENCH_SRC_DIR: srcDir } : {}) },
            }),
          ),
        baselineSrc,
        log,
      });
    } finally {
      await Promise.allSettled(credentialChildren.map((c) => c.stop()));
    }
  }
  if (ONLY.has('post'))
    results.post = await postScenario(
      targets.filter((t) => TARGETS.has(t.key)),
      upstream,
    );
  if (ONLY.has('sse')) results.sse = await sseScenario(targets);
  if (ONLY.has('idle')) {
    results.idle = await idleScenario(targets, {
      sidecar: () => spawnSidecar('idle-stream sidecar'),
      passthrough: () => spawnPassthrough('idle-stream passthrough'),
      ...(baselineSrc ? { baseline: () => spawnSidecar('idle-stream baseline sidecar', { srcDir: baselineSrc }) } : {}),
    });
  }
  if (ONLY.has('soak')) {
    log(`soak: ${SOAK_SECONDS} s`);
    results.soak = await soakScenario(targets, sidecar);
  }
  const loadAfter = uptime();
  await cleanup();
  const text = report(targets, results, { date, loadBefore, loadAfter, wallSeconds: (now() - startedAt) / 1000 });
  process.stdout.write(`${text}\n`);
  // Only a full default run replaces the committed results; a smoke or partial run goes to BENCH_OUT if set.
  const file = env.BENCH_OUT ?? (PARTIAL ? undefined : join(BENCH_DIR, 'results', 'latest.md'));
  if (file) {
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, `${text}\n`);
    log(`written to ${relative(ROOT, file)}`);
  }
  if (CPU_PROF) log(`CPU profile of the sidecar in ${relative(ROOT, join(BENCH_DIR, 'results', 'profiles'))}/`);
}

main().catch(async (err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  await cleanup();
  process.exit(1);
});
