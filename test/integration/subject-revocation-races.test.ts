// The person index's transitions (src/store/subjects/transitions.ts) on both engines: a member listed
// (the index expires with its longest-lived member), and a subject's revocation batch against what
// changes under it: a member changed between the batch's read and its plan is decided again (the
// change made exactly there), and on one real Redis, 8 sidecars revoking one person while tokens keep
// being issued for them revoke each token once and lose none from the index.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { ManualClock } from '../../src/model/clock.ts';
import { decideToken, generateToken, hashToken } from '../../src/model/credentials.ts';
import { keyLayout, type KeyLayout } from '../../src/store/key-layout.ts';
import { readOne, type Command, type Keyspace, type Plan, type Reply } from '../../src/store/keyspace.ts';
import { MemoryCore } from '../../src/store/memory-core.ts';
import { RedisKeyspace } from '../../src/store/redis-keyspace.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import { consentKey, consentMember, consentValue, subjectDigest } from '../../src/store/records.ts';
import { indexSubject, revokeSubjectBatch } from '../../src/store/subjects/transitions.ts';
import type { ConsentRecord } from '../../src/store/types.ts';
import { deleteUnder, openRedisStores, rawRedis, uniquePrefix } from '../support/redis.ts';
import { credentialsClient } from '../support/clients.ts';

const ISS = 'https://idp.example.com/';
const HOUR = 3_600_000;

let raw: Redis;
let prefix: string;

beforeAll(async () => {
  raw = await rawRedis();
  prefix = uniquePrefix('subject-revocation');
});
afterAll(async () => {
  try {
    await deleteUnder(raw, prefix);
  } finally {
    await raw.quit();
  }
});

/** A keyspace that makes `change` once, after the first read and before the first plan is applied. */
function changedAfterRead(inner: Keyspace, change: (ks: Keyspace) => Promise<void>): Keyspace & { applied: number } {
  let pending = false;
  let changed = false;
  const wrapped = {
    applied: 0,
    async read(commands: readonly Command[]): Promise<Reply[]> {
      const replies = await inner.read(commands);
      if (!changed) pending = true;
      return replies;
    },
    async apply(plan: Plan): Promise<Reply[] | null> {
      if (pending && !changed) {
        changed = true;
        await change(inner);
      }
      wrapped.applied++;
      return inner.apply(plan);
    },
  };
  return wrapped;
}

const set = (ks: Keyspace, command: Command) => ks.apply({ guards: [], steps: [command] });

let run = 0;
const engines: Array<[string, () => { keyspace: Keyspace; keys: KeyLayout }]> = [
  ['memory', () => ({ keyspace: new MemoryCore({ clock: new ManualClock(Date.now()) }).keyspace, keys: keyLayout('mcpauth:') })],
  ['redis', () => ({ keyspace: new RedisKeyspace(raw), keys: keyLayout(`${prefix}${++run}:`) })],
];

describe.each(engines)("a subject's index (%s)", (_, open) => {
  it('expires with its longest-lived member: set when it is new, moved later, never earlier', async () => {
    // Read before the engine's clock: no TTL below can come out longer than the times given.
    const now = Date.now();
    const { keyspace, keys } = open();
    const index = keys.subjectGrants(subjectDigest('alice'));
    const ttl = async () => Number(await readOne(keyspace, ['PTTL', index]));
    await indexSubject(keyspace, index, 'u:two-hours', now + 2 * HOUR);
    expect(await ttl()).toBeGreaterThan(HOUR);
    await indexSubject(keyspace, index, 'u:one-hour', now + HOUR);
    expect(await ttl()).toBeGreaterThan(HOUR);
    expect(await ttl()).toBeLessThanOrEqual(2 * HOUR);
    await indexSubject(keyspace, index, 'u:three-hours', now + 3 * HOUR);
    expect(await ttl()).toBeGreaterThan(2 * HOUR);
    expect(await readOne(keyspace, ['ZCARD', index])).toBe(3);
    expect(await readOne(keyspace, ['ZSCORE', index, 'u:one-hour'])).toBe(String(now + HOUR));
  });
});

