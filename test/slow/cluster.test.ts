// RedisTokenStore on a real three-master Redis Cluster (redis+cluster://): the whole store contract
// suite, then the sidecar over HTTP (admin operations, client_credentials, refresh rotation and reuse
// detection, user-grade tokens and their hand revocation), then the spread of the bucketed layout. A
// client's records share its bucket's tag {oauth:<bucket>}, so deleteClient's WATCH/MULTI/EXEC and the
// Lua scripts stay in one slot while the clients spread over the masters; user-grade keys are
// single-key operations spread over the masters.

import { randomBytes } from 'node:crypto';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateToken, generateTokenFor, hashToken } from '../../src/model/credentials.ts';
import { clientBucket, escapeGlob } from '../../src/store/records.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import { cachedRawAccess, redisRawAccess, runStoreContract } from '../integration/store-contract.ts';
import { startEchoUpstream, type FakeUpstream } from '../support/fake-upstreams.ts';
import { startRedisCluster, type RedisClusterSet } from '../support/redis-ha.ts';
import { aclRefusals, documentedAcl } from '../support/acl.ts';
import { openRedisStore, uniquePrefix } from '../support/redis.ts';
import { basic, postForm, postMcp } from '../support/http.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { credentialsClient } from '../support/clients.ts';

let cluster: RedisClusterSet;

beforeAll(async () => {
  const started = performance.now();
  cluster = await startRedisCluster();
  console.log(`Redis Cluster (3 masters) ready in ${Math.round(performance.now() - started)} ms: ${cluster.url}`);
});
afterAll(async () => {
  await cluster?.stop();
});

function rawCluster(): Cluster {
  const c = new Cluster(
    cluster.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })),
    { lazyConnect: true, redisOptions: { maxRetriesPerRequest: 2 } },
  );
  c.on('error', () => undefined);
  return c;
}

runStoreContract('RedisTokenStore on Redis Cluster', async () => {
  const prefix = uniquePrefix('cluster-contract');
  const store = await openRedisStore(prefix, { url: cluster.url });
  const raw = rawCluster();
  await raw.connect();
  return {
    store,
    ...redisRawAccess(raw),
    keys: store.keys,
    // The cluster is private to this file and killed in afterAll: nothing to delete.
    cleanup: async () => {
      await store.close();
      raw.disconnect();
    },
  };
});

// As the ACL user the docs give (docs/security.md's two lines and the Cluster line of
// docs/redis-ha.md, set on every node as an operator would), with the lookup cache on: nothing the
// store does on a Cluster is refused on any node.
runStoreContract('RedisTokenStore on Redis Cluster as the documented ACL user, with the lookup cache', async () => {
  const prefix = uniquePrefix('cluster-acl');
  const user = `mcp-sidecar-${randomBytes(3).toString('hex')}`;
  const password = randomBytes(16).toString('hex');
  const lines = [...documentedAcl('security', user, prefix, password), ...documentedAcl('redis-ha', user, prefix, password)];
  expect(lines).toHaveLength(3);
  const nodes = cluster.nodes.map((n) => new Redis(n.port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 2 }));
  for (const node of nodes) {
    await node.connect();
    for (const line of lines) await node.call('ACL', 'SETUSER', ...line);
  }
  const store = await openRedisStore(prefix, {
    url: cluster.url.replace('redis+cluster://', `redis+cluster://${user}:${password}@`),
    lookupCache: { maxEntries: 1000, pingIntervalMs: 1000, connectTimeoutMs: 5000 },
  });
  const cache = store.clusterLookupCache!;
  expect(cache.live).toBe(true);
  const unsubscribe = await store.subscribeRevocations({ revoked: () => undefined, missed: () => undefined });
  const raw = rawCluster();
  await raw.connect();
  return {
    store,
    ...cachedRawAccess(raw, cache),
    keys: store.keys,
    cleanup: async () => {
      try {
        for (const node of nodes) expect(await aclRefusals(node)).toEqual([]);
        if (store.client.status !== 'end') expect(cache.live).toBe(true);
      } finally {
        await unsubscribe().catch(() => undefined);
        await store.close().catch(() => undefined);
        raw.disconnect();
        for (const node of nodes) {
          await node.call('ACL', 'LOG', 'RESET');
          await node.call('ACL', 'DELUSER', user);
          node.disconnect();
        }
      }
    },
  };
});

