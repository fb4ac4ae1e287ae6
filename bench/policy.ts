// The per-tool policy's cost, in `npm run bench`: the same sidecar, the same fast upstream and the same
// `tools/call` POST, once without a policy (bodies stream unparsed) and once with a 20-rule policy
// (each body read, parsed as JSON-RPC and decided; the call is allowed by the last rule, so every rule
// is tried). Targets alternated round-robin, wrk, median of the rounds, CPU per request from /proc.

import { Child, fmt, procCpuMicros, table } from './lib.ts';
import { childPids } from './nginx.ts';
import { runWrk, warmUp, writeWrkScript } from './wrk.ts';

/** 19 rules that do not match the benchmark's call, then the one that allows it. */
export const BENCH_POLICY = {
  default: 'deny',
  rules: [
    ...Array.from({ length: 19 }, (_, i) => ({
      name: `rule-${i}`,
      effect: i % 2 === 0 ? 'deny' : 'allow',
      principals: i % 3 === 0 ? { kinds: ['user'] } : { clientIds: [`team-${i}-*`] },
      requests: { methods: ['tools/call'], names: [`tool_${i}_*`, `other_${i}`] },
    })),
    { name: 'allow-echo', effect: 'allow', requests: { methods: ['tools/call'], names: ['echo'] } },
  ],
};

const BODY = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}';

export interface PolicyCell {
  rps: number;
  p50: number;
  cpuPerRequest: number;
}

export interface PolicyResults {
  rounds: number;
  seconds: number;
  cells: Map<number, { off: PolicyCell; on: PolicyCell }>;
}

export interface PolicyContext {
  tmp: string;
  oauthToken: string;
  connections: number[];
  rounds: number;
  seconds: number;
  startUpstream(): Promise<Child>;
  startSidecar(name: string, upstreamUrl: string, policy: object | undefined): Promise<Child>;
  log(line: string): void;
}

export async function policyScenario(ctx: PolicyContext): Promise<PolicyResults> {
  const upstream = await ctx.startUpstream();
  const upstreamUrl = upstream.urls.url!;
  const off = await ctx.startSidecar('policy off', upstreamUrl, undefined);
  const on = await ctx.startSidecar('20-rule policy', upstreamUrl, BENCH_POLICY);
  const headers = {
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    Authorization: `Bearer ${ctx.oauthToken}`,
  };
  const targets = [
    { key: 'off' as const, child: off, script: writeWrkScript(ctx.tmp, 'policy-off', { method: 'POST', headers, body: BODY }) },
    { key: 'on' as const, child: on, script: writeWrkScript(ctx.tmp, 'policy-on', { method: 'POST', headers, body: BODY }) },
  ];
  for (const t of targets) {
    const res = await fetch(`${t.child.urls.proxyUrl}/mcp`, { method: 'POST', headers, body: BODY });
    await res.text();
    if (res.status !== 200) throw new Error(`policy scenario: the sidecar with policy ${t.key} answered ${res.status}`);
    await warmUp(`${t.child.urls.proxyUrl}/mcp`, t.script);
  }
  const cells = new Map<number, { off: PolicyCell; on: PolicyCell }>();
  for (const connections of ctx.connections) {
    const rounds = { off: [] as PolicyCell[], on: [] as PolicyCell[] };
    for (let round = 0; round < ctx.rounds; round++) {
      for (const t of round % 2 === 0 ? targets : [...targets].reverse()) {
        const pids = [t.child.pid!, ...childPids(t.child.pid!)];
        const before = procCpuMicros(pids);
        const r = await runWrk(`${t.child.urls.proxyUrl}/mcp`, t.script, connections, ctx.seconds);
        if (r.badStatus + r.socketErrors > 0)
          throw new Error(`policy scenario: ${r.badStatus + r.socketErrors} failed requests with policy ${t.key}`);
        rounds[t.key].push({
          rps: r.requests / r.seconds,
          p50: r.p50,
          cpuPerRequest: (procCpuMicros(pids) - before) / Math.max(1, r.requests),
        });
      }
    }
    ctx.log(`policy: ${connections} conn done`);
    cells.set(connections, { off: median(rounds.off), on: median(rounds.on) });
  }
  return { rounds: ctx.rounds, seconds: ctx.seconds, cells };
}

function median(cells: PolicyCell[]): PolicyCell {
  const pick = (k: keyof PolicyCell) => cells.map((c) => c[k]).sort((a, b) => a - b)[Math.floor(cells.length / 2)]!;
  return { rps: pick('rps'), p50: pick('p50'), cpuPerRequest: pick('cpuPerRequest') };
}

export function policyReport(r: PolicyResults): string[] {
  const out = ['### Per-tool policy: a 20-rule policy against none', ''];
  out.push(
    `The same sidecar and fast upstream, the same \`tools/call\` POST (${BODY.length} bytes), without a policy (the body streams unparsed) and with 20 rules (the body is read, parsed and decided; the last rule allows the call, so all 20 are tried). wrk, ${r.rounds} rounds × ${r.seconds} s, alternated, median. The CPU difference per request is what reading, parsing and deciding cost.`,
    '',
  );
  const rows: string[][] = [];
  for (const [connections, { off, on }] of r.cells) {
    rows.push([
      String(connections),
      fmt.int(off.rps),
      fmt.int(on.rps),
      fmt.ratio(on.rps / off.rps),
      fmt.ms(off.p50),
      fmt.ms(on.p50),
      off.cpuPerRequest.toFixed(0),
      on.cpuPerRequest.toFixed(0),
      (on.cpuPerRequest - off.cpuPerRequest).toFixed(0),
    ]);
  }
  out.push(
    table(
      [
        'conns',
        'req/s, no policy',
        'req/s, 20 rules',
        'with / without',
        'p50 ms, no policy',
        'p50 ms, 20 rules',
        'sidecar CPU µs/req, no policy',
        'sidecar CPU µs/req, 20 rules',
        'policy CPU µs/req',
      ],
      rows,
    ),
    '',
  );
  return out;
}

/** The goal row: with the policy on, at least 0.9x the throughput without it. */
export function policyChecks(r: PolicyResults): string[][] {
  const c = r.cells.has(32) ? 32 : [...r.cells.keys()].at(-1)!;
  const cell = r.cells.get(c)!;
  const ratio = cell.on.rps / cell.off.rps;
  return [[`policy: 20 rules >= 0.9x no policy, ${c} conn`, fmt.ratio(ratio), ratio >= 0.9 ? 'met' : 'not met']];
}
