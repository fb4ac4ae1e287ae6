// Where the sidecar's CPU goes beyond the undici pass-through's, per request: both under the same wrk
// load (POST ping to the fast upstream, 32 connections), each under --cpu-prof after its warm-up, and
// each function's self time in the middle of the load divided by the requests served then. Prints the
// functions by the difference. The profile samples wall time: a system call that wakes another
// process is over-weighted on a busy machine (the A/B's /proc figures are CPU time).
//   tsx bench/profile-diff.ts [topN]
// Env: PD_SECONDS (20), PD_CONNECTIONS (32), PD_CACHE (the sidecar's lookup cache, tracking),
// PD_ENV (more of the sidecar's environment, `KEY=value+KEY2=value`, e.g. BENCH_LOG_LEVEL=warn).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startRedisServer } from '../test/support/redis-server.ts';
import { Child } from './lib.ts';
import { runWrk, warmUp, writeWrkScript } from './wrk.ts';

const BENCH_DIR = dirname(fileURLToPath(import.meta.url));
const top = Number(process.argv[2] ?? 50);
const SECONDS = Number(process.env.PD_SECONDS ?? 20);
const CONNECTIONS = Number(process.env.PD_CONNECTIONS ?? 32);
const extraEnv = Object.fromEntries(
  (process.env.PD_ENV ?? '')
    .split('+')
    .filter((kv) => kv.includes('='))
    .map((kv) => kv.split(/=(.*)/s).slice(0, 2) as [string, string]),
);
const tmp = mkdtempSync(join(tmpdir(), 'profile-diff-'));
const redis = await startRedisServer();
const children: Child[] = [];
interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

function selfTimes(dir: string, windowUs: number, tailUs: number): Map<string, number> {
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'))!;
  const p = JSON.parse(readFileSync(join(dir, file), 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const times: number[] = [];
  let t = p.startTime;
  for (const d of p.timeDeltas) times.push((t += d));
  const end = p.endTime - tailUs;
  const out = new Map<string, number>();
  p.samples.forEach((id, i) => {
    if (times[i]! < end - windowUs || times[i]! > end) return;
    const f = byId.get(id)!.callFrame;
    const url = f.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/(src|bench)\//, '$1/');
    const key = `${f.functionName || '(anonymous)'} ${url}`;
    out.set(key, (out.get(key) ?? 0) + (p.timeDeltas[i + 1] ?? 0));
  });
  return out;
}

try {
  const upstream = await Child.start('fast upstream', join(BENCH_DIR, 'fast-upstream-child.ts'));
  children.push(upstream);
  const masterToken = randomBytes(32).toString('hex');
  const sidecarDir = mkdtempSync(join(tmp, 'sidecar-'));
  const passDir = mkdtempSync(join(tmp, 'pass-'));
  const logFd = openSync(join(tmp, 'sidecar.log'), 'a');
  const sidecar = await Child.start('sidecar', join(BENCH_DIR, 'sidecar-child.ts'), {
    env: {
      BENCH_MASTER_TOKEN: masterToken,
      BENCH_REDIS_URL: redis.url,
      BENCH_UPSTREAM_URL: upstream.urls.url!,
      BENCH_LOG_LEVEL: 'info',
      BENCH_LOOKUP_CACHE: process.env.PD_CACHE ?? 'tracking',
      ...extraEnv,
    },
    stdout: logFd,
    execArgv: ['--cpu-prof', '--cpu-prof-dir', sidecarDir],
  });
  children.push(sidecar);
  const pass = await Child.start('undici pass-through', join(BENCH_DIR, 'passthrough-child.ts'), {
    env: { BENCH_UPSTREAM_URL: upstream.urls.url!, BENCH_PROXY_LIB: 'undici' },
    execArgv: ['--cpu-prof', '--cpu-prof-dir', passDir],
  });
  children.push(pass);
  const res = await fetch(`${sidecar.urls.adminUrl}/oauth/createClient`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${masterToken}` },
    body: JSON.stringify({ clientName: 'pd' }),
  });
  const { clientId } = (await res.json()) as { clientId: string };
  const tok = await fetch(`${sidecar.urls.adminUrl}/oauth/createAccessToken`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${masterToken}` },
    body: JSON.stringify({ clientId, lifetimeSeconds: 3600 }),
  });
  const { accessToken } = (await tok.json()) as { accessToken: string };
  const script = writeWrkScript(tmp, 'mcp', {
    method: 'POST',
    body: '{"jsonrpc":"2.0","id":1,"method":"ping"}',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', Authorization: `Bearer ${accessToken}` },
  });
  const results: Array<{ name: string; dir: string; rps: number }> = [];
  for (const [name, child, dir] of [
    ['sidecar', sidecar, sidecarDir],
    ['pass-through', pass, passDir],
  ] as const) {
    const url = `${child.urls.proxyUrl ?? child.urls.url}/mcp`;
    await warmUp(url, script);
    const r = await runWrk(url, script, CONNECTIONS, SECONDS);
    await child.stop();
    results.push({ name, dir, rps: r.requests / r.seconds });
  }
  // The middle of the load: the profile ends at the exit, shortly after wrk stopped.
  const window = (SECONDS - 4) * 1e6;
  const [a, b] = results.map((r) => ({ ...r, self: selfTimes(r.dir, window, 2e6), requests: (r.rps * window) / 1e6 }));
  const keys = new Set([...a!.self.keys(), ...b!.self.keys()]);
  const rows = [...keys].map((k) => {
    const x = (a!.self.get(k) ?? 0) / a!.requests;
    const y = (b!.self.get(k) ?? 0) / b!.requests;
    return { k, x, y };
  });
  const busy = rows.filter((r) => !r.k.startsWith('(idle)'));
  const total = (pick: (r: (typeof rows)[number]) => number) => busy.reduce((sum, r) => sum + pick(r), 0);
  const line = (r: (typeof rows)[number]) =>
    `${(r.x - r.y).toFixed(2).padStart(7)}  ${r.x.toFixed(2).padStart(6)} ${r.y.toFixed(2).padStart(6)}  ${r.k}\n`;
  process.stdout.write(
    `req/s: sidecar ${a!.rps.toFixed(0)}, pass-through ${b!.rps.toFixed(0)}; ` +
      `busy µs/req (sampled): sidecar ${total((r) => r.x).toFixed(1)}, pass-through ${total((r) => r.y).toFixed(1)}\n` +
      'difference, sidecar, pass-through (µs/req), function\n',
  );
  for (const r of [...busy].sort((p, q) => q.x - q.y - (p.x - p.y)).slice(0, top)) process.stdout.write(line(r));
  process.stdout.write('the pass-through heavier:\n');
  for (const r of [...busy].sort((p, q) => p.x - p.y - (q.x - q.y)).slice(0, 10)) process.stdout.write(line(r));
} finally {
  await Promise.allSettled(children.map((c) => c.stop()));
  await redis.stop();
  rmSync(tmp, { recursive: true, force: true });
}