describe('the sidecar over HTTP on Redis Cluster', () => {
  let echo: FakeUpstream;
  let stack: Stack;
  let raw: Cluster;

  beforeAll(async () => {
    echo = await startEchoUpstream();
    stack = await startStack({ redisUrl: cluster.url, upstreamUrl: echo.url });
    raw = rawCluster();
    await raw.connect();
  });
  afterAll(async () => {
    raw?.disconnect();
    await stack?.close();
    await echo?.close();
  });

  async function mcp(token: string): Promise<number> {
    return (await postMcp(stack.mcpUrl, token)).status;
  }

  async function client(): Promise<{ id: string; secret: string }> {
    const created = await stack.admin('createClient', { clientName: 'cluster-test' });
    expect(created.status).toBe(201);
    return { id: created.body.clientId, secret: created.body.clientSecret };
  }

  it('admin createAccessToken, client_credentials, refresh rotation and reuse detection, deleteClient', async () => {
    const seeded = await stack.admin('seedDefaultProfiles');
    expect(seeded.status).toBe(200);
    const c = await client();
    const issued = await stack.admin('createAccessToken', { clientId: c.id, lifetimeSeconds: 600 });
    expect(issued.status).toBe(201);
    expect(await mcp(issued.body.accessToken)).toBe(200);

    const first = await postForm(`${stack.proxyUrl}/token`, { grant_type: 'client_credentials' }, basic(c.id, c.secret));
    expect(first.status).toBe(200);
    expect(first.body.refresh_token).toMatch(/^[0-9a-f]{64}$/);
    expect(await mcp(first.body.access_token)).toBe(200);

    const second = await postForm(
      `${stack.proxyUrl}/token`,
      { grant_type: 'refresh_token', refresh_token: first.body.refresh_token },
      basic(c.id, c.secret),
    );
    expect(second.status).toBe(200);
    expect(await mcp(second.body.access_token)).toBe(200);
    // Presented again within the grace window (the rotation's grace path, on Cluster): the
    // rotation's own pair again, as often as asked; the family alive.
    for (let i = 0; i < 2; i++) {
      const racing = await postForm(
        `${stack.proxyUrl}/token`,
        { grant_type: 'refresh_token', refresh_token: first.body.refresh_token },
        basic(c.id, c.secret),
      );
      expect(racing.status).toBe(200);
      expect([racing.body.access_token, racing.body.refresh_token]).toEqual([second.body.access_token, second.body.refresh_token]);
    }
    const racing = second;
    expect(await mcp(racing.body.access_token)).toBe(200);
    // Replaying the rotated refresh token after the window revokes the whole family.
    stack.clock.advance(stack.sidecar.config.oauth.refreshReuseGraceSeconds * 1000);
    const replay = await postForm(
      `${stack.proxyUrl}/token`,
      { grant_type: 'refresh_token', refresh_token: first.body.refresh_token },
      basic(c.id, c.secret),
    );
    expect([replay.status, replay.body.error]).toEqual([400, 'invalid_grant']);
    for (const t of [first, second, racing]) expect(await mcp(t.body.access_token)).toBe(401);
    // Untouched by the family revocation.
    expect(await mcp(issued.body.accessToken)).toBe(200);

    const third = await postForm(`${stack.proxyUrl}/token`, { grant_type: 'client_credentials' }, basic(c.id, c.secret));
    expect(await mcp(third.body.access_token)).toBe(200);
    const deleted = await stack.admin('deleteClient', { clientId: c.id });
    expect(deleted.status).toBe(200);
    // createAccessToken's token, third's access token (+ its refresh token); the family revoked before is not counted again.
    expect(deleted.body).toMatchObject({ clientId: c.id, accessTokensRevoked: 2, refreshTokensRevoked: 1 });
    expect(await mcp(issued.body.accessToken)).toBe(401);
    expect(await mcp(third.body.access_token)).toBe(401);
    const afterDelete = await postForm(
      `${stack.proxyUrl}/token`,
      { grant_type: 'refresh_token', refresh_token: third.body.refresh_token },
      basic(c.id, c.secret),
    );
    expect(afterDelete.status).not.toBe(200);
    expect((await stack.admin('createAccessToken', { clientId: c.id, lifetimeSeconds: 600 })).status).not.toBe(201);
  });

  it('user-grade tokens live on several masters; revoked by the admin operation or by hand with HSET', async () => {
    const store = stack.store as RedisTokenStore;
    const tokens = Array.from({ length: 12 }, () => generateToken());
    const now = Date.now();
    for (const t of tokens)
      await store.putUserToken({
        tokenHash: hashToken(t),
        subject: 'alice',
        issuer: 'https://idp.example/',
        createdAt: now,
        expiresAt: now + 3_600_000,
      });
    for (const t of tokens) expect(await mcp(t)).toBe(200);
    // Spread over the cluster (12 random slots on 3 masters all on one master: 3 * (1/3)^12, negligible).
    const slots = await Promise.all(
      tokens.map((t) => raw.call('CLUSTER', 'KEYSLOT', store.keys.userToken(hashToken(t))) as Promise<number>),
    );
    const owners = new Set(await Promise.all(slots.map(async (slot) => ownerOf(raw, slot))));
    expect(owners.size).toBeGreaterThan(1);

    const byAdmin = await stack.admin('revokeUserToken', { token: tokens[0] });
    expect([byAdmin.status, byAdmin.body.revoked]).toEqual([200, true]);
    await raw.hset(store.keys.userToken(hashToken(tokens[1]!)), 'revoked', 'true');
    expect(await mcp(tokens[0]!)).toBe(401);
    expect(await mcp(tokens[1]!)).toBe(401);
    for (const t of tokens.slice(2)) expect(await mcp(t)).toBe(200);
  });

  it("a client's records sit in the slot of its bucket; the rest of the OAuth state under {oauth}; no CROSSSLOT", async () => {
    const keys = await keysUnder(raw, stack.prefix);
    const store = stack.store as RedisTokenStore;
    const bucketed = keys.filter((k) => /\{oauth:[0-9a-f]{2}\}/.test(k));
    expect(bucketed.length).toBeGreaterThan(5);
    // Every access token of the run is in the slot of its client's record.
    for (const key of keys.filter((k) => store.keys.accessTokenHashOf(k) !== undefined)) {
      const clientId = await raw.hget(key, 'clientId');
      expect(await raw.call('CLUSTER', 'KEYSLOT', key)).toBe(await raw.call('CLUSTER', 'KEYSLOT', store.keys.client(clientId!)));
    }
    const sharedSlot = (await raw.call('CLUSTER', 'KEYSLOT', '{oauth}')) as number;
    for (const k of keys.filter((k) => k.includes('{oauth}'))) expect(await raw.call('CLUSTER', 'KEYSLOT', k)).toBe(sharedSlot);
    expect(stack.logs.filter((l) => /CROSSSLOT|MOVED|ASK |non local key/.test(l))).toEqual([]);
  });
});

