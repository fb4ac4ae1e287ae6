// The least-privilege ACL user that docs/security.md tells operators to create, as they would paste it:
// the block is read from the doc, its password and key prefix filled in, and set on a private
// redis-server. The whole store contract then runs as that user, subscribed to revocation notices as
// a sidecar is, and Redis's own ACL LOG must stay empty: a command, key or channel the store needs and
// the documented user may not use fails the test, even where the store would only log the refusal.

import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRedisStore } from '../support/redis.ts';
import { startRedisServer, type RedisServer } from '../support/redis-server.ts';
import { redisRawAccess, runStoreContract } from './store-contract.ts';
import type { StoreHarness } from './store-contract/context.ts';

const PASSWORD = randomBytes(16).toString('hex');
const DOC = new URL('../../docs/security.md', import.meta.url);

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

/**
 * The documented `ACL SETUSER` blocks as arguments for `user`, in the doc's order (the user, then what
 * the lookup cache adds): their password placeholder and default key prefix (`mcpauth:`, in keys and
 * channels) replaced by this test's.
 */
function documentedAcl(user: string, prefix: string): string[][] {
  const blocks = [...readFileSync(DOC, 'utf8').matchAll(/```\nACL SETUSER mcp-sidecar ([\s\S]*?)\n```/g)].map((m) => m[1]!);
  expect(blocks).toHaveLength(2);
  return blocks.map((block) => [
    user,
    ...block
      .split(/\s+/)
      .filter((rule) => rule !== '')
      .map((rule) => (rule === '>CHANGE-ME' ? `>${PASSWORD}` : rule.replace(/^([~&%RW]*)mcpauth:/, `$1${prefix}`))),
  ]);
}

/** Sets the documented user up on the private Redis: the first block, and with `cache` the second. */
async function setUser(user: string, prefix: string, cache = false): Promise<void> {
  const [base, forCache] = documentedAcl(user, prefix);
  await admin.call('ACL', 'SETUSER', ...base!);
  if (cache) await admin.call('ACL', 'SETUSER', ...forCache!);
}

/** What Redis refused the user since the last reset: `ACL LOG` entries as reason, object and username. */
async function refusals(): Promise<Array<{ reason: string; object: string; username: string }>> {
  const entries = (await admin.call('ACL', 'LOG')) as unknown[][];
  return entries.map((flat) => {
    const fields: Record<string, unknown> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) fields[String(flat[i])] = flat[i + 1];
    return { reason: String(fields.reason), object: String(fields.object), username: String(fields.username) };
  });
}

describe('the ACL user of docs/security.md', () => {
  it('is read from the doc with its key prefix and password placeholder', () => {
    const [base, forCache] = documentedAcl('u', 'p:');
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
  const access = redisRawAccess(admin);
  return {
    store,
    ...access,
    // With the cache, a hand edit is seen once its invalidation has arrived (as in store-redis.test.ts).
    setRawField: async (key, field, value) => {
      await access.setRawField(key, field, value);
      await store.lookupCache?.settled();
    },
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
