// The Lua scripts of the Redis store: each makes a check and the write it guards one atomic step
// (ioredis runs them with EVALSHA, falling back to EVAL once per connection).

import type { Fields } from './records.ts';
import type { RedisClient } from './redis-connection.ts';

// A token's key from its template (keyLayout's accessTokenTemplate) and hash: the bucket goes in `{oauth:}`.
const TOKEN_KEY = `
local function token_key(template, hash)
  local at = string.find(template, '{oauth:}', 1, true)
  return string.sub(template, 1, at + 6) .. string.sub(hash, 1, 2) .. string.sub(template, at + 7) .. hash
end
local function member_key(m, a, r) return token_key(string.sub(m, 1, 2) == 'a:' and a or r, string.sub(m, 3)) end`;

// Creates tokens only while their client exists and is not revoked; the same script adds them to the
// client's token set, which deleteClient WATCHes, so a create racing a delete either lands before the
// delete's snapshot (and is revoked with it) or sees the client revoked.
// Tokens issued for a signed-in user are listed in that subject's index in the same step (INDEX_MEMBER).
// KEYS: client, clientTokens, access, [refresh, family]
// ARGV: subjectIndex ('' for none), accessHash, accessExpiresAt, nAccessArgs, access fields...,
// [refreshHash, refreshExpiresAt, refresh fields...]
const STORE_TOKENS = `${TOKEN_KEY}
local function index_member(index, member, expiresAt)
  redis.call('ZADD', index, expiresAt, member)
  redis.call('PEXPIREAT', index, redis.call('ZRANGE', index, -1, -1, 'WITHSCORES')[2])
end
local function store_tokens(args, offset)
  local subjects = args[offset]
  offset = offset + 1
  if subjects ~= '' then index_member(subjects, 'a:' .. args[offset], args[offset + 1]) end
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
    if subjects ~= '' then index_member(subjects, 'r:' .. args[r], args[r + 1]) end
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
// get either the rotation (which keeps the sealed successor on the old token), `grace` (within graceMs
// of the first rotation: parallel sessions or a retry; nothing is stored, the caller answers with that
// successor), or the family revoked, never a mix. The window rule is rotatedWithinGrace's
// (src/model/credentials.ts): |now - rotatedAt| < graceMs, anything unparsable outside it.
// KEYS: client, clientTokens, access, refresh, family, oldRefresh.
// ARGV: now, clientId, familyId, accessKeyTemplate, refreshKeyTemplate, graceMs, successor ('' for none),
// then the STORE_TOKENS arguments.
const ROTATE_REFRESH = `${STORE_TOKENS}
local old = redis.call('HMGET', KEYS[6], 'clientId', 'revokedAt', 'rotatedAt', 'familyId')
if not old[1] or old[1] ~= ARGV[2] or old[2] or old[4] ~= ARGV[3] then return 'invalid' end
local outcome = 'ok'
if old[3] then
  local rotatedAt = #old[3] <= 16 and string.match(old[3], '^%d+$') and tonumber(old[3])
  local grace = tonumber(ARGV[6])
  if rotatedAt and grace > 0 and math.abs(tonumber(ARGV[1]) - rotatedAt) < grace then
    outcome = 'grace'
  else
    for _, m in ipairs(redis.call('SMEMBERS', KEYS[5])) do
      local key = member_key(m, ARGV[4], ARGV[5])
      if redis.call('EXISTS', key) == 1 then redis.call('HSETNX', key, 'revokedAt', ARGV[1]) end
    end
    return 'reused'
  end
