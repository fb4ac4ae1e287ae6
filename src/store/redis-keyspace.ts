// The Redis engine of the keyspace port (src/store/keyspace.ts): reads as commands written together,
// a plan as one generic Lua script that checks the guards and runs the steps. The script decides
// nothing of its own: every rule it applies was decided in TypeScript, which the memory engine runs too.

import type { RedisClient } from './redis-connection.ts';
import { READ_COMMANDS, WRITE_COMMANDS, encodeGuard, type Command, type Keyspace, type Plan, type Reply } from './keyspace.ts';

// The command lists as one constant string each, searched for `,NAME,` (no table built per call).
const luaList = (names: readonly string[]): string => `',${names.join(',')},'`;

// KEYS: every key the plan names, each once. ARGV: the number of guards, then each guard as
// `n name keyIndex args... expected` (n counts name, keyIndex and the args), then each step as
// `n name keyIndex args...`. A guard's reply is compared as `n` (nil) or `v` and its text, or (`<`
// and a number) must be a count below it: an integer, or a value of an integer's digits.
// Every command is checked against the port's lists before anything runs: a plan naming another
// writes nothing. Reply: nil when a guard failed (nothing written), else the steps' replies.
export const APPLY_PLAN = `
local READS = ${luaList(READ_COMMANDS)}
local WRITES = ${luaList(WRITE_COMMANDS)}
local function listed(list, name) return string.find(list, ',' .. name .. ',', 1, true) ~= nil end
local guards = tonumber(ARGV[1])
local i = 2
for g = 1, guards do
  if not listed(READS, ARGV[i + 1]) then return redis.error_reply('ERR plan: not a read: ' .. ARGV[i + 1]) end
  i = i + tonumber(ARGV[i]) + 2
end
while i <= #ARGV do
  local name = ARGV[i + 1]
  if not (listed(WRITES, name) or listed(READS, name)) then return redis.error_reply('ERR plan: unknown command: ' .. name) end
  i = i + tonumber(ARGV[i]) + 1
end
i = 2
for _ = 1, guards do
  local n = tonumber(ARGV[i])
  local name = ARGV[i + 1]
  local r = redis.call(name, KEYS[tonumber(ARGV[i + 2])], unpack(ARGV, i + 3, i + n))
  local expected = ARGV[i + n + 1]
  if string.sub(expected, 1, 1) == '<' then
    if type(r) == 'string' and string.match(r, '^-?%d+$') then r = tonumber(r) end
    if type(r) ~= 'number' or r >= tonumber(string.sub(expected, 2)) then return nil end
  else
    local got = 'n'
    if r then got = 'v' .. tostring(r) end
    if got ~= expected then return nil end
  end
  i = i + n + 2
end
local replies = {}
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  local r = redis.call(ARGV[i + 1], KEYS[tonumber(ARGV[i + 2])], unpack(ARGV, i + 3, i + n))
  if r == nil then r = false end
  replies[#replies + 1] = r
  i = i + n + 1
end
return replies`;

/** The applier as commands of a connection, one per number of keys (defined on first use). */
type PlanClient = Record<string, (...keysAndArgs: string[]) => Promise<Reply[] | null>>;

/**
 * The applier's command for `n` keys on `redis`. A fixed key count per command, because ioredis's
 * Cluster auto-pipelining routes a custom command by its first argument, which must then be a key.
 */
const definedCounts = new WeakMap<RedisClient, Set<number>>();
function applier(redis: RedisClient, n: number): (...keysAndArgs: string[]) => Promise<Reply[] | null> {
  let counts = definedCounts.get(redis);
  if (!counts) definedCounts.set(redis, (counts = new Set()));
  const name = `mcpApplyPlan${n}`;
  if (!counts.has(n)) {
    redis.defineCommand(name, { numberOfKeys: n, lua: APPLY_PLAN });
    counts.add(n);
  }
  return (redis as unknown as PlanClient)[name]!.bind(redis);
}

/** A plan as the script's KEYS and ARGV. */
export function encodePlan(plan: Plan): { keys: string[]; args: string[] } {
  const keys: string[] = [];
  const index = new Map<string, number>();
  const keyIndex = (key: string): string => {
    let at = index.get(key);
    if (at === undefined) {
      keys.push(key);
      index.set(key, (at = keys.length));
    }
    return String(at);
  };
  const encode = ([name, key, ...rest]: Command): string[] => [String(rest.length + 2), name, keyIndex(key), ...rest.map(String)];
  const args = [String(plan.guards.length)];
  for (const guard of plan.guards) args.push(...encode(guard.command), encodeGuard(guard));
  for (const step of plan.steps) args.push(...encode(step));
  return { keys, args };
}

/** The keyspace on one connection (the main one; the transaction one for a revocation WAITed for). */
export class RedisKeyspace implements Keyspace {
  readonly #redis: RedisClient;

  constructor(redis: RedisClient) {
    this.#redis = redis;
  }

  read(commands: readonly Command[]): Promise<Reply[]> {
    // Written in one turn: one write on a corked or auto-pipelined connection, one round trip.
    return Promise.all(commands.map(([name, ...args]) => this.#redis.call(name, ...args) as Promise<Reply>));
  }

  async apply(plan: Plan): Promise<Reply[] | null> {
    const { keys, args } = encodePlan(plan);
    return applier(this.#redis, keys.length)(...keys, ...args);
  }
}
