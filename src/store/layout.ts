// The store's layout version (`<prefix>layout`): checked before the sidecar serves, written on an
// empty store, and what `mcp-bearer-proxy migrate` moves a store of the previous layout to.
//
// Layout 1 (no version key) kept every OAuth record under the one `{oauth}` tag; layout 2
// (CURRENT_LAYOUT) puts a client's records under its bucket's tag (docs/storage.md).

import { Cluster, ReplyError, type Redis } from 'ioredis';
import { CURRENT_LAYOUT, escapeGlob, type KeyLayout } from './key-layout.ts';
import type { RedisClient } from './redis-connection.ts';
import { RedisKeyspace } from './redis-keyspace.ts';

/** The families of layout 1 that layout 2 names differently: `<prefix>{oauth}:<family>:<id>`. */
export const LEGACY_FAMILIES = [
  'oauthClients',
  'oauthClientTokens',
  'oauthAccessTokens',
  'oauthRefreshTokens',
  'oauthRefreshFamilies',
  'oauthAuthorizationCodes',
  'subjectGrants',
] as const;
export type LegacyFamily = (typeof LEGACY_FAMILIES)[number];

/** The key prefix the layout was built with. */
export function layoutPrefix(keys: KeyLayout): string {
  return keys.layout().slice(0, -'layout'.length);
}

/** A layout-1 key of one family, by its id. */
export function legacyKey(keys: KeyLayout, family: LegacyFamily, id: string): string {
  return `${layoutPrefix(keys)}{oauth}:${family}:${id}`;
}

/** The SCAN pattern of a layout-1 family. */
export function legacyPattern(keys: KeyLayout, family: LegacyFamily): string {
  return `${escapeGlob(layoutPrefix(keys))}{oauth}:${family}:*`;
}

/** The masters a SCAN must visit: every master of a cluster, or the one node. */
export function scanNodes(redis: RedisClient): Redis[] {
  return redis instanceof Cluster ? redis.nodes('master') : [redis];
}

/** One node's keys matching `pattern` (SCAN MATCH, COUNT `count`), each batch as SCAN answers it (empty ones too). */
export async function* scanNode(node: Redis, pattern: string, count: number): AsyncGenerator<string[]> {
  let cursor = '0';
  do {
    const [next, found] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', count);
    cursor = next;
    yield found;
  } while (cursor !== '0');
}

export type LayoutCheck = { ok: true; layout: number; written: boolean } | { ok: false; found: string; problem: string };

/**
 * Every write of the store is a plan run by one generic script (src/store/redis-keyspace.ts): a
 * Redis that cannot run one (before 7.0, or an ACL user without EVALSHA or one of its commands) is
 * refused here, before anything is served, instead of answering 503 on the first write. The probe
 * names a key that is never written (PEXPIRE of an absent key changes nothing). Redis's refusal, or
 * undefined; a connection failure is thrown as any start-up failure is.
 */
async function planRefused(redis: RedisClient, keys: KeyLayout): Promise<string | undefined> {
  const probe = `${keys.layout()}:probe`;
  try {
    await new RedisKeyspace(redis).apply({
      guards: [{ command: ['EXISTS', probe], equals: 0 }],
      steps: [
        ['PEXPIRE', probe, 1, 'NX'],
        ['PEXPIREAT', probe, 1, 'GT'],
      ],
    });
    return undefined;
  } catch (err) {
    if (err instanceof ReplyError) return (err as Error).message;
    throw err;
  }
}

/** Whether any node holds a key of a layout-1 family (stops at the first one found). */
async function holdsLegacyRecords(redis: RedisClient, keys: KeyLayout): Promise<boolean> {
  // subjectGrants of layout 1 is also layout 2's home index: its presence alone says nothing.
  const families = LEGACY_FAMILIES.filter((f) => f !== 'subjectGrants');
  for (const node of scanNodes(redis))
    for (const family of families)
      for await (const found of scanNode(node, legacyPattern(keys, family), 1000)) if (found.length > 0) return true;
  return false;
}

/**
 * Checks the store's layout before the sidecar serves: the current one is used as it is; a store
 * without a version key and without a record of layout 1 is empty (of OAuth records) and gets the
 * current version written (SET NX: two sidecars starting together agree; not with `write: false`,
 * the check of --check-config); anything else is refused, with what to run.
 */
export async function ensureLayout(redis: RedisClient, keys: KeyLayout, options: { write?: boolean } = {}): Promise<LayoutCheck> {
  const refused = await planRefused(redis, keys);
  if (refused !== undefined) {
    return {
      ok: false,
      found: 'plans refused',
      problem: `Redis refused the store's plan script (${refused.slice(0, 200)}): the store needs Redis 7.0 or later (it expires keys with PEXPIRE NX and GT) and, with an ACL user, EVALSHA and the commands listed in docs/security.md.`,
    };
  }
  const key = keys.layout();
  let stored = await redis.get(key);
  if (stored === null) {
    if (await holdsLegacyRecords(redis, keys)) {
      return {
        ok: false,
        found: '1',
        problem: `the store holds records of layout 1 (every OAuth record under one {oauth} tag) and this version uses layout ${CURRENT_LAYOUT}: run \`mcp-bearer-proxy migrate\` (with this configuration) to bring it over while the running sidecars keep serving, then start again.`,
      };
    }
    // A check alone (--check-config) writes nothing: the store would get its version at start-up.
    if (options.write === false) return { ok: true, layout: CURRENT_LAYOUT, written: false };
    if ((await redis.set(key, String(CURRENT_LAYOUT), 'NX')) === 'OK') return { ok: true, layout: CURRENT_LAYOUT, written: true };
    stored = await redis.get(key);
  }
  if (stored === String(CURRENT_LAYOUT)) return { ok: true, layout: CURRENT_LAYOUT, written: false };
  const known = stored !== null && /^[0-9]{1,4}$/.test(stored) && Number(stored) < CURRENT_LAYOUT;
  return {
    ok: false,
    found: stored ?? 'none',
    problem: known
      ? `the store is of layout ${stored} and this version uses layout ${CURRENT_LAYOUT}: run \`mcp-bearer-proxy migrate\` (with this configuration), then start again.`
      : `the store's layout key ${key} holds a layout this version does not know (${JSON.stringify((stored ?? '').slice(0, 40))}; this version uses ${CURRENT_LAYOUT}): it was written by another version or by hand. \`mcp-bearer-proxy migrate\` brings over only older layouts; start the version that wrote it, or restore the key.`,
  };
}