end
local state = client_state()
if state == 'client_not_found' then return 'invalid' end
if state ~= 'ok' then return state end
if outcome == 'grace' then return outcome end
redis.call('HSET', KEYS[6], 'rotatedAt', ARGV[1])
if ARGV[7] ~= '' then redis.call('HSET', KEYS[6], 'successor', ARGV[7]) end
store_tokens(ARGV, 8)
return outcome`;

// Single use of an authorization code, in one step with issuing its tokens, so two concurrent
// redemptions cannot both succeed; a second one revokes what the first issued (RFC 6749 §4.1.2).
// KEYS: client, clientTokens, access, [refresh, family], code (always last).
// ARGV: now, clientId, accessKeyTemplate, refreshKeyTemplate, familyKeyPrefix (the client's), retainMs, then the
// STORE_TOKENS arguments.
const REDEEM_CODE = `${STORE_TOKENS}
local code = KEYS[#KEYS]
local f = redis.call('HMGET', code, 'clientId', 'expiresAt', 'redeemedAt', 'accessTokenHash', 'familyId')
if not f[1] or f[1] ~= ARGV[2] then return 'invalid' end
if f[3] then
  local issued = f[4] and token_key(ARGV[3], f[4])
  if issued and redis.call('EXISTS', issued) == 1 then redis.call('HSETNX', issued, 'revokedAt', ARGV[1]) end
  if f[5] then
    for _, m in ipairs(redis.call('SMEMBERS', ARGV[5] .. f[5])) do
      local key = member_key(m, ARGV[3], ARGV[4])
      if redis.call('EXISTS', key) == 1 then redis.call('HSETNX', key, 'revokedAt', ARGV[1]) end
    end
  end
  return 'reused'
end
if tonumber(f[2]) == nil or tonumber(f[2]) <= tonumber(ARGV[1]) then return 'invalid' end
local state = client_state()
if state == 'client_not_found' then return 'invalid' end
if state ~= 'ok' then return state end
redis.call('HSET', code, 'redeemedAt', ARGV[1], 'accessTokenHash', ARGV[8])
if #KEYS >= 6 then redis.call('HSET', code, 'familyId', string.sub(KEYS[5], string.len(ARGV[5]) + 1)) end
redis.call('PEXPIRE', code, ARGV[6])
store_tokens(ARGV, 7)
return 'ok'`;

// The write of a compare-and-set decided outside Redis (updateHash), made only while the hash is
// exactly as read (every field and value, no more; none: absent): DEL, or HDEL, HSET and PEXPIREAT.
// KEYS: the hash. ARGV: n, n expected field/value pairs, drop ('1' or ''), expireAt ('' none), u,
// u fields to delete, then the field/value pairs to set.
const COMPARE_AND_SET_HASH = `
local n = tonumber(ARGV[1])
if redis.call('HLEN', KEYS[1]) ~= n then return 0 end
for i = 2, 2 * n, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) ~= ARGV[i + 1] then return 0 end
end
local at = 2 * n + 2
if ARGV[at] == '1' then redis.call('DEL', KEYS[1]); return 1 end
local u = tonumber(ARGV[at + 2])
if u > 0 then redis.call('HDEL', KEYS[1], unpack(ARGV, at + 3, at + 2 + u)) end
if #ARGV > at + 2 + u then redis.call('HSET', KEYS[1], unpack(ARGV, at + 3 + u)) end
if ARGV[at + 1] ~= '' then redis.call('PEXPIREAT', KEYS[1], ARGV[at + 1]) end
return 1`;

// KEYS: refresh token, family. ARGV: now, accessKeyTemplate, refreshKeyTemplate.
const REVOKE_REFRESH_FAMILY = `${TOKEN_KEY}
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSETNX', KEYS[1], 'revokedAt', ARGV[1])
for _, m in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  local key = member_key(m, ARGV[2], ARGV[3])
  if redis.call('EXISTS', key) == 1 then redis.call('HSETNX', key, 'revokedAt', ARGV[1]) end
end
return 1`;

// A fixed window that starts with its first hit; the reply is the count and the ms left in the window.
// The rule is hitCounter's (src/model/counters.ts), which the memory store runs; a parity test holds
// the two together.
const HIT_COUNTER = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); ttl = tonumber(ARGV[1]) end
return {count, ttl}`;

