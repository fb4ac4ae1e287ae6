// RedisTokenStore held to the store contract (test/integration/store-contract.ts) against a real Redis,
// plus the raw key layout of docs/storage.md as an operator sees it with redis-cli.

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { ManualClock } from '../../src/model/clock.ts';
import { decideToken, generateToken, hashToken } from '../../src/model/credentials.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import { deleteUnder, keysUnder, openRedisStore, rawRedis, uniquePrefix } from '../support/redis.ts';
import { promisesOf } from '../support/promises.ts';
import { handleDigest, handleOwner } from '../../src/proxy/handles.ts';
import { cachedRawAccess, redisRawAccess, runStoreContract } from './store-contract.ts';

const HOUR = 3_600_000;

runStoreContract('RedisTokenStore', async () => {
  const prefix = uniquePrefix('store-contract');
  const store = await openRedisStore(prefix);
  const raw = await rawRedis();
  return {
    store,
    ...redisRawAccess(raw),
    keys: store.keys,
    cleanup: async () => {
      try {
        await deleteUnder(raw, prefix);
      } finally {
        await store.close();
        await raw.quit();
      }
    },
  };
});

// With the lookup cache on, a hand edit is seen once its invalidation has arrived: the harness's
// edit waits for that (settled), as an admin's next request would come after it.
runStoreContract('RedisTokenStore with the lookup cache (tracking)', async () => {
  const prefix = uniquePrefix('store-contract-cache');
  const store = await openRedisStore(prefix, { lookupCache: { maxEntries: 1000, pingIntervalMs: 1000, connectTimeoutMs: 5000 } });
  const raw = await rawRedis();
  const cache = store.lookupCache!;
  return {
    store,
    ...cachedRawAccess(raw, cache),
    keys: store.keys,
    cleanup: async () => {
      try {
        // Live to the end, unless the test itself closed the store.
        if (store.client.status !== 'end') expect(cache.live).toBe(true);
        await deleteUnder(raw, prefix);
      } finally {
        await store.close();
        await raw.quit();
      }
    },
  };
});

