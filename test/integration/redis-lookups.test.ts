// The token lookups' own connection on a real Redis: opened by the first lookup, part of readiness
// (the admin listener's /readyz pings the store; mcp_auth_store_up reads `watch.ready`): a lookups
// connection that is down fails both, and one that has ended is opened again by the next lookup
// rather than leaving every request refused. The reads of the lookups started in one turn of the event
// loop, and the reads that go with them, leave in one write to the socket.

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { StoreUnavailableError } from '../../src/store/shared.ts';
import { generateToken, hashToken } from '../../src/model/credentials.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import { countSocketWrites, deleteUnder, openRedisStore, rawRedis, uniquePrefix } from '../support/redis.ts';

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

  it('sends the reads of every lookup started in one turn in one write, and answers each its own', async () => {
    const now = Date.now();
    const tokens = [generateToken(), generateToken(), generateToken()];
    await Promise.all(
      tokens.map((token, i) =>
        store.putUserToken({ tokenHash: hashToken(token), subject: `s${i}`, issuer: 'i', createdAt: now, expiresAt: now + 60_000 }),
      ),
    );
    await store.lookupToken(hashToken(generateToken())); // opens the connection
    const lookups = store.lookupClient as Redis;
    const writes = countSocketWrites(lookups);

    // Four lookups (two reads each), a session's handle read and a user's upstream credential (read on
    // every forwarded request when the sidecar passes one on), started in the same turn: ten commands.
    const unknown = hashToken(generateToken());
    const [found, handle, credential] = await Promise.all([
      Promise.all([...tokens.map((t) => store.lookupToken(hashToken(t))), store.lookupToken(unknown)]),
      store.readHandle('session', hashToken(generateToken())),
      store.getUpstreamCredential('s0', 'i', 'idp'),
    ]);
    const subject = (f: (typeof found)[number]) => (f.user === null || f.user === 'corrupt' ? f.user : f.user.subject);
    expect(found.map(subject)).toEqual(['s0', 's1', 's2', null]);
    expect(found.every((f) => f.oauth === null)).toBe(true);
    expect(handle).toBeNull();
    expect(credential).toBeNull();
    expect(writes).toEqual([10]);

    // The next turn's lookups are a write of their own: nothing stays corked.
    expect(lookups.stream.writableCorked).toBe(0);
    expect(subject(await store.lookupToken(hashToken(tokens[0]!)))).toBe('s0');
    expect(writes).toEqual([10, 2]);
  });
});
