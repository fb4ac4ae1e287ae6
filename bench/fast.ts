// The headline scenario of `npm run bench`: small JSON-RPC POSTs to a fast upstream (one that answers
// at once, bench/fast-upstream-child.ts), so the figures measure the proxies and not the upstream.
// Targets, alternated round-robin, each in processes of its own:
//   direct            the fast upstream itself
//   nginx             nginx `proxy_pass`, no auth
//   peer              nginx `auth_request` + a small Node auth service on the same Redis (the peer)
//   forward-auth      the same nginx, its auth_request to the sidecar's /authz (forward-auth mode, strict: lookupCache off)
//   forward-auth-cache  the same, the sidecar with redis.lookupCache: tracking
//   http-proxy        plain Node pass-through on http-proxy + http.Agent (the sidecar's former engine)
//   undici            plain Node pass-through on an undici Pool (the sidecar's engine)
//   sidecar           the sidecar, OAuth token
//   sidecar-warn      the same at log level warn: no access log (what the access log costs)
//   sidecar-cache     the sidecar with redis.lookupCache: tracking (token records cached in process)
//   sidecar-assertion the sidecar with upstream.assertion: true (a signed caller assertion on every request)
// and on request (BENCH_FAST_TARGETS): sidecar-user (user-grade token), baseline (BENCH_BASELINE's sidecar),
// sidecar-2w (WORKERS=2: billed the primary and both workers) and its peer peer-2w (nginx with 2 worker
// processes, the auth service in 2 processes).
// Load generator: wrk, one thread (bench/wrk.ts). Median of the rounds.

import { Child, fmt, procCpuMicros, table } from './lib.ts';
import { childPids, ensureNginx, startNginx, type Nginx } from './nginx.ts';
import { ensureWrk, runWrk, warmUp, writeWrkScript, type WrkResult } from './wrk.ts';

/** The engine src/proxy/forwarder.ts forwards with: the pass-through it is compared with. */
export const SIDECAR_ENGINE = 'undici';

export type FastKey =
  | 'direct'
  | 'nginx'
  | 'peer'
  | 'forward-auth'
  | 'forward-auth-cache'
  | 'auth-floor'
  | 'http-proxy'
  | 'undici'
  | 'sidecar'
  | 'sidecar-user'
  | 'sidecar-warn'
  | 'sidecar-cache'
  | 'sidecar-assertion'
  | 'baseline'
  | 'peer-2w'
  | 'sidecar-2w';
export const FAST_LABELS: Record<FastKey, string> = {
  direct: 'fast upstream direct',
  nginx: 'nginx proxy_pass, no auth',
  peer: 'nginx auth_request + Node auth service (the peer)',
  'forward-auth': 'nginx auth_request + sidecar /authz (forward-auth, strict)',
  'forward-auth-cache': 'nginx auth_request + sidecar /authz, lookup cache (tracking)',
  'auth-floor': 'nginx auth_request + Node server answering 204 unchecked (the floor)',
  'http-proxy': 'Node pass-through, http-proxy + http.Agent, no auth',
  undici: 'Node pass-through, undici Pool, no auth',
  sidecar: 'sidecar, OAuth token',
  'sidecar-user': 'sidecar, user-grade token',
  'sidecar-warn': 'sidecar, OAuth token, log level warn',
  'sidecar-cache': 'sidecar, OAuth token, lookup cache (tracking)',
  'sidecar-assertion': 'sidecar, OAuth token, caller assertion (upstream.assertion)',
  baseline: 'sidecar at the baseline commit, OAuth token',
  'peer-2w': 'the peer, nginx 2 workers + auth service 2 processes',
  'sidecar-2w': 'sidecar, WORKERS=2, OAuth token',
};

interface FastTarget {
  key: FastKey;
  url: string;
  script: string;
  authorization?: string;
  /** Processes between client and upstream whose CPU is billed to the proxy. */
  proxyPids: () => number[];
  /** Processes of the target billed separately (the peer's auth service). */
  authPids?: () => number[];
}

