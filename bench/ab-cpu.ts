// A/B of CPU per request on a loaded machine: an earlier commit's sidecar and this tree's, side by side
// on one Redis, asked directly (no nginx in front: only the process under test and wrk), alternated
// round by round. CPU time per request (/proc, user + system) is far steadier than throughput when
// other work shares the cores; the minimum over the rounds is the figure least inflated by it, the
// median is shown beside it.
//
//   tsx bench/ab-cpu.ts <baseline-ref> [authz|mcp]
//
// authz: GET /authz as nginx's auth_request sends it (X-Original-URI, X-Original-Method, the client's
// Authorization), strict (lookupCache off) and cached (tracking), and the peer's auth service asked
// the same. mcp: POST /mcp to the fast upstream, against the undici pass-through.
// Env: AB_ROUNDS (6), AB_SECONDS (2), AB_CONNECTIONS (16), AB_LOG_ALLOWED=1 (the baseline-free
// setting proxy.forwardAuthLogAllowed on in this tree's sidecars), AB_CACHE (authz: the modes to
// measure, off,tracking; mcp: the one mode, off),
// AB_VARIANTS: more sidecars of this tree, each with environment of its own, to measure one change
// alone in the same rounds (`name:KEY=value+KEY2=value;name2:KEY=value`), AB_PIN=1 (a machine of two
// or more cores: the targets on core 1, wrk, Redis and the upstream on core 0, so that a target's CPU
// per request is not inflated by sharing its core with the load generator; req/s is then per core),
// AB_VERBOSE=1 (each cell on stderr as it is measured).

import { execSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, openSync, closeSync, rmSync, symlinkSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startRedisServer } from '../test/support/redis-server.ts';
import { Child, procContextSwitches, procCpuMicros, procSyscalls } from './lib.ts';
import { ensureWrk, runWrk, warmUp, writeWrkScript } from './wrk.ts';

const BENCH_DIR = dirname(fileURLToPath(import.meta.url));
const ROOT = join(BENCH_DIR, '..');
const [baselineRef, mode = 'authz'] = process.argv.slice(2);
if (!baselineRef || (mode !== 'authz' && mode !== 'mcp')) {
  process.stderr.write('usage: tsx bench/ab-cpu.ts <baseline-ref> [authz|mcp]\n');
  process.exit(2);
}
const ROUNDS = Number(process.env.AB_ROUNDS ?? 6);
const SECONDS = Number(process.env.AB_SECONDS ?? 2);
const CONNECTIONS = Number(process.env.AB_CONNECTIONS ?? 16);
const VERBOSE = process.env.AB_VERBOSE === '1';
if (!ensureWrk()) throw new Error('wrk is missing');