describe.each(engines)('a revocation batch whose member changes between its read and its plan (%s)', (_, open) => {
  /** An access token of alice's, listed in her index: its key, member and index. */
  async function aliceToken(keyspace: Keyspace, keys: KeyLayout, now: number) {
    const hash = hashToken(generateToken());
    const key = keys.accessToken(hash);
    const index = keys.subjectGrants(subjectDigest('alice'));
    await set(keyspace, ['HSET', key, 'subject', 'alice', 'issuer', ISS, 'clientId', 'c-1', 'expiresAt', now + HOUR]);
    await set(keyspace, ['PEXPIREAT', key, now + HOUR]);
    await indexSubject(keyspace, index, `a:${hash}`, now + HOUR);
    return { hash, key, index, member: `a:${hash}` };
  }

  it('a token revoked meanwhile is decided again: not counted, not announced, its first revocation time kept', async () => {
    const { keyspace, keys } = open();
    const now = Date.now();
    const t = await aliceToken(keyspace, keys, now);
    const ks = changedAfterRead(keyspace, (inner) => set(inner, ['HSET', t.key, 'revokedAt', now - 5]).then(() => undefined));
    const done = await revokeSubjectBatch(ks, keys, t.index, 'alice', undefined, now, [t.member]);
    expect(done).toEqual({ accessTokensRevoked: 0, refreshTokensRevoked: 0, consentsForgotten: 0, tokenHashes: [], familyIds: [] });
    expect(await readOne(keyspace, ['HGET', t.key, 'revokedAt'])).toBe(String(now - 5));
    expect(await readOne(keyspace, ['ZSCORE', t.index, t.member])).toBeNull();
    expect(ks.applied).toBe(2);
  });

  it('a token whose record went meanwhile is decided again: no record is written back, its member leaves', async () => {
    const { keyspace, keys } = open();
    const now = Date.now();
    const t = await aliceToken(keyspace, keys, now);
    const ks = changedAfterRead(keyspace, (inner) => set(inner, ['DEL', t.key]).then(() => undefined));
    const done = await revokeSubjectBatch(ks, keys, t.index, 'alice', undefined, now, [t.member]);
    expect(done.accessTokensRevoked).toBe(0);
    expect(await readOne(keyspace, ['EXISTS', t.key])).toBe(0);
    expect(await readOne(keyspace, ['ZSCORE', t.index, t.member])).toBeNull();
  });

  it('an approval given again meanwhile (read as gone) is decided again: forgotten, never left unlisted', async () => {
    const { keyspace, keys } = open();
    const now = Date.now();
    const browser = hashToken('browser');
    const approval: ConsentRecord = {
      clientId: 'c-1',
      clientCreatedAt: 1,
      redirectUri: 'http://127.0.0.1:9999/cb',
      issuer: ISS,
      subject: 'alice',
      approvedAt: now,
      expiresAt: now + HOUR,
    };
    const field = consentKey(approval);
    const member = consentMember(browser, field);
    const index = keys.subjectGrants(subjectDigest('alice'));
    // Listed, its approval gone from the browser's hash (evicted): the batch reads it as not held.
    await indexSubject(keyspace, index, member, now + HOUR);
    const ks = changedAfterRead(keyspace, async (inner) => {
      await set(inner, ['HSET', keys.consents(browser), field, consentValue(approval)]);
      await indexSubject(inner, index, member, now + HOUR);
    });
    const done = await revokeSubjectBatch(ks, keys, index, 'alice', undefined, now, [member]);
    expect(done.consentsForgotten).toBe(1);
    expect(await readOne(keyspace, ['HGET', keys.consents(browser), field])).toBeNull();
    expect(await readOne(keyspace, ['ZSCORE', index, member])).toBeNull();
  });

  it("another issuer's token and an unknown member stay listed, and nothing is written for them", async () => {
    const { keyspace, keys } = open();
    const now = Date.now();
    const t = await aliceToken(keyspace, keys, now);
    await indexSubject(keyspace, t.index, 'x:unknown', now + HOUR);
    const ks = changedAfterRead(keyspace, async () => undefined);
    const done = await revokeSubjectBatch(ks, keys, t.index, 'alice', 'https://other-idp.example.com/', now, [t.member, 'x:unknown']);
    expect(done.accessTokensRevoked).toBe(0);
    expect(ks.applied).toBe(0);
    expect(await readOne(keyspace, ['ZCARD', t.index])).toBe(2);
    // An empty issuer names none: every issuer's token is revoked.
    expect((await revokeSubjectBatch(keyspace, keys, t.index, 'alice', '', now, [t.member])).tokenHashes).toEqual([t.hash]);
  });
});

describe('8 sidecars revoking one person while tokens keep being issued for them (real Redis)', () => {
  const SIDECARS = 8;
  let sidecars: RedisTokenStore[];
  let runPrefix: string;

  beforeAll(async () => {
    runPrefix = `${prefix}race:`;
    sidecars = await openRedisStores(runPrefix, SIDECARS);
  });
  afterAll(async () => {
    await Promise.all(sidecars.map((s) => s.close()));
  });

  it('each token is revoked and counted once; one issued during is revoked or still listed; none is live once a last revocation ran', async () => {
    const clock = new ManualClock(Date.now());
    const now = clock.now();
    const user = { subject: 'leaver', issuer: ISS };
    const store = sidecars[0]!;
    await store.createClient(credentialsClient('c-race', now));
    const issue = async (s: RedisTokenStore, kind: 'access' | 'user'): Promise<string> => {
      const tokenHash = hashToken(generateToken());
      if (kind === 'access')
        expect(await s.createAccessToken({ tokenHash, clientId: 'c-race', user, createdAt: now, expiresAt: now + HOUR })).toBe('ok');
      else await s.putUserToken({ tokenHash, ...user, createdAt: now, expiresAt: now + HOUR });
      return tokenHash;
    };
    const before = await Promise.all(
      Array.from({ length: 300 }, (_, i) => issue(sidecars[i % SIDECARS]!, i % 3 === 0 ? 'user' : 'access')),
    );
    const [results, during] = await Promise.all([
      Promise.all(sidecars.map((s) => s.revokeSubject('leaver', undefined, now, 7))),
      Promise.all(Array.from({ length: 120 }, (_, i) => issue(sidecars[i % SIDECARS]!, i % 3 === 0 ? 'user' : 'access'))),
    ]);
    const counted = (r: (typeof results)[number]) => r.accessTokensRevoked + r.userTokensRevoked;
    for (const hash of before) expect(decideToken(hash, await store.lookupToken(hash), now)).toEqual({ ok: false, reason: 'revoked' });
    // What is still live is listed: the next revocation finds it.
    const live: string[] = [];
    for (const hash of during) if (decideToken(hash, await store.lookupToken(hash), now).ok) live.push(hash);
    expect((await store.listSubjectTokens('leaver', now)).map((t) => t.tokenHash).sort()).toEqual(live.sort());
    const last = await store.revokeSubject('leaver', undefined, now, 7);
    expect(results.reduce((sum, r) => sum + counted(r), 0)).toBe(before.length + during.length - live.length);
    expect(counted(last)).toBe(live.length);
    for (const hash of [...before, ...during]) expect(decideToken(hash, await store.lookupToken(hash), now).ok).toBe(false);
    expect(await store.listSubjectTokens('leaver', now)).toEqual([]);
  }, 60_000);
});
