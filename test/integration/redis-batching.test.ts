// The main Redis connection sends the commands of one turn of the event loop in one write, on a real
// Redis: scripts (quota, failed-auth counter), a one-time value's SET NX, plain commands and a MULTI
// started together leave in one write to the socket and each gets its own answer; the next turn's
// commands are a write of their own. (A request that counts a quota, spends a DPoP proof and touches
// its token's last use costs one write, not one per command.)

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import { connectRedis, duplicateConnection, duplicateForLookups, duplicateForTransactions } from '../../src/store/redis-connection.ts';
import { countSocketWrites, deleteUnder, openRedisStore, rawRedis, uniquePrefix } from '../support/redis.ts';

describe('the main Redis connection', () => {
  let client: Redis;
  let store: RedisTokenStore;
  let raw: Redis;
  let prefix: string;
  beforeEach(async () => {
    prefix = uniquePrefix('batching');
    store = await openRedisStore(prefix);
    client = store.client as Redis;
    raw = await rawRedis();
  });
  afterEach(async () => {
    await store.close();
    await deleteUnder(raw, prefix);
    raw.disconnect();
  });

  it('sends the commands started in one turn in one write, scripts and a MULTI included, and answers each its own', async () => {
    const now = Date.now();
    // Once first, so that Redis knows the scripts (a first EVALSHA is answered NOSCRIPT and sent again)
    // and the store whether Redis has replicas (asked once, before the first one-time value); and the
    // quota counter 'q' in its window, so that a take is its one blind step (a new counter is read first).
    await store.takeQuota('q', 1, 3, 60_000, now);
    await store.hitCounter('warm', 60_000);
    await store.useOnce('warm', now + 60_000);
    const writes = countSocketWrites(client);

    const [first, second, counted, spent, spentAgain, exec, plain] = await Promise.all([
      store.takeQuota('q', 1, 3, 60_000, now),
      store.takeQuota('q', 1, 3, 60_000, now),
      store.hitCounter('h', 60_000),
      store.useOnce('jti', now + 60_000),
      store.useOnce('jti', now + 60_000),
      client.multi().set(`${prefix}m`, 'v').get(`${prefix}m`).exec(),
      client.get(`${prefix}absent`),
    ]);
    expect([first, second].map((take) => [take.allowed, take.used])).toEqual([
      [true, 2],
      [true, 3],
    ]);
    expect(counted.count).toBe(1);
    expect([spent, spentAgain]).toEqual([true, false]);
    expect(exec).toEqual([
      [null, 'OK'],
      [null, 'v'],
    ]);
    expect(plain).toBeNull();
    expect(writes).toHaveLength(1);

    // The next turn's command is a write of its own: nothing stays corked.
    expect(client.stream.writableCorked).toBe(0);
    expect(await client.get(`${prefix}m`)).toBe('v');
    expect(writes).toHaveLength(2);
  });

  it('batches the same way on every connection the store copies from it (transactions, subscriber, lookups)', async () => {
    const copies = [duplicateForTransactions(client), duplicateForLookups(client), duplicateConnection(client, { autoResubscribe: false })];
    try {
      for (const copy of copies) {
        await connectRedis(copy, 5000);
        const writes = countSocketWrites(copy as Redis);
        const replies = await Promise.all([copy.ping(), copy.get(`${prefix}absent`), copy.exists(`${prefix}absent`)]);
        expect(replies).toEqual(['PONG', null, 0]);
        expect(writes).toHaveLength(1);
      }
    } finally {
      for (const copy of copies) copy.disconnect();
    }
  });

  it('writes each command at once on a copy made unbatched (as the lookup cache makes its own: its barrier leaves at once)', async () => {
    const copy = duplicateConnection(client, {}, { batched: false }) as Redis;
    try {
      await connectRedis(copy, 5000);
      const writes = countSocketWrites(copy);
      const replies = await Promise.all([copy.ping(), copy.get(`${prefix}absent`), copy.exists(`${prefix}absent`)]);
      expect(replies).toEqual(['PONG', null, 0]);
      expect(writes).toHaveLength(3);
    } finally {
      copy.disconnect();
    }
  });

  it('writes each command at once on a stream that cannot cork, and answers each', async () => {
    const copy = duplicateConnection(client, {}) as Redis;
    try {
      await connectRedis(copy, 5000);
      const writes = countSocketWrites(copy);
      // A transport without cork()/uncork(): the batching steps aside instead of failing the command.
      Object.assign(copy.stream, { cork: undefined, uncork: undefined });
      const replies = await Promise.all([copy.ping(), copy.get(`${prefix}absent`), copy.exists(`${prefix}absent`)]);
      expect(replies).toEqual(['PONG', null, 0]);
      expect(writes).toHaveLength(3);
    } finally {
      copy.disconnect();
    }
  });
});