// A quota take (QuotaStorage.takeQuota), by takeQuota's rule (src/model/counters.ts; a parity test
// holds the two together): the window is computed from the caller's clock, a counter already in a
// later window keeps it, and the units are counted only when all fit. The key lives until
// its window ends and one window more (a relative PEXPIRE: the sidecar's clock need not agree with
// Redis's; a counter outliving its window is harmless, the stored window number tells it apart).
// KEYS: counter. ARGV: cost, limit, windowMs, now.
const TAKE_QUOTA = `
local cost = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local width = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
local window = math.floor(now / width)
local stored = redis.call('HMGET', KEYS[1], 'window', 'used')
local storedWindow = tonumber(stored[1])
local used = 0
if storedWindow and storedWindow >= window then
  window = storedWindow
  used = tonumber(stored[2]) or 0
end
local resetAt = (window + 1) * width
local allowed = used + cost <= limit
if allowed and cost > 0 then
  used = used + cost
  redis.call('HSET', KEYS[1], 'window', string.format('%.0f', window), 'used', string.format('%.0f', used))
  redis.call('PEXPIRE', KEYS[1], string.format('%.0f', resetAt - now + width))
end
return {allowed and 1 or 0, used, string.format('%.0f', resetAt)}`;

// The expiresAt member of a JSON value (an approval); nil when unreadable.
const JSON_EXPIRY = `
local function expiry(text)
  local ok, v = pcall(cjson.decode, text)
  if ok and type(v) == 'table' then return tonumber(v.expiresAt) end
  return nil
end`;

// A session or task handle's owner, read and its life extended in one step (skipped while less than
// a sixteenth of the lifetime has passed since the last renewal); with ARGV[1] 'bind', a
// handle not recorded yet is recorded for this owner in the same step (so two first presentations
// cannot both win). Each of the owner's indexes (client, subject) lists it with its expiry as score;
// an index drops expired members, and past `max` members its least recently used handle is
// forgotten (only if that handle is still the same owner's: a stale member names nothing).
// KEYS: handle, clientIndex, subjectIndex
// ARGV: mode ('use' | 'bind'), owner, clientId ('' none), subjectHash ('' none), now, ttlMs, max, member, handlePrefix,
//       urlElicitation ('1': a session whose client declared URL elicitation; '' none)
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
  if ARGV[10] == '1' then redis.call('HSET', KEYS[1], 'urlElicitation', '1') end
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

// Lists one member in a subject's index, scored by its record's expiry; the index expires with its
// longest-lived member. KEYS: index. ARGV: member, expiresAt.
const INDEX_SUBJECT = `
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('PEXPIREAT', KEYS[1], redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
return 1`;

// One batch of a subject's revocation, for the members of one index (one slot: a bucket's index lists
// that bucket's access and refresh tokens, the home index its approvals): access and refresh tokens
// get revokedAt, approvals are forgotten. A member whose record is gone, already revoked or another
// subject's leaves the index; one of another issuer (when ARGV[2] names one) stays. User-grade
// tokens (members `u:`) live outside any slot and are revoked one by one (revokeSubjectUserToken in
// src/model/token-records.ts, under the generic compare-and-set).
// KEYS: the subject's index. ARGV: now, issuer ('' any), subject, accessTemplate, refreshTemplate,
// consentsPrefix, members...
// Reply: {access revoked, refresh revoked, consents forgotten, revoked access hashes, revoked families}.
const REVOKE_SUBJECT_BATCH = `${JSON_EXPIRY}${TOKEN_KEY}
local access, refresh, consents = 0, 0, 0
local hashes, families = {}, {}
for i = 7, #ARGV do
  local m = ARGV[i]
  local kind = string.sub(m, 1, 2)
  local keep = false
  if kind == 'a:' or kind == 'r:' then
    local key = member_key(m, ARGV[4], ARGV[5])
    local f = redis.call('HMGET', key, 'subject', 'issuer', 'revokedAt', 'familyId', 'expiresAt')
    if f[1] == ARGV[3] and f[5] then
      if ARGV[2] ~= '' and f[2] ~= ARGV[2] then
        keep = true
      elseif not f[3] then
        redis.call('HSET', key, 'revokedAt', ARGV[1])
        if kind == 'a:' then
          access = access + 1
          hashes[#hashes + 1] = string.sub(m, 3)
        else
          refresh = refresh + 1
          if f[4] then families[#families + 1] = f[4] end
        end
      end
    end
  elseif kind == 'c:' then
    local browser, field = string.match(m, '^c:(%x+):(%x+)$')
    local value = browser and redis.call('HGET', ARGV[6] .. browser, field)
    if value then
      local ok, v = pcall(cjson.decode, value)
      local record = ok and type(v) == 'table' and v or {}
      if record.subject == ARGV[3] then
        if ARGV[2] ~= '' and record.issuer ~= ARGV[2] then
          keep = true
        else
          redis.call('HDEL', ARGV[6] .. browser, field)
          consents = consents + 1
        end
      end
    end
  else
    keep = true
  end
  if not keep then redis.call('ZREM', KEYS[1], m) end
end
return {access, refresh, consents, table.concat(hashes, ' '), table.concat(families, ' ')}`;

