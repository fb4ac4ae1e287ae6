// The Lua scripts of the Redis store: each makes a check and the write it guards one atomic step
// (ioredis runs them with EVALSHA, falling back to EVAL once per connection).

import type { Fields } from './records.ts';
import type { RedisClient } from './redis-connection.ts';

// Revokes a user-grade record only if it exists (HSET alone would create a bare record).
const REVOKE_USER_TOKEN = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'revoked', 'true')
return 1`;

// Creates tokens only while their client exists and is not revoked; the same script adds them to the
// client's token set, which deleteClient WATCHes, so a create racing a delete either lands before the
// delete's snapshot (and is revoked with it) or sees the client revoked.
// KEYS: client, clientTokens, access, [refresh, family]
// ARGV: accessHash, accessExpiresAt, nAccessArgs, access fields..., [refreshHash, refreshExpiresAt, refresh fields...]
const STORE_TOKENS = `
local function store_tokens(args, offset)
  local n = tonumber(args[offset + 2])
  redis.call('HSET', KEYS[3], unpack(args, offset + 3, offset + 2 + n))
  redis.call('PEXPIREAT', KEYS[3], args[offset + 1])
  redis.call('SADD', KEYS[2], 'a:' .. args[offset])
  if #KEYS >= 5 then
    local r = offset + 3 + n
    redis.call('HSET', KEYS[4], unpack(args, r + 2))
    redis.call('PEXPIREAT', KEYS[4], args[r + 1])
    redis.call('SADD', KEYS[2], 'r:' .. args[r])
    redis.call('SADD', KEYS[5], 'a:' .. args[offset], 'r:' .. args[r])
    redis.call('PEXPIREAT', KEYS[5], args[r + 1])
  end
end
local function client_state()
  if redis.call('EXISTS', KEYS[1]) == 0 then return 'client_not_found' end
  if redis.call('HEXISTS', KEYS[1], 'revokedAt') == 1 then return 'client_revoked' end
  return 'ok'
end
`;

const ISSUE_TOKENS = `${STORE_TOKENS}
local state = client_state()
if state ~= 'ok' then return state end
store_tokens(ARGV, 1)
return 'ok'`;

// Rotation, the grace window and reuse detection in one step, so concurrent refreshes with one token
// get either the rotation, the one grace pair of a rotated token (within graceMs of the first
// rotation: a parallel session or a retry; graceUsedAt marks it given), a refusal within the window
// once that pair is given, or the family revoked, never a mix. The window rule is
// rotatedWithinGrace's (src/credentials.ts): |now - rotatedAt| < graceMs, anything unparsable outside it.
// KEYS: client, clientTokens, access, refresh, family, oldRefresh.
// ARGV: now, clientId, familyId, accessKeyPrefix, refreshKeyPrefix, graceMs, then the STORE_TOKENS arguments.
const ROTATE_REFRESH = `${STORE_TOKENS}
local old = redis.call('HMGET', KEYS[6], 'clientId', 'revokedAt', 'rotatedAt', 'familyId', 'graceUsedAt')
if not old[1] or old[1] ~= ARGV[2] or old[2] or old[4] ~= ARGV[3] then return 'invalid' end
local outcome = 'ok'
if old[3] then
  local rotatedAt = #old[3] <= 16 and string.match(old[3], '^%d+$') and tonumber(old[3])
  local grace = tonumber(ARGV[6])
  if rotatedAt and grace > 0 and math.abs(tonumber(ARGV[1]) - rotatedAt) < grace then
    outcome = 'grace'
  else
    for _, m in ipairs(redis.call('SMEMBERS', KEYS[5])) do
      local key = (string.sub(m, 1, 2) == 'a:' and ARGV[4] or ARGV[5]) .. string.sub(m, 3)
      if redis.call('EXISTS', key) == 1 then redis.call('HSETNX', key, 'revokedAt', ARGV[1]) end
    end
    return 'reused'
  end
