// The Lua scripts of the Redis store: each makes a check and the write it guards one atomic step
// (ioredis runs them with EVALSHA, falling back to EVAL once per connection).

import type { Fields } from './records.ts';
import type { RedisClient } from './redis-connection.ts';

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
  /** The connection's own SET, in the one form used (one-time values need no script). */
  set(key: string, value: string, expiry: 'PXAT', at: number, condition: 'NX'): Promise<'OK' | null>;
}

/** Registers the scripts on a connection (the main one and the transaction one). */
export function defineScripts(redis: RedisClient): ScriptedClient {
  redis.defineCommand('mcpTakeQuota', { numberOfKeys: 1, lua: TAKE_QUOTA });
  return redis as unknown as ScriptedClient;
}

/** Hash fields as the flat `field value field value ...` argument list of HSET, XADD and the scripts. */
export function flattenFields(fields: Fields): string[] {
  const out: string[] = [];
  for (const k in fields) out.push(k, fields[k]!);
  return out;
}
