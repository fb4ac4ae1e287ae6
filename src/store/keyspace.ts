// The one way a transition of several keys is written: read what the decision needs, decide in
// TypeScript, then apply the writes in one atomic step guarded by what the decision read. Both
// engines run the same code above this port: Redis (one generic Lua script checks the guards and runs
// the writes: src/store/redis-keyspace.ts) and memory (the same commands on its own maps:
// src/store/memory-keyspace.ts). A guard that no longer holds means another writer came in between:
// the transition reads and decides again on what is there now.

import { writesHash, type Fields, type HashUpdate } from './codec.ts';
import { StoreUnavailableError } from './shared.ts';

/** A Redis reply as both engines give it: integers as numbers, bulk strings, nil as null, arrays. */
export type Reply = string | number | null | Reply[];

/**
 * A command: its name, its one key, then its arguments. Only the commands below exist: both engines
 * run exactly these (the Lua script refuses any other).
 */
export type Command = readonly [name: CommandName, key: string, ...args: Array<string | number>];

/** Commands that read (any of them may be a guard, or a read before the decision). */
export const READ_COMMANDS = [
  'EXISTS',
  'GET',
  'HGET',
  'HMGET',
  'HGETALL',
  'HEXISTS',
  'HLEN',
  'SCARD',
  'SMEMBERS',
  'SISMEMBER',
  'ZCARD',
  'ZSCORE',
  'ZCOUNT',
  'ZRANGE',
  'ZRANGEBYSCORE',
  'ZREVRANGE',
  'PTTL',
] as const;

/** Commands that write (the steps of a plan; a read may be a step too, its reply given back). */
export const WRITE_COMMANDS = [
  'DEL',
  'SET',
  'HSET',
  'HSETNX',
  'HDEL',
  'SADD',
  'SREM',
  'ZADD',
  'ZREM',
  'ZREMRANGEBYSCORE',
  'PEXPIREAT',
  'PEXPIRE',
  'INCR',
  'HINCRBY',
] as const;

/**
 * Commands that read a key a batch at a time, `cursor [COUNT n]` (reply: the next cursor and the
 * batch; `0` when done): a read only, never a guard or a step of a plan. The memory engine answers
 * the whole key at once.
 */
export const SCAN_COMMANDS = ['ZSCAN', 'SSCAN', 'HSCAN'] as const;

export type ReadName = (typeof READ_COMMANDS)[number];
export type CommandName = ReadName | (typeof WRITE_COMMANDS)[number] | (typeof SCAN_COMMANDS)[number];

/**
 * A read whose reply must still be `equals` when the plan is applied; or, for a count, still `below`
 * a bound (a decision that only needed room under a bound stays right while others add under it:
 * pinning the exact count would make every writer of the same set retry after each other). A count is
 * an integer reply, or a value holding an integer's digits (a hash field HINCRBY counts in).
 */
export type Guard = { command: Command; equals: string | number | null } | { command: Command; below: number };

/** Writes made together only while every guard holds (the guards first, then the steps in order). */
export interface Plan {
  guards: Guard[];
  steps: Command[];
}

export interface Keyspace {
  /** Runs read commands, in order (on Redis: written together, one round trip). */
  read(commands: readonly Command[]): Promise<Reply[]>;
  /** Applies a plan in one atomic step: each step's reply, or null when a guard no longer held (nothing written). */
  apply(plan: Plan): Promise<Reply[] | null>;
}

/**
 * What a decision answers: its result, and the plan to apply for it (none: nothing to write). A
 * result that depends on what the steps answer (a counter's new value) is a function of their replies.
 */
export type Decision<R> = { result: R; plan?: undefined } | { plan: Plan; result: R | ((replies: Reply[]) => R) };

/** Attempts of a transition before it gives up (each lost one means a guarded key changed meanwhile). */
export const MAX_ATTEMPTS = 16;

/**
 * Reads, decides and applies until a plan's guards hold: `decide` reads through the keyspace, so a
 * retry decides again on what is there now. After MAX_ATTEMPTS lost races the store is reported
 * unavailable (503) rather than a decision made on a stale read.
 */
export async function transition<R>(keyspace: Keyspace, what: string, decide: (keyspace: Keyspace) => Promise<Decision<R>>): Promise<R> {
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const decision = await decide(keyspace);
    if (decision.plan === undefined) return decision.result;
    const replies = await keyspace.apply(decision.plan);
    if (replies === null) continue;
    const { result } = decision;
    return typeof result === 'function' ? (result as (replies: Reply[]) => R)(replies) : result;
  }
  throw new StoreUnavailableError(`${what}: too much contention, gave up`);
}

/** One read: its reply. */
export async function readOne(keyspace: Keyspace, command: Command): Promise<Reply> {
  const [reply] = await keyspace.read([command]);
  return reply!;
}

/** A flat `field value ...` reply (HGETALL) as fields; an absent hash as null. */
export function fieldsOf(reply: Reply): Record<string, string> | null {
  if (!Array.isArray(reply) || reply.length === 0) return null;
  const fields: Record<string, string> = {};
  for (let i = 0; i + 1 < reply.length; i += 2) fields[String(reply[i])] = String(reply[i + 1]);
  return fields;
}

