// The opt-in token-lookup cache (redis.lookupCache: tracking, src/store/redis-lookup-cache.ts) on a
// private redis-server started for this file: its INFO commandstats count only this file's reads, its
// connections can be killed by id, and it may be flushed. Every wait is on an event or a reply, never
// on time.

import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { decideToken, generateToken, hashToken } from '../../src/model/credentials.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import type { LookupCacheOptions, TrackedLookupCache } from '../../src/store/redis-lookup-cache.ts';
import { startRedisServer, type RedisServer } from '../support/redis-server.ts';
import { openRedisStore, rawRedis, uniquePrefix } from '../support/redis.ts';
import { initializeStatus } from '../support/http.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { addressOf, startFaultProxy, type FaultProxy } from '../support/fault-proxy.ts';
import { StoreUnavailableError } from '../../src/store/shared.ts';
import { readable } from '../support/records.ts';

const HOUR = 3_600_000;

let redis: RedisServer;
let raw: Redis;

beforeAll(async () => {
  redis = await startRedisServer();
  raw = await rawRedis(redis.url);
});
afterAll(async () => {
  await raw?.quit();
  await redis?.stop();
});

/** HGETALL calls the server has executed so far (all of this file's clients). */
async function hgetallCalls(): Promise<number> {
  const info = await raw.info('commandstats');
  const m = /cmdstat_hgetall:calls=(\d+)/.exec(info);
  return m ? Number(m[1]) : 0;
}

function options(overrides: Partial<LookupCacheOptions> = {}): LookupCacheOptions {
  return { maxEntries: 1000, pingIntervalMs: 1000, connectTimeoutMs: 5000, ...overrides };
}

async function putUser(store: RedisTokenStore, now = Date.now()): Promise<{ raw: string; tokenHash: string }> {
  const token = generateToken();
  const tokenHash = hashToken(token);
  await store.putUserToken({ tokenHash, subject: 'user-1', issuer: 'https://idp.example.com/', createdAt: now, expiresAt: now + HOUR });
  return { raw: token, tokenHash };
}

/** Resolves with the next `event` of the cache (listening starts before `act` runs). */
async function after<T>(cache: TrackedLookupCache, event: 'live' | 'dropped' | 'invalidated', act: () => Promise<T>): Promise<unknown[]> {
  const seen = once(cache, event);
  await act();
  return seen;
}

describe('the lookup cache off (redis.lookupCache: off)', () => {
  // First in the file: no cache connection of an earlier test can still be closing.
  it('opens no connection of its own and reads Redis on every lookup', async () => {
    const stack = await startStack({
      redisUrl: redis.url,
      prefix: uniquePrefix('lookup-cache-off'),
      config: { redis: { lookupCache: 'off' } },
    });
    try {
      expect((stack.store as RedisTokenStore).lookupCache).toBeUndefined();
      expect(await raw.client('LIST')).not.toContain('name=mcpauth-lookup');
      const { raw: token } = await putUser(stack.store as RedisTokenStore, stack.clock.now());
      const before = await hgetallCalls();
      expect(await initializeStatus(stack, token)).toBe(200);
      expect(await initializeStatus(stack, token)).toBe(200);
      expect(await hgetallCalls()).toBe(before + 4);
      expect(await (await fetch(`${stack.adminUrl}/metrics`)).text()).not.toContain('mcp_auth_lookup_cache_lookups_total{');
    } finally {
      await stack.close();
    }
  });
});

