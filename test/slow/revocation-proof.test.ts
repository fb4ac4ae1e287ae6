// The lookup cache's promise, checked by brute force: a revocation written by hand in Redis (an
// operator's redis-cli: its own connection, each command answered before the next is typed) is seen by
// the very next request to the sidecar, made AFTER the write's reply arrived. Every iteration first
// proves the token's record is held by the cache (a request answered from it), then writes, then asks
// once: any 200 after the write is a missed revocation. Many iterations, idle and under 32 connections
// of load, on one process and on two worker processes (proxy.workers: 2).
// The windows between the write's reply and the invalidation's arrival are measured in the in-process
// runs (both ends in one process, one clock) and printed; docs/lookup-cache.md quotes them.
// Counts: REVOCATION_PROOF_ITERATIONS (default 10 000) for HSET in one process; the rarer commands and
// the worker processes run a tenth and a fifth of it (a new connection per request there).

import { Agent } from 'node:http';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { generateToken, hashToken } from '../../src/model/credentials.ts';
import { keyLayout } from '../../src/store/records.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import { startRedisServer, type RedisServer } from '../support/redis-server.ts';
import { rawRedis, redisUrl } from '../support/redis.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { startEchoUpstream, type FakeUpstream } from '../support/fake-upstreams.ts';
import { startSidecarProcess, type SidecarProcess } from '../support/process.ts';
import { nodeTs } from '../support/node-ts.ts';
import { authz, heldAfter, load, summary, userRecord } from '../support/revocation-proof.ts';

const HSET_ITERATIONS = Number(process.env.REVOCATION_PROOF_ITERATIONS ?? 10_000);
const RARE_ITERATIONS = Math.max(50, Math.floor(HSET_ITERATIONS / 10));
const SIDECAR = nodeTs('src/entry/main.ts');

/**
 * One revocation as an operator types it: `key` is the token's record, `db` the database the sidecar
 * uses. Each returns once Redis answered every command it sent (the reply is what the operator sees).
 */
type Revocation = (operator: Redis, key: string, db: number) => Promise<unknown>;

const REVOCATIONS: Record<string, Revocation> = {
  'HSET revoked true': (r, key) => r.hset(key, 'revoked', 'true'),
  DEL: (r, key) => r.del(key),
  'PEXPIRE in the past': (r, key) => r.pexpireat(key, 1),
  'EXPIRE 0': (r, key) => r.expire(key, 0),
  'HDEL revoked': (r, key) => r.hdel(key, 'revoked'),
  'HDEL expiresAt': (r, key) => r.hdel(key, 'expiresAt'),
  'RENAME away': (r, key) => r.rename(key, `${key}:renamed`),
  FLUSHDB: (r) => r.flushdb(),
  // The other database holds nothing: after the swap the sidecar's database is empty.
  'SWAPDB with an empty database': (r, _key, db) => r.swapdb(db, db + 1),
  'a Lua script doing the HSET': (r, key) => r.eval("return redis.call('HSET', KEYS[1], 'revoked', 'true')", 1, key),
  'MULTI doing the HSET': (r, key) => r.multi().hset(key, 'revoked', 'true').exec(),
};

describe('next-request revocation with the lookup cache, one process (windows measured)', () => {
  let redis: RedisServer;
  let echo: FakeUpstream;
  let stack: Stack;
  let operator: Redis;
  let agent: Agent;
  /** Arrival time (performance.now) of the last invalidation naming each key, and of the last flush. */
  const arrivals = new Map<string, number>();
  let flushedAt = -Infinity;
  const windows: Record<string, number[]> = {};

  beforeAll(async () => {
    redis = await startRedisServer();
    echo = await startEchoUpstream();
    stack = await startStack({
      redisUrl: redis.url,
      upstreamUrl: echo.url,
      config: { proxy: { forwardAuth: true }, redis: { lookupCache: 'tracking', commandTimeoutMs: 1500 } },
    });
    operator = await rawRedis(redis.url);
    agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const cache = (stack.store as RedisTokenStore).lookupCache!;
    // Listening beside the cache's own handler, on the same socket: the time the message was read.
    cache.connections.subscriber.on('messageBuffer', (_channel: Buffer, keys: unknown) => {
      const at = performance.now();
      if (Array.isArray(keys)) for (const key of keys) arrivals.set(String(key), at);
      else flushedAt = at;
    });
  });
  afterAll(async () => {
    agent?.destroy();
    await operator?.quit();
    await stack?.close();
    await echo?.close();
    await redis?.stop();
    for (const [name, values] of Object.entries(windows))
      console.log(`revocation window (ms, write reply -> invalidation read), one process, ${name}:`, summary(values));
  });

  /** `iterations` rounds of: new token, cached, revoke by hand, ask once. Returns the requests allowed after a revocation. */
  async function prove(name: string, revoke: Revocation, iterations: number, label: string): Promise<number> {
    const cache = (stack.store as RedisTokenStore).lookupCache!;
    const keys = keyLayout(stack.prefix);
    const db = 0;
    let missed = 0;
    const measured = (windows[`${name}${label}`] ??= []);
    for (let i = 0; i < iterations; i++) {
      const token = generateToken();
      const tokenHash = hashToken(token);
      const key = keys.userToken(tokenHash);
      const now = stack.clock.now();
      await operator.hset(key, userRecord(tokenHash, now));
      expect(await heldAfter(cache, () => authz(stack.proxyUrl, token, agent))).toBeLessThan(20);
      const flushesBefore = flushedAt;
      await revoke(operator, key, db);
      const repliedAt = performance.now();
      const status = await authz(stack.proxyUrl, token, agent);
      if (status === 200) missed++;
      const arrived = flushedAt !== flushesBefore ? flushedAt : arrivals.get(key);
      if (arrived !== undefined) measured.push(arrived - repliedAt);
      arrivals.delete(key);
      if (name.startsWith('SWAPDB')) await operator.swapdb(db, db + 1); // put the database back
      await operator.del(key, `${key}:renamed`);
    }
    return missed;
  }

  it(`HSET revoked true, idle: ${HSET_ITERATIONS} revocations, every next request refused`, async () => {
    expect(await prove('HSET revoked true', REVOCATIONS['HSET revoked true']!, HSET_ITERATIONS, ', idle')).toBe(0);
  }, 600_000);

  it(`HSET revoked true under 32 connections of load: ${HSET_ITERATIONS} revocations, every next request refused`, async () => {
    const loadToken = generateToken();
    await operator.hset(keyLayout(stack.prefix).userToken(hashToken(loadToken)), userRecord(hashToken(loadToken), stack.clock.now()));
    const traffic = load(stack.proxyUrl, loadToken);
    try {
      expect(await prove('HSET revoked true', REVOCATIONS['HSET revoked true']!, HSET_ITERATIONS, ', 32 connections of load')).toBe(0);
    } finally {
      expect(await traffic.stop()).toBeGreaterThan(0);
    }
  }, 900_000);

  for (const [name, revoke] of Object.entries(REVOCATIONS)) {
    if (name === 'HSET revoked true') continue;
    it(`${name}: ${RARE_ITERATIONS} revocations, every next request refused`, async () => {
      expect(await prove(name, revoke, RARE_ITERATIONS, '')).toBe(0);
    }, 300_000);
  }
});