export interface FastCell {
  rps: number;
  p50: number;
  p99: number;
  p999: number;
  bad: number;
  proxyCpuPerRequest: number;
  authCpuPerRequest: number;
  upstreamCpuPerRequest: number;
  redisCpuPerRequest: number;
  wrkCpuPercent: number;
}

export interface FastResults {
  connections: number[];
  rounds: number;
  seconds: number;
  cells: Map<number, Map<FastKey, FastCell>>;
  skipped: string[];
}

export interface FastContext {
  tmp: string;
  redisUrl: string;
  redisPid: number | undefined;
  oauthToken: string;
  /** The baseline sidecar's own token (minted through its admin listener, in its store layout). */
  baselineToken?: string | undefined;
  userToken: string;
  connections: number[];
  rounds: number;
  seconds: number;
  keys: FastKey[];
  /** Sidecar processes of this run (also billed as one when it has workers). */
  sidecarProcesses: number;
  startUpstream(): Promise<Child>;
  /**
   * `processes` > 1: one primary and that many workers sharing the port (node:cluster). `noCheck`: the
   * floor, a server that answers 204 at once (no Redis, no check).
   */
  startAuthService(processes?: number, noCheck?: boolean): Promise<Child>;
  startPassthrough(lib: 'http-proxy' | 'undici', upstreamUrl: string): Promise<Child>;
  startSidecar(
    key:
      | 'sidecar'
      | 'sidecar-warn'
      | 'sidecar-cache'
      | 'sidecar-assertion'
      | 'baseline'
      | 'sidecar-2w'
      | 'forward-auth'
      | 'forward-auth-cache',
    upstreamUrl: string,
  ): Promise<Child>;
  log(line: string): void;
}

const BODY = '{"jsonrpc":"2.0","id":1,"method":"ping"}';

