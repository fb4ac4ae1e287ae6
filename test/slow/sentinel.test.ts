// The sidecar on Redis Sentinel (redis+sentinel://): a real primary, one replica and three Sentinels on
// loopback. Revocations are WAITed for (on the replica before the operation returns) without holding
// up the lookups; then the primary is SIGKILLed: every request in the failover window gets 503 within
// the bound (never 200 for a revoked token, never a hang), the sidecar follows the promotion by itself,
// valid tokens work again and a token revoked before the failover stays revoked after it.

import { createServer, type Socket } from 'node:net';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateToken, hashToken } from '../../src/model/credentials.ts';
import { createRedisClient } from '../../src/store/redis-connection.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import { startEchoUpstream, type FakeUpstream } from '../support/fake-upstreams.ts';
import { info, infoField, startSentinelSet, until, type SentinelSet } from '../support/redis-ha.ts';
import { rawRedis } from '../support/redis.ts';
import { basic, postForm, postMcp } from '../support/http.ts';
import { startStack, type Stack } from '../support/stack.ts';

/** Redis unreachable or too slow: every request is answered 503 within 2 s. */
const BOUND_MS = 2000;
const COMMAND_TIMEOUT_MS = 500;

interface Answer {
  status: number;
  body: any;
  retryAfter: string | null;
  startedAt: number;
  ms: number;
}

let ha: SentinelSet;
let echo: FakeUpstream;
let stack: Stack;
let store: RedisTokenStore;

beforeAll(async () => {
  const started = performance.now();
  ha = await startSentinelSet('mcpauth', { downAfterMs: 1000, failoverTimeoutMs: 3000 });
  console.log(
    `Sentinel set (primary ${ha.primary.port}, replica ${ha.replica.port}, 3 Sentinels) ready in ${Math.round(performance.now() - started)} ms`,
  );
  echo = await startEchoUpstream();
  stack = await startStack({ redisUrl: ha.url, upstreamUrl: echo.url, config: { redis: { commandTimeoutMs: COMMAND_TIMEOUT_MS } } });
  store = stack.store as RedisTokenStore;
});
afterAll(async () => {
  await stack?.close();
  await echo?.close();
  await ha?.stop();
});

async function mcp(token: string): Promise<Answer> {
  const startedAt = performance.now();
  // A client-side cap well past the bound: a hang shows up as a failed assertion, not a stuck test.
  const { status, headers, body } = await postMcp(stack.mcpUrl, token, { signal: AbortSignal.timeout(4 * BOUND_MS) });
  return { status, body, retryAfter: headers.get('retry-after'), startedAt, ms: performance.now() - startedAt };
}

async function waitCalls(port: number): Promise<number> {
  return Number(/^cmdstat_wait:calls=(\d+)/m.exec(await info(port, 'commandstats'))?.[1] ?? 0);
}

function putUserToken(): Promise<string> {
  const token = generateToken();
  const now = Date.now();
  return store
    .putUserToken({
      tokenHash: hashToken(token),
      subject: 'alice',
      issuer: 'https://idp.example/',
      createdAt: now,
      expiresAt: now + 3_600_000,
    })
    .then(() => token);
}