describe('the lookup cache on the store', () => {
  let store: RedisTokenStore;
  let cache: TrackedLookupCache;

  beforeEach(async () => {
    store = await openRedisStore(uniquePrefix('lookup-cache'), { url: redis.url, lookupCache: options() });
    cache = store.lookupCache!;
  });
  afterEach(async () => {
    await store.close();
  });

  it('is live once opened, on two named connections of its own', async () => {
    expect(cache.live).toBe(true);
    const clients = await raw.client('LIST');
    const { data, subscriber } = cache.clientIds;
    expect(clients).toMatch(new RegExp(`id=${data} .*name=mcpauth-lookup-cache `));
    expect(clients).toMatch(new RegExp(`id=${subscriber} .*name=mcpauth-lookup-invalidations .*sub=1 `));
    expect(clients).toMatch(new RegExp(`id=${data} .*flags=t`)); // tracking on
  });

  it('a found record is read from Redis once, then served from the cache (no second HGETALL)', async () => {
    const { tokenHash } = await putUser(store);
    const before = await hgetallCalls();
    const first = await store.lookupToken(tokenHash);
    const second = await store.lookupToken(tokenHash);
    expect(await hgetallCalls()).toBe(before + 2); // the first lookup's two reads only
    expect(second).toEqual(first);
    expect(decideToken(tokenHash, second, Date.now()).ok).toBe(true);
    expect(cache.stats).toMatchObject({ hits: 1, misses: 1, bypasses: 0 });
  });

  it('a record is parsed once, when the cache is filled: every hit hands out the same frozen record, a corrupt one included', async () => {
    const { tokenHash } = await putUser(store);
    const first = await store.lookupToken(tokenHash);
    expect(first.user).toMatchObject({ subject: 'user-1', revoked: false });
    expect(Object.isFrozen(first.user)).toBe(true);
    expect((await store.lookupToken(tokenHash)).user).toBe(first.user);
    await after(cache, 'invalidated', () => raw.hset(`${store.keys.userToken(tokenHash)}`, 'groups', 'not a list'));
    const corrupt = await store.lookupToken(tokenHash);
    expect(corrupt).toEqual({ user: 'corrupt', oauth: null });
    expect(await store.lookupToken(tokenHash)).toEqual({ user: 'corrupt', oauth: null });
    expect(cache.stats).toMatchObject({ hits: 2, misses: 2 });
    expect(decideToken(tokenHash, corrupt, Date.now())).toEqual({ ok: false, reason: 'corrupt' });
  });

  it('a fill that Redis answers with an error (a token key of another type) fails the lookup as a store failure, and the cache stays live', async () => {
    const tokenHash = hashToken(generateToken());
    await raw.set(store.keys.userToken(tokenHash), 'not a hash');
    const failed = await store.lookupToken(tokenHash).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failed).toBeInstanceOf(StoreUnavailableError);
    expect((failed as Error).message).toMatch(/WRONGTYPE/);
    // An error reply says nothing of the connection: no drop, and the next lookups fill and hit.
    expect(cache.live).toBe(true);
    expect(cache.stats.drops).toBe(0);
    const { tokenHash: good } = await putUser(store);
    await store.lookupToken(good);
    await store.lookupToken(good);
    expect(cache.stats).toMatchObject({ hits: 1, misses: 2 });
  });

  it('misses are never cached: an unknown token is read every time, and found once it exists', async () => {
    const tokenHash = hashToken(generateToken());
    const before = await hgetallCalls();
    expect(await store.lookupToken(tokenHash)).toEqual({ user: null, oauth: null });
    expect(await store.lookupToken(tokenHash)).toEqual({ user: null, oauth: null });
    expect(await hgetallCalls()).toBe(before + 4);
    expect(cache.size).toBe(0);
    const now = Date.now();
    await store.putUserToken({ tokenHash, subject: 'late', issuer: 'i', createdAt: now, expiresAt: now + HOUR });
    expect(readable((await store.lookupToken(tokenHash)).user)?.subject).toBe('late');
    expect(cache.stats.hits).toBe(0);
  });

  it('every use of a cached record is still decided: expiry needs no invalidation', async () => {
    const now = Date.now();
    const { tokenHash } = await putUser(store, now);
    await store.lookupToken(tokenHash);
    const held = await store.lookupToken(tokenHash);
    expect(cache.stats.hits).toBe(1);
    expect(decideToken(tokenHash, held, now + HOUR - 1).ok).toBe(true);
    expect(decideToken(tokenHash, held, now + HOUR)).toEqual({ ok: false, reason: 'expired' });
  });

  it.each([
    ['HSET revoked true', (r: Redis, key: string) => r.hset(key, 'revoked', 'true')],
    ['DEL', (r: Redis, key: string) => r.del(key)],
    ['PEXPIREAT in the past (deleted at once)', (r: Redis, key: string) => r.pexpireat(key, 1)],
    ['HDEL of a field', (r: Redis, key: string) => r.hdel(key, 'expiresAt')],
  ])('a hand edit (%s) by another client is seen once its invalidation arrives', async (_name, edit) => {
    const { tokenHash } = await putUser(store);
    const key = store.keys.userToken(tokenHash);
    await store.lookupToken(tokenHash);
    expect(cache.size).toBe(1);
    const [hit] = await after(cache, 'invalidated', () => edit(raw, key));
    expect(hit).toBe(1);
    expect(cache.size).toBe(0);
    expect(decideToken(tokenHash, await store.lookupToken(tokenHash), Date.now()).ok).toBe(false);
    expect(cache.stats.hits).toBe(0);
  });

  it('a record whose key Redis expires (its TTL runs out) leaves the cache when Redis deletes it', async () => {
    const { tokenHash } = await putUser(store);
    const key = store.keys.userToken(tokenHash);
    await store.lookupToken(tokenHash);
    await after(cache, 'invalidated', () => raw.pexpire(key, 1000)); // the PEXPIRE itself is a write
    const held = await store.lookupToken(tokenHash);
    // Refilled while the key still lived (on a loaded machine it may already be gone: nothing to wait for).
    if (held.user !== null) {
      expect(cache.size).toBe(1);
      const [hit] = await once(cache, 'invalidated'); // Redis's own expiry cycle deletes the key
      expect(hit).toBe(1);
    }
    expect(cache.size).toBe(0);
    expect(await store.lookupToken(tokenHash)).toEqual({ user: null, oauth: null });
  });

  it('a copy is served no longer than its key lives: a TTL set by hand bounds it without waiting for Redis to delete the key', async () => {
    // Redis deletes an expired key (and only then sends its invalidation) when its expiry cycle samples
    // it or a client touches it: with many keys, seconds to minutes later. The cache's clock is moved
    // instead of waiting; Redis still holds the key, so a read after the bound is seen as an HGETALL.
    let now = 0;
    const timed = await openRedisStore(uniquePrefix('lookup-cache-ttl'), { url: redis.url, lookupCache: options({ now: () => now }) });
    try {
      const timedCache = timed.lookupCache!;
      const { tokenHash } = await putUser(timed);
      const key = timed.keys.userToken(tokenHash);
      await raw.pexpire(key, 30_000); // by hand; the record's expiresAt is an hour out
      await timed.lookupToken(tokenHash);
      now += 29_000;
      const before = await hgetallCalls();
      expect(readable((await timed.lookupToken(tokenHash)).user)?.subject).toBe('user-1');
      expect(await hgetallCalls()).toBe(before); // within the TTL: the copy
      now += 1_001;
      expect(readable((await timed.lookupToken(tokenHash)).user)?.subject).toBe('user-1');
      expect(await hgetallCalls()).toBe(before + 2); // past it: Redis again (where the key would be gone)
      expect(timedCache.stats).toMatchObject({ hits: 1, misses: 2 });
    } finally {
      await timed.close();
    }
  });

  it('the fill race: an invalidation that arrives while a lookup is in flight keeps its reply out of the cache', async () => {
    const racing = await openRedisStore(uniquePrefix('lookup-cache-race'), {
      url: redis.url,
      lookupCache: options({
        beforeFill: async (hash) => {
          // Between the read's reply and its use: an admin revokes the token, and the invalidation arrives.
          const c = racing.lookupCache!;
          await after(c, 'invalidated', () => raw.hset(racing.keys.userToken(hash), 'revoked', 'true'));
        },
      }),
    });
    try {
      const { tokenHash } = await putUser(racing);
      const stale = await racing.lookupToken(tokenHash);
      expect(readable(stale.user)?.revoked).toBe(false); // read before the edit: this one request may pass
      expect(racing.lookupCache!.size).toBe(0);
      expect(decideToken(tokenHash, await racing.lookupToken(tokenHash), Date.now())).toEqual({ ok: false, reason: 'revoked' });
      expect(racing.lookupCache!.stats.hits).toBe(0);
    } finally {
      await racing.close();
    }
  });

  it('holds at most maxEntries records, the least recently used evicted first', async () => {
    const small = await openRedisStore(uniquePrefix('lookup-cache-small'), { url: redis.url, lookupCache: options({ maxEntries: 3 }) });
    try {
      const tokens = [];
      for (let i = 0; i < 5; i++) tokens.push((await putUser(small)).tokenHash);
      for (const t of tokens.slice(0, 3)) await small.lookupToken(t);
      await small.lookupToken(tokens[0]!); // most recently used now: tokens[1] is the oldest
      await small.lookupToken(tokens[3]!);
      await small.lookupToken(tokens[4]!);
      const c = small.lookupCache!;
      expect(c.size).toBe(3);
      const hitsBefore = c.stats.hits;
      await small.lookupToken(tokens[0]!);
      await small.lookupToken(tokens[4]!);
      expect(c.stats.hits).toBe(hitsBefore + 2);
      await small.lookupToken(tokens[1]!); // evicted: read again
      expect(c.stats.hits).toBe(hitsBefore + 2);
      expect(c.size).toBe(3);
    } finally {
      await small.close();
    }
  });

  it('FLUSHALL (a null invalidation) empties the cache', async () => {
    const { tokenHash } = await putUser(store);
    await store.lookupToken(tokenHash);
    const [reason] = await after(cache, 'dropped', () => raw.flushall());
    expect(reason).toBe('flush');
    expect(cache.size).toBe(0);
    expect(await store.lookupToken(tokenHash)).toEqual({ user: null, oauth: null });
  });

  it.each(['subscriber', 'data'] as const)(
    'CLIENT KILL of the %s connection: cache dropped, lookups bypass it until tracking is set up again, then hits resume',
    async (which) => {
      const { tokenHash } = await putUser(store);
      await store.lookupToken(tokenHash);
      expect(cache.size).toBe(1);
      const oldIds = cache.clientIds;
      const live = once(cache, 'live');
      const [reason] = await after(cache, 'dropped', () => raw.client('KILL', 'ID', String(oldIds[which])));
      expect(reason).toBe(which === 'data' ? 'data_connection_lost' : 'subscriber_lost');
      expect(cache.live).toBe(false);
      expect(cache.size).toBe(0);
      // Not live: straight to Redis (bypass), nothing cached.
      const bypassesBefore = cache.stats.bypasses;
      const before = await hgetallCalls();
      if (!cache.live) {
        await store.lookupToken(tokenHash);
        expect(cache.stats.bypasses).toBe(bypassesBefore + 1);
        expect(await hgetallCalls()).toBe(before + 2);
        expect(cache.size).toBe(0);
      }
      await live;
      expect(cache.clientIds[which]).not.toBe(oldIds[which]);
      // Live again, tracking redirected to the current subscriber: a fill, a hit, and a hand edit seen.
      await store.lookupToken(tokenHash);
      const hits = cache.stats.hits;
      await store.lookupToken(tokenHash);
      expect(cache.stats.hits).toBe(hits + 1);
      await after(cache, 'invalidated', () => raw.hset(store.keys.userToken(tokenHash), 'revoked', 'true'));
      expect(decideToken(tokenHash, await store.lookupToken(tokenHash), Date.now())).toEqual({ ok: false, reason: 'revoked' });
    },
  );

  it('revocations through the store are applied to its own cache before they resolve', async () => {
    const { tokenHash } = await putUser(store);
    const key = store.keys.userToken(tokenHash);
    await store.lookupToken(tokenHash);
    expect(cache.size).toBe(1);
    // Invalidations held back in the subscriber's socket: the revocation is written, but this process
    // has not heard of it yet. It must not report done before it has.
    const socket = cache.connections.subscriber.stream;
    socket.pause();
    const revoking = store.revokeUserToken(tokenHash);
    while ((await raw.hget(key, 'revoked')) !== 'true');
    socket.resume();
    expect(await revoking).toBe(true);
    expect(cache.size).toBe(0);
    expect(decideToken(tokenHash, await store.lookupToken(tokenHash), Date.now())).toEqual({ ok: false, reason: 'revoked' });
  });

  it('a hand write whose reply came before the lookup began is seen by it, however late its invalidation is read', async () => {
    const { tokenHash } = await putUser(store);
    await store.lookupToken(tokenHash);
    await store.lookupToken(tokenHash);
    expect(cache.stats.hits).toBe(1); // held
    // The invalidation held back in the subscriber's socket, as a busy or distant sidecar reads it
    // after the operator already has the write's reply (measured: up to ~0.4 ms after, on loopback).
    const socket = cache.connections.subscriber.stream;
    socket.pause();
    await raw.hset(store.keys.userToken(tokenHash), 'revoked', 'true');
    const lookup = store.lookupToken(tokenHash);
    // Nothing may answer while the invalidation is unread: wait for the barrier's PING to be queued
    // behind it on the subscriber's socket, then let the socket be read.
    let settled = false;
    void lookup.then(() => (settled = true));
    for (let i = 0; i < 20 && cache.stats.barriers === 0; i++) await new Promise((r) => setImmediate(r));
    expect(cache.stats.barriers).toBe(1);
    expect(settled).toBe(false);
    socket.resume();
    expect(decideToken(tokenHash, await lookup, Date.now())).toEqual({ ok: false, reason: 'revoked' });
  });

  it('SWAPDB (no invalidation is sent) is noticed before a held record is served: the cache is emptied', async () => {
    const { tokenHash } = await putUser(store);
    await store.lookupToken(tokenHash);
    await store.lookupToken(tokenHash);
    expect(cache.stats.hits).toBe(1); // held
    const db = 0; // the suite's private server: this file's stores use database 0
    const dropped = once(cache, 'dropped');
    await raw.swapdb(db, 9);
    try {
      // Database 0 is now database 9's contents (empty): the token is unknown, as a strict read says.
      expect(await store.lookupToken(tokenHash)).toEqual({ user: null, oauth: null });
      expect(await dropped).toEqual(['database_changed']);
      expect(cache.stats.hits).toBe(1);
    } finally {
      await raw.swapdb(db, 9);
    }
  });
});