export async function fastScenario(ctx: FastContext): Promise<FastResults> {
  const skipped: string[] = [];
  if (!ensureWrk()) throw new Error('wrk is missing and could not be installed (apt-get install wrk)');
  const upstream = await ctx.startUpstream();
  const upstreamUrl = upstream.urls.url!;
  const upstreamPid = upstream.pid!;
  const targets: FastTarget[] = [];
  let nginx: Nginx | undefined;
  let nginx2w: Nginx | undefined;
  const forwardAuthNginx: Nginx[] = [];
  const wanted = new Set(ctx.keys);
  const script = (name: string, authorization?: string) =>
    writeWrkScript(ctx.tmp, name, {
      method: 'POST',
      body: BODY,
      headers: {
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        ...(authorization ? { Authorization: authorization } : {}),
      },
    });
  const oauth = `Bearer ${ctx.oauthToken}`;
  if (wanted.has('direct')) targets.push({ key: 'direct', url: upstreamUrl, script: script('direct'), proxyPids: () => [] });
  if (wanted.has('nginx') || wanted.has('peer')) {
    if (ensureNginx()) {
      const auth = await ctx.startAuthService();
      nginx = await startNginx({ dir: ctx.tmp, upstreamUrl, authUrl: auth.urls.url!, workers: ctx.sidecarProcesses });
      const workers = nginx.workerPids;
      if (wanted.has('nginx')) targets.push({ key: 'nginx', url: nginx.proxyPassUrl, script: script('nginx'), proxyPids: workers });
      if (wanted.has('peer'))
        targets.push({
          key: 'peer',
          url: nginx.authRequestUrl,
          script: script('peer', oauth),
          authorization: oauth,
          proxyPids: workers,
          authPids: () => [auth.pid!],
        });
    } else skipped.push('nginx and the peer (nginx with auth_request not available)');
  }
  if (wanted.has('peer-2w') && ensureNginx()) {
    const auth = await ctx.startAuthService(2);
    nginx2w = await startNginx({ dir: `${ctx.tmp}/2w`, upstreamUrl, authUrl: auth.urls.url!, workers: 2 });
    const authPids = () => [auth.pid!, ...childPids(auth.pid!)];
    targets.push({
      key: 'peer-2w',
      url: nginx2w.authRequestUrl,
      script: script('peer-2w', oauth),
      authorization: oauth,
      proxyPids: nginx2w.workerPids,
      authPids,
    });
  }
  // The same nginx configuration as the peer's, asking the sidecar's /authz instead of the auth service.
  for (const key of ['forward-auth', 'forward-auth-cache'] as const) {
    if (!wanted.has(key)) continue;
    if (!ensureNginx()) {
      skipped.push(`${key} (nginx with auth_request not available)`);
      continue;
    }
    const sidecar = await ctx.startSidecar(key, upstreamUrl);
    const front = await startNginx({
      dir: `${ctx.tmp}/${key}`,
      upstreamUrl,
      authUrl: sidecar.urls.proxyUrl!,
      authPath: '/authz',
      workers: ctx.sidecarProcesses,
    });
    forwardAuthNginx.push(front);
    targets.push({
      key,
      url: front.authRequestUrl,
      script: script(key, oauth),
      authorization: oauth,
      proxyPids: front.workerPids,
      authPids: () => [sidecar.pid!],
    });
  }
  // The floor of any Node auth service: the same nginx asking a server that checks nothing. What the
  // peer could gain over its own 20 lines by being faster is bounded by this target's rate.
  if (wanted.has('auth-floor')) {
    if (ensureNginx()) {
      const floor = await ctx.startAuthService(1, true);
      const front = await startNginx({
        dir: `${ctx.tmp}/auth-floor`,
        upstreamUrl,
        authUrl: floor.urls.url!,
        workers: ctx.sidecarProcesses,
      });
      forwardAuthNginx.push(front);
      targets.push({
        key: 'auth-floor',
        url: front.authRequestUrl,
        script: script('auth-floor', oauth),
        authorization: oauth,
        proxyPids: front.workerPids,
        authPids: () => [floor.pid!],
      });
    } else skipped.push('auth-floor (nginx with auth_request not available)');
  }
  for (const lib of ['http-proxy', 'undici'] as const) {
    if (!wanted.has(lib)) continue;
    const child = await ctx.startPassthrough(lib, upstreamUrl);
    targets.push({
      key: lib,
      url: `${child.urls.proxyUrl}/mcp`,
      script: script(lib),
      proxyPids: () => [child.pid!, ...childPids(child.pid!)],
    });
  }
  for (const key of ['sidecar', 'sidecar-user', 'sidecar-warn', 'sidecar-cache', 'sidecar-assertion', 'baseline', 'sidecar-2w'] as const) {
    if (!wanted.has(key)) continue;
    const child = await ctx.startSidecar(key === 'sidecar-user' ? 'sidecar' : key, upstreamUrl);
    const authorization =
      key === 'sidecar-user' ? `Bearer ${ctx.userToken}` : key === 'baseline' && ctx.baselineToken ? `Bearer ${ctx.baselineToken}` : oauth;
    targets.push({
      key,
      url: `${child.urls.proxyUrl}/mcp`,
      script: script(key, authorization),
      authorization,
      proxyPids: () => [child.pid!, ...childPids(child.pid!)],
    });
  }

  try {
    // Every target must answer 200 before anything is measured (a wrong token would measure 401s).
    for (const t of targets) {
      const headers = {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...(t.authorization ? { authorization: t.authorization } : {}),
      };
      const res = await fetch(t.url, { method: 'POST', headers, body: BODY });
      await res.text();
      if (res.status !== 200) throw new Error(`fast scenario: ${FAST_LABELS[t.key]} answered ${res.status}`);
    }
    // Each target until its rate has settled (warmUp): a fixed second left the sidecar's cells cold.
    const warm: string[] = [];
    for (const t of targets) {
      const w = await warmUp(t.url, t.script);
      warm.push(`${t.key} ${w.seconds} s${w.settled ? '' : ' (not settled)'}`);
    }
    ctx.log(`fast upstream: warmed up until settled: ${warm.join(', ')}`);
    const cells = new Map<number, Map<FastKey, FastCell>>();
    for (const connections of ctx.connections) {
      const rounds = new Map<FastKey, FastCell[]>(targets.map((t) => [t.key, []]));
      for (let round = 0; round < ctx.rounds; round++) {
        const order = targets.map((_, i) => targets[(i + round) % targets.length]!);
        for (const t of order) rounds.get(t.key)!.push(await measure(t, connections, ctx.seconds, upstreamPid, ctx.redisPid));
      }
      ctx.log(`fast upstream: ${connections} conn done`);
      cells.set(connections, new Map([...rounds].map(([k, r]) => [k, median(r)])));
    }
    return { connections: ctx.connections, rounds: ctx.rounds, seconds: ctx.seconds, cells, skipped };
  } finally {
    await nginx?.stop();
    await nginx2w?.stop();
    await Promise.allSettled(forwardAuthNginx.map((n) => n.stop()));
  }
}

