// Redis cost of one token lookup, lever by lever, A/B in one run (`npx tsx bench/redis-levers.ts`):
// ioredis auto-pipelining on/off, two `HGETALL`s vs two `HMGET`s of just the fields the credential
// model reads, and RESP2 vs RESP3 on the wire (redis-benchmark, which speaks both; ioredis speaks
// RESP2 only). Each variant runs the sidecar's lookup (the user-grade key and the OAuth key of one
// token hash, issued together) from `concurrency` loops for a few seconds; variants alternate
// round-robin and the median round is kept. Writes bench/results/redis-levers.md.

import { execFileSync, execSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { keyLayout } from '../src/store/records.ts';
import { startRedisServer } from '../test/support/redis-server.ts';
import { fmt, procCpuMicros, table } from './lib.ts';

const SECONDS = Number(process.env.BENCH_CELL_SECONDS ?? 2);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = (process.env.BENCH_CONNECTIONS ?? '1,32').split(',').map(Number);
const USER_FIELDS = ['tokenHash', 'revoked', 'expiresAt', 'subject'];
const OAUTH_FIELDS = ['tokenHash', 'revokedAt', 'expiresAt', 'clientId', 'scope'];

const server = await startRedisServer();
const keys = keyLayout('mcpauth:');
const token = randomBytes(32).toString('hex');
const hash = createHash('sha256').update(token).digest('hex');
const seed = new Redis(server.url);
const expiresAt = String(Date.now() + 3_600_000);
await seed.hset(keys.accessToken(hash), { tokenHash: hash, clientId: 'bench', createdAt: String(Date.now()), expiresAt, scope: 'mcp' });

const redisCpu = () => procCpuMicros([server.process.pid!]);

const zip = (names: string[], values: Array<string | null>) => {
  const out: Record<string, string> = {};
  let any = false;
  values.forEach((v, i) => {
    if (v !== null) {
      out[names[i]!] = v;
      any = true;
    }
  });
  return any ? out : null;
};

type Lookup = () => Promise<unknown>;
const variants: Array<{ name: string; client: Redis; lookup: (r: Redis) => Lookup }> = [];
const auto = new Redis(server.url, { enableAutoPipelining: true });
const plain = new Redis(server.url, { enableAutoPipelining: false });
variants.push({
  name: 'auto-pipelining on, 2 × HGETALL (the sidecar today)',
  client: auto,
  lookup: (r) => () => Promise.all([r.hgetall(keys.userToken(hash)), r.hgetall(keys.accessToken(hash))]),
});
variants.push({
  name: 'auto-pipelining off, 2 × HGETALL',
  client: plain,
  lookup: (r) => () => Promise.all([r.hgetall(keys.userToken(hash)), r.hgetall(keys.accessToken(hash))]),
});
variants.push({
  name: 'auto-pipelining on, 2 × HMGET of the needed fields',
  client: auto,
  lookup: (r) => async () => {
    const [u, o] = await Promise.all([r.hmget(keys.userToken(hash), ...USER_FIELDS), r.hmget(keys.accessToken(hash), ...OAUTH_FIELDS)]);
    return [zip(USER_FIELDS, u), zip(OAUTH_FIELDS, o)];
  },
});
variants.push({
  name: 'explicit pipeline (one exec), 2 × HGETALL',
  client: plain,
  lookup: (r) => () => r.pipeline().hgetall(keys.userToken(hash)).hgetall(keys.accessToken(hash)).exec(),
});

interface Cell {
  rate: number;
  clientCpu: number;
  redisCpu: number;
  p50: number;
}

async function cell(lookup: Lookup, concurrency: number): Promise<Cell> {
  const until = performance.now() + SECONDS * 1000;
  let n = 0;
  const lat: number[] = [];
  const cpu0 = process.cpuUsage();
  const r0 = redisCpu();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        const s = performance.now();
        await lookup();
        lat.push(performance.now() - s);
        n++;
      }
    }),
  );
  const wall = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  lat.sort((a, b) => a - b);
  return { rate: n / wall, clientCpu: (cpu.user + cpu.system) / n, redisCpu: (redisCpu() - r0) / n, p50: lat[Math.floor(lat.length / 2)]! };
}

