// The Lua scripts of the Redis store: each makes a check and the write it guards one atomic step
// (ioredis runs them with EVALSHA, falling back to EVAL once per connection).

import type { Fields } from './records.ts';
import type { RedisClient } from './redis-connection.ts';

// A token's key from its template (keyLayout's accessTokenTemplate) and hash: the bucket goes in `{oauth:}`
// (a subject's revocation batch builds its members' keys so).
const TOKEN_KEY = `
local function token_key(template, hash)
  local at = string.find(template, '{oauth:}', 1, true)
  return string.sub(template, 1, at + 6) .. string.sub(hash, 1, 2) .. string.sub(template, at + 7) .. hash
end
local function member_key(m, a, r) return token_key(string.sub(m, 1, 2) == 'a:' and a or r, string.sub(m, 3)) end`;

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

// Stores a pending device authorization unless its address or the server holds its bound, or its
// user code is taken. KEYS: record, user-code index, by address, all. ARGV: now, expiresAt,
// recordExpiresAt, perAddress, total, member, deviceCodeHash, fields...
const PUT_DEVICE_AUTHORIZATION = `
local now = tonumber(ARGV[1])
local bounds = {tonumber(ARGV[4]), tonumber(ARGV[5])}
local holders = {'address', 'total'}
for i = 1, 2 do
  local key = KEYS[i + 2]
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  if bounds[i] > 0 and redis.call('ZCARD', key) >= bounds[i] then
    local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    return {holders[i], oldest[2]}
  end
end
if redis.call('EXISTS', KEYS[2]) == 1 then return {'user_code'} end
redis.call('HSET', KEYS[1], unpack(ARGV, 8))
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
redis.call('HSET', KEYS[2], 'deviceCodeHash', ARGV[7])
redis.call('PEXPIREAT', KEYS[2], ARGV[2])
for i = 3, 4 do
  redis.call('ZADD', KEYS[i], ARGV[2], ARGV[6])
  redis.call('PEXPIREAT', KEYS[i], redis.call('ZRANGE', KEYS[i], -1, -1, 'WITHSCORES')[2])
end
return {'ok'}`;

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
  mcpPutPendingSignIn(request: string, byAddress: string, byClient: string, ...args: string[]): Promise<[string, string?]>;
  mcpPutDeviceAuthorization(record: string, index: string, byAddress: string, all: string, ...args: string[]): Promise<[string, string?]>;
  mcpCompareAndSetHash(key: string, expectedFields: string, ...expectedThenWrites: string[]): Promise<number>;
  /** The connection's own HGETALL (the read of a compare-and-set). */
  hgetall(key: string): Promise<Record<string, string>>;
  /** The connection's own SET, in the one form used (one-time values need no script). */
  set(key: string, value: string, expiry: 'PXAT', at: number, condition: 'NX'): Promise<'OK' | null>;
  mcpIndexSubject(index: string, member: string, expiresAt: string): Promise<number>;
  mcpRevokeSubjectBatch(index: string, ...args: string[]): Promise<[number, number, number, string, string]>;
  mcpClaimHandle(handle: string, clientIndex: string, subjectIndex: string, ...args: string[]): Promise<string>;
}

/** Registers the scripts on a connection (the main one and the transaction one). */
export function defineScripts(redis: RedisClient): ScriptedClient {
  redis.defineCommand('mcpPutPendingSignIn', { numberOfKeys: 3, lua: PUT_PENDING_SIGN_IN });
  redis.defineCommand('mcpPutDeviceAuthorization', { numberOfKeys: 4, lua: PUT_DEVICE_AUTHORIZATION });
  redis.defineCommand('mcpCompareAndSetHash', { numberOfKeys: 1, lua: COMPARE_AND_SET_HASH });
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
