// The token-lookup cache on a real three-master Redis Cluster (src/store/redis-cluster-lookup-cache.ts):
// tracking on every master under the one-node names, a hit's barrier sent to the masters of its keys'
// slots only, hand revocations on either master seen by the next lookup, and every way it fails
// closed: FLUSHALL on one master, a connection of the cache killed, a slot being moved (ASK), a slot
// moved (MOVED), ioredis refreshing to another slot map. The revocation proof is
// cluster-revocation-proof.test.ts.

import { once } from 'node:events';
import { Cluster, Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { buildConfig } from '../../src/config/load.ts';
import { StoreUnavailableError } from '../../src/store/shared.ts';
import { systemClock } from '../../src/model/clock.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { openStore } from '../../src/store/wiring.ts';
import { generateToken, generateTokenFor, hashToken } from '../../src/model/credentials.ts';
import { keySlot } from '../../src/store/cluster-slots.ts';
import type { ClusterLookupCache } from '../../src/store/redis-cluster-lookup-cache.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import type { StoredUserToken, TokenLookup } from '../../src/model/records.ts';
import { startRedisCluster, until, type RedisClusterSet } from '../support/redis-ha.ts';
import { openRedisStore, uniquePrefix } from '../support/redis.ts';
import { credentialsClient } from '../support/clients.ts';

const HOUR = 3_600_000;

let cluster: RedisClusterSet;
/** A plain client per master, by node id. */
const nodes = new Map<string, Redis>();
let raw: Cluster;

beforeAll(async () => {
  cluster = await startRedisCluster();
  for (const n of cluster.nodes) {
    const c = new Redis({ port: n.port, lazyConnect: true, maxRetriesPerRequest: 1 });
    await c.connect();
    nodes.set(String(await c.call('CLUSTER', 'MYID')), c);
  }
  raw = new Cluster(
    cluster.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })),
    { lazyConnect: true, redisOptions: { maxRetriesPerRequest: 2 } },
  );
  raw.on('error', () => undefined);
  await raw.connect();
});
afterAll(async () => {
  raw?.disconnect();
  for (const c of nodes.values()) c.disconnect();
  await cluster?.stop();
});

/** The node id of the master serving `slot` now (asked of the cluster itself). */
async function ownerOf(slot: number): Promise<string> {
  const ranges = (await raw.cluster('SLOTS')) as unknown as Array<[number, number, [string, number, string]]>;
  const range = ranges.find(([start, end]) => start <= slot && slot <= end)!;
  return range[2][2];
}

function node(id: string): Redis {
  return nodes.get(id)!;
}

function userFields(tokenHash: string): Record<string, string> {
  const now = Date.now();
  return {
    tokenHash,
    subject: 'cluster-cache',
    issuer: 'https://idp.example.com/',
    revoked: 'false',
    createdAt: String(now),
    expiresAt: String(now + HOUR),
  };
}

function user(found: TokenLookup): StoredUserToken {
  expect(found.user).not.toBeNull();
  expect(found.user).not.toBe('corrupt');
  return found.user as StoredUserToken;
}

/** A user-grade token written by hand, looked up until the cache holds it (a hit). */
async function heldToken(store: RedisTokenStore, cache: ClusterLookupCache): Promise<{ tokenHash: string; key: string }> {
  const tokenHash = hashToken(generateToken());
  const key = store.keys.userToken(tokenHash);
  await raw.hset(key, userFields(tokenHash));
  expect(user(await store.lookupToken(tokenHash)).revoked).toBe(false);
  const hits = cache.stats.hits;
  expect(user(await store.lookupToken(tokenHash)).revoked).toBe(false);
  expect(cache.stats.hits).toBe(hits + 1);
  return { tokenHash, key };
}

/** Moves `slot` from its master to `to` as redis-cli --cluster reshard does, keys included; `stop` after a step. */
async function moveSlot(slot: number, to: string, stop: 'migrating' | 'done' = 'done'): Promise<string> {
  const from = await ownerOf(slot);
  await node(to).call('CLUSTER', 'SETSLOT', String(slot), 'IMPORTING', from);
  await node(from).call('CLUSTER', 'SETSLOT', String(slot), 'MIGRATING', to);
  if (stop === 'migrating') return from;
  const port = cluster.nodes.find((n) => n.port === node(to).options.port)!.port;
  for (;;) {
    const keys = (await node(from).call('CLUSTER', 'GETKEYSINSLOT', String(slot), '100')) as string[];
    if (keys.length === 0) break;
    await node(from).call('MIGRATE', '127.0.0.1', String(port), '', '0', '5000', 'KEYS', ...keys);
  }
  for (const c of nodes.values()) await c.call('CLUSTER', 'SETSLOT', String(slot), 'NODE', to);
  await until('every master to agree on the slot', async () => {
    for (const c of nodes.values()) {
      const ranges = (await c.cluster('SLOTS')) as unknown as Array<[number, number, [string, number, string]]>;
      if (ranges.find(([start, end]) => start <= slot && slot <= end)?.[2][2] !== to) return false;
    }
    return true;
  });
  return from;
}