describe('the lookup cache when Redis cannot be reached (through a fault proxy)', () => {
  let proxy: FaultProxy;
  let store: RedisTokenStore;
  let cache: TrackedLookupCache;

  async function open(pingIntervalMs: number): Promise<void> {
    proxy = await startFaultProxy(addressOf(redis.url));
    store = await openRedisStore(uniquePrefix('lookup-cache-faults'), {
      url: proxy.url('redis'),
      commandTimeoutMs: 200,
      lookupCache: options({ pingIntervalMs }),
    });
    cache = store.lookupCache!;
  }
  afterEach(async () => {
    await store?.close();
    await proxy?.close();
  });

  it('connections reset: the cache is dropped at once and a held token is not served (503, as strict), then live again', async () => {
    await open(60_000); // no PING comes to the rescue: the close itself must drop the cache
    const { tokenHash } = await putUser(store);
    await store.lookupToken(tokenHash);
    expect(cache.size).toBe(1);
    await after(cache, 'dropped', () => proxy.setMode('down'));
    expect(cache.live).toBe(false);
    await expect(store.lookupToken(tokenHash)).rejects.toBeInstanceOf(StoreUnavailableError);
    await after(cache, 'live', () => proxy.setMode('pass'));
    await store.lookupToken(tokenHash);
    const hits = cache.stats.hits;
    await store.lookupToken(tokenHash);
    expect(cache.stats.hits).toBe(hits + 1);
  });

  it('connections silent (no FIN, no RST): an unanswered PING drops the cache, then live again once Redis answers', async () => {
    await open(100);
    const { tokenHash } = await putUser(store);
    await store.lookupToken(tokenHash);
    expect(cache.size).toBe(1);
    const [reason] = await after(cache, 'dropped', () => proxy.setMode('blackhole'));
    expect(reason).toBe('ping_failed');
    expect(cache.live).toBe(false);
    expect(cache.size).toBe(0);
    await after(cache, 'live', () => proxy.setMode('pass'));
    expect((await store.lookupToken(tokenHash)).user).not.toBeNull();
  });
});