describe('the bucketed layout on three masters', () => {
  let store: RedisTokenStore;
  let raw: Cluster;
  const HOUR = 3_600_000;

  beforeAll(async () => {
    store = await openRedisStore(uniquePrefix('cluster-spread'), { url: cluster.url });
    raw = rawCluster();
    await raw.connect();
  });
  afterAll(async () => {
    raw?.disconnect();
    await store?.close();
  });

  async function issue(clientId: string, subject?: string): Promise<string> {
    const now = Date.now();
    const access = hashToken(generateTokenFor(clientId));
    const refresh = hashToken(generateTokenFor(clientId));
    const user = subject === undefined ? {} : { user: { subject, issuer: 'https://idp.example/' } };
    const familyId = `fam-${access.slice(0, 8)}`;
    expect(
      await store.issueTokens(
        { tokenHash: access, clientId, familyId, createdAt: now, expiresAt: now + HOUR, ...user },
        { tokenHash: refresh, clientId, familyId, createdAt: now, expiresAt: now + 24 * HOUR, ...user },
      ),
    ).toBe('ok');
    return access;
  }

  async function client(clientId: string): Promise<void> {
    await store.createClient({
      clientId,
      clientName: clientId,
      redirectUris: [],
      grantTypes: ['client_credentials', 'refresh_token'],
      profile: 'default',
      tokenEndpointAuthMethod: 'client_secret_basic',
      clientSecretHash: hashToken(clientId),
      source: 'admin',
      createdAt: Date.now(),
    });
  }

  it('with the tokens of 300 clients, each master holds a share of the OAuth records within 15 points of a third', async () => {
    const clients = Array.from({ length: 300 }, (_, i) => `spread-${i}`);
    for (const id of clients) {
      await client(id);
      await issue(id);
      await issue(id);
    }
    const prefix = store.keys.layout().slice(0, -'layout'.length);
    const perMaster = await Promise.all(
      raw.nodes('master').map(async (node) => (await keysUnder(node, prefix)).filter((k) => k.includes('{oauth')).length),
    );
    const total = perMaster.reduce((a, b) => a + b, 0);
    // 300 clients: a record, a token set, 2 access, 2 refresh tokens and 2 families each.
    expect(total).toBeGreaterThanOrEqual(300 * 8);
    const shares = perMaster.map((n) => n / total);
    console.log(`OAuth records per master, of ${total}: ${shares.map((s) => `${(s * 100).toFixed(1)}%`).join(' ')}`);
    expect(perMaster).toHaveLength(3);
    for (const share of shares) expect(Math.abs(share - 1 / 3)).toBeLessThanOrEqual(0.15);
    for (const id of clients.slice(0, 3))
      expect(await store.deleteClient(id, Date.now())).toMatchObject({ accessTokensRevoked: 2, refreshTokensRevoked: 2 });
  });

  it("a subject's tokens of clients on every master: listed, revoked slot by slot, and a second run finds nothing left", async () => {
    const subject = `person-${Date.now()}`;
    const clients = Array.from({ length: 24 }, (_, i) => `subj-${i}`);
    const hashes: string[] = [];
    for (const id of clients) {
      await client(id);
      hashes.push(await issue(id, subject));
    }
    const owners = new Set(
      await Promise.all(hashes.map(async (h) => ownerOf(raw, (await raw.call('CLUSTER', 'KEYSLOT', store.keys.accessToken(h))) as number))),
    );
    expect(owners.size).toBe(3);
    const listed = await store.listSubjectTokens(subject, Date.now());
    expect(
      listed
        .filter((t) => t.kind === 'access')
        .map((t) => t.tokenHash)
        .sort(),
    ).toEqual([...hashes].sort());
    expect(listed.filter((t) => t.kind === 'refresh')).toHaveLength(24);
    const first = await store.revokeSubject(subject, undefined, Date.now(), 7);
    expect(first).toMatchObject({ accessTokensRevoked: 24, refreshTokensRevoked: 24 });
    for (const h of hashes) expect((await store.lookupToken(h)).oauth).toMatchObject({ revoked: true });
    expect(await store.revokeSubject(subject, undefined, Date.now(), 7)).toMatchObject({ accessTokensRevoked: 0, refreshTokensRevoked: 0 });
  });
});

