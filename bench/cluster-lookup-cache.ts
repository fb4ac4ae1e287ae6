// The token-lookup cache on a three-master Redis Cluster against the strict mode, in one run
// (`node --import ./bin/typescript.js bench/cluster-lookup-cache.ts`): two stores on the same cluster
// hold the same access tokens (bench/cluster-seed.ts), one strict and one with the cache on (filled by a
// pass over every token first, so its lookups are hits); `concurrency` loops call lookupToken for
// BENCH_CELL_SECONDS, the two alternating for BENCH_ROUNDS rounds. Per cell: lookups/s, this process's
// CPU per lookup, and the masters' CPU per lookup (INFO cpu). The median round and every round are
// written to bench/results/cluster-lookup-cache.md.

import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { connectRedis, createRedisClient } from '../src/store/redis-connection.ts';
import { RedisTokenStore } from '../src/store/redis.ts';
import { startRedisCluster } from '../test/support/redis-ha.ts';
import { CLIENTS, rate, seed, TOKENS_PER_CLIENT } from './cluster-seed.ts';
import { fmt, table } from './lib.ts';

const SECONDS = Number(process.env.BENCH_CELL_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const CONCURRENCY = Number(process.env.BENCH_CONNECTIONS ?? 64);

const cluster = await startRedisCluster();
const masters = cluster.nodes.map((n) => new Redis({ port: n.port, lazyConnect: true }));
await Promise.all(masters.map((m) => m.connect()));

async function openStore(cached: boolean): Promise<RedisTokenStore> {
  const client = createRedisClient({ url: cluster.url, commandTimeoutMs: 1500, connectTimeoutMs: 5000 });
  await connectRedis(client, 5000);
  const store = new RedisTokenStore(client, { keyPrefix: 'bench:' });
  if (cached) await store.trackLookups({ maxEntries: 100_000, pingIntervalMs: 1000, connectTimeoutMs: 5000 });
  return store;
}

/** CPU seconds (user + sys) the masters have used so far. */
async function mastersCpu(): Promise<number> {
  const infos = await Promise.all(masters.map((m) => m.info('cpu')));
  let total = 0;
  for (const info of infos)
    for (const field of ['used_cpu_user', 'used_cpu_sys']) total += Number(new RegExp(`^${field}:([0-9.]+)`, 'm').exec(info)?.[1] ?? NaN);
  return total;
}

interface Cell {
  rate: number;
  /** µs of this process's CPU per lookup. */
  sidecarUs: number;
  /** µs of the masters' CPU per lookup. */
  redisUs: number;
}

async function cell(store: RedisTokenStore, hashes: string[]): Promise<Cell> {
  const cpu = process.cpuUsage();
  const redis = await mastersCpu();
  const perSecond = await rate(store, hashes, SECONDS, CONCURRENCY);
  const used = process.cpuUsage(cpu);
  const redisUsed = (await mastersCpu()) - redis;
  const lookups = perSecond * SECONDS;
  return { rate: perSecond, sidecarUs: (used.user + used.system) / lookups, redisUs: (redisUsed * 1e6) / lookups };
}

const strict = await openStore(false);
const cached = await openStore(true);
const hashes = await seed(strict);
for (const h of hashes) await cached.lookupToken(h);
const variants = [
  { name: 'strict (redis.lookupCache: off)', store: strict },
  { name: 'cached (redis.lookupCache: tracking)', store: cached },
];
const rounds: Cell[][] = variants.map(() => []);
for (let r = 0; r < ROUNDS; r++) {
  for (const [i, v] of variants.entries()) rounds[i]!.push(await cell(v.store, hashes));
}
const cache = cached.clusterLookupCache!;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const rows = variants.map((v, i) => {
  const cells = rounds[i]!;
  return [
    v.name,
    fmt.int(median(cells.map((c) => c.rate))),
    cells.map((c) => fmt.int(c.rate)).join(' / '),
    median(cells.map((c) => c.sidecarUs)).toFixed(1),
    median(cells.map((c) => c.redisUs)).toFixed(1),
  ];
});
const text = `# Token lookups on a three-master Cluster: strict against the lookup cache

${CLIENTS} clients x ${TOKENS_PER_CLIENT} access tokens, ${CONCURRENCY} loops in one process, ${SECONDS} s cells, ${ROUNDS} rounds alternated (strict first in each); the cluster's three redis-servers on the same machine.
Cache over the run: ${cache.stats.hits} hits, ${cache.stats.misses} misses, ${cache.stats.bypasses} bypasses, ${cache.stats.barriers} barriers, ${cache.stats.drops} drops.

${table(['store', 'median lookups/s', 'rounds (lookups/s)', 'process CPU µs/lookup (median)', 'masters CPU µs/lookup (median)'], rows)}
`;
process.stdout.write(text);
writeFileSync(join(dirname(fileURLToPath(import.meta.url)), 'results', 'cluster-lookup-cache.md'), text);
for (const v of variants) await v.store.close();
for (const m of masters) m.disconnect();
await cluster.stop();
