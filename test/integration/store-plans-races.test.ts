// The store's changes planned under WATCH (a plan read, decided by the model, written by MULTI/EXEC
// while nothing read changed), raced from 8 sidecars on one real Redis: each has its own transaction
// connection, so their WATCHes and EXECs interleave, and a change that lost a race plans again.

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { generateToken, hashToken } from '../../src/model/credentials.ts';
import { handleDigest, handleOwner } from '../../src/proxy/handles.ts';
import { subjectDigest } from '../../src/store/records.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import type { ConsentRecord } from '../../src/store/types.ts';
import { deleteUnder, openRedisStore, rawRedis, uniquePrefix } from '../support/redis.ts';

const SIDECARS = 8;
const HOUR = 3_600_000;
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

describe('approvals remembered on one browser from 8 sidecars at once', () => {
  const browser = hashToken(generateToken());
  function approval(clientId: string, expiresAt: number): ConsentRecord {
    return {
      clientId,
      clientCreatedAt: expiresAt - 48 * HOUR,
      redirectUri: 'http://127.0.0.1:9999/cb',
      issuer: 'https://idp.example.com/',
      subject: 'idp-user-1',
      approvedAt: expiresAt - 24 * HOUR,
      expiresAt,
    };
  }
  const pexpiretime = async (key: string) => Number(await raw.call('PEXPIRETIME', key));

  it('at most maxPerBrowser kept, the longest-lived among them; the hash and the index expire with their latest', async () => {
    const now = Date.now();
    const given = sidecars.map((_, i) => approval(`c-${i + 1}`, now + (i + 1) * HOUR));
    await Promise.all(sidecars.map((s, i) => s.putConsent(browser, given[i]!, now, 3)));
    const kept = (await sidecars[0]!.listConsents(browser, now)).map((c) => c.clientId);
    expect(kept).toHaveLength(3);
    expect(kept).toEqual(expect.arrayContaining(['c-7', 'c-8']));
    const key = sidecars[0]!.keys.consents(browser);
    expect(await raw.hlen(key)).toBe(3);
    expect(await pexpiretime(key)).toBe(now + 8 * HOUR);
    // Each approval was listed when given (one evicted since names nothing: dropped when the index is read).
    const index = sidecars[0]!.keys.subjectGrants(subjectDigest('idp-user-1'));
    expect(await raw.zcard(index)).toBe(8);
    expect(await pexpiretime(index)).toBe(now + 8 * HOUR);
  });

  it("the person's index expires with its longest-lived member, the approval given again counted at its new expiry", async () => {
    const store = sidecars[0]!;
    const now = Date.now();
    const index = store.keys.subjectGrants(subjectDigest('idp-user-1'));
    await store.putConsent(browser, approval('c-x', now + 3 * HOUR), now, 20);
    await store.putConsent(browser, approval('c-y', now + HOUR), now, 20);
    expect(await pexpiretime(index)).toBe(now + 3 * HOUR);
    await store.putConsent(browser, approval('c-x', now + 2 * HOUR), now, 20);
    expect(await pexpiretime(index)).toBe(now + 2 * HOUR);
    expect(await pexpiretime(store.keys.consents(browser))).toBe(now + 2 * HOUR);
  });
});