end
local state = client_state()
if state == 'client_not_found' then return 'invalid' end
if state ~= 'ok' then return state end
if outcome == 'grace' then
  if old[5] then return 'grace_spent' end
  redis.call('HSET', KEYS[6], 'graceUsedAt', ARGV[1])
else
  redis.call('HSET', KEYS[6], 'rotatedAt', ARGV[1])
end
store_tokens(ARGV, 7)
return outcome`;

// Single use of an authorization code, in one step with issuing its tokens, so two concurrent
// redemptions cannot both succeed; a second one revokes what the first issued (RFC 6749 §4.1.2).
// KEYS: client, clientTokens, access, [refresh, family], code (always last).
// ARGV: now, clientId, accessKeyPrefix, refreshKeyPrefix, familyKeyPrefix, retainMs, then the
// STORE_TOKENS arguments.
const REDEEM_CODE = `${STORE_TOKENS}
local code = KEYS[#KEYS]
local f = redis.call('HMGET', code, 'clientId', 'expiresAt', 'redeemedAt', 'accessTokenHash', 'familyId')
if not f[1] or f[1] ~= ARGV[2] then return 'invalid' end
if f[3] then
  if f[4] and redis.call('EXISTS', ARGV[3] .. f[4]) == 1 then redis.call('HSETNX', ARGV[3] .. f[4], 'revokedAt', ARGV[1]) end
  if f[5] then
    for _, m in ipairs(redis.call('SMEMBERS', ARGV[5] .. f[5])) do
      local key = (string.sub(m, 1, 2) == 'a:' and ARGV[3] or ARGV[4]) .. string.sub(m, 3)
      if redis.call('EXISTS', key) == 1 then redis.call('HSETNX', key, 'revokedAt', ARGV[1]) end
    end
  end
  return 'reused'
end
if tonumber(f[2]) == nil or tonumber(f[2]) <= tonumber(ARGV[1]) then return 'invalid' end
local state = client_state()
if state == 'client_not_found' then return 'invalid' end
if state ~= 'ok' then return state end
redis.call('HSET', code, 'redeemedAt', ARGV[1], 'accessTokenHash', ARGV[7])
if #KEYS >= 6 then redis.call('HSET', code, 'familyId', string.sub(KEYS[5], string.len(ARGV[5]) + 1)) end
redis.call('PEXPIRE', code, ARGV[6])
store_tokens(ARGV, 7)
return 'ok'`;

// Read-and-delete in one step: a sign-in handle is good for one use.
const TAKE_HASH = `
local f = redis.call('HGETALL', KEYS[1])
redis.call('DEL', KEYS[1])
return f`;

// A pending sign-in, stored only while its client address and its client each hold fewer than their
// bound (0: none); expired holdings are dropped first. All three keys carry the {oauth} tag: one slot.
// KEYS: request, byAddress, byClient. ARGV: now, expiresAt, perAddress, perClient, member, fields...
// Reply: {'ok'} or {'address' | 'client', the expiry of the holder's oldest pending sign-in}.
const PUT_PENDING_SIGN_IN = `
local now = tonumber(ARGV[1])
local bounds = {tonumber(ARGV[3]), tonumber(ARGV[4])}
local holders = {'address', 'client'}
for i = 1, 2 do
  local key = KEYS[i + 1]
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  if bounds[i] > 0 and redis.call('ZCARD', key) >= bounds[i] then
    local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    return {holders[i], oldest[2]}
  end
end
redis.call('HSET', KEYS[1], unpack(ARGV, 6))
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
for i = 2, 3 do
  redis.call('ZADD', KEYS[i], ARGV[2], ARGV[5])
  redis.call('PEXPIREAT', KEYS[i], redis.call('ZRANGE', KEYS[i], -1, -1, 'WITHSCORES')[2])
end
return {'ok'}`;

// KEYS: refresh token, family. ARGV: now, accessKeyPrefix, refreshKeyPrefix.
const REVOKE_REFRESH_FAMILY = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSETNX', KEYS[1], 'revokedAt', ARGV[1])
for _, m in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  local key = (string.sub(m, 1, 2) == 'a:' and ARGV[2] or ARGV[3]) .. string.sub(m, 3)
  if redis.call('EXISTS', key) == 1 then redis.call('HSETNX', key, 'revokedAt', ARGV[1]) end
end
return 1`;

// Sets revokedAt on an existing access token or client, keeping the first revocation time.
const MARK_REVOKED = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSETNX', KEYS[1], 'revokedAt', ARGV[1])
return 1`;

// Creates an indexed record (a client, a profile) only when absent: a registration never replaces
// another client, and seeding never overwrites an admin's edits to a profile.
// KEYS: record, index. ARGV: id, fields...
const CREATE_INDEXED = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('SADD', KEYS[2], ARGV[1])
return 1`;

// A fixed window that starts with its first hit; the reply is the count and the ms left in the window.
const HIT_COUNTER = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); ttl = tonumber(ARGV[1]) end
return {count, ttl}`;

// The expiresAt member of a JSON value (a published key, an approval); nil when unreadable.
const JSON_EXPIRY = `
local function expiry(text)
  local ok, v = pcall(cjson.decode, text)
  if ok and type(v) == 'table' then return tonumber(v.expiresAt) end
  return nil
