// The token lookups' own connection on a real Redis: opened by the first lookup, part of readiness
// (the admin listener's /readyz pings the store; mcp_auth_store_up reads `watch.ready`): a lookups
// connection that is down fails both, and one that has ended is opened again by the next lookup
// rather than leaving every request refused.

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { StoreUnavailableError } from '../../src/http/errors.ts';
import { generateToken, hashToken } from '../../src/model/credentials.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import { deleteUnder, openRedisStore, rawRedis, uniquePrefix } from '../support/redis.ts';

describe('the token lookups connection', () => {
  let store: RedisTokenStore;
  let raw: Redis;
  let prefix: string;
  beforeEach(async () => {
    prefix = uniquePrefix('lookups');
    store = await openRedisStore(prefix);
    raw = await rawRedis();
  });
  afterEach(async () => {
    await store.close();
    await deleteUnder(raw, prefix);
    raw.disconnect();
  });

  it('is opened by the first lookup, and readiness follows it', async () => {
    expect(store.lookupClient).toBeUndefined();
    expect(store.watch.ready()).toBe(true);
    await store.ping();
    const hash = hashToken(generateToken());
    expect(await store.lookupToken(hash)).toEqual({ user: null, oauth: null });
    const lookups = store.lookupClient;
    expect(lookups?.status).toBe('ready');

    // Ended (closed for good): as if never opened, and the next lookup opens another.
    lookups!.disconnect();
    await new Promise<void>((resolve) => (lookups!.status === 'end' ? resolve() : lookups!.once('end', () => resolve())));
    expect(store.watch.ready()).toBe(true);
    await store.ping();
    expect(await store.lookupToken(hash)).toEqual({ user: null, oauth: null });
    expect(store.lookupClient).not.toBe(lookups);
    expect(store.lookupClient?.status).toBe('ready');
    expect(store.watch.ready()).toBe(true);
    await store.ping();
  });

  it('counts a lookups connection that is reconnecting as not ready, and the probe fails as an outage', async () => {
    await store.lookupToken(hashToken(generateToken()));
    const lookups = store.lookupClient!;
    // Killed by Redis (CLIENT KILL): ioredis reconnects it; until it is back, readiness says no.
    const id = await lookups.client('ID');
    const closed = new Promise<void>((resolve) => lookups.once('close', () => resolve()));
    await raw.client('KILL', 'ID', String(id));
    await closed;
    expect(store.watch.ready()).toBe(false);
    await expect(store.ping()).rejects.toBeInstanceOf(StoreUnavailableError);
    await new Promise<void>((resolve) => lookups.once('ready', () => resolve()));
    expect(store.watch.ready()).toBe(true);
    await store.ping();
  });
});