async function measure(
  t: FastTarget,
  connections: number,
  seconds: number,
  upstreamPid: number,
  redisPid: number | undefined,
): Promise<FastCell> {
  const pids = t.proxyPids();
  const authPids = t.authPids?.() ?? [];
  const before = {
    proxy: procCpuMicros(pids),
    auth: procCpuMicros(authPids),
    up: procCpuMicros([upstreamPid]),
    redis: redisPid ? procCpuMicros([redisPid]) : Number.NaN,
  };
  const started = performance.now();
  const r: WrkResult = await runWrk(t.url, t.script, connections, seconds);
  const wall = (performance.now() - started) / 1000;
  const after = {
    proxy: procCpuMicros(pids),
    auth: procCpuMicros(authPids),
    up: procCpuMicros([upstreamPid]),
    redis: redisPid ? procCpuMicros([redisPid]) : Number.NaN,
  };
  const n = Math.max(1, r.requests);
  return {
    rps: r.requests / r.seconds,
    p50: r.p50,
    p99: r.p99,
    p999: r.p999,
    bad: r.badStatus + r.socketErrors,
    proxyCpuPerRequest: pids.length > 0 ? (after.proxy - before.proxy) / n : Number.NaN,
    authCpuPerRequest: authPids.length > 0 ? (after.auth - before.auth) / n : Number.NaN,
    upstreamCpuPerRequest: (after.up - before.up) / n,
    redisCpuPerRequest: (after.redis - before.redis) / n,
    wrkCpuPercent: (r.cpuMicros / (wall * 1e6)) * 100,
  };
}

/** Per field median over the rounds (each figure its own median). */
function median(cells: FastCell[]): FastCell {
  const out = {} as Record<keyof FastCell, number>;
  for (const k of Object.keys(cells[0]!) as Array<keyof FastCell>) {
    const v = cells.map((c) => c[k]).sort((a, b) => a - b);
    out[k] = k === 'bad' ? v.reduce((a, b) => a + b, 0) : v[Math.floor(v.length / 2)]!;
  }
  return out;
}