/** The scripts as commands of a connection (after defineScripts). */
export interface ScriptedClient {
  mcpHitCounter(key: string, windowMs: string): Promise<[number, number]>;
  mcpTakeQuota(key: string, cost: string, limit: string, windowMs: string, now: string): Promise<[number, number, string]>;
  /** Fixed key counts: ioredis's Cluster auto-pipelining routes a custom command by its first argument. */
  mcpIssueAccess(...keysAndArgs: string[]): Promise<string>;
  mcpIssuePair(...keysAndArgs: string[]): Promise<string>;
  mcpRedeemCodeAccess(...keysAndArgs: string[]): Promise<string>;
  mcpRedeemCodePair(...keysAndArgs: string[]): Promise<string>;
  mcpRotateRefresh(...keysAndArgs: string[]): Promise<string>;
  mcpCompareAndSetHash(key: string, expectedFields: string, ...expectedThenWrites: string[]): Promise<number>;
  /** The connection's own HGETALL (the read of a compare-and-set). */
  hgetall(key: string): Promise<Record<string, string>>;
  mcpRevokeRefreshFamily(token: string, family: string, now: string, accessPrefix: string, refreshPrefix: string): Promise<number>;
  /** The connection's own SET, in the one form used (one-time values need no script). */
  set(key: string, value: string, expiry: 'PXAT', at: number, condition: 'NX'): Promise<'OK' | null>;
  mcpIndexSubject(index: string, member: string, expiresAt: string): Promise<number>;
  mcpRevokeSubjectBatch(index: string, ...args: string[]): Promise<[number, number, number, string, string]>;
  mcpClaimHandle(handle: string, clientIndex: string, subjectIndex: string, ...args: string[]): Promise<string>;
}

/** Registers the scripts on a connection (the main one and the transaction one). */
export function defineScripts(redis: RedisClient): ScriptedClient {
  redis.defineCommand('mcpIssueAccess', { numberOfKeys: 3, lua: ISSUE_TOKENS });
  redis.defineCommand('mcpIssuePair', { numberOfKeys: 5, lua: ISSUE_TOKENS });
  redis.defineCommand('mcpRotateRefresh', { numberOfKeys: 6, lua: ROTATE_REFRESH });
  redis.defineCommand('mcpRedeemCodeAccess', { numberOfKeys: 4, lua: REDEEM_CODE });
  redis.defineCommand('mcpRedeemCodePair', { numberOfKeys: 6, lua: REDEEM_CODE });
  redis.defineCommand('mcpCompareAndSetHash', { numberOfKeys: 1, lua: COMPARE_AND_SET_HASH });
  redis.defineCommand('mcpRevokeRefreshFamily', { numberOfKeys: 2, lua: REVOKE_REFRESH_FAMILY });
  redis.defineCommand('mcpHitCounter', { numberOfKeys: 1, lua: HIT_COUNTER });
  redis.defineCommand('mcpTakeQuota', { numberOfKeys: 1, lua: TAKE_QUOTA });
  redis.defineCommand('mcpIndexSubject', { numberOfKeys: 1, lua: INDEX_SUBJECT });
  redis.defineCommand('mcpRevokeSubjectBatch', { numberOfKeys: 1, lua: REVOKE_SUBJECT_BATCH });
  redis.defineCommand('mcpClaimHandle', { numberOfKeys: 3, lua: CLAIM_HANDLE });
  return redis as unknown as ScriptedClient;
}

/** Hash fields as the flat `field value field value ...` argument list of HSET, XADD and the scripts. */
export function flattenFields(fields: Fields): string[] {
  const out: string[] = [];
  for (const k in fields) out.push(k, fields[k]!);
  return out;
}
