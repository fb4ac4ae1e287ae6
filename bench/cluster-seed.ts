// What the Cluster lookup benches share: a store seeded with the access tokens of CLIENTS clients
// (minted as the sidecar mints them, generateTokenFor, so they spread over the buckets) and the rate of
// `concurrency` loops of lookupToken.

import { generateTokenFor, hashToken } from '../src/model/credentials.ts';
import type { RedisTokenStore } from '../src/store/redis.ts';
import { credentialsClient } from '../test/support/clients.ts';

export const CLIENTS = 300;
export const TOKENS_PER_CLIENT = 10;

export async function seed(store: RedisTokenStore): Promise<string[]> {
  const hashes: string[] = [];
  const now = Date.now();
  for (let c = 0; c < CLIENTS; c++) {
    const clientId = `bench-client-${c}`;
    await store.createClient(credentialsClient(clientId, now));
    for (let t = 0; t < TOKENS_PER_CLIENT; t++) {
      const tokenHash = hashToken(generateTokenFor(clientId));
      await store.createAccessToken({ tokenHash, clientId, createdAt: now, expiresAt: now + 3_600_000 });
      hashes.push(tokenHash);
    }
  }
  return hashes;
}

/** Lookups per second from `concurrency` loops over `seconds`. */
export async function rate(store: RedisTokenStore, hashes: string[], seconds: number, concurrency: number): Promise<number> {
  const until = performance.now() + seconds * 1000;
  let done = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, w) => {
      for (let i = w; performance.now() < until; i += concurrency) {
        const found = await store.lookupToken(hashes[i % hashes.length]!);
        if (found.oauth === null) throw new Error('a seeded token was not found');
        done++;
      }
    }),
  );
  return done / seconds;
}
