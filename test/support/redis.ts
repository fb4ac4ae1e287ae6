// Per-test-file access to the suite's Redis: a unique key prefix, stores and raw clients on it, and a
// cleanup that deletes only keys under that prefix (never FLUSH: REDIS_URL may be someone's Redis).

import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import { Redis } from 'ioredis';
import type { Socket } from 'node:net';
import type { Clock } from '../../src/model/clock.ts';
import { connectRedis, createRedisClient } from '../../src/store/redis-connection.ts';
import { RedisTokenStore } from '../../src/store/redis.ts';
import type { LookupCacheOptions } from '../../src/store/redis-lookup-cache.ts';

export function redisUrl(): string {
  return inject('redisUrl');
}

export function uniquePrefix(label: string): string {
  return `${inject('redisPrefix')}${label}-${randomBytes(3).toString('hex')}:mcpauth:`;
}

/** A plain client for assertions and admin-style edits (`HSET ... revoked true`). */
export async function rawRedis(url = redisUrl()): Promise<Redis> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 2 });
  await client.connect();
  return client;
}

/** A store on the suite's Redis; with `lookupCache`, its lookup cache on and live before it resolves. */
export async function openRedisStore(
  prefix: string,
  options: { url?: string; commandTimeoutMs?: number; lookupCache?: LookupCacheOptions | undefined } = {},
): Promise<RedisTokenStore> {
  const client = createRedisClient({
    url: options.url ?? redisUrl(),
    commandTimeoutMs: options.commandTimeoutMs ?? 1000,
    connectTimeoutMs: 5000,
  });
  client.on('error', () => undefined);
  await connectRedis(client, 5000);
  const store = new RedisTokenStore(client, { keyPrefix: prefix });
  if (options.lookupCache) await store.trackLookups(options.lookupCache);
  return store;
}

/** `count` stores on the suite's Redis under one prefix: as many sidecars sharing one backend. */
export function openRedisStores(prefix: string, count: number): Promise<RedisTokenStore[]> {
  return Promise.all(Array.from({ length: count }, () => openRedisStore(prefix)));
}

/** Racing sidecars: a fresh prefix, a raw connection and `count` stores under the prefix. */
export interface RacingStores {
  prefix: string;
  raw: Redis;
  sidecars: RedisTokenStore[];
}

/** Opens racing sidecars under a new prefix named after `name` (closeRacingStores undoes it). */
export async function openRacingStores(name: string, count: number): Promise<RacingStores> {
  const prefix = uniquePrefix(name);
  return { prefix, raw: await rawRedis(), sidecars: await openRedisStores(prefix, count) };
}

/** Deletes every key under the prefix, then closes the stores and the raw connection, whatever failed. */
export async function closeRacingStores({ prefix, raw, sidecars }: RacingStores): Promise<void> {
  try {
    await deleteUnder(raw, prefix);
  } finally {
    await Promise.all(sidecars.map((s) => s.close()));
    await raw.quit();
  }
}

/** Every key under `prefix`, sorted (SCAN, not KEYS: the Redis may be shared). */
export async function keysUnder(client: Redis, prefix: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await client.scan(cursor, 'MATCH', `${escapeGlob(prefix)}*`, 'COUNT', 500);
    cursor = next;
    found.push(...batch);
  } while (cursor !== '0');
  return found.sort();
}

export async function deleteUnder(client: Redis, prefix: string): Promise<void> {
  const keys = await keysUnder(client, prefix);
  for (let i = 0; i < keys.length; i += 500) await client.del(...keys.slice(i, i + 500));
}

function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

export type { Clock };

/**
 * Counts the writes that reach `client`'s socket from now on: one entry per `_write` or `_writev` call,
 * its number of chunks (what was handed to the socket between two flushes).
 */
export function countSocketWrites(client: Redis): number[] {
  const socket = client.stream as Socket & { _write: (...args: unknown[]) => void; _writev: (...args: unknown[]) => void };
  const writes: number[] = [];
  const write = socket._write.bind(socket);
  const writev = socket._writev.bind(socket);
  socket._write = (...args) => (writes.push(1), write(...args));
  socket._writev = (...args) => (writes.push((args[0] as unknown[]).length), writev(...args));
  return writes;
}
