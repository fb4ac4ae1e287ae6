// The least-privilege ACL user that docs/security.md tells operators to create, as they would paste it:
// the lines are read from the doc, their password and key prefix filled in, and set on a private
// redis-server. The whole store contract then runs as that user, subscribed to revocation notices as
// a sidecar is, strict and with the lookup cache; and the sidecar process starts as that user, with
// its cache live, and serves. Redis's own ACL LOG must stay empty: a command, key or channel the
// sidecar needs and the documented user may not use fails the test, even where it is only logged.

import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateToken } from '../../src/model/credentials.ts';
import { RUN_TS } from '../support/node-ts.ts';
import { startProcess } from '../support/process.ts';
import { aclRefusals, documentedAcl } from '../support/acl.ts';
import { openRedisStore } from '../support/redis.ts';
import { startRedisServer, type RedisServer } from '../support/redis-server.ts';
import { cachedRawAccess, runStoreContract } from './store-contract.ts';
import type { StoreHarness } from './store-contract/context.ts';

const PASSWORD = randomBytes(16).toString('hex');

let server: RedisServer;
let admin: Redis;

beforeAll(async () => {
  server = await startRedisServer();
  admin = new Redis(server.port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 2 });
  await admin.connect();
});
afterAll(async () => {
  await admin?.quit();
  await server?.stop();
});

/** The documented user's two lines (the user, then what the lookup cache adds) for `user`. */
function documentedLines(user: string, prefix: string): string[][] {
  const lines = documentedAcl('security', user, prefix, PASSWORD);
  expect(lines).toHaveLength(2);
  return lines;
}

/** Sets the documented user up on the private Redis: the first block, and with `cache` the second. */
async function setUser(user: string, prefix: string, cache = false): Promise<void> {
  const [base, forCache] = documentedLines(user, prefix);
  await admin.call('ACL', 'SETUSER', ...base!);
  if (cache) await admin.call('ACL', 'SETUSER', ...forCache!);
}

const refusals = () => aclRefusals(admin);

describe('the ACL user of docs/security.md', () => {
  it('is read from the doc with its key prefix and password placeholder', () => {
    const [base, forCache] = documentedLines('u', 'p:');
    expect(base).toContain(`>${PASSWORD}`);
    expect(base).toContain('~p:*');
    expect(base).toContain('&p:revocations');
    expect(forCache).toContain('&__redis__:invalidate');
    expect([...base!, ...forCache!].some((rule) => rule.includes('mcpauth:'))).toBe(false);
  });

  it('is refused a command outside its list: the ACL log this suite reads sees a refusal', async () => {
    const user = `acl-probe-${randomBytes(3).toString('hex')}`;
    await setUser(user, 'probe:');
    const client = new Redis(server.port, '127.0.0.1', { username: user, password: PASSWORD, lazyConnect: true, maxRetriesPerRequest: 0 });
    await client.connect();
    try {
      await expect(client.call('FLUSHALL')).rejects.toThrow(/NOPERM/);
      expect(await refusals()).toContainEqual({ reason: 'command', object: 'flushall', username: user });
    } finally {
      client.disconnect();
      await admin.call('ACL', 'LOG', 'RESET');
      await admin.call('ACL', 'DELUSER', user);
    }
  });
});

/** The store as the documented user (with the cache's additions and the cache on, with `cache`). */
async function asDocumentedUser(cache: boolean): Promise<StoreHarness> {
  const prefix = `acl-${randomBytes(3).toString('hex')}:mcpauth:`;
  const user = `mcp-sidecar-${randomBytes(3).toString('hex')}`;
  await setUser(user, prefix, cache);
  const store = await openRedisStore(prefix, {
    url: `redis://${user}:${PASSWORD}@127.0.0.1:${server.port}`,
    lookupCache: cache ? { maxEntries: 1000, pingIntervalMs: 1000, connectTimeoutMs: 5000 } : undefined,
  });
  // As a sidecar does at start-up: revocation notices on a connection of their own.
  const unsubscribe = await store.subscribeRevocations({ revoked: () => undefined, missed: () => undefined });
  return {
    store,
    ...cachedRawAccess(admin, store.lookupCache),
    keys: store.keys,
    cleanup: async () => {
      try {
        expect(await refusals()).toEqual([]);
        if (cache && store.client.status !== 'end') expect(store.lookupCache?.live).toBe(true);
      } finally {
        await admin.call('ACL', 'LOG', 'RESET');
        await unsubscribe().catch(() => undefined);
        await store.close().catch(() => undefined);
        await admin.call('ACL', 'DELUSER', user);
        const keys = await admin.keys(`${prefix}*`);
        if (keys.length > 0) await admin.del(...keys);
      }
    },
  };
}

