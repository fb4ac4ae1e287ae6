// The store's changes planned under WATCH (a plan read, decided by the model, written by MULTI/EXEC
// while nothing read changed), raced from 8 sidecars on one real Redis: each has its own transaction
// connection, so their WATCHes and EXECs interleave, and a change that lost a race plans again.

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { handleDigest, handleOwner } from '../../src/proxy/handles.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import { deleteUnder, openRedisStore, rawRedis, uniquePrefix } from '../support/redis.ts';

const SIDECARS = 8;
const TTL = 60_000;
const MAX = 100;

let prefix: string;
let raw: Redis;
let sidecars: RedisTokenStore[];

beforeEach(async () => {
  prefix = uniquePrefix('plans-races');
  raw = await rawRedis();
  sidecars = await Promise.all(Array.from({ length: SIDECARS }, () => openRedisStore(prefix)));
});
afterEach(async () => {
  try {
    await deleteUnder(raw, prefix);
  } finally {
    await Promise.all(sidecars.map((s) => s.close()));
    await raw.quit();
  }
});

describe('handles of a person forgotten from 8 sidecars at once', () => {
  it('while more are bound: each handle is forgotten once, none is left unlisted', async () => {
    const alice = handleOwner({ kind: 'oauth', subject: 'alice', clientId: 'c-a' });
    const now = Date.now();
    const before = Array.from({ length: 8 }, (_, i) => handleDigest(`before-${i}`));
    for (const hash of before) await sidecars[0]!.bindHandle('session', hash, alice, now, TTL, MAX);
    const during = Array.from({ length: 16 }, (_, i) => handleDigest(`during-${i}`));
    const [forgotten] = await Promise.all([
      Promise.all(sidecars.map((s) => s.forgetSubjectHandles('alice'))),
      Promise.all(during.map((hash, i) => sidecars[i % SIDECARS]!.bindHandle('session', hash, alice, now, TTL, MAX))),
    ]);
    const left = await sidecars[0]!.forgetSubjectHandles('alice');
    expect(forgotten.reduce((sum, n) => sum + n, 0) + left).toBe(before.length + during.length);
    for (const hash of [...before, ...during]) expect(await raw.exists(`${prefix}{oauth}:mcpHandles:session:${hash}`)).toBe(0);
  });
});
