// Holders of pending requests on the keyspace port (src/store/keyspace.ts): each holder is a sorted
// set of its pending requests, member = a prefix of the request's hash, score = its expiry. What a
// holder holds is read as the count of members not expired and the oldest of them; the bound itself
// is the model's rule (boundHeld in src/model/pending-bounds.ts). Pending sign-ins (per client address
// and per client) and device authorizations (per client address and in total) are bounded this way.

import type { HeldRequests } from '../model/pending-bounds.ts';
import { scoredOf, type Command, type Guard, type Reply } from './keyspace.ts';

/** One holder of a request being put: its name, its sorted set, its bound (0: none). */
export interface Holder<H extends string> {
  holder: H;
  key: string;
  bound: number;
}

/** Members scored after `now`: the pending requests not expired at `now`. */
const unexpired = (now: number) => [`(${now}`, '+inf'] as const;

/**
 * The reads that tell what each bounded holder holds at `now` (an unbounded one is not read: its
 * count decides nothing): the count not expired, and the oldest with its score.
 */
export function holdingReads(holders: ReadonlyArray<Holder<string>>, now: number): Command[] {
  return holders
    .filter(({ bound }) => bound > 0)
    .flatMap(({ key }): Command[] => [
      ['ZCOUNT', key, ...unexpired(now)],
      ['ZRANGEBYSCORE', key, ...unexpired(now), 'WITHSCORES', 'LIMIT', 0, 1],
    ]);
}

/** A holder with what it holds. */
export type Held<H extends string> = Holder<H> & HeldRequests<H>;

/**
 * What each holder holds, from the replies of holdingReads (first in `replies`, in order; what
 * follows is the caller's). An unbounded holder holds nothing that counts.
 */
export function heldFrom<H extends string>(holders: ReadonlyArray<Holder<H>>, replies: readonly Reply[]): Array<Held<H>> {
  let at = 0;
  return holders.map((h) => {
    if (h.bound <= 0) return { ...h, count: 0, oldest: undefined };
    const count = Number(replies[at]);
    const [first] = scoredOf(replies[at + 1]!);
    at += 2;
    return { ...h, count, oldest: first?.[1] };
  });
}

/**
 * The guards of a request stored because each bounded holder had room: its count not expired is still
 * below its bound when the plan applies. That is all the decision needed: requests put meanwhile
 * under the bound leave it standing (racing puts do not retry after each other while there is room),
 * and once one fills the holder the others' guards fail, they read again and are refused. An
 * unbounded holder is not guarded: its count decided nothing.
 */
export function holdingGuards(holders: ReadonlyArray<Holder<string>>, now: number): Guard[] {
  return holders.filter(({ bound }) => bound > 0).map(({ key, bound }) => ({ command: ['ZCOUNT', key, ...unexpired(now)], below: bound }));
}

/** The first steps of a request stored: each holder's requests expired by `now` dropped. */
export function droppingExpired(holders: ReadonlyArray<Holder<string>>, now: number): Command[] {
  return holders.map(({ key }): Command => ['ZREMRANGEBYSCORE', key, '-inf', now]);
}

/**
 * The last steps of a request stored: it is added to each holder (`member`, until `expiresAt`), and
 * each set expires with its longest-lived member (PEXPIREAT NX gives a new set an expiry, GT only
 * moves one later): what reading the set's top member and expiring at its score gave, without the read.
 */
export function holding(holders: ReadonlyArray<Holder<string>>, member: string, expiresAt: number): Command[] {
  return holders.flatMap(({ key }): Command[] => [
    ['ZADD', key, expiresAt, member],
    ['PEXPIREAT', key, expiresAt, 'NX'],
    ['PEXPIREAT', key, expiresAt, 'GT'],
  ]);
}
