// `mcp-bearer-proxy migrate`: brings a store of layout 1 (every OAuth record under `{oauth}`) over to
// the current layout while sidecars keep serving. Each record of layout 1 is merged into its key of
// the current layout field by field with HSETNX (sets and indexes by union), never overwriting a
// field: records only ever gain fields (revokedAt, rotatedAt, redeemedAt...), so a merge is right
// whatever ran before it, and running it again (after a kill, or to catch up with what sidecars of
// the previous version wrote meanwhile) only adds what is missing. The layout-1 keys stay for the
// sidecars of the previous version until `--finish` deletes them (once none of those runs).

import { ACCESS_MEMBER, hashBucket, REFRESH_MEMBER, type KeyLayout } from './records.ts';
import { CURRENT_LAYOUT } from './key-layout.ts';
import { layoutPrefix, LEGACY_FAMILIES, legacyPattern, scanNode, scanNodes, type LegacyFamily } from './layout.ts';
import type { RedisClient } from './redis-connection.ts';

/** What one family's records became: new key created, fields added to an existing one, nothing to add, layout-1 key deleted. */
export interface FamilyCounts {
  scanned: number;
  copied: number;
  merged: number;
  unchanged: number;
  removed: number;
}
export type MigrationCounts = Record<LegacyFamily, FamilyCounts>;

// Adds the fields the hash lacks (HSETNX each), and its expiry when it has none. KEYS: the hash.
// ARGV: expireAt ('' none), field/value pairs. Reply: {existed (0/1), fields added}.
const MERGE_HASH = `
local existed = redis.call('EXISTS', KEYS[1])
local added = 0
for i = 2, #ARGV, 2 do added = added + redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) end
if ARGV[1] ~= '' and redis.call('PTTL', KEYS[1]) == -1 then redis.call('PEXPIREAT', KEYS[1], ARGV[1]) end
return {existed, added}`;

// The same for a set (SADD) or a sorted set (ZADD NX, member/score pairs). KEYS: the set.
// ARGV: 'set' | 'zset', expireAt ('' none), members (or member/score pairs).
const MERGE_SET = `
local existed = redis.call('EXISTS', KEYS[1])
local added = 0
if ARGV[1] == 'set' then
  for i = 3, #ARGV do added = added + redis.call('SADD', KEYS[1], ARGV[i]) end
else
  for i = 3, #ARGV, 2 do added = added + redis.call('ZADD', KEYS[1], 'NX', ARGV[i + 1], ARGV[i]) end
end
if ARGV[2] ~= '' and redis.call('PTTL', KEYS[1]) == -1 then redis.call('PEXPIREAT', KEYS[1], ARGV[2]) end
return {existed, added}`;

interface Migrator {
  redis: RedisClient;
  keys: KeyLayout;
  finish: boolean;
  counts: MigrationCounts;
}

function emptyCounts(): MigrationCounts {
  const counts = {} as MigrationCounts;
  for (const family of LEGACY_FAMILIES) counts[family] = { scanned: 0, copied: 0, merged: 0, unchanged: 0, removed: 0 };
  return counts;
}

/** The absolute expiry of a key from its PTTL ('' when it has none). */
function expireAtOf(pttl: number): string {
  return pttl > 0 ? String(Date.now() + pttl) : '';
}

function tally(counts: FamilyCounts, [existed, added]: [number, number]): void {
  if (existed === 0 && added > 0) counts.copied++;
  else if (added > 0) counts.merged++;
  else counts.unchanged++;
}

/** The current key of a layout-1 hash record, by family and id. */
function currentHashKey(keys: KeyLayout, family: LegacyFamily, id: string): string | undefined {
  if (family === 'oauthClients') return keys.client(id);
  if (family === 'oauthAccessTokens') return keys.accessToken(id);
  if (family === 'oauthRefreshTokens') return keys.refreshToken(id);
  if (family === 'oauthAuthorizationCodes') return keys.authorizationCode(id);
  return undefined;
}

async function mergeHash(m: Migrator, family: LegacyFamily, key: string, target: string): Promise<void> {
  const [fields, pttl] = await Promise.all([m.redis.hgetall(key), m.redis.pttl(key)]);
  const flat = Object.entries(fields).flat();
  if (flat.length === 0) return; // expired since the SCAN
  const reply = (await m.redis.eval(MERGE_HASH, 1, target, expireAtOf(pttl), ...flat)) as [number, number];
  tally(m.counts[family], reply);
}

async function mergeSet(
  m: Migrator,
  family: LegacyFamily,
  target: string,
  kind: 'set' | 'zset',
  members: string[],
  pttl: number,
): Promise<void> {
  if (members.length === 0) return;
  const reply = (await m.redis.eval(MERGE_SET, 1, target, kind, expireAtOf(pttl), ...members)) as [number, number];
  tally(m.counts[family], reply);
}