describe('the lookup cache on Redis Cluster: tracking per master and the barrier', () => {
  let store: RedisTokenStore;
  let cache: ClusterLookupCache;

  beforeAll(async () => {
    // No PING tick within the test: the commands counted are the lookups' own.
    store = await openRedisStore(uniquePrefix('cluster-cache'), {
      url: cluster.url,
      lookupCache: { maxEntries: 1000, pingIntervalMs: 60_000, connectTimeoutMs: 5000 },
    });
    cache = store.clusterLookupCache!;
  });
  afterAll(async () => {
    await store?.close();
  });

  it('is live with two connections on every master, named as on one node, tracking redirected to the invalidation connection', async () => {
    expect(cache.live).toBe(true);
    expect(store.lookupCache).toBeUndefined();
    expect(cache.shards.map((s) => s.master.id).sort()).toEqual([...nodes.keys()].sort());
    for (const [id, c] of nodes) {
      const clients = String(await c.client('LIST'))
        .trim()
        .split('\n')
        .map((line) => Object.fromEntries(line.split(' ').map((kv) => kv.split('=') as [string, string])));
      const data = clients.filter((f) => f.name === 'mcpauth-lookup-cache');
      const invalidations = clients.filter((f) => f.name === 'mcpauth-lookup-invalidations');
      expect([data.length, invalidations.length], `master ${id}`).toEqual([1, 1]);
      expect(data[0]!.flags).toContain('t');
      expect(data[0]!.redir).toBe(invalidations[0]!.id);
      expect(invalidations[0]!.sub).toBe('1');
    }
  });

  it("sends a hit's barrier to the masters of its two keys' slots and to no other", async () => {
    const clientId = `cluster-cache-${Date.now()}`;
    await store.createClient(credentialsClient(clientId, Date.now()));
    const tokenHash = hashToken(generateTokenFor(clientId));
    await store.createAccessToken({ tokenHash, clientId, createdAt: Date.now(), expiresAt: Date.now() + HOUR });
    expect((await store.lookupToken(tokenHash)).oauth).not.toBeNull();
    const owners = new Set([
      await ownerOf(keySlot(store.keys.userToken(tokenHash))),
      await ownerOf(keySlot(store.keys.accessToken(tokenHash))),
    ]);
    const counts = async () => {
      const out = new Map<string, [number, number]>();
      for (const [id, c] of nodes) {
        const stats = await c.info('commandstats');
        const calls = (cmd: string) => Number(new RegExp(`^cmdstat_${cmd}:calls=(\\d+)`, 'm').exec(stats)?.[1] ?? 0);
        out.set(id, [calls('ping'), calls('exists')]);
      }
      return out;
    };
    const before = await counts();
    const hits = cache.stats.hits;
    expect((await store.lookupToken(tokenHash)).oauth).not.toBeNull();
    expect(cache.stats.hits).toBe(hits + 1);
    const after = await counts();
    for (const id of nodes.keys()) {
      const [pings, exists] = [after.get(id)![0] - before.get(id)![0], after.get(id)![1] - before.get(id)![1]];
      // Owners: one PING (the invalidation connection) and one EXISTS per slot of the token on it.
      if (owners.has(id)) expect([pings, exists > 0], `master ${id}`).toEqual([1, true]);
      else expect([pings, exists], `master ${id}`).toEqual([0, 0]);
    }
    expect([...before.values()].length).toBe(3);
  });

  it('sees a hand revocation on the master of either key at the next lookup', async () => {
    const { tokenHash, key } = await heldToken(store, cache);
    await raw.hset(key, 'revoked', 'true');
    expect(user(await store.lookupToken(tokenHash)).revoked).toBe(true);
    await raw.del(key);
    expect((await store.lookupToken(tokenHash)).user).toBeNull();
  });
});

describe('redis.lookupCache on Redis Cluster at start-up', () => {
  for (const lookupCache of ['auto', 'tracking'] as const) {
    it(`${lookupCache}: the store opens with the cache live on every master, and no fall-back reason`, async () => {
      const config = buildConfig(
        { redis: { url: cluster.url, keyPrefix: uniquePrefix(`cluster-cache-${lookupCache}`), lookupCache } },
        { BEARER_SECRET_MASTER: generateToken() },
      );
      const logs: string[] = [];
      const logger = createLogger(
        'info',
        new Writable({
          write(chunk: Buffer, _enc, done) {
            logs.push(chunk.toString());
            done();
          },
        }),
      );
      const store = (await openStore(config, systemClock, logger)) as RedisTokenStore;
      try {
        expect(store.clusterLookupCache?.live).toBe(true);
        expect(store.clusterLookupCache?.shards).toHaveLength(3);
        expect(store.lookupCacheFallback).toBeUndefined();
        expect(logs.join('')).toContain('token lookup cache live: invalidation tracking set up');
      } finally {
        await store.close();
      }
    });
  }
});

