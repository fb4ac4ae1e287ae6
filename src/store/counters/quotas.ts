// A quota take, written once for both engines on the keyspace port. A quota counter is a hash
// {window, used} that concurrent requests on every replica take from, so the common case must not
// retry: the take first counts on blind, in one round trip, with HINCRBY guarded by the window it
// assumes (the caller's) and by the room left under the limit (a count guard: others adding under
// the limit meanwhile leave it holding). When that guard fails (a new window, a counter of a replica
// whose clock is ahead, a count that does not read, or no room), the counter is read and the model's
// rule (takeQuota, src/model/counters.ts) decides; its write is guarded by what it read.
//
// The key lives until its window ends and one window more (a relative PEXPIRE: the sidecar's clock
// need not agree with Redis's; a counter outliving its window is harmless, its stored window number
// tells it apart).

import { quotaWindow, takeQuota, type QuotaCounter } from '../../model/counters.ts';
import { readOne, transition, type Keyspace, type Plan, type Reply } from '../keyspace.ts';
import type { QuotaOutcome } from './types.ts';

/** A stored field as an integer, in the one spelling the counter is written in; anything else does not read. */
const integerOf = (text: Reply | undefined): number | undefined =>
  typeof text === 'string' && /^(0|-?[1-9]\d{0,14})$/.test(text) ? Number(text) : undefined;

/** Adds `cost` to a counter in `window` while it still counts there and has room for it under `limit`. */
function countOnPlan(key: string, window: number, cost: number, limit: number, keepMs: number): Plan {
  return {
    guards: [
      { command: ['HGET', key, 'window'], equals: String(window) },
      { command: ['HGET', key, 'used'], below: limit - cost + 1 },
    ],
    steps: [
      ['HINCRBY', key, 'used', cost],
      ['PEXPIRE', key, keepMs],
    ],
  };
}

export async function takeQuotaOn(
  keyspace: Keyspace,
  key: string,
  cost: number,
  limit: number,
  windowMs: number,
  at: number,
): Promise<QuotaOutcome> {
  const now = Math.trunc(at);
  // The blind step is the rule's own write for a counter in the window of now with room for the take.
  const assumed = takeQuota({ window: quotaWindow(now, windowMs), used: 0 }, cost, limit, windowMs, now);
  if (assumed.write !== undefined) {
    const replies = await keyspace.apply(countOnPlan(key, assumed.write.window, cost, limit, assumed.write.keepMs));
    if (replies !== null) return { allowed: true, used: Number(replies[0]), resetAt: assumed.resetAt };
  }
  return transition(keyspace, 'takeQuota', async (space) => {
    const read = await readOne(space, ['HMGET', key, 'window', 'used']);
    const [windowText, usedText] = read as [string | null, string | null];
    const stored: QuotaCounter | null =
      windowText === null && usedText === null ? null : { window: integerOf(windowText), used: integerOf(usedText) };
    const take = takeQuota(stored, cost, limit, windowMs, now);
    const result: QuotaOutcome = { allowed: take.allowed, used: take.used, resetAt: take.resetAt };
    if (take.write === undefined) return { result };
    const { window, used, keepMs, countsOn } = take.write;
    if (countsOn) {
      return { plan: countOnPlan(key, window, cost, limit, keepMs), result: (replies) => ({ ...result, used: Number(replies[0]) }) };
    }
    const plan: Plan = {
      guards: [
        { command: ['HGET', key, 'window'], equals: windowText },
        { command: ['HGET', key, 'used'], equals: usedText },
      ],
      steps: [
        ['HSET', key, 'window', String(window), 'used', String(used)],
        ['PEXPIRE', key, keepMs],
      ],
    };
    return { plan, result };
  });
}