/** A TCP relay whose target can be switched: new connections go to the current target. */
async function startSwitch(port: number): Promise<{ url: string; target: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const state = { target: port };
  const server = createServer((client) => {
    const upstream = connect(state.target, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => {
        sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `redis://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get target() {
      return state.target;
    },
    set target(p: number) {
      state.target = p;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('the lookup cache when its connections reach two different servers (a failover)', () => {
  it('does not redirect tracking across servers: both connections start over and the cache is live on one server', async () => {
    const other = await startRedisServer();
    const otherRaw = await rawRedis(other.url);
    const relay = await startSwitch(redis.port);
    const store = await openRedisStore(uniquePrefix('lookup-cache-switch'), { url: relay.url, lookupCache: options() });
    try {
      const cache = store.lookupCache!;
      // The data connection moves to the other server; the subscriber stays where it was.
      relay.target = other.port;
      const live = once(cache, 'live');
      await after(cache, 'dropped', () => raw.client('KILL', 'ID', String(cache.clientIds.data)));
      await live;
      const onOther = await otherRaw.client('LIST');
      expect(onOther).toMatch(new RegExp(`id=${cache.clientIds.data} .*name=mcpauth-lookup-cache `));
      expect(onOther).toMatch(new RegExp(`id=${cache.clientIds.subscriber} .*name=mcpauth-lookup-invalidations `));
      // Tracking works there: a record read through the cache and edited by hand on that server.
      const tokenHash = hashToken(generateToken());
      const key = store.keys.userToken(tokenHash);
      const now = Date.now();
      await otherRaw.hset(key, {
        tokenHash,
        subject: 's',
        issuer: 'i',
        revoked: 'false',
        createdAt: String(now),
        expiresAt: String(now + HOUR),
      });
      await cache.lookup(tokenHash, () => Promise.reject(new Error('not live')));
      expect(cache.size).toBe(1);
      await after(cache, 'invalidated', () => otherRaw.hset(key, 'revoked', 'true'));
      expect(cache.size).toBe(0);
    } finally {
      await store.close();
      await relay.close();
      await otherRaw.quit();
      await other.stop();
    }
  });
});

describe('the lookup cache through the sidecar', () => {
  let stack: Stack;

  beforeEach(async () => {
    stack = await startStack({
      redisUrl: redis.url,
      prefix: uniquePrefix('lookup-cache-stack'),
      config: { redis: { lookupCache: 'tracking' } },
    });
  });
  afterEach(async () => {
    await stack.close();
  });

  const cacheOf = (s: Stack) => (s.store as RedisTokenStore).lookupCache!;

  it('a user-grade token revoked by hand (redis-cli HSET ... revoked true) gets 401 once the invalidation arrives', async () => {
    const cache = cacheOf(stack);
    const { raw: token, tokenHash } = await putUser(stack.store as RedisTokenStore, stack.clock.now());
    expect(await initializeStatus(stack, token)).toBe(200);
    expect(await initializeStatus(stack, token)).toBe(200);
    expect(cache.stats.hits).toBe(1);
    await after(cache, 'invalidated', () => raw.hset((stack.store as RedisTokenStore).keys.userToken(tokenHash), 'revoked', 'true'));
    expect(await initializeStatus(stack, token)).toBe(401);
  });

  it('revocation through the admin API answers 401 on the very next request', async () => {
    const { raw: token } = await putUser(stack.store as RedisTokenStore, stack.clock.now());
    expect(await initializeStatus(stack, token)).toBe(200);
    expect(await initializeStatus(stack, token)).toBe(200);
    expect(cacheOf(stack).stats.hits).toBe(1);
    expect((await stack.admin('revokeUserToken', { token })).status).toBe(200);
    expect(await initializeStatus(stack, token)).toBe(401);
  });

  it('POST /revoke (by the holder, by the master token) and deleteClient answer 401 on the very next request', async () => {
    const user = await putUser(stack.store as RedisTokenStore, stack.clock.now());
    const one = await stack.issueOAuthToken();
    const two = await stack.issueOAuthToken();
    for (const token of [user.raw, one.token, two.token]) {
      expect(await initializeStatus(stack, token)).toBe(200);
      expect(await initializeStatus(stack, token)).toBe(200);
    }
    expect(cacheOf(stack).stats.hits).toBe(3);
    const revoke = (token: string, headers: Record<string, string> = {}) =>
      fetch(`${stack.proxyUrl}/revoke`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body: new URLSearchParams({ token }),
      });
    expect((await revoke(user.raw)).status).toBe(200);
    expect(await initializeStatus(stack, user.raw)).toBe(401);
    expect((await revoke(one.token, { authorization: `Bearer ${stack.masterToken}` })).status).toBe(200);
    expect(await initializeStatus(stack, one.token)).toBe(401);
    expect((await stack.admin('deleteClient', { clientId: two.clientId })).status).toBe(200);
    expect(await initializeStatus(stack, two.token)).toBe(401);
  });

  it('an expired record is refused while held in the cache (the clock, not an invalidation, ends it)', async () => {
    const { raw: token } = await putUser(stack.store as RedisTokenStore, stack.clock.now());
    expect(await initializeStatus(stack, token)).toBe(200);
    stack.clock.advance(HOUR);
    expect(await initializeStatus(stack, token)).toBe(401);
    expect(cacheOf(stack).stats.hits).toBe(1);
  });

  it('GET /metrics reports lookups by result, barriers, invalidations, drops and whether the cache is live', async () => {
    const { raw: token, tokenHash } = await putUser(stack.store as RedisTokenStore, stack.clock.now());
    await initializeStatus(stack, token);
    await initializeStatus(stack, token);
    await after(cacheOf(stack), 'invalidated', () =>
      raw.hset((stack.store as RedisTokenStore).keys.userToken(tokenHash), 'revoked', 'true'),
    );
    const text = await (await fetch(`${stack.adminUrl}/metrics`)).text();
    expect(text).toContain('mcp_auth_lookup_cache_lookups_total{result="hit"} 1');
    expect(text).toContain('mcp_auth_lookup_cache_lookups_total{result="miss"} 1');
    expect(text).toContain('mcp_auth_lookup_cache_lookups_total{result="bypass"} 0');
    // The hit waited for one barrier; the miss read Redis itself.
    expect(text).toContain('mcp_auth_lookup_cache_barriers_total 1');
    expect(text).toContain('mcp_auth_lookup_cache_invalidations_total 1');
    expect(text).toContain('mcp_auth_lookup_cache_drops_total 0');
    expect(text).toContain('mcp_auth_lookup_cache_live 1');
  });

  it('logs at warn when the cache goes off and at info when it is live again, without token hashes', async () => {
    const cache = cacheOf(stack);
    const { tokenHash } = await putUser(stack.store as RedisTokenStore, stack.clock.now());
    await stack.store.lookupToken(tokenHash);
    const live = once(cache, 'live');
    await after(cache, 'dropped', () => raw.client('KILL', 'ID', String(cache.clientIds.subscriber)));
    await live;
    const lines = stack.logs.filter((l) => l.includes('token lookup cache'));
    expect(lines.map((l) => JSON.parse(l).level)).toEqual([30, 40, 30]); // live at start, off, live again
    expect(lines[1]).toContain('"reason":"subscriber_lost"');
    for (const l of lines) expect(l).not.toContain(tokenHash);
  });
});