describe('Redis Sentinel', () => {
  let valid: string; // OAuth access token of a live client
  let deletedClientToken: string; // its client deleted (deleteClient) before the failover
  let user: string; // user-grade, valid
  let revokedUser: string; // user-grade, revoked (revokeUserToken) before the failover

  it('revocations return only once the replica holds them (WAIT 1), and lookups never wait behind a WAIT', async () => {
    const waitsBefore = await waitCalls(ha.primary.port);
    valid = (await stack.issueOAuthToken()).token;
    const doomed = await stack.issueOAuthToken();
    deletedClientToken = doomed.token;
    user = await putUserToken();
    revokedUser = await putUserToken();
    expect((await mcp(valid)).status).toBe(200);
    expect((await mcp(deletedClientToken)).status).toBe(200);
    expect((await mcp(user)).status).toBe(200);
    expect((await mcp(revokedUser)).status).toBe(200);

    const deleted = await stack.admin('deleteClient', { clientId: doomed.clientId });
    expect([deleted.status, deleted.body.accessTokensRevoked]).toEqual([200, 1]);
    const revoked = await stack.admin('revokeUserToken', { token: revokedUser });
    expect([revoked.status, revoked.body.revoked]).toEqual([200, true]);
    // Issuing tokens is not a revocation: only the two revocations above issued a WAIT.
    expect((await waitCalls(ha.primary.port)) - waitsBefore).toBe(2);
    expect(store.replicationStats).toEqual({ waits: 2, unacknowledged: 0 });
    // Already on the replica the moment the operations returned (read from the replica itself).
    const replica: Redis = await rawRedis(`redis://127.0.0.1:${ha.replica.port}`);
    try {
      expect(await replica.hget(store.keys.userToken(hashToken(revokedUser)), 'revoked')).toBe('true');
      expect(await replica.hget(store.keys.accessToken(hashToken(deletedClientToken)), 'revokedAt')).toMatch(/^\d+$/);
      expect(await replica.hget(store.keys.client(doomed.clientId), 'revokedAt')).toMatch(/^\d+$/);
    } finally {
      replica.disconnect();
    }
    expect((await mcp(deletedClientToken)).status).toBe(401);
    expect((await mcp(revokedUser)).status).toBe(401);

    // Refresh-token reuse revokes the family: that revocation is WAITed for as well.
    expect((await stack.admin('seedDefaultProfiles')).status).toBe(200);
    const created = await stack.admin('createClient', { clientName: 'refresher' });
    const token = (params: Record<string, string>) =>
      postForm(`${stack.proxyUrl}/token`, params, basic(created.body.clientId, created.body.clientSecret));
    const first = await token({ grant_type: 'client_credentials' });
    expect(first.body.refresh_token).toMatch(/^[0-9a-f]{64}$/);
    const second = await token({ grant_type: 'refresh_token', refresh_token: first.body.refresh_token! });
    expect(second.status).toBe(200);
    expect((await mcp(second.body.access_token!)).status).toBe(200);
    expect(store.replicationStats.waits).toBe(2); // rotation itself is not a revocation
    stack.clock.advance(stack.sidecar.config.oauth.refreshReuseGraceSeconds * 1000); // past the grace window
    const replay = await token({ grant_type: 'refresh_token', refresh_token: first.body.refresh_token! });
    expect([replay.status, replay.body.error]).toEqual([400, 'invalid_grant']);
    expect(store.replicationStats).toEqual({ waits: 3, unacknowledged: 0 });
    expect((await mcp(second.body.access_token!)).status).toBe(401);

    // A replica that does not acknowledge (stopped): the revocation still succeeds after WAIT's own
    // timeout, and lookups keep being answered at once meanwhile (WAIT blocks only its connection).
    const extra = await putUserToken();
    ha.replica.process.kill('SIGSTOP');
    let revocationDone = false;
    let revocationMs: number;
    const during: Answer[] = [];
    try {
      const t0 = performance.now();
      const revocation = stack.admin('revokeUserToken', { token: extra }).then((r) => {
        revocationDone = true;
        revocationMs = performance.now() - t0;
        return r;
      });
      while (!revocationDone && during.length < 200) during.push(await mcp(valid));
      expect((await revocation).status).toBe(200);
    } finally {
      ha.replica.process.kill('SIGCONT');
    }
    console.log(
      `revocation with the replica stopped: ${Math.round(revocationMs!)} ms (WAIT timeout ${Math.floor(COMMAND_TIMEOUT_MS * 0.8)} ms); ${during.length} lookups answered meanwhile, slowest ${Math.round(Math.max(...during.map((a) => a.ms)))} ms`,
    );
    expect(revocationMs!).toBeGreaterThanOrEqual(Math.floor(COMMAND_TIMEOUT_MS * 0.8) - 5);
    expect(store.replicationStats).toEqual({ waits: 4, unacknowledged: 1 });
    // The same counts at /metrics, for an alert on revocations no replica has confirmed.
    const scraped = await (await fetch(`${stack.adminUrl}/metrics`)).text();
    expect(scraped).toContain('mcp_auth_revocation_waits_total{result="acknowledged"} 3');
    expect(scraped).toContain('mcp_auth_revocation_waits_total{result="unacknowledged"} 1');
    // Lookups took a few ms each here (48 during one WAIT); with the WAIT on the lookups' connection
    // (tried) at most 2 got through, the first one held up for the whole WAIT.
    expect(during.length).toBeGreaterThanOrEqual(5);
    for (const a of during) expect(a.status).toBe(200);
    expect((await mcp(extra)).status).toBe(401);

    // Refresh-token reuse with the replica stopped: the rotation revoked the family on the main
    // connection, and its repeat on the transaction connection changes nothing there. Its WAIT still
    // waits for the rotation's writes (Redis 7.0 moves a connection's WAIT offset on a write command
    // that changed nothing), not returning at once because the replica holds everything the
    // transaction connection itself wrote before.
    const reused = await token({ grant_type: 'client_credentials' });
    expect((await token({ grant_type: 'refresh_token', refresh_token: reused.body.refresh_token! })).status).toBe(200);
    stack.clock.advance(stack.sidecar.config.oauth.refreshReuseGraceSeconds * 1000);
    ha.replica.process.kill('SIGSTOP');
    try {
      const replayed = await token({ grant_type: 'refresh_token', refresh_token: reused.body.refresh_token! });
      expect([replayed.status, replayed.body.error]).toEqual([400, 'invalid_grant']);
    } finally {
      ha.replica.process.kill('SIGCONT');
    }
    expect(store.replicationStats).toEqual({ waits: 5, unacknowledged: 2 });

    // Back in sync before the failover test: the primary sees the replica online, every Sentinel
    // sees it up (a failover needs a good replica).
    await until('the replica to be online again', async () => /slave0:.*state=online/.test(await info(ha.primary.port, 'replication')));
    await until(
      'the replica link to be up',
      async () => infoField(await info(ha.replica.port, 'replication'), 'master_link_status') === 'up',
    );
  });

  it('primary SIGKILLed: 503 within the bound during the failover, never 200 for a revoked token; recovers to the promoted replica by itself', async () => {
    expect(await ha.currentPrimaryPort()).toBe(ha.primary.port);
    const answers: Array<Answer & { token: 'valid' | 'revoked' }> = [];
    const probe = async () => {
      const [a, b] = await Promise.all([mcp(valid), mcp(revokedUser)]);
      answers.push({ ...a, token: 'valid' }, { ...b, token: 'revoked' });
      return a;
    };
    for (let i = 0; i < 3; i++) expect((await probe()).status).toBe(200);

    // A revocation caught by the crash: its WAIT is blocked on the primary (the replica is stopped for
    // a moment, so it cannot acknowledge) when the primary dies. Whether the write survives the
    // promotion is unknown, so it must not answer success: 503, and the admin retries.
    const inFlight = await putUserToken();
    ha.replica.process.kill('SIGSTOP');
    let killedAt: number;
    let caught: { status: number; body: any };
    try {
      const pending = stack.admin('revokeUserToken', { token: inFlight });
      await until(
        'the revocation WAIT to block on the primary',
        async () => Number(infoField(await info(ha.primary.port, 'clients'), 'blocked_clients')) >= 1,
        5000,
        5,
      );
      killedAt = performance.now();
      await ha.primary.kill();
      caught = await pending;
    } finally {
      ha.replica.process.kill('SIGCONT');
    }
    expect(caught.status).toBe(503);
    // Probe until the valid token has worked 20 times in a row after the kill (bounded by the deadline).
    const deadline = killedAt + 30_000;
    let okInARow = 0;
    let sawUnavailable = false;
    while (okInARow < 20 && performance.now() < deadline) {
      const a = await probe();
      if (a.status === 503) sawUnavailable = true;
      okInARow = a.status === 200 && sawUnavailable ? okInARow + 1 : 0;
    }
    expect(okInARow).toBe(20);

    const after = answers.filter((a) => a.startedAt >= killedAt);
    for (const a of answers) {
      expect(a.ms).toBeLessThan(BOUND_MS);
      if (a.token === 'revoked') expect(a.status === 401 || a.status === 503, `revoked token answered ${a.status}`).toBe(true);
      if (a.status === 503) {
        expect(a.body).toEqual({ error: 'temporarily_unavailable' });
        expect(a.retryAfter).toMatch(/^\d+$/);
      }
    }
    const validAfter = after.filter((a) => a.token === 'valid');
    const firstOk = validAfter.findIndex((a) => a.status === 200);
    // Nothing but 503 until the promotion, nothing but 200 after it (no flapping back).
    expect(firstOk).toBeGreaterThan(0);
    for (const a of validAfter.slice(0, firstOk)) expect(a.status).toBe(503);
    for (const a of validAfter.slice(firstOk)) expect(a.status).toBe(200);
    const windowMs = validAfter[firstOk]!.startedAt - killedAt;
    const lastUnavailable = validAfter[firstOk - 1]!;
    console.log(
      `failover: ${firstOk} requests answered 503 (slowest ${Math.round(Math.max(...after.map((a) => a.ms)))} ms); ` +
        `503 window ${Math.round(windowMs)} ms from SIGKILL to the first 200 (last 503 started at +${Math.round(lastUnavailable.startedAt - killedAt)} ms)`,
    );

    // The promoted replica is the primary now, and the sidecar is on it.
    expect(await ha.currentPrimaryPort()).toBe(ha.replica.port);
    expect(infoField(await info(ha.replica.port, 'replication'), 'role')).toBe('master');
    expect((await mcp(user)).status).toBe(200);
    expect((await mcp(revokedUser)).status).toBe(401);
    expect((await mcp(deletedClientToken)).status).toBe(401);
    // The retry of the revocation the crash interrupted succeeds on the new primary.
    expect((await stack.admin('revokeUserToken', { token: inFlight })).status).toBe(200);
    expect((await mcp(inFlight)).status).toBe(401);

    // Writes work on the new primary too, including the admin transactions (a fresh connection).
    const fresh = await stack.issueOAuthToken();
    expect((await mcp(fresh.token)).status).toBe(200);
    const deleted = await stack.admin('deleteClient', { clientId: fresh.clientId });
    expect(deleted.status).toBe(200);
    expect((await mcp(fresh.token)).status).toBe(401);
    // The new primary has no replica (the old one is dead): no WAIT, so no timeout to sit out.
    const waits = store.replicationStats.waits;
    const revoked = await stack.admin('revokeUserToken', { token: user });
    expect(revoked.status).toBe(200);
    expect(store.replicationStats.waits).toBe(waits);
    expect((await mcp(user)).status).toBe(401);
    expect((await mcp(valid)).status).toBe(200);
  });
});

