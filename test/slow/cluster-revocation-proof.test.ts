// The lookup cache's promise on a three-master Redis Cluster, checked by brute force as on one node
// (revocation-proof.test.ts): each round writes a fresh token's record, asks /authz until an answer
// came from the cache, revokes by hand on the operator's own Cluster connection (the write goes to the
// master owning the key's slot, whose reply the operator has before the next command) and asks once:
// any 200 after the write is a missed revocation. The user-grade key and the OAuth access-token key of a
// token live in different slots, mostly on different masters: the hit's barrier must cover both.
// The windows between the write's reply and the invalidation's arrival are printed (one clock: the
// sidecar runs in this process); docs/lookup-cache.md quotes them.
// Counts: CLUSTER_REVOCATION_PROOF_ITERATIONS (default 2 000) for HSET idle; under load a fifth of it,
// the other revocations a tenth (at least 50 each).

import { Agent } from 'node:http';
import { performance } from 'node:perf_hooks';
import { Cluster, type Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateToken, hashToken } from '../../src/model/credentials.ts';
import { keySlot } from '../../src/store/cluster-slots.ts';
import { keyLayout } from '../../src/store/records.ts';
import type { ClusterLookupCache } from '../../src/store/redis-cluster-lookup-cache.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import { startEchoUpstream, type FakeUpstream } from '../support/fake-upstreams.ts';
import { startRedisCluster, type RedisClusterSet } from '../support/redis-ha.ts';
import { authz, heldAfter, load, summary, userRecord } from '../support/revocation-proof.ts';
import { startStack, type Stack } from '../support/stack.ts';

const HSET_ITERATIONS = Number(process.env.CLUSTER_REVOCATION_PROOF_ITERATIONS ?? 2_000);
const LOAD_ITERATIONS = Math.max(50, Math.floor(HSET_ITERATIONS / 5));
const RARE_ITERATIONS = Math.max(50, Math.floor(HSET_ITERATIONS / 10));

/** One revocation as an operator types it on the Cluster; `key` is the token's record. */
type Revocation = (operator: Cluster, key: string) => Promise<unknown>;

/** A name in `key`'s slot (RENAME is single-slot on Cluster): the key with a counted suffix. */
function sameSlotName(key: string): string {
  const slot = keySlot(key);
  for (let n = 0; ; n++) if (keySlot(`${key}:renamed:${n}`) === slot) return `${key}:renamed:${n}`;
}

/** The operator's connection to the master owning `key`'s slot (FLUSHALL is per node). */
function masterOf(operator: Cluster, key: string): Redis {
  const address = operator.slots[keySlot(key)]![0];
  return operator.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === address)!;
}

const REVOCATIONS: Record<string, Revocation> = {
  DEL: (r, key) => r.del(key),
  'PEXPIRE in the past': (r, key) => r.pexpireat(key, 1),
  'EXPIRE 0': (r, key) => r.expire(key, 0),
  'HDEL revoked': (r, key) => r.hdel(key, 'revoked'),
  'HDEL expiresAt': (r, key) => r.hdel(key, 'expiresAt'),
  'RENAME away (in the slot)': (r, key) => r.rename(key, sameSlotName(key)),
  'a Lua script doing the HSET': (r, key) => r.eval("return redis.call('HSET', KEYS[1], 'revoked', 'true')", 1, key),
  'MULTI doing the HSET': (r, key) => r.multi().hset(key, 'revoked', 'true').exec(),
  // Last: it empties the master, the other rounds' state with it.
  'FLUSHALL on its master': (r, key) => masterOf(r, key).flushall(),
};

