// The keyspace port both engines implement (src/store/keyspace.ts): every command a plan may name
// answers the same on the memory engine as on a real Redis running the Lua applier, a plan whose guard
// no longer holds writes nothing, and transitions racing on one key lose no write on either engine.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { systemClock } from '../../src/model/clock.ts';
import { MemoryCore } from '../../src/store/memory-core.ts';
import { RedisKeyspace } from '../../src/store/redis-keyspace.ts';
import { fieldsOf, MAX_ATTEMPTS, readOne, transition, type Command, type Keyspace, type Plan } from '../../src/store/keyspace.ts';
import { StoreUnavailableError } from '../../src/store/shared.ts';
import { deleteUnder, rawRedis, uniquePrefix } from '../support/redis.ts';

let raw: Redis;
let prefix: string;
let redis: Keyspace;
const memory: Keyspace = new MemoryCore({ clock: systemClock }).keyspace;

beforeAll(async () => {
  raw = await rawRedis();
  prefix = uniquePrefix('keyspace');
  redis = new RedisKeyspace(raw);
});
afterAll(async () => {
  try {
    await deleteUnder(raw, prefix);
  } finally {
    await raw.quit();
  }
});

let n = 0;
/** Keys for one test, the same names on both engines (each engine its own prefix run). */
const keysFor = (engine: string) => {
  const base = `${prefix}${engine}:${++n}:`;
  return { hash: `${base}h`, set: `${base}s`, zset: `${base}z`, counter: `${base}c`, absent: `${base}none` };
};

/** Runs the same commands, one at a time, on both engines: their replies, side by side. */
async function both(script: (k: ReturnType<typeof keysFor>) => Command[]): Promise<{ memory: unknown[]; redis: unknown[] }> {
  const out = { memory: [] as unknown[], redis: [] as unknown[] };
  for (const [name, keyspace] of [
    ['memory', memory],
    ['redis', () => redis],
  ] as const) {
    const ks = typeof keyspace === 'function' ? keyspace() : keyspace;
    for (const command of script(keysFor(name))) {
      const [reply] = (await ks.apply({ guards: [], steps: [command] }))!;
      out[name].push(reply);
    }
  }
  return out;
}

