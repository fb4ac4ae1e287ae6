// The memory engine of the keyspace port (src/store/keyspace.ts): the commands a plan may name, run on
// the memory store's own maps with Redis's replies, expiries against the injected clock. A plan is
// applied between two awaits, so nothing runs in between: the atomic step the Lua script is on Redis.

import type { Clock } from '../model/clock.ts';
import { INTEGER_TEXT, READ_COMMANDS, WRITE_COMMANDS, guardHolds, type Command, type Keyspace, type Plan, type Reply } from './keyspace.ts';

type Args = Array<string | number>;

const READS = new Set<string>(READ_COMMANDS);
const WRITES = new Set<string>(WRITE_COMMANDS);

/** A score bound of ZCOUNT, ZRANGEBYSCORE and ZREMRANGEBYSCORE: `-inf`, `+inf`, `n` or `(n` (exclusive). */
function scoreTest(bound: string | number, upper: boolean): (score: number) => boolean {
  const text = String(bound);
  if (text === '-inf') return () => true;
  if (text === '+inf') return () => true;
  const open = text.startsWith('(');
  const value = Number(open ? text.slice(1) : text);
  if (Number.isNaN(value)) throw new Error('ERR min or max is not a float');
  if (upper) return open ? (s) => s < value : (s) => s <= value;
  return open ? (s) => s > value : (s) => s >= value;
}

/** Rank `at` of `length` items (negative counts from the end), as ZRANGE reads it. */
const rank = (at: string | number, length: number): number => {
  const n = Number(at);
  return n < 0 ? length + n : n;
};

const byScore = (a: [string, number], b: [string, number]): number => a[1] - b[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0);

const withScores = (pairs: Array<[string, number]>, scores: boolean): string[] =>
  scores ? pairs.flatMap(([m, s]) => [m, String(s)]) : pairs.map(([m]) => m);

/** The memory store's maps, as the commands use them (MemoryCore). */
export interface KeyspaceMaps {
  readonly clock: Clock;
  check(): void;
  get(key: string): Record<string, string> | null;
  createHash(key: string): Record<string, string>;
  liveSet(key: string): Set<string> | undefined;
  set(key: string): Set<string>;
  liveSortedSet(key: string): Map<string, number> | undefined;
  sortedSet(key: string): Map<string, number>;
  liveString(key: string): string | undefined;
  putString(key: string, value: string, expiresAt?: number): void;
  increment(key: string): number;
  deleteKey(key: string): boolean;
  expiryOf(key: string): number | null | undefined;
  expireAt(key: string, at: number, mode?: 'NX' | 'GT'): boolean;
}

export class MemoryKeyspace implements Keyspace {
  readonly #core: KeyspaceMaps;

  constructor(core: KeyspaceMaps) {
    this.#core = core;
  }

  async read(commands: readonly Command[]): Promise<Reply[]> {
    this.#core.check();
    return commands.map((command) => this.run(command));
  }

  async apply(plan: Plan): Promise<Reply[] | null> {
    return this.applyNow(plan);
  }

  /** A plan applied at once (memory decides and writes in one turn: nothing runs in between). */
  applyNow(plan: Plan): Reply[] | null {
    this.#core.check();
    for (const { command } of plan.guards) if (!READS.has(command[0])) throw new Error(`ERR plan: not a read: ${command[0]}`);
    for (const [name] of plan.steps) if (!READS.has(name) && !WRITES.has(name)) throw new Error(`ERR plan: unknown command: ${name}`);
    for (const guard of plan.guards) if (!guardHolds(guard, this.run(guard.command))) return null;
    return plan.steps.map((step) => this.run(step));
  }

  /** One command, as Redis answers it. */
  run([name, key, ...args]: Command): Reply {
    const core = this.#core;
    const hash = core.get(key);
    const zset = core.liveSortedSet(key);
    const set = core.liveSet(key);
    switch (name) {
      case 'EXISTS':
        return hash !== null || zset !== undefined || set !== undefined || core.liveString(key) !== undefined ? 1 : 0;
      case 'GET':
        return core.liveString(key) ?? null;
      case 'HGET':
        return hash?.[String(args[0])] ?? null;
      case 'HMGET':
        return args.map((field) => hash?.[String(field)] ?? null);
      case 'HGETALL':
        return hash === null ? [] : Object.entries(hash).flat();
      case 'HEXISTS':
        return hash?.[String(args[0])] === undefined ? 0 : 1;
      case 'HLEN':
        return hash === null ? 0 : Object.keys(hash).length;
      case 'SCARD':
        return set?.size ?? 0;
      case 'SMEMBERS':
        return [...(set ?? [])];
      case 'SISMEMBER':
        return set?.has(String(args[0])) ? 1 : 0;
      case 'ZCARD':
        return zset?.size ?? 0;
      case 'ZSCORE': {
        const score = zset?.get(String(args[0]));
        return score === undefined ? null : String(score);
      }
      case 'ZCOUNT':
        return this.#byScore(zset, args).length;
      case 'ZRANGE':
        return this.#range(zset, args);
      case 'ZRANGEBYSCORE':
        return this.#rangeByScore(zset, args);
      case 'ZREVRANGE':
        return this.#range(zset, args, true);
      case 'PTTL':
        return this.#ttl(key);
      // The scans answer the whole key in one batch (the cursor back to 0 at once).
      case 'ZSCAN':
        return ['0', String(args[0]) === '0' ? withScores([...(zset ?? [])], true) : []];
      case 'SSCAN':
        return ['0', String(args[0]) === '0' ? [...(set ?? [])] : []];
      case 'HSCAN':
        return ['0', String(args[0]) === '0' && hash !== null ? Object.entries(hash).flat() : []];
      default:
        return this.#write(name, key, args, hash, set, zset);
    }
  }