describe('Redis Sentinel with the lookup cache (redis.lookupCache: tracking)', () => {
  it('a failover (SENTINEL FAILOVER: the old primary stays up, demoted) drops the cache; it is live again on the new primary, where a hand edit is seen', async () => {
    const set = await startSentinelSet('mcpcache', { downAfterMs: 1000, failoverTimeoutMs: 3000 });
    const up = await startEchoUpstream();
    const cached = await startStack({
      redisUrl: set.url,
      upstreamUrl: up.url,
      config: { redis: { commandTimeoutMs: COMMAND_TIMEOUT_MS, lookupCache: 'tracking' } },
    });
    const newPrimary = await rawRedis(`redis://127.0.0.1:${set.replica.port}`);
    try {
      const cache = (cached.store as RedisTokenStore).lookupCache!;
      const { token } = await cached.issueOAuthToken();
      const ask = async () => (await postMcp(cached.mcpUrl, token)).status;
      expect(await ask()).toBe(200);
      expect(await ask()).toBe(200);
      expect(cache.stats.hits).toBeGreaterThanOrEqual(1);
      const dropped = new Promise((resolve) => cache.once('dropped', resolve));
      const sentinel = await rawRedis(`redis://127.0.0.1:${set.sentinels[0]!.port}`);
      try {
        await sentinel.call('SENTINEL', 'FAILOVER', 'mcpcache');
      } finally {
        sentinel.disconnect();
      }
      await dropped;
      await until('the cache to be live on the promoted replica', async () => {
        if (!cache.live) return false;
        const clients = (await newPrimary.client('LIST')) as string;
        return (
          clients.includes(`id=${cache.clientIds.subscriber} `) &&
          clients.includes(`id=${cache.clientIds.data} `) &&
          clients.includes('name=mcpauth-lookup-invalidations')
        );
      });
      expect(await set.currentPrimaryPort()).toBe(set.replica.port);
      // Filled again on the new primary, then revoked there by hand: refused once the invalidation arrives.
      const tokenHash = hashToken(token);
      await until('a request to pass on the new primary', async () => (await ask()) === 200);
      expect(await ask()).toBe(200);
      const invalidated = new Promise((resolve) => cache.once('invalidated', resolve));
      await newPrimary.hset((cached.store as RedisTokenStore).keys.accessToken(tokenHash), 'revokedAt', String(Date.now()));
      await invalidated;
      expect(await ask()).toBe(401);
    } finally {
      await newPrimary.quit();
      await cached.close();
      await up.close();
      await set.stop();
    }
  }, 60_000);
});

