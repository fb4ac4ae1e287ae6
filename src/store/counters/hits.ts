// A rate counter's hit, written once for both engines: a fixed window that starts with its first hit.
// No decision to take, so no guard: INCR, then PEXPIRE NX gives the window its length only when it
// has none (a new counter, or one whose expiry was lost to a hand edit), and PTTL reads what is left.
// The three run as one plan (one atomic step, one round trip), so concurrent hits never race.

import type { Plan, Reply } from '../keyspace.ts';

export function hitPlan(key: string, windowMs: number): Plan {
  return {
    guards: [],
    steps: [
      ['INCR', key],
      ['PEXPIRE', key, windowMs, 'NX'],
      ['PTTL', key],
    ],
  };
}

/** The count now and the ms left in the window, from the plan's replies. */
export function hitOf(replies: Reply[]): { count: number; resetMs: number } {
  return { count: Number(replies[0]), resetMs: Number(replies[2]) };
}