describe('deleteClient with a token outside its bucket (as the migration leaves a layout-1 token)', () => {
  it('revokes it with the client, counted once', async () => {
    const store = await openRedisStore(uniquePrefix('cluster-stray'), { url: cluster.url });
    const raw = rawCluster();
    await raw.connect();
    try {
      const clientId = 'stray-owner';
      await store.createClient(credentialsClient(clientId, Date.now()));
      const inBucket = hashToken(generateTokenFor(clientId));
      const now = Date.now();
      expect(await store.createAccessToken({ tokenHash: inBucket, clientId, createdAt: now, expiresAt: now + 3_600_000 })).toBe('ok');
      // A token minted before the bucketed layout: in the bucket of its own hash, listed in the client's set.
      let stray = hashToken(generateToken());
      while (stray.slice(0, 2) === clientBucket(clientId)) stray = hashToken(generateToken());
      const strayKey = store.keys.accessToken(stray);
      await raw.hset(strayKey, { tokenHash: stray, clientId, createdAt: String(now), expiresAt: String(now + 3_600_000) });
      await raw.sadd(store.keys.clientTokens(clientId), `a:${stray}`);
      expect(await raw.call('CLUSTER', 'KEYSLOT', strayKey)).not.toBe(await raw.call('CLUSTER', 'KEYSLOT', store.keys.client(clientId)));
      expect((await store.lookupToken(stray)).oauth).toMatchObject({ revoked: false });
      expect(await store.deleteClient(clientId, now)).toMatchObject({ accessTokensRevoked: 2 });
      expect((await store.lookupToken(stray)).oauth).toMatchObject({ revoked: true });
      expect((await store.lookupToken(inBucket)).oauth).toMatchObject({ revoked: true });
      expect(await store.deleteClient(clientId, now)).toMatchObject({ accessTokensRevoked: 0 });
    } finally {
      raw.disconnect();
      await store.close();
    }
  });
});

/** Every key under a prefix on one node, or on every master of a cluster. */
async function keysUnder(client: Cluster | Redis, prefix: string): Promise<string[]> {
  const nodes = client instanceof Cluster ? client.nodes('master') : [client];
  const keys: string[] = [];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, batch] = await node.scan(cursor, 'MATCH', `${escapeGlob(prefix)}*`, 'COUNT', 500);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== '0');
  }
  return keys;
}

async function ownerOf(raw: Cluster, slot: number): Promise<string> {
  const ranges = (await raw.call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number, ...unknown[]], ...unknown[]]>;
  const range = ranges.find(([from, to]) => slot >= from && slot <= to);
  if (!range) throw new Error(`slot ${slot} unassigned`);
  return `${range[2][0]}:${range[2][1]}`;
}