export function fastReport(r: FastResults, sidecarProcesses: number): string[] {
  const out: string[] = [];
  out.push('### Fast upstream: JSON-RPC `ping` POSTs, the headline', '');
  out.push(
    `The upstream answers at once, so these rows measure the proxies. Load generator wrk (one thread, C), ${r.rounds} rounds × ${r.seconds} s per target per connection count, targets alternated round-robin, median of the rounds. ` +
      `CPU µs per request from /proc for each process; the peer's proxy CPU is nginx's ${sidecarProcesses} worker(s), its auth service is billed separately. Everything shares the same cores: wrk's own CPU share is shown to tell whether the generator had headroom.`,
    '',
  );
  if (r.skipped.length > 0) out.push(`Skipped: ${r.skipped.join('; ')}.`, '');
  const rows: string[][] = [];
  for (const [connections, cells] of r.cells) {
    for (const [key, c] of cells) {
      rows.push([
        String(connections),
        FAST_LABELS[key],
        fmt.int(c.rps),
        fmt.ms(c.p50),
        fmt.ms(c.p99),
        fmt.ms(c.p999),
        String(c.bad),
        Number.isFinite(c.proxyCpuPerRequest) ? c.proxyCpuPerRequest.toFixed(0) : '—',
        Number.isFinite(c.authCpuPerRequest) ? c.authCpuPerRequest.toFixed(0) : '—',
        c.upstreamCpuPerRequest.toFixed(0),
        Number.isFinite(c.redisCpuPerRequest) ? c.redisCpuPerRequest.toFixed(0) : '—',
        `${c.wrkCpuPercent.toFixed(0)}%`,
      ]);
    }
  }
  out.push(
    table(
      [
        'conns',
        'target',
        'req/s',
        'p50 ms',
        'p99 ms',
        'p99.9 ms',
        'non-2xx + errors',
        'proxy CPU µs/req',
        'auth service CPU µs/req',
        'upstream CPU µs/req',
        'redis CPU µs/req',
        'wrk CPU',
      ],
      rows,
    ),
    '',
  );
  out.push(`Ratios (the sidecar with an OAuth token against the others; "same engine" is the ${SIDECAR_ENGINE} pass-through):`, '');
  const ratioRows: string[][] = [];
  for (const [connections, cells] of r.cells) {
    const rps = (k: FastKey) => cells.get(k)?.rps ?? Number.NaN;
    const p50 = (k: FastKey) => cells.get(k)?.p50 ?? Number.NaN;
    ratioRows.push([
      String(connections),
      fmt.ratio(rps('sidecar') / rps('peer')),
      fmt.ratio(rps('sidecar') / rps(SIDECAR_ENGINE)),
      fmt.ratio(rps('sidecar') / rps('direct')),
      fmt.ratio(rps('peer') / rps('direct')),
      fmt.ratio(rps('undici') / rps('http-proxy')),
      fmt.signedMs(p50('sidecar') - p50('direct')),
      fmt.signedMs(p50('peer') - p50('direct')),
      fmt.ratio(rps('forward-auth') / rps('peer')),
      fmt.ratio(rps('forward-auth-cache') / rps('peer')),
      fmt.signedMs(p50('forward-auth') - p50('direct')),
    ]);
  }
  out.push(
    table(
      [
        'conns',
        'sidecar / peer',
        'sidecar / same-engine pass-through',
        'sidecar / direct',
        'peer / direct',
        'undici / http-proxy pass-through',
        'sidecar added p50 vs direct',
        'peer added p50 vs direct',
        'forward-auth / peer',
        'forward-auth cache / peer',
        'forward-auth added p50 vs direct',
      ],
      ratioRows,
    ),
    '',
  );
  return out;
}

