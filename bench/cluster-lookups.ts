// The OAuth lookup rate with the bucketed layout on one Redis node against a three-master Cluster, in
// one run (`node bench/cluster-lookups.ts`, on a quiet machine): both stores hold the access tokens of
// 300 clients (minted as the sidecar mints them, generateTokenFor); `concurrency` loops call the store's
// lookupToken (the hot path's two reads) for BENCH_CELL_SECONDS, the two variants alternating for
// BENCH_ROUNDS rounds, the median round kept. Writes bench/results/cluster-lookups.md.

import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateTokenFor, hashToken } from '../src/model/credentials.ts';
import { connectRedis, createRedisClient } from '../src/store/redis-connection.ts';
import { RedisTokenStore } from '../src/store/redis.ts';
import { startRedisCluster } from '../test/support/redis-ha.ts';
import { startRedisServer } from '../test/support/redis-server.ts';
import { fmt, table } from './lib.ts';

const SECONDS = Number(process.env.BENCH_CELL_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = Number(process.env.BENCH_CONNECTIONS ?? 64);
const CLIENTS = 300;
const TOKENS_PER_CLIENT = 10;

async function openStore(url: string): Promise<RedisTokenStore> {
  const client = createRedisClient({ url, commandTimeoutMs: 5000, connectTimeoutMs: 5000 });
  await connectRedis(client, 5000);
  return new RedisTokenStore(client, { keyPrefix: 'bench:' });
}

async function seed(store: RedisTokenStore): Promise<string[]> {
  const hashes: string[] = [];
  const now = Date.now();
  for (let c = 0; c < CLIENTS; c++) {
    const clientId = `bench-client-${c}`;
    await store.createClient({
      clientId,
      clientName: clientId,
      redirectUris: [],
      grantTypes: ['client_credentials'],
      profile: 'default',
      tokenEndpointAuthMethod: 'client_secret_basic',
      clientSecretHash: hashToken(clientId),
      source: 'admin',
      createdAt: now,
    });
    for (let t = 0; t < TOKENS_PER_CLIENT; t++) {
      const tokenHash = hashToken(generateTokenFor(clientId));
      await store.createAccessToken({ tokenHash, clientId, createdAt: now, expiresAt: now + 3_600_000 });
      hashes.push(tokenHash);
    }
  }
  return hashes;
}

/** Lookups per second from CONCURRENCY loops over SECONDS. */
async function rate(store: RedisTokenStore, hashes: string[]): Promise<number> {
  const until = performance.now() + SECONDS * 1000;
  let done = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async (_, w) => {
      for (let i = w; performance.now() < until; i += CONCURRENCY) {
        const found = await store.lookupToken(hashes[i % hashes.length]!);
        if (found.oauth === null) throw new Error('a seeded token was not found');
        done++;
      }
    }),
  );
  return done / SECONDS;
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
  for (const [i, v] of variants.entries()) rounds[i]!.push(await rate(v.store, seeded[i]!));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const rows = variants.map((v, i) => [v.name, fmt.int(median(rounds[i]!)), rounds[i]!.map((x) => fmt.int(x)).join(' / ')]);
const text = `# OAuth lookups: one node against a three-master Cluster\n\n${CLIENTS} clients x ${TOKENS_PER_CLIENT} access tokens, ${CONCURRENCY} loops, ${SECONDS} s cells, ${ROUNDS} rounds alternated; lookups/s.\n\n${table(['store', 'median lookups/s', 'rounds'], rows)}\n`;
process.stdout.write(text);
writeFileSync(join(dirname(fileURLToPath(import.meta.url)), 'results', 'cluster-lookups.md'), text);
for (const v of variants) await v.store.close();
await cluster.stop();
await single.stop();