describe('rediss+sentinel://', () => {
  it('speaks TLS to the Sentinels and to the data nodes (not plain TCP)', async () => {
    // A listener in place of a Sentinel records the first byte it receives: 0x16 opens a TLS handshake,
    // a plain RESP command would start with '*'.
    const firstBytes: number[] = [];
    const sockets = new Set<Socket>();
    const server = createServer((socket) => {
      sockets.add(socket);
      socket.once('data', (chunk: Buffer) => {
        firstBytes.push(chunk[0]!);
        socket.destroy();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    const client = createRedisClient({
      url: `rediss+sentinel://:secret@127.0.0.1:${port}/mcpauth`,
      commandTimeoutMs: 500,
      connectTimeoutMs: 1000,
    });
    client.on('error', () => undefined);
    try {
      client.connect().catch(() => undefined);
      await until('a connection attempt to reach the fake Sentinel', async () => firstBytes.length > 0, 5000, 10);
      expect(firstBytes[0]).toBe(0x16);
      // The data node named by a Sentinel is reached with TLS too (ioredis needs both options).
      const options = (client as Redis).options;
      expect(options.enableTLSForSentinelMode).toBe(true);
      expect(options.tls).toBeDefined();
      expect(options.password).toBe('secret');
    } finally {
      client.disconnect();
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