/** The goal rows of the fast scenario for the report's "against the targets" table. */
export function fastChecks(r: FastResults): string[][] {
  const checks: string[][] = [];
  const at = (c: number, k: FastKey) => r.cells.get(c)?.get(k);
  const c32 = r.cells.has(32) ? 32 : r.connections[r.connections.length - 1]!;
  const peerRatio = (at(c32, 'sidecar')?.rps ?? NaN) / (at(c32, 'peer')?.rps ?? NaN);
  checks.push([
    `fast upstream: sidecar >= 1.0x the nginx auth_request peer, ${c32} conn`,
    fmt.ratio(peerRatio),
    peerRatio >= 1 ? 'met' : 'not met',
  ]);
  const engineRatio = (at(c32, 'sidecar')?.rps ?? NaN) / (at(c32, SIDECAR_ENGINE)?.rps ?? NaN);
  checks.push([
    `fast upstream: sidecar >= 0.9x the ${SIDECAR_ENGINE} pass-through, ${c32} conn`,
    fmt.ratio(engineRatio),
    engineRatio >= 0.9 ? 'met' : 'not met',
  ]);
  // The default configuration keeps the lookup cache on where the store allows it (sidecar-cache).
  if (at(c32, 'sidecar-cache') !== undefined) {
    const ratio = (at(c32, 'sidecar-cache')?.rps ?? NaN) / (at(c32, SIDECAR_ENGINE)?.rps ?? NaN);
    checks.push([
      `fast upstream: sidecar, default settings (lookup cache on) >= 0.9x the ${SIDECAR_ENGINE} pass-through, ${c32} conn`,
      fmt.ratio(ratio),
      ratio >= 0.9 ? 'met' : 'not met',
    ]);
  }
  if (r.cells.has(1) && at(1, 'sidecar-cache') !== undefined) {
    const added = (at(1, 'sidecar-cache')?.p50 ?? NaN) - (at(1, 'direct')?.p50 ?? NaN);
    checks.push([
      'fast upstream: sidecar, default settings, added p50 < 0.3 ms at 1 conn vs direct',
      `${fmt.signedMs(added)} ms`,
      added < 0.3 ? 'met' : 'not met',
    ]);
  }
  // Forward-auth: the same nginx asking the sidecar instead of the 20-line auth service.
  if (at(c32, 'forward-auth') !== undefined) {
    const ratio = (at(c32, 'forward-auth')?.rps ?? NaN) / (at(c32, 'peer')?.rps ?? NaN);
    checks.push([`fast upstream: forward-auth >= 1.0x the peer, ${c32} conn`, fmt.ratio(ratio), ratio >= 1 ? 'met' : 'not met']);
  }
  if (at(c32, 'forward-auth-cache') !== undefined) {
    const ratio = (at(c32, 'forward-auth-cache')?.rps ?? NaN) / (at(c32, 'peer')?.rps ?? NaN);
    // Beside it, when measured, how far any Node auth service could go: the one that checks nothing.
    const floor = (at(c32, 'auth-floor')?.rps ?? NaN) / (at(c32, 'peer')?.rps ?? NaN);
    checks.push([
      `fast upstream: forward-auth with the lookup cache >= 1.4x the peer, ${c32} conn`,
      Number.isNaN(floor) ? fmt.ratio(ratio) : `${fmt.ratio(ratio)} (a Node service that checks nothing: ${fmt.ratio(floor)})`,
      ratio >= 1.4 ? 'met' : 'not met',
    ]);
  }
  if (r.cells.has(1) && at(1, 'forward-auth') !== undefined) {
    const added = (at(1, 'forward-auth')?.p50 ?? NaN) - (at(1, 'direct')?.p50 ?? NaN);
    const peerAdded = (at(1, 'peer')?.p50 ?? NaN) - (at(1, 'direct')?.p50 ?? NaN);
    checks.push([
      "fast upstream: forward-auth added p50 <= the peer's at 1 conn",
      `${fmt.signedMs(added)} vs ${fmt.signedMs(peerAdded)} ms`,
      added <= peerAdded ? 'met' : 'not met',
    ]);
  }
  if (r.cells.has(1)) {
    const added = (at(1, 'sidecar')?.p50 ?? NaN) - (at(1, 'direct')?.p50 ?? NaN);
    checks.push(['fast upstream: added p50 < 0.5 ms at 1 conn vs direct', `${fmt.signedMs(added)} ms`, added < 0.5 ? 'met' : 'not met']);
  }
  const assertion = at(c32, 'sidecar-assertion');
  if (assertion !== undefined) {
    const ratio = assertion.rps / (at(c32, 'sidecar')?.rps ?? NaN);
    checks.push([`fast upstream: caller assertion on >= 0.95x off, ${c32} conn`, fmt.ratio(ratio), ratio >= 0.95 ? 'met' : 'not met']);
  }
  return checks;
}