describe('the keyspace commands', () => {
  it('answer alike on memory and on Redis: hashes', async () => {
    const replies = await both((k) => [
      ['HSET', k.hash, 'a', '1', 'b', '2'],
      ['HSET', k.hash, 'b', '3', 'c', '4'],
      ['HSETNX', k.hash, 'a', 'x'],
      ['HSETNX', k.hash, 'd', '5'],
      ['HGET', k.hash, 'b'],
      ['HGET', k.hash, 'zz'],
      ['HMGET', k.hash, 'a', 'zz', 'd'],
      ['HEXISTS', k.hash, 'c'],
      ['HLEN', k.hash],
      ['HDEL', k.hash, 'a', 'zz'],
      ['EXISTS', k.hash],
      ['HDEL', k.hash, 'b', 'c', 'd'],
      ['EXISTS', k.hash],
      ['HGETALL', k.hash],
      ['DEL', k.absent],
      ['HINCRBY', k.hash, 'n', 5],
      ['HINCRBY', k.hash, 'n', -7],
      ['HGET', k.hash, 'n'],
    ]);
    expect(replies.memory).toEqual(replies.redis);
    expect(replies.redis).toEqual([2, 1, 0, 1, '3', null, ['1', null, '5'], 1, 4, 1, 1, 3, 0, [], 0, 5, -2, '-2']);
  });

  it('answer alike on memory and on Redis: sets, sorted sets and counters', async () => {
    const replies = await both((k) => [
      ['SADD', k.set, 'x', 'y', 'x'],
      ['SISMEMBER', k.set, 'y'],
      ['SCARD', k.set],
      ['SREM', k.set, 'x', 'q'],
      ['ZADD', k.zset, 30, 'c', 10, 'a', 20, 'b', 20, 'bb'],
      ['ZADD', k.zset, 5, 'c'],
      ['ZRANGE', k.zset, 0, -1, 'WITHSCORES'],
      ['ZRANGE', k.zset, -1, -1, 'WITHSCORES'],
      ['ZRANGE', k.zset, 2, 1],
      ['ZSCORE', k.zset, 'a'],
      ['ZSCORE', k.zset, 'nope'],
      ['ZCOUNT', k.zset, '(10', '+inf'],
      ['ZRANGEBYSCORE', k.zset, '-inf', 20, 'WITHSCORES', 'LIMIT', 1, 2],
      ['ZREMRANGEBYSCORE', k.zset, '-inf', '(20'],
      ['ZCARD', k.zset],
      ['ZREM', k.zset, 'b', 'bb'],
      ['EXISTS', k.zset],
      ['INCR', k.counter],
      ['INCR', k.counter],
      ['PTTL', k.counter],
      ['PTTL', k.absent],
    ]);
    expect(replies.memory).toEqual(replies.redis);
    expect(replies.redis).toEqual([
      2,
      1,
      2,
      1,
      4,
      0,
      ['c', '5', 'a', '10', 'b', '20', 'bb', '20'],
      ['bb', '20'],
      [],
      '10',
      null,
      2,
      ['a', '10', 'b', '20'],
      2,
      2,
      2,
      0,
      1,
      2,
      -1,
      -2,
    ]);
  });

  it('answer alike on memory and on Redis: strings (SET, PXAT, GET, INCR) and ZREVRANGE', async () => {
    const at = Date.now() + 3_600_000;
    const replies = await both((k) => [
      ['GET', k.absent],
      ['SET', k.counter, '41'],
      ['INCR', k.counter],
      ['GET', k.counter],
      ['PTTL', k.counter],
      ['SET', k.counter, 'v', 'PXAT', at],
      ['GET', k.counter],
      ['HSET', k.hash, 'f', 'v'],
      ['SET', k.hash, 'replaced'],
      ['GET', k.hash],
      ['SET', k.set, 'x', 'PXAT', Date.now() - 1],
      ['EXISTS', k.set],
      ['ZADD', k.zset, 1, 'a', 3, 'c', 2, 'b'],
      ['ZREVRANGE', k.zset, 0, 1],
      ['ZREVRANGE', k.zset, 0, -1, 'WITHSCORES'],
      ['ZREVRANGE', k.zset, 5, 9],
    ]);
    expect(replies.memory).toEqual(replies.redis);
    expect(replies.redis).toEqual([
      null,
      'OK',
      42,
      '42',
      -1,
      'OK',
      'v',
      1,
      'OK',
      'replaced',
      'OK',
      0,
      3,
      ['c', 'b'],
      ['c', '3', 'b', '2', 'a', '1'],
      [],
    ]);
    // The value SET with PXAT goes when Redis would let it go.
    for (const [name, ks] of [
      ['memory', memory],
      ['redis', redis],
    ] as const) {
      const k = keysFor(name);
      await ks.apply({ guards: [], steps: [['SET', k.counter, 'v', 'PXAT', at]] });
      const left = (await readOne(ks, ['PTTL', k.counter])) as number;
      expect(left).toBeGreaterThan(at - Date.now() - 2000);
      expect(left).toBeLessThanOrEqual(at - Date.now() + 50);
    }
  });

  it('refuse alike on memory and on Redis: INCR of a value that is no integer; memory refuses a SET option outside the port', async () => {
    for (const [name, ks] of [
      ['memory', memory],
      ['redis', redis],
    ] as const) {
      const k = keysFor(name);
      await ks.apply({ guards: [], steps: [['SET', k.counter, 'abc']] });
      await expect(ks.apply({ guards: [], steps: [['INCR', k.counter]] }), name).rejects.toThrow(/value is not an integer/);
      expect(await readOne(ks, ['GET', k.counter]), name).toBe('abc');
    }
    // Only PXAT is in the port (NX, EX, KEEPTTL... are not): the memory engine refuses the rest.
    const k = keysFor('memory');
    await expect(memory.apply({ guards: [], steps: [['SET', k.counter, 'v', 'NX']] })).rejects.toThrow(/SET takes only PXAT/);
    expect(await readOne(memory, ['EXISTS', k.counter])).toBe(0);
  });

  it('answer alike on memory and on Redis: expiries (NX and GT, and a time already past)', async () => {
    const at = Date.now() + 3_600_000;
    const replies = await both((k) => [
      ['PEXPIREAT', k.absent, at],
      ['ZADD', k.zset, 1, 'm'],
      ['PEXPIREAT', k.zset, at, 'GT'],
      ['PEXPIREAT', k.zset, at, 'NX'],
      ['PEXPIREAT', k.zset, at - 1000, 'NX'],
      ['PEXPIREAT', k.zset, at - 1000, 'GT'],
      ['PEXPIREAT', k.zset, at + 1000, 'GT'],
      ['SADD', k.set, 'x'],
      ['PEXPIRE', k.set, 60_000, 'NX'],
      ['PEXPIRE', k.set, 1, 'NX'],
      ['HSET', k.hash, 'f', 'v'],
      ['PEXPIREAT', k.hash, Date.now() - 1],
      ['EXISTS', k.hash],
    ]);
    expect(replies.memory).toEqual(replies.redis);
    expect(replies.redis).toEqual([0, 1, 0, 1, 0, 0, 1, 1, 1, 0, 1, 1, 0]);
    // The expiries themselves: the latest one GT allowed, kept by the set's PEXPIRE NX.
    for (const [name, ks] of [
      ['memory', memory],
      ['redis', redis],
    ] as const) {
      const k = keysFor(name);
      await ks.apply({
        guards: [],
        steps: [
          ['ZADD', k.zset, 1, 'm'],
          ['PEXPIREAT', k.zset, at, 'NX'],
          ['PEXPIREAT', k.zset, at + 5000, 'GT'],
        ],
      });
      const left = (await readOne(ks, ['PTTL', k.zset])) as number;
      expect(left).toBeGreaterThan(at + 5000 - Date.now() - 2000);
      expect(left).toBeLessThanOrEqual(at + 5000 - Date.now() + 50);
    }
  });
});

