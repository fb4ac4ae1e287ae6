// The measuring loop of the cost scenarios (bench/observability.ts, bench/upstream-credentials.ts):
// the same wrk POST to each variant's sidecar (each warmed up by its caller, warmUp in bench/wrk.ts),
// the variants alternated round by round (reversed every other round, so no variant always follows the
// same one), the median of the rounds per variant and connection count. CPU per request is the sidecar
// process's (and its children's) from /proc.

import { type Child, procCpuMicros } from './lib.ts';
import { childPids } from './nginx.ts';
import { runWrk } from './wrk.ts';

export interface CostCell {
  rps: number;
  p50: number;
  cpuPerRequest: number;
}

export interface Variant<K extends string> {
  key: K;
  child: Child;
}

/** How a scenario is run: what every cost scenario's context carries. */
export interface CellSettings {
  connections: readonly number[];
  rounds: number;
  seconds: number;
  log: (message: string) => void;
}

export async function alternatedCells<K extends string>(
  scenario: {
    /** The scenario's name, for errors and progress lines. */
    name: string;
    variants: ReadonlyArray<Variant<K>>;
    /** The wrk script (writeWrkScript) every request is sent with. */
    script: string;
  },
  options: CellSettings,
): Promise<Map<number, Map<K, CostCell>>> {
  const { name, variants, script } = scenario;
  const cells = new Map<number, Map<K, CostCell>>();
  for (const connections of options.connections) {
    const rounds = new Map<K, CostCell[]>(variants.map((v) => [v.key, []]));
    for (let round = 0; round < options.rounds; round++) {
      for (const v of round % 2 === 0 ? variants : [...variants].reverse()) {
        const pids = [v.child.pid!, ...childPids(v.child.pid!)];
        const before = procCpuMicros(pids);
        const r = await runWrk(`${v.child.urls.proxyUrl}/mcp`, script, connections, options.seconds);
        if (r.badStatus + r.socketErrors > 0)
          throw new Error(`${name} scenario: ${r.badStatus + r.socketErrors} failed requests, ${v.key}`);
        rounds
          .get(v.key)!
          .push({ rps: r.requests / r.seconds, p50: r.p50, cpuPerRequest: (procCpuMicros(pids) - before) / Math.max(1, r.requests) });
      }
    }
    options.log(`${name}: ${connections} conn done`);
    cells.set(connections, new Map([...rounds].map(([k, list]) => [k, median(list)])));
  }
  return cells;
}

function median(cells: CostCell[]): CostCell {
  const pick = (k: keyof CostCell) => cells.map((c) => c[k]).sort((a, b) => a - b)[Math.floor(cells.length / 2)]!;
  return { rps: pick('rps'), p50: pick('p50'), cpuPerRequest: pick('cpuPerRequest') };
}
