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

// KEYS: refresh token, family. ARGV: now, accessKeyTemplate, refreshKeyTemplate.
const REVOKE_REFRESH_FAMILY = `${TOKEN_KEY}
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSETNX', KEYS[1], 'revokedAt', ARGV[1])
for _, m in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  local key = member_key(m, ARGV[2], ARGV[3])
  if redis.call('EXISTS', key) == 1 then redis.call('HSETNX', key, 'revokedAt', ARGV[1]) end
end
return 1`;

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

/** The scripts as commands of a connection (after defineScripts). */
export interface ScriptedClient {
  mcpTakeQuota(key: string, cost: string, limit: string, windowMs: string, now: string): Promise<[number, number, string]>;
  /** Fixed key counts: ioredis's Cluster auto-pipelining routes a custom command by its first argument. */
  mcpIssueAccess(...keysAndArgs: string[]): Promise<string>;
  mcpIssuePair(...keysAndArgs: string[]): Promise<string>;
  mcpRedeemCodeAccess(...keysAndArgs: string[]): Promise<string>;
  mcpRedeemCodePair(...keysAndArgs: string[]): Promise<string>;
  mcpRotateRefresh(...keysAndArgs: string[]): Promise<string>;
  mcpRevokeRefreshFamily(token: string, family: string, now: string, accessPrefix: string, refreshPrefix: string): Promise<number>;
  /** The connection's own SET, in the one form used (one-time values need no script). */
  set(key: string, value: string, expiry: 'PXAT', at: number, condition: 'NX'): Promise<'OK' | null>;
}

/** Registers the scripts on a connection (the main one and the transaction one). */
export function defineScripts(redis: RedisClient): ScriptedClient {
  redis.defineCommand('mcpIssueAccess', { numberOfKeys: 3, lua: ISSUE_TOKENS });
  redis.defineCommand('mcpIssuePair', { numberOfKeys: 5, lua: ISSUE_TOKENS });
  redis.defineCommand('mcpRotateRefresh', { numberOfKeys: 6, lua: ROTATE_REFRESH });
  redis.defineCommand('mcpRedeemCodeAccess', { numberOfKeys: 4, lua: REDEEM_CODE });
  redis.defineCommand('mcpRedeemCodePair', { numberOfKeys: 6, lua: REDEEM_CODE });
  redis.defineCommand('mcpRevokeRefreshFamily', { numberOfKeys: 2, lua: REVOKE_REFRESH_FAMILY });
  redis.defineCommand('mcpTakeQuota', { numberOfKeys: 1, lua: TAKE_QUOTA });
  return redis as unknown as ScriptedClient;
}

/** Hash fields as the flat `field value field value ...` argument list of HSET, XADD and the scripts. */
export function flattenFields(fields: Fields): string[] {
  const out: string[] = [];
  for (const k in fields) out.push(k, fields[k]!);
  return out;
}