describe.each(['memory', 'redis'])('plans on %s', (name) => {
  const ks = () => (name === 'memory' ? memory : redis);

  it('run their steps only while every guard holds; a failed guard writes nothing', async () => {
    const k = keysFor(`${name}-plan`);
    await ks().apply({ guards: [], steps: [['HSET', k.hash, 'state', 'open']] });
    const plan = (state: string | null): Plan => ({
      guards: [
        { command: ['HGET', k.hash, 'state'], equals: state },
        { command: ['EXISTS', k.absent], equals: 0 },
      ],
      steps: [
        ['HSET', k.hash, 'state', 'closed'],
        ['SADD', k.set, 'closed'],
        ['HGET', k.hash, 'nothing'],
      ],
    });
    expect(await ks().apply(plan('closed'))).toBeNull();
    expect(await ks().apply(plan(null))).toBeNull();
    expect(fieldsOf(await readOne(ks(), ['HGETALL', k.hash]))).toEqual({ state: 'open' });
    expect(await readOne(ks(), ['EXISTS', k.set])).toBe(0);
    expect(await ks().apply(plan('open'))).toEqual([0, 1, null]);
    expect(fieldsOf(await readOne(ks(), ['HGETALL', k.hash]))).toEqual({ state: 'closed' });
  });

  it('hold a count guard while the count stays below its bound, and fail it at the bound or on a reply that is no count', async () => {
    const k = keysFor(`${name}-below`);
    const add = (member: string): Plan => ({
      guards: [{ command: ['ZCARD', k.zset], below: 2 }],
      steps: [['ZADD', k.zset, 1, member]],
    });
    expect(await ks().apply(add('a'))).toEqual([1]);
    expect(await ks().apply(add('b'))).toEqual([1]);
    expect(await ks().apply(add('c'))).toBeNull();
    expect(await readOne(ks(), ['ZCARD', k.zset])).toBe(2);
    // A value of an integer's digits is a count (a hash field HINCRBY counts in); any other is none.
    await ks().apply({ guards: [], steps: [['HSET', k.hash, 'n', '0', 'x', 'many', 'f', '1.5']] });
    const underFive = (field: string, step: Command): Plan => ({ guards: [{ command: ['HGET', k.hash, field], below: 5 }], steps: [step] });
    expect(await ks().apply(underFive('n', ['HINCRBY', k.hash, 'n', 5]))).toEqual([5]);
    expect(await ks().apply(underFive('n', ['SADD', k.set, 'x']))).toBeNull();
    for (const field of ['x', 'f', 'absent']) expect(await ks().apply(underFive(field, ['SADD', k.set, 'x']))).toBeNull();
    expect(await readOne(ks(), ['EXISTS', k.set])).toBe(0);
  });

  it('refuse a command outside the port, as a guard or as a step, and write nothing', async () => {
    const k = keysFor(`${name}-refused`);
    const steps = [['HSET', k.hash, 'a', '1'] as Command, ['FLUSHALL', k.hash] as unknown as Command];
    await expect(ks().apply({ guards: [], steps })).rejects.toThrow(/unknown command: FLUSHALL/);
    const guard = { command: ['HSET', k.hash, 'a', '1'] as Command, equals: 1 };
    await expect(ks().apply({ guards: [guard], steps: [] })).rejects.toThrow(/not a read: HSET/);
    expect(await readOne(ks(), ['EXISTS', k.hash])).toBe(0);
    // A count on a value that is not an integer's is an error on both engines, as in Redis.
    await ks().apply({ guards: [], steps: [['HSET', k.hash, 's', 'x']] });
    await expect(ks().apply({ guards: [], steps: [['HINCRBY', k.hash, 's', 1]] })).rejects.toThrow(/not an integer/);
    expect(await readOne(ks(), ['HGET', k.hash, 's'])).toBe('x');
  });

  it('lose no write when transitions race on one key (each decides on what it read, guarded by it)', async () => {
    const k = keysFor(`${name}-race`);
    const bump = () =>
      transition(ks(), 'bump', async (space) => {
        const count = (await readOne(space, ['HGET', k.hash, 'count'])) as string | null;
        return {
          result: undefined,
          plan: {
            guards: [{ command: ['HGET', k.hash, 'count'], equals: count }],
            steps: [['HSET', k.hash, 'count', String(Number(count ?? 0) + 1)]],
          },
        };
      });
    await Promise.all(Array.from({ length: 12 }, bump));
    expect(await readOne(ks(), ['HGET', k.hash, 'count'])).toBe('12');
  });

  it('gives up after as many lost races as allowed, as the store being unavailable', async () => {
    const k = keysFor(`${name}-giveup`);
    let attempts = 0;
    const never = transition(ks(), 'never', async (space) => {
      attempts++;
      // Another writer changes the key between this read and the apply, every time.
      const count = await readOne(space, ['HGET', k.hash, 'count']);
      await space.apply({ guards: [], steps: [['HSET', k.hash, 'count', String(attempts)]] });
      return { result: 'done', plan: { guards: [{ command: ['HGET', k.hash, 'count'], equals: count as string | null }], steps: [] } };
    });
    await expect(never).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(attempts).toBe(MAX_ATTEMPTS);
  });
});