end`;

// Lists a public assertion key until ARGV[4] (extending, never shortening, its listing), drops every
// entry expired by ARGV[1] (or unreadable), and lets the hash itself expire with its last entry, so
// keys of replicas that died leave nothing behind. One hash: one key, one Cluster slot.
// KEYS: signing keys hash. ARGV: now, kid, value (signingKeyValue), expiresAt.
const PUBLISH_SIGNING_KEY = `${JSON_EXPIRY}
local current = redis.call('HGET', KEYS[1], ARGV[2])
local listed = current and expiry(current)
if not listed or listed < tonumber(ARGV[4]) then redis.call('HSET', KEYS[1], ARGV[2], ARGV[3]) end
local now = tonumber(ARGV[1])
local latest = 0
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local at = expiry(all[i + 1])
  if not at or at <= now then redis.call('HDEL', KEYS[1], all[i]) elseif at > latest then latest = at end
end
if latest > 0 then redis.call('PEXPIREAT', KEYS[1], string.format('%d', latest)) end
return 1`;

// Records one approval in a browser's hash and applies consentEviction's rule (src/store/records.ts):
// unreadable or expired entries go, then the soonest to expire (ties by field; never the one just
// written) beyond ARGV[2]; the hash expires with the last entry kept.
// KEYS: the browser's approvals. ARGV: now, max, field, value.
const PUT_CONSENT = `${JSON_EXPIRY}
redis.call('HSET', KEYS[1], ARGV[3], ARGV[4])
local now = tonumber(ARGV[1])
local live = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local at = expiry(all[i + 1])
  if not at or at <= now then redis.call('HDEL', KEYS[1], all[i]) else live[#live + 1] = {all[i], at} end
end
local function rank(e) return e[1] == ARGV[3] and 1 or 0 end
table.sort(live, function(a, b)
  if rank(a) ~= rank(b) then return rank(a) < rank(b) end
  if a[2] ~= b[2] then return a[2] < b[2] end
  return a[1] < b[1]
end)
local excess = #live - tonumber(ARGV[2])
local latest = 0
for i, e in ipairs(live) do
  if i <= excess then redis.call('HDEL', KEYS[1], e[1]) elseif e[2] > latest then latest = e[2] end
end
if latest > 0 then redis.call('PEXPIREAT', KEYS[1], string.format('%d', latest)) else redis.call('DEL', KEYS[1]) end
return 1`;

// Forgets the approval a revoked grant was linked to, and the link.
// KEYS: the grant's link. ARGV: the prefix of browsers' approval keys.
const FORGET_CONSENT = `
local link = redis.call('HMGET', KEYS[1], 'browser', 'consent')
if link[1] and link[2] then redis.call('HDEL', ARGV[1] .. link[1], link[2]) end
redis.call('DEL', KEYS[1])
return 1`;

// A session or task handle's owner, read and its life extended in one step (skipped while less than
// a sixteenth of the lifetime has passed since the last renewal); with ARGV[1] 'bind', a
// handle not recorded yet is recorded for this owner in the same step (so two first presentations
// cannot both win). Each of the owner's indexes (client, subject) lists it with its expiry as score;
// an index drops expired members, and past `max` members its least recently used handle is
// forgotten (only if that handle is still the same owner's: a stale member names nothing).
// KEYS: handle, clientIndex, subjectIndex
// ARGV: mode ('use' | 'bind'), owner, clientId ('' none), subjectHash ('' none), now, ttlMs, max, member, handlePrefix
const CLAIM_HANDLE = `
local stored = redis.call('HMGET', KEYS[1], 'owner', 'renewedAt')
local owner = stored[1]
local outcome = 'owned'
if owner then
  if owner ~= ARGV[2] then return 'foreign' end
elseif ARGV[1] == 'bind' then
  outcome = 'bound'
  redis.call('HSET', KEYS[1], 'owner', ARGV[2])
  if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'clientId', ARGV[3]) end
  if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'subjectHash', ARGV[4]) end
