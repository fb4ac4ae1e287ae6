// The OAuth lookup rate with the bucketed layout on one Redis node against a three-master Cluster, in
// one run (`node bench/cluster-lookups.ts`, on a quiet machine): both stores hold the access tokens of
// 300 clients (minted as the sidecar mints them, generateTokenFor); `concurrency` loops call the store's
// lookupToken (the hot path's two reads) for BENCH_CELL_SECONDS, the two variants alternating for
// BENCH_ROUNDS rounds, the median round kept. Writes bench/results/cluster-lookups.md.

import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connectRedis, createRedisClient } from '../src/store/redis-connection.ts';
import { RedisTokenStore } from '../src/store/redis.ts';
import { startRedisCluster } from '../test/support/redis-ha.ts';
import { startRedisServer } from '../test/support/redis-server.ts';
import { CLIENTS, rate, seed, TOKENS_PER_CLIENT } from './cluster-seed.ts';
import { fmt, table } from './lib.ts';

const SECONDS = Number(process.env.BENCH_CELL_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = Number(process.env.BENCH_CONNECTIONS ?? 64);

async function openStore(url: string): Promise<RedisTokenStore> {
  const client = createRedisClient({ url, commandTimeoutMs: 5000, connectTimeoutMs: 5000 });
  await connectRedis(client, 5000);
  return new RedisTokenStore(client, { keyPrefix: 'bench:' });
}

const single = await startRedisServer();
const cluster = await startRedisCluster();
const variants = [
  { name: 'one node', store: await openStore(single.url) },
  { name: 'three masters (Cluster)', store: await openStore(cluster.url) },
];
const seeded = await Promise.all(variants.map((v) => seed(v.store)));
const rounds: number[][] = variants.map(() => []);
for (let r = 0; r < ROUNDS; r++) {
  for (const [i, v] of variants.entries()) rounds[i]!.push(await rate(v.store, seeded[i]!, SECONDS, CONCURRENCY));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const rows = variants.map((v, i) => [v.name, fmt.int(median(rounds[i]!)), rounds[i]!.map((x) => fmt.int(x)).join(' / ')]);
const text = `# OAuth lookups: one node against a three-master Cluster\n\n${CLIENTS} clients x ${TOKENS_PER_CLIENT} access tokens, ${CONCURRENCY} loops, ${SECONDS} s cells, ${ROUNDS} rounds alternated; lookups/s.\n\n${table(['store', 'median lookups/s', 'rounds'], rows)}\n`;
process.stdout.write(text);
writeFileSync(join(dirname(fileURLToPath(import.meta.url)), 'results', 'cluster-lookups.md'), text);
for (const v of variants) await v.store.close();
await cluster.stop();
await single.stop();
