// The quota's counting rule is the model's pure function (src/model/counters.ts), and both engines
// run it through one transition on the keyspace port, with a blind first step that counts on without
// reading (src/store/counters/quotas.ts). This holds the engines to the rule: random counters and
// inputs, each taken on a real Redis and in memory, and decided by the model. A rate counter's hit
// is one plan both engines run (src/store/counters/hits.ts): here both engines run it on the same
// random counters and each answer is held to the rule of a fixed window started by its first hit.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { takeQuota, type QuotaCounter } from '../../src/model/counters.ts';
import { ManualClock } from '../../src/model/clock.ts';
import { hitOf, hitPlan } from '../../src/store/counters/hits.ts';
import { takeQuotaOn } from '../../src/store/counters/quotas.ts';
import { MemoryCore } from '../../src/store/memory-core.ts';
import { RedisCore } from '../../src/store/redis-core.ts';
import { deleteUnder, rawRedis, uniquePrefix } from '../support/redis.ts';

const CASES = 400;

/** A small seeded generator (mulberry32): the same cases on every run, a failure can be replayed. */
function random(seed: number): (below: number) => number {
  let a = seed;
  return (below) => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * below);
  };
}

let raw: Redis;
let prefix: string;
let core: RedisCore;

beforeAll(async () => {
  raw = await rawRedis();
  prefix = uniquePrefix('counter-parity');
  core = new RedisCore(await rawRedis(), { keyPrefix: prefix });
});
afterAll(async () => {
  try {
    await deleteUnder(raw, prefix);
  } finally {
    await core.close();
    await raw.quit();
  }
});

/**
 * The rule a hit keeps: counted, and a window without an expiry (none running, or a hand edit) given
 * a whole one; a running window keeps what it has left, whatever it counts (a counter only ever
 * comes into being with its window: INCR and PEXPIRE NX are one step).
 */
function hitCounter(stored: { count: number; ttlMs: number | undefined } | null, windowMs: number) {
  const count = (stored?.count ?? 0) + 1;
  if (stored?.ttlMs === undefined) return { count, resetMs: windowMs, startsWindow: true };
  return { count, resetMs: stored.ttlMs, startsWindow: false };
}

describe('the hit plan on both engines and the rule of a fixed window', () => {
  it(`agree on ${CASES} random counters: the count, and whether the window starts (its expiry set)`, async () => {
    const next = random(0x5eed);
    for (let i = 0; i < CASES; i++) {
      const key = `${prefix}hits:${i}`;
      const windowMs = 1000 + next(100_000);
      const shape = next(4); // 0: none; 1: no expiry (a hand edit); 2, 3: a window running
      const count = next(20);
      let endsAt: number | undefined;
      if (shape > 0) await raw.set(key, String(count));
      if (shape > 1) {
        endsAt = Date.now() + 10_000 + next(1_000_000);
        await raw.pexpireat(key, endsAt);
      }
      const before = Date.now();
      const { count: gotCount, resetMs: gotTtl } = hitOf((await core.keyspace.apply(hitPlan(key, windowMs)))!);
      const after = Date.now();
      // The memory engine on the same counter, at one instant of its own clock.
      const memory = new MemoryCore({ clock: new ManualClock(before) });
      if (shape > 0) memory.strings.set(key, String(count));
      if (endsAt !== undefined) memory.expiries.set(key, endsAt);
      const inMemory = hitOf(memory.keyspace.applyNow(hitPlan(key, windowMs))!);
      const expiresAt = Number(await raw.call('PEXPIRETIME', key));
      const stored = shape === 0 ? null : { count, ttlMs: endsAt === undefined ? undefined : endsAt - before };
      const hit = hitCounter(stored, windowMs);
      const context = { i, windowMs, shape, storedCount: count, endsAt };
      expect({ count: gotCount, ...context }).toEqual({ count: hit.count, ...context });
      expect({ ...inMemory, ...context }).toEqual({ count: hit.count, resetMs: hit.resetMs, ...context });
      if (hit.startsWindow) {
        // A window started by this hit: it ends windowMs after it (by the one clock of this machine).
        expect(expiresAt, JSON.stringify(context)).toBeGreaterThanOrEqual(before + windowMs);
        expect(expiresAt, JSON.stringify(context)).toBeLessThanOrEqual(after + windowMs);
        expect(gotTtl).toBeLessThanOrEqual(windowMs);
      } else {
        expect(expiresAt, JSON.stringify(context)).toBe(endsAt);
        expect(gotTtl).toBeLessThanOrEqual(endsAt! - before);
        expect(gotTtl).toBeGreaterThanOrEqual(endsAt! - after - 1);
      }
    }
  });
});

describe('the quota take on both engines and the model takeQuota', () => {
  it(`agree on ${CASES} random counters and takes: the answer, and the counter written`, async () => {
    const next = random(0xc0de);
    for (let i = 0; i < CASES; i++) {
      const key = `${prefix}quota:${i}`;
      const windowMs = 1000 + next(10_000_000);
      const now = 1_700_000_000_000 + next(1_000_000_000);
      const cost = next(6);
      const limit = next(12);
      const shape = next(5); // 0: none; 1: a used count that does not read; 2-4: a counter near now's window
      let stored: QuotaCounter | null = null;
      const memory = new MemoryCore({ clock: new ManualClock(now) });
      if (shape > 0) {
        const window = Math.floor(now / windowMs) + next(5) - 2;
        const used = next(limit + 4);
        stored = { window, used: shape === 1 ? undefined : used };
        const fields = { window: String(window), used: shape === 1 ? 'many' : String(used) };
        await raw.hset(key, fields);
        Object.assign(memory.createHash(key), fields);
      }
      const before = await raw.hgetall(key);
      const onRedis = await takeQuotaOn(core.keyspace, key, cost, limit, windowMs, now);
      const inMemory = await takeQuotaOn(memory.keyspace, key, cost, limit, windowMs, now);
      const take = takeQuota(stored, cost, limit, windowMs, now);
      const context = { i, windowMs, now, cost, limit, stored };
      const expected = { allowed: take.allowed, used: take.used, resetAt: take.resetAt, ...context };
      expect({ ...onRedis, ...context }).toEqual(expected);
      expect({ ...inMemory, ...context }).toEqual(expected);
      const after = await raw.hgetall(key);
      const afterInMemory = memory.get(key) ?? {};
      if (take.write === undefined) {
        expect(after, JSON.stringify(context)).toEqual(before);
        expect(afterInMemory, JSON.stringify(context)).toEqual(before);
      } else {
        const written = { window: String(take.write.window), used: String(take.write.used) };
        expect(after, JSON.stringify(context)).toEqual(written);
        expect({ ...afterInMemory }, JSON.stringify(context)).toEqual(written);
        const ttl = await raw.pttl(key);
        expect(ttl).toBeGreaterThan(0);
        expect(ttl).toBeLessThanOrEqual(take.write.keepMs);
        expect(memory.expiryOf(key)).toBe(now + take.write.keepMs);
      }
    }
  });
});