else
  return 'unknown'
end
local now = tonumber(ARGV[5])
local ttl = tonumber(ARGV[6])
local max = tonumber(ARGV[7])
-- A handle used again within a sixteenth of its lifetime since its last renewal keeps its expiry
-- and its index entries: the common use is one read, the renewal happens at most sixteen times a lifetime.
local renewedAt = tonumber(stored[2])
if outcome == 'owned' and renewedAt and now >= renewedAt and now - renewedAt < math.floor(ttl / 16) then return outcome end
redis.call('HSET', KEYS[1], 'renewedAt', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ttl)
local function listed(index, field, value)
  redis.call('ZREMRANGEBYSCORE', index, '-inf', now)
  if not redis.call('ZSCORE', index, ARGV[8]) then
    local over = redis.call('ZCARD', index) - max + 1
    if over > 0 then
      local evicted = redis.call('ZPOPMIN', index, over)
      for i = 1, #evicted, 2 do
        local key = ARGV[9] .. evicted[i]
        if redis.call('HGET', key, field) == value then redis.call('DEL', key) end
      end
    end
  end
  redis.call('ZADD', index, now + ttl, ARGV[8])
  redis.call('PEXPIRE', index, ttl)
end
if ARGV[3] ~= '' then listed(KEYS[2], 'clientId', ARGV[3]) end
if ARGV[4] ~= '' then listed(KEYS[3], 'subjectHash', ARGV[4]) end
return outcome`;

// Forgets one handle and its members in its owner's indexes.
// KEYS: handle. ARGV: clientIndexPrefix, subjectIndexPrefix, member
const FORGET_HANDLE = `
local f = redis.call('HMGET', KEYS[1], 'clientId', 'subjectHash')
if f[1] then redis.call('ZREM', ARGV[1] .. f[1], ARGV[3]) end
if f[2] then redis.call('ZREM', ARGV[2] .. f[2], ARGV[3]) end
return redis.call('DEL', KEYS[1])`;

// Forgets every handle an index lists that still belongs to its owner (`field` = `value`), then the index.
// KEYS: index. ARGV: handlePrefix, field, value
const FORGET_INDEXED_HANDLES = `
local members = redis.call('ZRANGE', KEYS[1], 0, -1)
local forgotten = 0
for _, member in ipairs(members) do
  local key = ARGV[1] .. member
  if redis.call('HGET', key, ARGV[2]) == ARGV[3] then
    redis.call('DEL', key)
    forgotten = forgotten + 1
  end