const medianBy = (cells: Cell[]) => [...cells].sort((a, b) => a.rate - b.rate)[Math.floor(cells.length / 2)]!;
const loadBefore = execSync('uptime', { encoding: 'utf8' }).trim();
const date = new Date().toISOString();
const rows: string[][] = [];
for (const v of variants) await cell(v.lookup(v.client), 8); // warm-up
for (const c of CONCURRENCY) {
  const cells = new Map<string, Cell[]>(variants.map((v) => [v.name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < variants.length; i++) {
      const v = variants[(i + round) % variants.length]!;
      cells.get(v.name)!.push(await cell(v.lookup(v.client), c));
    }
  }
  for (const v of variants) {
    const m = medianBy(cells.get(v.name)!);
    rows.push([String(c), v.name, fmt.int(m.rate), fmt.ms(m.p50), m.clientCpu.toFixed(1), m.redisCpu.toFixed(1)]);
  }
  process.stderr.write(`[redis-levers] concurrency ${c} done\n`);
}

// RESP2 vs RESP3: redis-benchmark (C, no client library cost) sends HGETALL of the OAuth record.
const respRows: string[][] = [];
let benchmark = true;
try {
  execSync('command -v redis-benchmark', { stdio: 'ignore', shell: '/bin/sh' });
} catch {
  benchmark = false;
}
if (benchmark) {
  const key = keys.accessToken(hash);
  for (let round = 0; round < ROUNDS; round++) {
    for (const proto of ['2', '3']) {
      const r0 = redisCpu();
      const n = 200_000;
      const out = execFileSync(
        'redis-benchmark',
        ['-p', String(server.port), '-c', '32', '-n', String(n), '-q', ...(proto === '3' ? ['-3'] : []), 'hgetall', key],
        { encoding: 'utf8' },
      );
      const rps = Number(/([\d.]+) requests per second/.exec(out)?.[1]);
      respRows.push([`RESP${proto}`, String(round + 1), fmt.int(rps), ((redisCpu() - r0) / n).toFixed(2)]);
    }
  }
}
const loadAfter = execSync('uptime', { encoding: 'utf8' }).trim();

const text = [
  '## Redis cost per token lookup',
  '',
  `- date: ${date}`,
  `- command: \`${['CONNECTIONS', 'ROUNDS', 'CELL_SECONDS']
    .filter((k) => process.env[`BENCH_${k}`] !== undefined)
    .map((k) => `BENCH_${k}=${process.env[`BENCH_${k}`]} `)
    .join('')}npx tsx bench/redis-levers.ts\``,
  `- machine: nproc ${execSync('nproc', { encoding: 'utf8' }).trim()}, node ${process.version}, ${execSync('redis-server --version', { encoding: 'utf8' }).trim().split(' sha=')[0]}`,
  `- load before: \`${loadBefore}\``,
  `- load after: \`${loadAfter}\``,
  `- ${ROUNDS} rounds × ${SECONDS} s per variant, variants alternated, median round; a lookup is the sidecar's: the user-grade key and the OAuth key of one token hash, issued together (the OAuth one exists)`,
  '',
  table(['concurrent lookups', 'variant', 'lookups/s', 'p50 ms', 'client CPU µs/lookup', 'redis CPU µs/lookup'], rows),
  '',
  ...(respRows.length > 0
    ? [
        'RESP2 vs RESP3 (redis-benchmark, 32 connections, `HGETALL` of the OAuth record, 200,000 commands per run):',
        '',
        table(['protocol', 'round', 'commands/s', 'redis CPU µs/command'], respRows),
        '',
      ]
    : ['RESP2 vs RESP3: redis-benchmark not found, not measured.', '']),
].join('\n');
process.stdout.write(`${text}\n`);
writeFileSync(join(dirname(fileURLToPath(import.meta.url)), 'results', 'redis-levers.md'), `${text}\n`);
for (const r of [seed, auto, plain]) r.disconnect();
await server.stop();