/** A `member score ...` reply (WITHSCORES) as pairs, scores as numbers. */
export function scoredOf(reply: Reply): Array<[member: string, score: number]> {
  if (!Array.isArray(reply)) return [];
  const pairs: Array<[string, number]> = [];
  for (let i = 0; i + 1 < reply.length; i += 2) pairs.push([String(reply[i]), Number(reply[i + 1])]);
  return pairs;
}

/**
 * A key read a batch at a time (ZSCAN, SSCAN, HSCAN `key cursor COUNT count`): each batch's flat
 * reply, until the cursor comes back to 0. COUNT is a hint: a batch may hold more.
 */
export async function* scanKey(
  keyspace: Keyspace,
  [name, key]: readonly [(typeof SCAN_COMMANDS)[number], string],
  count: number,
): AsyncGenerator<string[]> {
  let cursor = '0';
  do {
    const reply = await readOne(keyspace, [name, key, cursor, 'COUNT', count]);
    if (!Array.isArray(reply) || reply.length !== 2 || !Array.isArray(reply[1])) throw new Error(`${name}: not a scan reply`);
    cursor = String(reply[0]);
    if (reply[1].length > 0) yield reply[1].map(String);
  } while (cursor !== '0');
}

/** A list reply (SMEMBERS, ZRANGE) as strings. */
export function membersOf(reply: Reply): string[] {
  return Array.isArray(reply) ? reply.map(String) : [];
}

/** `field value ...` arguments of HSET from fields. */
export function fieldArgs(fields: Record<string, string>): string[] {
  const out: string[] = [];
  for (const k in fields) out.push(k, fields[k]!);
  return out;
}

/** A guard's expected reply, as the Lua script compares it: nil as `n`, anything else `v` and its text. */
export function encodeExpected(value: string | number | null): string {
  return value === null ? 'n' : `v${String(value)}`;
}

/**
 * The plan of a hash update decided on the hash as read (`current`; null: absent): guarded by every
 * field and value read and the field count (a hash read as absent must still be absent), then DEL, or
 * HDEL, HSET and PEXPIREAT. The one write of every single-record rule (src/model/), on both engines.
 */
export function hashUpdatePlan(key: string, current: Fields | null, update: HashUpdate<unknown>): Plan {
  const guards = hashGuards(key, current);
  if (update.drop === true) return { guards, steps: [['DEL', key]] };
  const steps: Command[] = [];
  if ((update.unset?.length ?? 0) > 0) steps.push(['HDEL', key, ...update.unset!]);
  const set = fieldArgs(update.set ?? {});
  if (set.length > 0) steps.push(['HSET', key, ...set]);
  if (update.expireAt !== undefined) steps.push(['PEXPIREAT', key, Math.trunc(update.expireAt)]);
  return { guards, steps };
}

/** The guards that hold while a hash is exactly as read (`current`; null: absent): its field count and every field's value. */
export function hashGuards(key: string, current: Fields | null): Guard[] {
  const guards: Guard[] = [{ command: ['HLEN', key], equals: current === null ? 0 : Object.keys(current).length }];
  for (const field in current) guards.push({ command: ['HGET', key, field], equals: current[field]! });
  return guards;
}

/**
 * A compare-and-set on one hash: reads it, asks `decide` what to write, and writes that only while
 * the hash is still exactly as read; when it changed in between, `decide` runs again on what is
 * there now. A rule on a single record lives in src/model/ and runs here on either engine. `also`
 * names more steps written in the same atomic step when the hash is written (keys of its slot kept
 * with it: an index entry), from the decision's result.
 */
export function updateHash<R>(
  keyspace: Keyspace,
  key: string,
  decide: (current: Fields | null) => HashUpdate<R>,
  also?: (result: R) => Command[],
): Promise<R> {
  return transition(keyspace, 'updateHash', async (space) => {
    const current = fieldsOf(await readOne(space, ['HGETALL', key]));
    const update = decide(current && { ...current });
    if (!writesHash(update)) return { result: update.result };
    const plan = hashUpdatePlan(key, current, update);
    if (also !== undefined) plan.steps.push(...also(update.result));
    return { result: update.result, plan };
  });
}

/** The steps that write a record whole: the hash replaced by `fields`, gone at `expiresAt` (epoch ms). */
export function putHashSteps(key: string, fields: Record<string, string>, expiresAt: number): Command[] {
  return [
    ['DEL', key],
    ['HSET', key, ...fieldArgs(fields)],
    ['PEXPIREAT', key, Math.trunc(expiresAt)],
  ];
}

/** A guard as the Lua script checks it: an expected reply (encodeExpected), or `<` and the bound a number must stay below. */
export function encodeGuard(guard: Guard): string {
  return 'below' in guard ? `<${guard.below}` : encodeExpected(guard.equals);
}

/** A value of an integer's digits: what a count guard counts, and what HINCRBY counts on (as Redis reads it). */
export const INTEGER_TEXT = /^-?\d+$/;

/** Whether a guard's read answered what it expects (as the Lua script decides it). */
export function guardHolds(guard: Guard, reply: Reply): boolean {
  if ('below' in guard) {
    const count = typeof reply === 'string' && INTEGER_TEXT.test(reply) ? Number(reply) : reply;
    return typeof count === 'number' && count < guard.below;
  }
  return encodeExpected(reply as string | number | null) === encodeExpected(guard.equals);
}