end
redis.call('DEL', KEYS[1])
return forgotten`;

/** The scripts as commands of a connection (after defineScripts). */
export interface ScriptedClient {
  mcpHitCounter(key: string, windowMs: string): Promise<[number, number]>;
  mcpRevokeUserToken(key: string): Promise<number>;
  mcpIssueTokens(...keysAndArgs: string[]): Promise<string>;
  mcpRotateRefresh(...keysAndArgs: string[]): Promise<string>;
  mcpRedeemCode(...keysAndArgs: string[]): Promise<string>;
  mcpTakeHash(key: string): Promise<string[]>;
  mcpPutPendingSignIn(request: string, byAddress: string, byClient: string, ...args: string[]): Promise<[string, string?]>;
  mcpRevokeRefreshFamily(token: string, family: string, now: string, accessPrefix: string, refreshPrefix: string): Promise<number>;
  mcpMarkRevoked(key: string, now: string): Promise<number>;
  mcpCreateIndexed(key: string, index: string, id: string, ...fields: string[]): Promise<number>;
  /** The connection's own SET, in the one form used (one-time values need no script). */
  set(key: string, value: string, expiry: 'PXAT', at: number, condition: 'NX'): Promise<'OK' | null>;
  mcpPublishSigningKey(key: string, now: string, kid: string, value: string, expiresAt: string): Promise<number>;
  mcpPutConsent(key: string, now: string, max: string, field: string, value: string): Promise<number>;
  mcpForgetConsent(link: string, consentsPrefix: string): Promise<number>;
  mcpClaimHandle(handle: string, clientIndex: string, subjectIndex: string, ...args: string[]): Promise<string>;
  mcpForgetHandle(handle: string, clientIndexPrefix: string, subjectIndexPrefix: string, member: string): Promise<number>;
  mcpForgetIndexedHandles(index: string, handlePrefix: string, field: string, value: string): Promise<number>;
}

/** Registers the scripts on a connection (the main one and the transaction one). */
export function defineScripts(redis: RedisClient): ScriptedClient {
  redis.defineCommand('mcpRevokeUserToken', { numberOfKeys: 1, lua: REVOKE_USER_TOKEN });
  redis.defineCommand('mcpIssueTokens', { lua: ISSUE_TOKENS });
  redis.defineCommand('mcpRotateRefresh', { numberOfKeys: 6, lua: ROTATE_REFRESH });
  redis.defineCommand('mcpRedeemCode', { lua: REDEEM_CODE });
  redis.defineCommand('mcpTakeHash', { numberOfKeys: 1, lua: TAKE_HASH });
  redis.defineCommand('mcpPutPendingSignIn', { numberOfKeys: 3, lua: PUT_PENDING_SIGN_IN });
  redis.defineCommand('mcpRevokeRefreshFamily', { numberOfKeys: 2, lua: REVOKE_REFRESH_FAMILY });
  redis.defineCommand('mcpMarkRevoked', { numberOfKeys: 1, lua: MARK_REVOKED });
  redis.defineCommand('mcpCreateIndexed', { numberOfKeys: 2, lua: CREATE_INDEXED });
  redis.defineCommand('mcpHitCounter', { numberOfKeys: 1, lua: HIT_COUNTER });
  redis.defineCommand('mcpPublishSigningKey', { numberOfKeys: 1, lua: PUBLISH_SIGNING_KEY });
  redis.defineCommand('mcpPutConsent', { numberOfKeys: 1, lua: PUT_CONSENT });
  redis.defineCommand('mcpForgetConsent', { numberOfKeys: 1, lua: FORGET_CONSENT });
  redis.defineCommand('mcpClaimHandle', { numberOfKeys: 3, lua: CLAIM_HANDLE });
  redis.defineCommand('mcpForgetHandle', { numberOfKeys: 1, lua: FORGET_HANDLE });
  redis.defineCommand('mcpForgetIndexedHandles', { numberOfKeys: 1, lua: FORGET_INDEXED_HANDLES });
  return redis as unknown as ScriptedClient;
}

/** Hash fields as the flat `field value field value ...` argument list of HSET, XADD and the scripts. */
export function flattenFields(fields: Fields): string[] {
  const out: string[] = [];
  for (const k in fields) out.push(k, fields[k]!);
  return out;
}