describe('next-request revocation with the lookup cache on a three-master Redis Cluster, one process (windows measured)', () => {
  let cluster: RedisClusterSet;
  let echo: FakeUpstream;
  let stack: Stack;
  let operator: Cluster;
  let agent: Agent;
  let cache: ClusterLookupCache;
  const arrivals = new Map<string, number>();
  let flushedAt = -Infinity;
  const windows: Record<string, number[]> = {};
  const listened = new WeakSet<object>();

  /** Listens beside the cache's own handler on every master's invalidation connection (anew after each set-up). */
  function listen(): void {
    for (const { subscriber } of cache.shards) {
      if (listened.has(subscriber)) continue;
      listened.add(subscriber);
      subscriber.on('messageBuffer', (_channel: Buffer, keys: unknown) => {
        const at = performance.now();
        if (Array.isArray(keys)) for (const key of keys) arrivals.set(String(key), at);
        else flushedAt = at;
      });
    }
  }

  beforeAll(async () => {
    cluster = await startRedisCluster();
    echo = await startEchoUpstream();
    stack = await startStack({
      redisUrl: cluster.url,
      upstreamUrl: echo.url,
      config: { proxy: { forwardAuth: true }, redis: { lookupCache: 'tracking', commandTimeoutMs: 1500 } },
    });
    operator = new Cluster(
      cluster.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })),
      { lazyConnect: true, redisOptions: { maxRetriesPerRequest: 2 } },
    );
    operator.on('error', () => undefined);
    await operator.connect();
    agent = new Agent({ keepAlive: true, maxSockets: 1 });
    cache = (stack.store as RedisTokenStore).clusterLookupCache!;
    listen();
    cache.on('live', listen);
  }, 120_000);
  afterAll(async () => {
    agent?.destroy();
    operator?.disconnect();
    await stack?.close();
    await echo?.close();
    await cluster?.stop();
    for (const [name, values] of Object.entries(windows))
      console.log(`revocation window (ms, write reply -> invalidation read), Cluster, one process, ${name}:`, summary(values));
  });

  /**
   * `iterations` rounds: a token (`mint` writes its record and names its key), held by the cache,
   * revoked by hand, asked once. Returns the requests allowed after a revocation.
   */
  async function prove(
    label: string,
    revoke: Revocation,
    iterations: number,
    mint: () => Promise<{ token: string; key: string }> = handWritten,
  ): Promise<number> {
    let missed = 0;
    const measured = (windows[label] ??= []);
    for (let i = 0; i < iterations; i++) {
      const { token, key } = await mint();
      expect(await heldAfter(cache, () => authz(stack.proxyUrl, token, agent))).toBeLessThan(20);
      const flushesBefore = flushedAt;
      await revoke(operator, key);
      const repliedAt = performance.now();
      if ((await authz(stack.proxyUrl, token, agent)) === 200) missed++;
      const arrived = flushedAt !== flushesBefore ? flushedAt : arrivals.get(key);
      if (arrived !== undefined) measured.push(arrived - repliedAt);
      arrivals.delete(key);
      await operator.del(key);
    }
    return missed;
  }

  const keys = () => keyLayout(stack.prefix);

  /** A user-grade token's record written by hand. */
  async function handWritten(): Promise<{ token: string; key: string }> {
    const token = generateToken();
    const key = keys().userToken(hashToken(token));
    await operator.hset(key, userRecord(hashToken(token), stack.clock.now()));
    return { token, key };
  }

  it(`HSET revoked true, idle: ${HSET_ITERATIONS} revocations, every next request refused`, async () => {
    expect(await prove('HSET revoked true, idle', (r, key) => r.hset(key, 'revoked', 'true'), HSET_ITERATIONS)).toBe(0);
  }, 1_800_000);

  it(`HSET revoked true under 32 connections of load: ${LOAD_ITERATIONS} revocations, every next request refused`, async () => {
    const loadToken = generateToken();
    await operator.hset(keys().userToken(hashToken(loadToken)), userRecord(hashToken(loadToken), stack.clock.now()));
    const traffic = load(stack.proxyUrl, loadToken);
    try {
      expect(await prove('HSET revoked true, 32 connections of load', (r, key) => r.hset(key, 'revoked', 'true'), LOAD_ITERATIONS)).toBe(0);
    } finally {
      expect(await traffic.stop()).toBeGreaterThan(0);
    }
  }, 1_800_000);

  it(`an OAuth access token (its bucket's slot) revoked by hand (HSET revokedAt): ${RARE_ITERATIONS} revocations, every next request refused`, async () => {
    expect((await stack.admin('seedDefaultProfiles')).status).toBe(200);
    const created = await stack.admin('createClient', { clientName: 'cluster-proof' });
    expect(created.status).toBe(201);
    const clientId = created.body.clientId as string;
    const minted = async () => {
      const issued = await stack.admin('createAccessToken', { clientId, lifetimeSeconds: 3600 });
      expect(issued.status).toBe(201);
      const token = issued.body.accessToken as string;
      return { token, key: keys().accessToken(hashToken(token)) };
    };
    const revoke: Revocation = (r, key) => r.hset(key, 'revokedAt', String(Date.now()));
    expect(await prove('OAuth access token HSET revokedAt', revoke, RARE_ITERATIONS, minted)).toBe(0);
  }, 900_000);

  for (const [name, revoke] of Object.entries(REVOCATIONS)) {
    it(`${name}: ${RARE_ITERATIONS} revocations, every next request refused`, async () => {
      expect(await prove(name, revoke, RARE_ITERATIONS)).toBe(0);
    }, 600_000);
  }
});
