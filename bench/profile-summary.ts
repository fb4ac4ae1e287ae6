// Summarises a V8 .cpuprofile (from `BENCH_CPU_PROF=1 npm run bench`): self time by function and by
// package/file, and the inclusive time of the project's own functions.
// usage: tsx bench/profile-summary.ts <file.cpuprofile> [topN]

import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const [file, topArg] = process.argv.slice(2);
if (!file) {
  process.stderr.write('usage: tsx bench/profile-summary.ts <file.cpuprofile> [topN]\n');
  process.exit(2);
}
const top = Number(topArg ?? 30);
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

// Self time per node from the samples and their time deltas (µs).
const self = new Map<number, number>();
profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
// Percentages are of the busy time: the idle samples (waiting in the event loop) are left out.
let idle = 0;
for (const [id, t] of [...self]) {
  if (byId.get(id)!.callFrame.functionName === '(idle)') {
    idle += t;
    self.delete(id);
  }
}
const total = [...self.values()].reduce((a, b) => a + b, 0);

function where(n: ProfileNode): string {
  const url = n.callFrame.url;
  if (!url) return '(native/V8)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm !== -1)
    return url
      .slice(nm + 'node_modules/'.length)
      .split('/')
      .slice(0, url.includes('/@', nm) ? 2 : 1)
      .join('/');
  if (url.startsWith('node:')) return url;
  const src = url.indexOf('/src/');
  return src !== -1 ? url.slice(src + 1) : url.replace(/^file:\/\//, '');
}
const fnName = (n: ProfileNode) => `${n.callFrame.functionName || '(anonymous)'} ${where(n)}:${n.callFrame.lineNumber + 1}`;

function add(map: Map<string, number>, key: string, v: number) {
  map.set(key, (map.get(key) ?? 0) + v);
}
const byFunction = new Map<string, number>();
const byPlace = new Map<string, number>();
for (const [id, t] of self) {
  const n = byId.get(id)!;
  add(byFunction, fnName(n), t);
  add(byPlace, where(n), t);
}
// Inclusive time of project functions (src/...), each counted once per sample stack.
const inclusive = new Map<string, number>();
profile.samples.forEach((id, i) => {
  if (!self.has(id)) return;
  const seen = new Set<string>();
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const n = byId.get(cur)!;
    if (!where(n).startsWith('src/')) continue;
    const key = fnName(n);
    if (seen.has(key)) continue;
    seen.add(key);
    add(inclusive, key, profile.timeDeltas[i] ?? 0);
  }
});

const pct = (v: number) => `${((v / total) * 100).toFixed(1)}%`;
const print = (title: string, map: Map<string, number>, n: number) => {
  process.stdout.write(`\n${title}\n`);
  for (const [k, v] of [...map].sort((a, b) => b[1] - a[1]).slice(0, n))
    process.stdout.write(`  ${pct(v).padStart(6)}  ${(v / 1000).toFixed(0).padStart(7)} ms  ${k}\n`);
};
process.stdout.write(
  `${file}: ${((total + idle) / 1e6).toFixed(1)} s sampled, ${(total / 1e6).toFixed(1)} s busy (percentages below are of the busy time)\n`,
);
print('self time by package / file', byPlace, top);
print('self time by function', byFunction, top);
print('inclusive time of project functions', inclusive, top);