runStoreContract('RedisTokenStore as the ACL user of docs/security.md', () => asDocumentedUser(false));
runStoreContract('RedisTokenStore with the lookup cache, as that user with what the cache adds', () => asDocumentedUser(true));

describe('the sidecar as the ACL user of docs/security.md, with what the cache adds', () => {
  it('starts with its lookup cache live, registers a client, authenticates a token and revokes it: nothing refused', async () => {
    const prefix = `acl-process-${randomBytes(3).toString('hex')}:`;
    const user = `mcp-sidecar-${randomBytes(3).toString('hex')}`;
    await setUser(user, prefix, true);
    const dir = mkdtempSync(join(tmpdir(), 'mcp-bearer-proxy-acl-'));
    const config = join(dir, 'sidecar.yaml');
    writeFileSync(
      config,
      ['masterToken: ${BEARER_SECRET_MASTER}', 'redis:', `  keyPrefix: "${prefix}"`, 'proxy:', '  port: 0', 'admin:', '  port: 0', ''].join(
        '\n',
      ),
    );
    const master = generateToken();
    const started = await startProcess(
      [process.execPath, ...RUN_TS, 'src/entry/main.ts', '--config', config],
      {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        BEARER_SECRET_MASTER: master,
        REDIS_URL: `redis://${user}:${PASSWORD}@127.0.0.1:${server.port}`,
        LOG_FORMAT: 'json',
        HOST: '127.0.0.1',
        // Nothing listens there: an authenticated request is answered 502 after its token was looked up.
        UPSTREAM_URL: 'http://127.0.0.1:9/mcp',
      },
      [/proxy listening on (\S+)/, /admin listening on (\S+)/],
    );
    try {
      const out = started.output();
      const proxyUrl = /proxy listening on (\S+)/.exec(out)![1]!;
      const adminUrl = /admin listening on (\S+)/.exec(out)![1]!;
      const operation = (name: string, body: object) =>
        fetch(`${adminUrl}/oauth/${name}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${master}` },
          body: JSON.stringify(body),
        });
      const created = await operation('createClient', { clientName: 'acl' });
      expect(created.status).toBe(201);
      const { clientId } = (await created.json()) as { clientId: string };
      const issued = await operation('createAccessToken', { clientId, lifetimeSeconds: 600 });
      expect(issued.status).toBe(201);
      const { accessToken } = (await issued.json()) as { accessToken: string };
      const call = () =>
        fetch(`${proxyUrl}/mcp`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${accessToken}`,
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
          },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
        });
      expect((await call()).status).toBe(502);
      expect((await call()).status).toBe(502);
      const deleted = await operation('deleteClient', { clientId });
      expect(deleted.status).toBe(200);
      expect((await call()).status).toBe(401);
      const scrape = await (await fetch(`${adminUrl}/metrics`)).text();
      expect(scrape).toContain('mcp_auth_lookup_cache_live 1');
      expect(out).not.toContain('token lookup cache off');
      expect(await refusals()).toEqual([]);
    } finally {
      started.child.kill('SIGKILL');
      await started.exit;
      rmSync(dir, { recursive: true, force: true });
      await admin.call('ACL', 'LOG', 'RESET');
      await admin.call('ACL', 'DELUSER', user);
    }
  }, 60_000);
});