const PIN = process.env.AB_PIN === '1';
// Every process started from here on (Redis, the upstream, wrk) inherits core 0; the targets move to core 1.
if (PIN) execSync(`taskset -a -p 1 ${process.pid}`, { stdio: 'ignore' });
const tmp = mkdtempSync(join(tmpdir(), 'ab-cpu-'));
const children: Child[] = [];
const redis = await startRedisServer();
try {
  const dir = join(tmp, 'baseline');
  mkdirSync(dir);
  execSync(`git archive ${JSON.stringify(baselineRef)} src | tar -x -C ${JSON.stringify(dir)}`, { cwd: ROOT });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  const masterToken = randomBytes(32).toString('hex');
  const upstream = await Child.start('fast upstream', join(BENCH_DIR, 'fast-upstream-child.ts'));
  children.push(upstream);
  const sidecar = async (name: string, env: Record<string, string>) => {
    const logFd = openSync(join(tmp, `${name}.log`), 'a');
    try {
      const child = await Child.start(name, join(BENCH_DIR, 'sidecar-child.ts'), {
        env: {
          BENCH_MASTER_TOKEN: masterToken,
          BENCH_REDIS_URL: redis.url,
          BENCH_UPSTREAM_URL: upstream.urls.url!,
          BENCH_LOG_LEVEL: 'info',
          ...env,
        },
        stdout: logFd,
      });
      children.push(child);
      return child;
    } finally {
      closeSync(logFd);
    }
  };
  const here: Record<string, string> = process.env.AB_LOG_ALLOWED === '1' ? { BENCH_FORWARD_AUTH_LOG_ALLOWED: '1' } : {};
  const targets: Array<{ name: string; child: Child; path: string; pids: () => number[] }> = [];
  const add = async (name: string, env: Record<string, string>, path: string) => {
    const child = await sidecar(name, env);
    targets.push({ name, child, path, pids: () => [child.pid!] });
  };
  const variants = (process.env.AB_VARIANTS ?? '')
    .split(';')
    .filter((v) => v.includes(':'))
    .map((v) => {
      const [name, settings] = v.split(/:(.*)/s) as [string, string];
      return { name, env: Object.fromEntries(settings.split('+').map((kv) => kv.split(/=(.*)/s).slice(0, 2) as [string, string])) };
    });
  if (mode === 'authz') {
    for (const cache of (process.env.AB_CACHE ?? 'off,tracking').split(',')) {
      const common = { BENCH_FORWARD_AUTH: '1', BENCH_LOOKUP_CACHE: cache };
      await add(`baseline ${cache}`, { ...common, BENCH_SRC_DIR: join(dir, 'src') }, '/authz');
      await add(`this tree ${cache}`, { ...common, ...here }, '/authz');
      for (const v of variants) await add(`${v.name} ${cache}`, { ...common, ...here, ...v.env }, '/authz');
    }
    const peer = await Child.start('auth service', join(BENCH_DIR, 'auth-service-child.ts'), { env: { BENCH_REDIS_URL: redis.url } });
    children.push(peer);
    targets.push({ name: 'peer auth service', child: peer, path: '', pids: () => [peer.pid!] });
  } else {
    const cache = process.env.AB_CACHE ?? 'off';
    await add('baseline', { BENCH_LOOKUP_CACHE: cache, BENCH_SRC_DIR: join(dir, 'src') }, '/mcp');
    await add('this tree', { BENCH_LOOKUP_CACHE: cache }, '/mcp');
    for (const v of variants) await add(v.name, { BENCH_LOOKUP_CACHE: cache, ...v.env }, '/mcp');
    const pass = await Child.start('undici pass-through', join(BENCH_DIR, 'passthrough-child.ts'), {
      env: { BENCH_UPSTREAM_URL: upstream.urls.url!, BENCH_PROXY_LIB: 'undici' },
    });
    children.push(pass);
    targets.push({ name: 'undici pass-through', child: pass, path: '/mcp', pids: () => [pass.pid!] });
  }

  if (PIN) for (const t of targets) for (const pid of t.pids()) execSync(`taskset -a -p 2 ${pid}`, { stdio: 'ignore' });
  const adminUrl = targets[0]!.child.urls.adminUrl!;
  const admin = async (op: string, body: Record<string, unknown>) => {
    const res = await fetch(`${adminUrl}/oauth/${op}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${masterToken}` },
      body: JSON.stringify(body),
    });
    if (res.status !== 201) throw new Error(`admin ${op}: ${res.status}`);
    return (await res.json()) as Record<string, string>;
  };
  const client = await admin('createClient', { clientName: 'ab' });
  const token = (await admin('createAccessToken', { clientId: client.clientId, lifetimeSeconds: 3600 })).accessToken!;
  const script =
    mode === 'authz'
      ? writeWrkScript(tmp, 'authz', {
          method: 'GET',
          headers: { 'X-Original-URI': '/mcp', 'X-Original-Method': 'POST', Authorization: `Bearer ${token}`, Accept: 'application/json' },
        })
      : writeWrkScript(tmp, 'mcp', {
          method: 'POST',
          body: '{"jsonrpc":"2.0","id":1,"method":"ping"}',
          headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', Authorization: `Bearer ${token}` },
        });
  const url = (t: (typeof targets)[number]) => `${t.child.urls.proxyUrl ?? t.child.urls.url}${t.path}`;
  for (const t of targets) {
    const res = await fetch(url(t), {
      method: mode === 'authz' ? 'GET' : 'POST',
      headers: {
        'x-original-uri': '/mcp',
        'x-original-method': 'POST',
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
      },
      ...(mode === 'mcp' ? { body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' } : {}),
    });
    await res.text();
    if (res.status >= 300) throw new Error(`${t.name} answered ${res.status}`);
    await warmUp(url(t), script);
  }
  const cells = new Map<string, Array<{ us: number; sys: number; rps: number; switches: number; syscalls: number }>>(
    targets.map((t) => [t.name, []]),
  );
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < targets.length; i++) {
      const t = targets[(i + round) % targets.length]!;
      const switchesBefore = procContextSwitches(t.pids());
      const syscallsBefore = procSyscalls(t.pids());
      const before = procCpuMicros(t.pids());
      const sysBefore = procCpuMicros(t.pids(), 'system');
      const result = await runWrk(url(t), script, CONNECTIONS, SECONDS);
      const cpu = procCpuMicros(t.pids()) - before;
      const sys = procCpuMicros(t.pids(), 'system') - sysBefore;
      const switches = procContextSwitches(t.pids()) - switchesBefore;
      const syscalls = procSyscalls(t.pids()) - syscallsBefore;
      if (result.badStatus + result.socketErrors > 0)
        throw new Error(`${t.name}: ${result.badStatus} non-2xx, ${result.socketErrors} errors`);
      const cell = {
        us: cpu / result.requests,
        sys: sys / result.requests,
        rps: result.requests / result.seconds,
        switches: switches / result.requests,
        syscalls: syscalls / result.requests,
      };
      cells.get(t.name)!.push(cell);
      if (VERBOSE)
        process.stderr.write(
          `round ${round + 1} ${t.name}: ${cell.us.toFixed(0)} µs/req (${cell.sys.toFixed(0)} system), ${cell.rps.toFixed(0)} req/s, ${cell.switches.toFixed(2)} switches/req, ${cell.syscalls.toFixed(2)} reads+writes/req\n`,
        );
    }
  }
  const lines = [
    `A/B ${mode}, baseline ${baselineRef} (${execSync(`git rev-parse --short ${baselineRef}`, { cwd: ROOT }).toString().trim()}) vs this tree ` +
      `(${execSync('git rev-parse --short HEAD', { cwd: ROOT }).toString().trim()}${execSync('git status --porcelain src', { cwd: ROOT }).length ? '+changes' : ''}), ` +
      `${ROUNDS} rounds x ${SECONDS} s at ${CONNECTIONS} connections, load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')} at the end`,
    '',
    '| target | CPU µs/req min | CPU µs/req median | of which system, median | req/s median | context switches/req median | read + write calls/req median |',
    '| --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const [name, runs] of cells) {
    const us = runs.map((r) => r.us).sort((a, b) => a - b);
    const rps = runs.map((r) => r.rps).sort((a, b) => a - b);
    const switches = runs.map((r) => r.switches).sort((a, b) => a - b);
    const syscalls = runs.map((r) => r.syscalls).sort((a, b) => a - b);
    const sys = runs.map((r) => r.sys).sort((a, b) => a - b);
    const mid = (xs: number[]) => xs[Math.floor(xs.length / 2)]!;
    lines.push(
      `| ${name} | ${us[0]!.toFixed(0)} | ${mid(us).toFixed(0)} | ${mid(sys).toFixed(0)} | ${mid(rps).toFixed(0)} | ${mid(switches).toFixed(2)} | ${mid(syscalls).toFixed(2)} |`,
    );
  }
  process.stdout.write(`${lines.join('\n')}\n`);
} finally {
  await Promise.allSettled(children.map((c) => c.stop()));
  await redis.stop();
  rmSync(tmp, { recursive: true, force: true });
}
