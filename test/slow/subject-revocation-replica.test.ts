// Revocations on a primary with a replica (two private redis-servers). A subject's: each batch of its
// access and refresh tokens and approvals is a revocation WAITed for, so what it revoked is on the
// replica the moment revokeSubject returns. A refresh token's reuse: its family's revocation is WAITed
// for too, and told to the other sidecars once.

import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { generateToken, generateTokenFor, hashToken } from '../../src/model/credentials.ts';
import { hashBucket } from '../../src/store/key-layout.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import { info, infoField, until } from '../support/redis-ha.ts';
import { startRedisServer, type RedisServer } from '../support/redis-server.ts';
import { openRedisStore, rawRedis } from '../support/redis.ts';
import { credentialsClient } from '../support/clients.ts';

const HOUR = 3_600_000;
const ISS = 'https://idp.example.com/';

let primary: RedisServer;
let replica: RedisServer;
let store: RedisTokenStore;
let fromReplica: Redis;

beforeAll(async () => {
  primary = await startRedisServer();
  replica = await startRedisServer(['--replicaof', '127.0.0.1', String(primary.port)]);
  await until('the replica in sync', async () => infoField(await info(replica.port, 'replication'), 'master_link_status') === 'up');
  await until('the primary seeing its replica', async () => infoField(await info(primary.port, 'replication'), 'connected_slaves') === '1');
  store = await openRedisStore('replica-revoke:', { url: primary.url });
  fromReplica = await rawRedis(replica.url);
});
afterAll(async () => {
  await store?.close();
  fromReplica?.disconnect();
  await replica?.stop();
  await primary?.stop();
});

it("every batch of a person's tokens and approvals is WAITed for: on the replica when revokeSubject returns", async () => {
  const now = Date.now();
  const user = { subject: 'leaver', issuer: ISS };
  await store.createClient(credentialsClient('c-replica', now));
  const hashes = Array.from({ length: 6 }, () => hashToken(generateToken()));
  for (const tokenHash of hashes)
    expect(await store.createAccessToken({ tokenHash, clientId: 'c-replica', user, createdAt: now, expiresAt: now + HOUR })).toBe('ok');
  const browser = hashToken('browser');
  const approval = { clientId: 'c-replica', clientCreatedAt: now, redirectUri: 'http://127.0.0.1:9999/cb', ...user, approvedAt: now };
  await store.putConsent(browser, { ...approval, expiresAt: now + HOUR }, now, 20);
  // At least one batch per index holding anything: the home index's approval, each bucket's tokens.
  const batches = 1 + new Set(hashes.map(hashBucket)).size;
  const before = store.replicationStats;

  const result = await store.revokeSubject('leaver', undefined, now, 2);

  expect(result).toEqual({ accessTokensRevoked: hashes.length, refreshTokensRevoked: 0, userTokensRevoked: 0, consentsForgotten: 1 });
  const after = store.replicationStats;
  expect(after.unacknowledged).toBe(before.unacknowledged);
  expect(after.waits - before.waits).toBeGreaterThanOrEqual(batches);
  for (const tokenHash of hashes) expect(await fromReplica.hget(store.keys.accessToken(tokenHash), 'revokedAt')).toBe(String(now));
  expect(await fromReplica.hlen(store.keys.consents(browser))).toBe(0);
}, 60_000);

it('a refresh token used twice: its family revoked, WAITed for, on the replica when rotate returns, and told to the sidecars once', async () => {
  const now = Date.now();
  const clientId = 'c-reuse';
  await store.createClient(credentialsClient(clientId, now));
  const familyId = 'fam-replica-reuse';
  const pair = () => {
    const access = { tokenHash: hashToken(generateTokenFor(clientId)), clientId, familyId, createdAt: now, expiresAt: now + HOUR };
    const refresh = { tokenHash: hashToken(generateTokenFor(clientId)), clientId, familyId, createdAt: now, expiresAt: now + HOUR };
    return { access, refresh };
  };
  const first = pair();
  expect(await store.issueTokens(first.access, first.refresh)).toBe('ok');
  const second = pair();
  expect(await store.rotateRefreshToken(first.refresh.tokenHash, clientId, now, second.access, second.refresh)).toBe('ok');
  // PUBLISH as Redis counts it: every notice a revocation sends goes out with one.
  const publishes = async () => Number(/cmdstat_publish:calls=(\d+)/.exec(await info(primary.port, 'commandstats'))?.[1] ?? 0);
  const before = { publishes: await publishes(), waits: store.replicationStats.waits };

  const third = pair();
  expect(await store.rotateRefreshToken(first.refresh.tokenHash, clientId, now, third.access, third.refresh)).toBe('reused');

  expect(store.replicationStats.waits - before.waits).toBeGreaterThanOrEqual(1);
  expect(await fromReplica.hget(store.keys.refreshToken(second.refresh.tokenHash), 'revokedAt')).not.toBeNull();
  expect(await fromReplica.hget(store.keys.accessToken(second.access.tokenHash), 'revokedAt')).not.toBeNull();
  expect((await publishes()) - before.publishes).toBe(1);
}, 60_000);