  #byScore(zset: Map<string, number> | undefined, [min, max]: Args): Array<[string, number]> {
    const low = scoreTest(min!, false);
    const high = scoreTest(max!, true);
    return [...(zset ?? [])].filter(([, s]) => low(s) && high(s)).sort(byScore);
  }

  /** ZRANGE by rank (ZREVRANGE: `reverse`, the highest score first). */
  #range(zset: Map<string, number> | undefined, [start, stop, option]: Args, reverse = false): string[] {
    const sorted = [...(zset ?? [])].sort(byScore);
    if (reverse) sorted.reverse();
    const from = Math.max(0, rank(start!, sorted.length));
    const to = Math.min(sorted.length - 1, rank(stop!, sorted.length));
    return withScores(from > to ? [] : sorted.slice(from, to + 1), option === 'WITHSCORES');
  }

  #rangeByScore(zset: Map<string, number> | undefined, [min, max, ...options]: Args): string[] {
    let pairs = this.#byScore(zset, [min!, max!]);
    const limit = options.indexOf('LIMIT');
    if (limit >= 0) {
      const offset = Number(options[limit + 1]);
      const count = Number(options[limit + 2]);
      pairs = pairs.slice(offset, count < 0 ? undefined : offset + count);
    }
    return withScores(pairs, options.includes('WITHSCORES'));
  }

  #ttl(key: string): number {
    const at = this.#core.expiryOf(key);
    if (at === null) return -2;
    return at === undefined ? -1 : Math.max(0, at - this.#core.clock.now());
  }

  #write(
    name: Command[0],
    key: string,
    args: Args,
    hash: Record<string, string> | null,
    set: Set<string> | undefined,
    zset: Map<string, number> | undefined,
  ): Reply {
    const core = this.#core;
    switch (name) {
      case 'DEL':
        return core.deleteKey(key) ? 1 : 0;
      case 'SET':
        return this.#set(key, args);
      case 'HSET': {
        const fields = hash ?? core.createHash(key);
        let added = 0;
        for (let i = 0; i + 1 < args.length; i += 2) {
          if (fields[String(args[i])] === undefined) added++;
          fields[String(args[i])] = String(args[i + 1]);
        }
        return added;
      }
      case 'HSETNX': {
        if (hash?.[String(args[0])] !== undefined) return 0;
        (hash ?? core.createHash(key))[String(args[0])] = String(args[1]);
        return 1;
      }
      case 'HDEL': {
        if (hash === null) return 0;
        let removed = 0;
        for (const field of args) if (hash[String(field)] !== undefined && delete hash[String(field)]) removed++;
        if (Object.keys(hash).length === 0) core.deleteKey(key);
        return removed;
      }
      case 'SADD': {
        const members = set ?? core.set(key);
        const before = members.size;
        for (const member of args) members.add(String(member));
        return members.size - before;
      }
      case 'SREM':
        return this.#remove(key, set, args);
      case 'ZADD': {
        const scores = zset ?? core.sortedSet(key);
        let added = 0;
        for (let i = 0; i + 1 < args.length; i += 2) {
          if (!scores.has(String(args[i + 1]))) added++;
          scores.set(String(args[i + 1]), Number(args[i]));
        }
        return added;
      }
      case 'ZREM':
        return this.#remove(key, zset, args);
      case 'ZREMRANGEBYSCORE':
        return this.#remove(
          key,
          zset,
          this.#byScore(zset, args).map(([m]) => m),
        );
      case 'PEXPIREAT':
        return core.expireAt(key, Number(args[0]), args[1] as 'NX' | 'GT' | undefined) ? 1 : 0;
      case 'PEXPIRE':
        return core.expireAt(key, core.clock.now() + Number(args[0]), args[1] as 'NX' | 'GT' | undefined) ? 1 : 0;
      case 'INCR':
        return core.increment(key);
      case 'HINCRBY': {
        const fields = hash ?? core.createHash(key);
        const field = String(args[0]);
        const stored = fields[field];
        if (stored !== undefined && !INTEGER_TEXT.test(stored)) throw new Error('ERR hash value is not an integer');
        const count = Number(stored ?? 0) + Number(args[1]);
        fields[field] = String(count);
        return count;
      }
      default:
        throw new Error(`ERR plan: unknown command: ${String(name)}`);
    }
  }

  /** SET key value [PXAT ms]: the value replaces whatever the key held (the other options are not in the port). */
  #set(key: string, [value, option, at, ...rest]: Args): string {
    const expiring = option !== undefined && String(option).toUpperCase() === 'PXAT';
    if ((option !== undefined && !expiring) || rest.length > 0) throw new Error('ERR plan: SET takes only PXAT');
    const expiresAt = expiring ? Number(at) : undefined;
    if (expiresAt !== undefined && !Number.isSafeInteger(expiresAt)) throw new Error('ERR value is not an integer or out of range');
    if (expiresAt !== undefined && expiresAt <= this.#core.clock.now()) this.#core.deleteKey(key);
    else this.#core.putString(key, String(value), expiresAt);
    return 'OK';
  }

  /** SREM and ZREM: members removed; an emptied key is deleted, as Redis does. */
  #remove(key: string, members: Set<string> | Map<string, number> | undefined, names: Args): number {
    if (members === undefined) return 0;
    let removed = 0;
    for (const name of names) if (members.delete(String(name))) removed++;
    if (members.size === 0) this.#core.deleteKey(key);
    return removed;
  }
}