describe('the lookup cache on Redis Cluster fails closed on every change it cannot vouch for', () => {
  let store: RedisTokenStore;
  let cache: ClusterLookupCache;

  beforeAll(async () => {
    store = await openRedisStore(uniquePrefix('cluster-cache-fail'), {
      url: cluster.url,
      lookupCache: { maxEntries: 1000, pingIntervalMs: 100, connectTimeoutMs: 5000 },
    });
    cache = store.clusterLookupCache!;
  });
  afterAll(async () => {
    await store?.close();
  });
  afterEach(async () => {
    if (!cache.live) await once(cache, 'live');
  });

  it('FLUSHALL on one master: emptied, set up anew, and the flushed token is gone', async () => {
    const { tokenHash, key } = await heldToken(store, cache);
    const dropped = once(cache, 'dropped');
    await node(await ownerOf(keySlot(key))).flushall();
    expect(await dropped).toEqual(['flush']);
    expect(cache.size).toBe(0);
    expect((await store.lookupToken(tokenHash)).user).toBeNull();
  });

  it('a connection of the cache killed on a master: emptied, and set up anew on fresh connections', async () => {
    for (const [reason, name] of [
      ['data_connection_lost', 'mcpauth-lookup-cache'],
      ['subscriber_lost', 'mcpauth-lookup-invalidations'],
    ] as const) {
      if (!cache.live) await once(cache, 'live');
      await heldToken(store, cache);
      const shard = cache.shards[0]!;
      const listed = String(await node(shard.master.id).client('LIST'));
      const mine = listed
        .trim()
        .split('\n')
        .find((line) => line.includes(` name=${name} `))!;
      const dropped = once(cache, 'dropped');
      await node(shard.master.id).call('CLIENT', 'KILL', 'ID', /\bid=(\d+)/.exec(mine)![1]!);
      // The close itself, or the PING tick that found the connection gone first.
      expect([reason, 'ping_failed']).toContain((await dropped)[0]);
      expect(cache.size).toBe(0);
      await once(cache, 'live');
      expect(cache.shards.includes(shard)).toBe(false);
    }
  });

  it("a slot being moved away: the barrier's probe answers ASK, the cache is emptied and the lookup reads the cluster", async () => {
    const { tokenHash, key } = await heldToken(store, cache);
    const slot = keySlot(key);
    const from = await ownerOf(slot);
    const target = [...nodes.keys()].find((id) => id !== from)!;
    await moveSlot(slot, target, 'migrating');
    try {
      // The entry is held: the hit's barrier probes the slot on its old master, which answers ASK.
      const dropped = once(cache, 'dropped');
      expect(user(await store.lookupToken(tokenHash)).revoked).toBe(false);
      expect(await dropped).toEqual(['topology_changed']);
      expect(cache.size).toBe(0);
      await raw.hset(key, 'revoked', 'true');
      expect(user(await store.lookupToken(tokenHash)).revoked).toBe(true);
    } finally {
      // Back to stable: the slot stays where it was.
      for (const id of [from, target]) await node(id).call('CLUSTER', 'SETSLOT', String(slot), 'STABLE');
    }
  });

  it('a slot moved: MOVED on the fill empties the cache, the lookup follows the cluster, and the cache comes back on the new map', async () => {
    const { tokenHash, key } = await heldToken(store, cache);
    const slot = keySlot(key);
    const from = await ownerOf(slot);
    const target = [...nodes.keys()].find((id) => id !== from)!;
    const dropped = once(cache, 'dropped');
    // MIGRATE deletes the key on its old master: its invalidation empties the entry; the next read is
    // routed by the old map and answered MOVED.
    await moveSlot(slot, target);
    // The lookup then reads as the strict mode does, whose ioredis may refuse once to redirect a batch
    // whose keys now live on two masters (a 503, fail closed) before it refreshes its own map.
    const first = await store.lookupToken(tokenHash).catch((err: unknown) => err);
    if (!(first instanceof StoreUnavailableError)) expect(user(first as TokenLookup).revoked).toBe(false);
    expect(await dropped).toEqual(['topology_changed']);
    expect(user(await store.lookupToken(tokenHash)).revoked).toBe(false);
    await once(cache, 'live');
    // Held again, now from the new master; a revocation there is seen.
    expect(user(await store.lookupToken(tokenHash)).revoked).toBe(false);
    const hits = cache.stats.hits;
    expect(user(await store.lookupToken(tokenHash)).revoked).toBe(false);
    expect(cache.stats.hits).toBe(hits + 1);
    await raw.hset(key, 'revoked', 'true');
    expect(user(await store.lookupToken(tokenHash)).revoked).toBe(true);
  });

  it('ioredis refreshing to another slot map empties the cache at once', async () => {
    const { key } = await heldToken(store, cache);
    const slot = keySlot(key);
    const from = await ownerOf(slot);
    const to = [...nodes.keys()].find((id) => id !== from)!;
    const dropped = once(cache, 'dropped');
    await moveSlot(slot, to);
    // No lookup: ioredis's own refresh is what tells the cache.
    await new Promise<void>((resolve, reject) => (store.client as Cluster).refreshSlotsCache((err) => (err ? reject(err) : resolve())));
    expect(await dropped).toEqual(['topology_changed']);
  });
});