for (const workers of [1, 2]) {
  describe(`next-request revocation with the lookup cache, a sidecar process with proxy.workers: ${workers}`, () => {
    let echo: FakeUpstream;
    let sidecar: SidecarProcess;
    let operator: Redis;

    beforeAll(async () => {
      echo = await startEchoUpstream();
      sidecar = await startSidecarProcess(`revocation-proof-${workers}`, SIDECAR, {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        HOST: '127.0.0.1',
        PORT: '0',
        ADMIN_PORT: '0',
        LOG_LEVEL: 'warn',
        LOG_FORMAT: 'json',
        UPSTREAM_URL: echo.url,
        WORKERS: String(workers),
        FORWARD_AUTH: 'true',
        REDIS_LOOKUP_CACHE: 'tracking',
      });
      operator = await rawRedis(redisUrl());
    });
    afterAll(async () => {
      await operator?.quit();
      await sidecar?.cleanup();
      await echo?.close();
    });

    /** The sum of the `hit` series of the lookup cache over the workers (the primary sums the scrape). */
    async function hits(): Promise<number> {
      const scrape = await (await fetch(`${sidecar.adminUrl}/metrics`)).text();
      const line = scrape.split('\n').find((l) => l.startsWith('mcp_auth_lookup_cache_lookups_total{result="hit"}'));
      return Number(line?.slice(line.lastIndexOf(' ') + 1) ?? 0);
    }

    /**
     * Each round fills every worker (new connections: the cluster hands each to the next worker), then
     * revokes and asks once on a new connection. That a round's record was held is checked in bulk: the
     * workers' hit count grows by at least one per round.
     */
    async function prove(iterations: number): Promise<number> {
      const keys = keyLayout(sidecar.prefix);
      const before = await hits();
      let missed = 0;
      for (let i = 0; i < iterations; i++) {
        const token = generateToken();
        const key = keys.userToken(hashToken(token));
        await operator.hset(key, userRecord(hashToken(token), Date.now()));
        for (let j = 0; j < 2 * workers + 1; j++) expect(await authz(sidecar.proxyUrl, token, false)).toBe(200);
        await REVOCATIONS['HSET revoked true']!(operator, key, 0);
        if ((await authz(sidecar.proxyUrl, token, false)) === 200) missed++;
        await operator.del(key);
      }
      expect(await hits()).toBeGreaterThanOrEqual(before + iterations);
      return missed;
    }

    it(`HSET revoked true, idle: ${RARE_ITERATIONS * 2} revocations, every next request refused`, async () => {
      expect(await prove(RARE_ITERATIONS * 2)).toBe(0);
    }, 600_000);

    it(`HSET revoked true under 32 connections of load: ${RARE_ITERATIONS * 2} revocations, every next request refused`, async () => {
      const loadToken = generateToken();
      await operator.hset(keyLayout(sidecar.prefix).userToken(hashToken(loadToken)), userRecord(hashToken(loadToken), Date.now()));
      const traffic = load(sidecar.proxyUrl, loadToken);
      try {
        expect(await prove(RARE_ITERATIONS * 2)).toBe(0);
      } finally {
        expect(await traffic.stop()).toBeGreaterThan(0);
      }
    }, 900_000);
  });
}
