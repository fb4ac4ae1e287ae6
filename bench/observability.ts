// The cost of tracing and of one quota rule, in `npm run bench` (BENCH_ONLY=observability): the same
// fast upstream and the same `tools/call` POST through sidecars that differ in one thing each.
//  - tracing: off; on and sampled (every request exported to an OTLP/HTTP sink in this process);
//    on and unsampled (OTEL_TRACES_SAMPLER=always_off: spans are made but not recorded or exported).
//  - quota: a one-rule allow-all policy (the body is read and decided) against the same with one quota
//    rule that counts the call (one Redis round trip per request: the take counting on in one guarded step; the limit is never reached).
// Targets alternated round-robin, wrk, median of the rounds, CPU per request from /proc.

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { alternatedCells, type CostCell } from './alternated.ts';
import { Child, fmt, table } from './lib.ts';
import { warmUp, writeWrkScript } from './wrk.ts';

const BODY = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}';
const ALLOW_ALL = { default: 'allow', rules: [{ name: 'echo', effect: 'allow', requests: { methods: ['tools/call'], names: ['echo'] } }] };
const ONE_QUOTA = {
  ...ALLOW_ALL,
  quotas: [{ name: 'echo', match: { tools: ['echo'] }, per: 'subject', limit: 1_000_000_000, windowSeconds: 2_678_400 }],
};

export type ObservabilityCell = CostCell;

export interface ObservabilityResults {
  rounds: number;
  seconds: number;
  /** Per connection count, per variant. */
  cells: Map<number, Map<string, ObservabilityCell>>;
  spansExported: number;
}

export interface ObservabilityContext {
  tmp: string;
  oauthToken: string;
  connections: number[];
  rounds: number;
  seconds: number;
  startUpstream(): Promise<Child>;
  /** `srcDir`: another copy of src/ (the baseline's), with `lookupCache` named (off, as every target here). */
  startSidecar(
    name: string,
    upstreamUrl: string,
    options: { policy?: object; env?: Record<string, string>; srcDir?: string; lookupCache?: string },
  ): Promise<Child>;
  /** The baseline commit's src/, when the run has one: the quota variant is measured on it too. */
  baselineSrc?: string | undefined;
  log(line: string): void;
}

/** An OTLP/HTTP sink: answers every export with 200 and counts the spans' bytes (nothing is kept). */
async function startSink(): Promise<{ server: Server; url: string; exports: () => number }> {
  let exports = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      exports++;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`, exports: () => exports };
}

export async function observabilityScenario(ctx: ObservabilityContext): Promise<ObservabilityResults> {
  const sink = await startSink();
  try {
    const upstream = await ctx.startUpstream();
    const to = upstream.urls.url!;
    const traced = { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: sink.url, OTEL_SERVICE_NAME: 'bench' };
    const variants = [
      { key: 'tracing off', child: await ctx.startSidecar('tracing off', to, {}) },
      {
        key: 'tracing sampled',
        child: await ctx.startSidecar('tracing sampled', to, { env: { ...traced, OTEL_TRACES_SAMPLER: 'always_on' } }),
      },
      {
        key: 'tracing unsampled',
        child: await ctx.startSidecar('tracing unsampled', to, { env: { ...traced, OTEL_TRACES_SAMPLER: 'always_off' } }),
      },
      { key: 'policy, no quota', child: await ctx.startSidecar('policy, no quota', to, { policy: ALLOW_ALL }) },
      { key: 'policy + 1 quota', child: await ctx.startSidecar('policy + 1 quota', to, { policy: ONE_QUOTA }) },
    ];
    if (ctx.baselineSrc !== undefined)
      variants.push({
        key: 'policy + 1 quota at the baseline',
        child: await ctx.startSidecar('policy + 1 quota, baseline', to, { policy: ONE_QUOTA, srcDir: ctx.baselineSrc, lookupCache: 'off' }),
      });
    const headers = {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      Authorization: `Bearer ${ctx.oauthToken}`,
    };
    const script = writeWrkScript(ctx.tmp, 'observability', { method: 'POST', headers, body: BODY });
    for (const v of variants) {
      const res = await fetch(`${v.child.urls.proxyUrl}/mcp`, { method: 'POST', headers, body: BODY });
      const text = await res.text();
      if (res.status !== 200 || text.includes('"isError":true'))
        throw new Error(`observability scenario: ${v.key} answered ${res.status} ${text.slice(0, 200)}`);
      await warmUp(`${v.child.urls.proxyUrl}/mcp`, script);
    }
    const cells = await alternatedCells({ name: 'observability', variants, script }, ctx);
    return { rounds: ctx.rounds, seconds: ctx.seconds, cells, spansExported: sink.exports() };
  } finally {
    await new Promise<void>((r) => sink.server.close(() => r()));
  }
}

export function observabilityReport(r: ObservabilityResults): string[] {
  const out = ['### Tracing and quotas: what each costs', ''];
  out.push(
    `The same sidecar and fast upstream, the same \`tools/call\` POST (${BODY.length} bytes). Tracing off, on and sampled (every request's spans exported as OTLP/HTTP JSON to a sink; ${r.spansExported} exports), on and unsampled (\`always_off\`). A one-rule allow-all policy without and with one quota rule counting the call (one Redis round trip per request). wrk, ${r.rounds} rounds × ${r.seconds} s, alternated, median.`,
    '',
  );
  const rows: string[][] = [];
  for (const [connections, byVariant] of r.cells) {
    const off = byVariant.get('tracing off')!;
    const policy = byVariant.get('policy, no quota')!;
    for (const [key, cell] of byVariant) {
      const base = key.startsWith('tracing') ? off : policy;
      rows.push([
        String(connections),
        key,
        fmt.int(cell.rps),
        fmt.ratio(cell.rps / base.rps),
        fmt.ms(cell.p50),
        cell.cpuPerRequest.toFixed(0),
        (cell.cpuPerRequest - base.cpuPerRequest).toFixed(0),
      ]);
    }
  }
  out.push(table(['conns', 'sidecar', 'req/s', 'vs its base', 'p50 ms', 'sidecar CPU µs/req', 'CPU µs/req over its base'], rows), '');
  return out;
}