describe('RedisTokenStore raw key layout', () => {
  let prefix: string;
  let store: RedisTokenStore;
  let raw: Redis;
  let clock: ManualClock;

  beforeEach(async () => {
    prefix = uniquePrefix('store-layout');
    store = await openRedisStore(prefix);
    raw = await rawRedis();
    clock = new ManualClock(Date.now());
  });
  afterEach(async () => {
    try {
      await deleteUnder(raw, prefix);
      expect(await keysUnder(raw, prefix)).toEqual([]);
    } finally {
      await store.close();
      await raw.quit();
    }
  });

  it('a user-grade token is one hash at <prefix>userBearerTokens:<hash> expiring at expiresAt', async () => {
    const tokenHash = hashToken(generateToken());
    const expiresAt = Date.now() + HOUR;
    await store.putUserToken({ tokenHash, subject: 'alice', issuer: 'https://idp.example.com/', createdAt: clock.now(), expiresAt });
    const key = `${prefix}userBearerTokens:${tokenHash}`;
    // Besides it, only its subject's index (a sorted set in the {oauth} slot, expiring with its longest member).
    const index = `${prefix}{oauth}:subjectGrants:${hashToken('alice')}`;
    expect((await keysUnder(raw, prefix)).sort()).toEqual([key, index].sort());
    expect(await raw.zrange(index, 0, -1, 'WITHSCORES')).toEqual([`u:${tokenHash}`, String(expiresAt)]);
    expect(await raw.call('PEXPIRETIME', index)).toBe(expiresAt);
    expect(await raw.type(key)).toBe('hash');
    expect(await raw.hget(key, 'revoked')).toBe('false');
    expect(await raw.hget(key, 'expiresAt')).toBe(String(expiresAt));
    const pttl = await raw.pttl(key);
    expect(pttl).toBeGreaterThan(0);
    expect(Math.abs(Date.now() + pttl - expiresAt)).toBeLessThan(5000);
    // The documented admin revocation, literally.
    await raw.hset(key, 'revoked', 'true');
    expect(decideToken(tokenHash, await store.lookupToken(tokenHash), clock.now())).toEqual({ ok: false, reason: 'revoked' });
  });

  it('a one-time value is one string at <prefix>{oauth}:usedOnce:<sha256 of the name>, expiring exactly at expiresAt', async () => {
    const expiresAt = Date.now() + HOUR;
    expect(await store.useOnce('client_assertion:mcp_a:jti-1', expiresAt)).toBe(true);
    const key = `${prefix}{oauth}:usedOnce:${hashToken('client_assertion:mcp_a:jti-1')}`;
    expect(await keysUnder(raw, prefix)).toEqual([key]);
    expect(await raw.call('PEXPIRETIME', key)).toBe(expiresAt);
    // Once the key is gone (Redis drops it at expiresAt), the name is usable again.
    await raw.del(key);
    expect(await store.useOnce('client_assertion:mcp_a:jti-1', expiresAt)).toBe(true);
  });

  it('a session handle is one hash at <prefix>{oauth}:mcpHandles:session:<sha256>, its owner indexed in sorted sets; its life slides with each use by its owner only', async () => {
    const owner = handleOwner({ kind: 'oauth', subject: 'alice', clientId: 'mcp_a' });
    const stranger = handleOwner({ kind: 'oauth', subject: 'bob', clientId: 'mcp_b' });
    const session = handleDigest('a-session-id');
    expect(await store.bindHandle('session', session, owner, clock.now(), 60_000, 10)).toBe('bound');
    const key = `${prefix}{oauth}:mcpHandles:session:${session}`;
    const byClient = `${prefix}{oauth}:mcpHandlesByClient:mcp_a`;
    const bySubject = `${prefix}{oauth}:mcpHandlesBySubject:${hashToken('alice')}`;
    expect(await keysUnder(raw, prefix)).toEqual([key, byClient, bySubject].sort());
    expect(await raw.type(key)).toBe('hash');
    expect(await raw.zscore(byClient, `session:${session}`)).toBe(String(clock.now() + 60_000));
    const first = await raw.pttl(key);
    expect(first).toBeGreaterThan(0);
    expect(first).toBeLessThanOrEqual(60_000);
    // Used by its owner with a longer lifetime, past a sixteenth of it: extended, the indexes too.
    clock.advance(60_000);
    expect(await store.useHandle('session', session, owner, clock.now(), 600_000, 10)).toBe('owned');
    expect(await raw.pttl(key)).toBeGreaterThan(60_000);
    expect(await raw.pttl(byClient)).toBeGreaterThan(60_000);
    expect(await raw.pttl(bySubject)).toBeGreaterThan(60_000);
    // Presented by another principal: refused, and its life is not extended by that.
    expect(await store.useHandle('session', session, stranger, clock.now(), 6_000_000, 10)).toBe('foreign');
    expect(await raw.pttl(key)).toBeLessThanOrEqual(600_000);
    expect(await keysUnder(raw, prefix)).toEqual([key, byClient, bySubject].sort());
  });

  it('a record whose expiresAt field is missing (HDEL) is rejected as corrupt', async () => {
    const tokenHash = hashToken(generateToken());
    await store.putUserToken({ tokenHash, subject: 'alice', issuer: 'iss', createdAt: clock.now(), expiresAt: clock.now() + HOUR });
    await raw.hdel(`${prefix}userBearerTokens:${tokenHash}`, 'expiresAt');
    expect(decideToken(tokenHash, await store.lookupToken(tokenHash), clock.now())).toEqual({ ok: false, reason: 'corrupt' });
    await raw.hdel(`${prefix}userBearerTokens:${tokenHash}`, 'revoked');
    expect(decideToken(tokenHash, await store.lookupToken(tokenHash), clock.now())).toEqual({ ok: false, reason: 'corrupt' });
  });

  it('every OAuth key carries {oauth} or a bucket tag {oauth:<2 hex>}; access tokens expire in Redis; no raw token or secret is stored anywhere', async () => {
    const rawSecrets: string[] = [];
    const hashes: string[] = [];
    const fresh = () => {
      const t = generateToken();
      rawSecrets.push(t);
      hashes.push(hashToken(t));
      return hashToken(t);
    };
    await store.putUserToken({
      tokenHash: fresh(),
      subject: 'alice',
      issuer: 'iss',
      createdAt: clock.now(),
      expiresAt: clock.now() + HOUR,
    });
    for (const clientId of ['c-one', 'c-two']) {
      await store.createClient({
        clientId,
        clientSecretHash: fresh(),
        redirectUris: ['https://app.example.com/cb'],
        grantTypes: ['client_credentials', 'refresh_token'],
        profile: 'default',
        tokenEndpointAuthMethod: 'client_secret_basic',
        source: 'admin',
        createdAt: clock.now(),
      });
      const accessHash = fresh();
      expect(
        await store.createAccessToken({ tokenHash: accessHash, clientId, createdAt: clock.now(), expiresAt: clock.now() + HOUR }),
      ).toBe('ok');
      const accessKey = store.keys.accessToken(accessHash);
      const pttl = await raw.pttl(accessKey);
      expect(pttl).toBeGreaterThan(0);
      expect(pttl).toBeLessThanOrEqual(HOUR);
      expect(
        await store.issueTokens(
          { tokenHash: fresh(), clientId, familyId: `fam-${clientId}`, createdAt: clock.now(), expiresAt: clock.now() + HOUR },
          { tokenHash: fresh(), clientId, familyId: `fam-${clientId}`, createdAt: clock.now(), expiresAt: clock.now() + 24 * HOUR },
        ),
      ).toBe('ok');
    }
    await store.seedProfiles([
      {
        name: 'default',
        description: 'd',
        accessTokenLifetimeSeconds: 3600,
        refreshTokenLifetimeSeconds: 0,
        grantTypes: ['client_credentials'],
        createdAt: clock.now(),
      },
    ]);
    expect(await store.deleteClient('c-two', clock.now())).toMatchObject({ accessTokensRevoked: 2, refreshTokensRevoked: 1 });

    const keys = await keysUnder(raw, prefix);
    const userKeys = keys.filter((k) => k.startsWith(`${prefix}userBearerTokens:`));
    expect(userKeys).toHaveLength(1);
    const oauthKeys = keys.filter((k) => !userKeys.includes(k));
    expect(oauthKeys.length).toBeGreaterThanOrEqual(12);
    for (const k of oauthKeys) expect(k).toMatch(/\{oauth(:[0-9a-f]{2})?\}/);
    for (const k of userKeys) expect(k).not.toMatch(/\{oauth/);

    // Everything an operator could read under the prefix, as text.
    const dump: string[] = [];
    for (const k of keys) {
      dump.push(k);
      const type = await raw.type(k);
      if (type === 'hash') for (const [f, v] of Object.entries(await raw.hgetall(k))) dump.push(f, v);
      else if (type === 'set') dump.push(...(await raw.smembers(k)));
      else if (type === 'zset') dump.push(...(await raw.zrange(k, 0, -1)));
      else throw new Error(`unexpected key type ${type} at ${k}`);
    }
    const text = dump.join('\n');
    for (const secret of rawSecrets) expect(text).not.toContain(secret);
    // Sanity: the dump really holds the stored hashes (so the check above looked at the data).
    for (const h of hashes) expect(text).toContain(h);
    // Timestamps are integer epoch ms everywhere.
    for (const k of keys) {
      if ((await raw.type(k)) !== 'hash') continue;
      const fields = await raw.hgetall(k);
      for (const f of ['createdAt', 'expiresAt', 'revokedAt', 'rotatedAt'])
        if (fields[f] !== undefined) expect(fields[f]).toMatch(/^[0-9]+$/);
    }
  });
});

describe('RedisTokenStore failure boundary on the hot path', () => {
  it('lookupToken is handed to the Redis operations as it is: no wrapper promise per call', async () => {
    const prefix = uniquePrefix('store-hot-path');
    const store = await openRedisStore(prefix);
    // The operations behind the boundary, reached the way the decorator itself reaches them.
    const inner = (store as unknown as { inner: RedisTokenStore }).inner;
    const tokenHash = hashToken(generateToken());
    try {
      await store.lookupToken(tokenHash);
      await inner.lookupToken(tokenHash);
      const [outer, bare] = [await promisesOf(() => store.lookupToken(tokenHash)), await promisesOf(() => inner.lookupToken(tokenHash))];
      expect(outer).toBe(bare);
      // Any other operation goes through the boundary (one async wrapper around it).
      expect(await promisesOf(() => store.getClient('nobody'))).toBeGreaterThan(await promisesOf(() => inner.getClient('nobody')));
    } finally {
      await store.close();
    }
  });
});
