// The one generic step every single-record rule runs under (updateHash): the same decisions give the
// same hash on both engines, MemoryCore and RedisCore on a real Redis (the keyspace plan), and on
// Redis a write is made only on the hash as it was read.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { ManualClock } from '../../src/model/clock.ts';
import { MemoryCore } from '../../src/store/memory-core.ts';
import type { Fields, HashUpdate } from '../../src/store/records.ts';
import { RedisCore } from '../../src/store/redis-core.ts';
import { deleteUnder, rawRedis, uniquePrefix } from '../support/redis.ts';

type Decide<R> = (current: Fields | null) => HashUpdate<R>;

interface Engine {
  update<R>(key: string, decide: Decide<R>): Promise<R>;
  /** The hash and its expiry (epoch ms; undefined: none), as HGETALL and PEXPIRETIME show them. */
  read(key: string): Promise<{ fields: Fields | null; expiresAt: number | undefined }>;
}

const HOUR = 3_600_000;

let raw: Redis;
let prefix: string;
let redisCore: RedisCore;
const memoryCore = new MemoryCore({ clock: new ManualClock(Date.now()) });

beforeAll(async () => {
  raw = await rawRedis();
  prefix = uniquePrefix('hash-update');
  redisCore = new RedisCore(await rawRedis(), { keyPrefix: prefix });
});
afterAll(async () => {
  try {
    await deleteUnder(raw, prefix);
  } finally {
    await redisCore.close();
    await raw.quit();
  }
});

const engines: Record<string, () => Engine> = {
  memory: () => ({
    update: async (key, decide) => memoryCore.updateHash(key, decide),
    read: async (key) => {
      const fields = memoryCore.get(key);
      return { fields: fields && { ...fields }, expiresAt: fields === null ? undefined : memoryCore.hashes.get(key)?.expiresAt };
    },
  }),
  redis: () => ({
    update: (key, decide) => redisCore.updateHash(key, decide),
    read: async (key) => {
      const fields = await raw.hgetall(key);
      const at = Number(await raw.call('PEXPIRETIME', key));
      return { fields: Object.keys(fields).length === 0 ? null : fields, expiresAt: at > 0 ? at : undefined };
    },
  }),
};

let n = 0;
const freshKey = () => `${prefix}record:${++n}`;

describe.each(Object.keys(engines))('updateHash on %s', (name) => {
  const engine = () => engines[name]!();

  it('creates a hash read as absent, with its expiry; a decision writing nothing leaves it absent', async () => {
    const e = engine();
    const key = freshKey();
    expect(await e.update(key, () => ({ result: 'none' }))).toBe('none');
    expect(await e.update(key, () => ({ result: 'none', set: {} }))).toBe('none');
    expect((await e.read(key)).fields).toBeNull();
    const expireAt = Date.now() + HOUR;
    expect(await e.update(key, (current) => ({ result: current, set: { a: '1', b: '2' }, expireAt }))).toBeNull();
    expect(await e.read(key)).toEqual({ fields: { a: '1', b: '2' }, expiresAt: expireAt });
  });

  it('sets and deletes fields of the hash as read, keeping its expiry; the last field deleted takes the hash', async () => {
    const e = engine();
    const key = freshKey();
    const expireAt = Date.now() + HOUR;
    await e.update(key, () => ({ result: undefined, set: { a: '1', b: '2', c: '3' }, expireAt }));
    expect(await e.update(key, (current) => ({ result: current, set: { a: '9', d: '4' }, unset: ['b', 'absent'] }))).toEqual({
      a: '1',
      b: '2',
      c: '3',
    });
    expect(await e.read(key)).toEqual({ fields: { a: '9', c: '3', d: '4' }, expiresAt: expireAt });
    await e.update(key, () => ({ result: undefined, expireAt: expireAt + 1000 }));
    expect((await e.read(key)).expiresAt).toBe(expireAt + 1000);
    await e.update(key, (current) => ({ result: undefined, unset: Object.keys(current!) }));
    expect(await e.read(key)).toEqual({ fields: null, expiresAt: undefined });
  });

  it('drop deletes the whole hash, whatever else is decided', async () => {
    const e = engine();
    const key = freshKey();
    await e.update(key, () => ({ result: undefined, set: { a: '1' } }));
    expect(await e.update(key, () => ({ result: 'gone', drop: true, set: { b: '2' } }))).toBe('gone');
    expect((await e.read(key)).fields).toBeNull();
  });

  it('8 concurrent read-decide-writes each apply once, on the hash as the one before left it', async () => {
    const e = engine();
    const key = freshKey();
    const increment: Decide<number> = (current) => {
      const count = Number(current?.count ?? 0) + 1;
      return { result: count, set: { count: String(count) } };
    };
    const results = await Promise.all(Array.from({ length: 8 }, () => e.update(key, increment)));
    expect(results.sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect((await e.read(key)).fields).toEqual({ count: '8' });
  });

  it('8 concurrent creations of one absent hash: exactly one creates it', async () => {
    const e = engine();
    const key = freshKey();
    const outcomes = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        e.update(key, (current) => (current === null ? { result: true, set: { owner: String(i) } } : { result: false })),
      ),
    );
    expect(outcomes.filter(Boolean)).toHaveLength(1);
    expect((await e.read(key)).fields).toEqual({ owner: String(outcomes.indexOf(true)) });
  });
});

describe('updateHash on Redis writes only on the hash as read', () => {
  it('a field changed between the read and the write: the decision is made again on what is there now', async () => {
    const key = freshKey();
    await raw.hset(key, 'a', '1');
    const seen: Array<Fields | null> = [];
    const result = await redisCore.updateHash(key, (current) => {
      seen.push(current);
      // An edit queued on the same connection ahead of the write: the first write finds the hash changed.
      if (seen.length === 1) void redisCore.redis.hset(key, 'edited', 'yes');
      return { result: seen.length, set: { a: String(Number(current!.a) + 1) } };
    });
    expect(result).toBe(2);
    expect(seen).toEqual([{ a: '1' }, { a: '1', edited: 'yes' }]);
    expect(await raw.hgetall(key)).toEqual({ a: '2', edited: 'yes' });
  });

  it('a hash read as absent and created in between is not overwritten', async () => {
    const key = freshKey();
    let first = true;
    const result = await redisCore.updateHash(key, (current) => {
      if (first) void redisCore.redis.hset(key, 'owner', 'other');
      first = false;
      return current === null ? { result: 'created', set: { owner: 'me' } } : { result: 'exists' };
    });
    expect(result).toBe('exists');
    expect(await raw.hgetall(key)).toEqual({ owner: 'other' });
  });
});