/** A refresh family goes to its client's bucket: the client is read from a member's record. */
async function familyClient(m: Migrator, members: string[]): Promise<string | null> {
  for (const member of members) {
    const hash = member.slice(ACCESS_MEMBER.length);
    const kind = member.startsWith(ACCESS_MEMBER) ? 'oauthAccessTokens' : 'oauthRefreshTokens';
    const current = member.startsWith(ACCESS_MEMBER) ? m.keys.accessToken(hash) : m.keys.refreshToken(hash);
    const clientId =
      (await m.redis.hget(current, 'clientId')) ?? (await m.redis.hget(`${layoutPrefix(m.keys)}{oauth}:${kind}:${hash}`, 'clientId'));
    if (clientId !== null) return clientId;
  }
  return null;
}

/** Merges one layout-1 key; with `finish`, deletes it (the home index keeps its own members). */
async function migrateKey(m: Migrator, family: LegacyFamily, key: string): Promise<void> {
  const id = key.slice(`${layoutPrefix(m.keys)}{oauth}:${family}:`.length);
  m.counts[family].scanned++;
  const hashTarget = currentHashKey(m.keys, family, id);
  if (hashTarget !== undefined) await mergeHash(m, family, key, hashTarget);
  else if (family === 'oauthClientTokens') {
    const [members, pttl] = await Promise.all([m.redis.smembers(key), m.redis.pttl(key)]);
    await mergeSet(m, family, m.keys.clientTokens(id), 'set', members, pttl);
  } else if (family === 'oauthRefreshFamilies') {
    const [members, pttl] = await Promise.all([m.redis.smembers(key), m.redis.pttl(key)]);
    const clientId = await familyClient(m, members);
    // No member left to name its client: every token of the family is gone, and the family with them.
    if (clientId !== null) await mergeSet(m, family, m.keys.refreshFamily(clientId, id), 'set', members, pttl);
    else m.counts[family].unchanged++;
  } else {
    await migrateSubjectIndex(m, key, id);
    return;
  }
  if (m.finish && (await m.redis.del(key)) === 1) m.counts[family].removed++;
}

/**
 * Layout 1's subject index is layout 2's home index (same key): its token members (`a:`, `r:`) go to
 * the index of their bucket, and leave the home index only with `--finish` (the previous version
 * reads them there).
 */
async function migrateSubjectIndex(m: Migrator, key: string, subjectHash: string): Promise<void> {
  const counts = m.counts.subjectGrants;
  const flat = await m.redis.zrange(key, 0, -1, 'WITHSCORES');
  const byBucket = new Map<string, string[]>();
  const tokens: string[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const member = flat[i]!;
    if (!member.startsWith(ACCESS_MEMBER) && !member.startsWith(REFRESH_MEMBER)) continue;
    tokens.push(member);
    const bucket = hashBucket(member.slice(ACCESS_MEMBER.length));
    byBucket.set(bucket, [...(byBucket.get(bucket) ?? []), member, flat[i + 1]!]);
  }
  counts.scanned++;
  if (tokens.length === 0) {
    counts.unchanged++;
    return;
  }
  for (const [bucket, pairs] of byBucket) {
    const scores = pairs.filter((_, i) => i % 2 === 1).map(Number);
    const target = m.keys.subjectGrants(subjectHash, bucket);
    await mergeSet(m, 'subjectGrants', target, 'zset', pairs, Math.max(...scores) - Date.now());
  }
  if (m.finish) {
    await m.redis.zrem(key, ...tokens);
    counts.removed++;
  }
}

/**
 * One pass over every layout-1 record on every master, then the layout version written. Safe to run
 * while sidecars of either version serve, to interrupt, and to run again.
 */
export async function migrateLayout(
  redis: RedisClient,
  keys: KeyLayout,
  options: { finish: boolean; batchSize?: number; progress?: (line: string) => void },
): Promise<MigrationCounts> {
  const m: Migrator = { redis, keys, finish: options.finish, counts: emptyCounts() };
  const count = options.batchSize ?? 500;
  for (const node of scanNodes(redis)) {
    for (const family of LEGACY_FAMILIES) {
      options.progress?.(`migrating ${family} on ${node.options.host ?? ''}:${node.options.port ?? ''}`);
      for await (const found of scanNode(node, legacyPattern(keys, family), count))
        await Promise.all(found.map((key) => migrateKey(m, family, key)));
    }
  }
  await redis.set(keys.layout(), String(CURRENT_LAYOUT));
  return m.counts;
}
