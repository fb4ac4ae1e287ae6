// A remembered approval forgotten from the account page, as a pure step on the one approval as read.
// Both stores run it under their one compare-and-set on the browser's approvals (updateHash in
// src/store/), so the rule is written once.

import type { RecordStep } from './token-records.ts';

/**
 * Forgetting one remembered approval for `subject`: only when it is that person's (the account page
 * acts for one person); one gone, unreadable or another person's stays. Answers whether it goes.
 */
export function forgetSubjectApproval(stored: { readonly subject?: unknown } | null, subject: string): RecordStep<boolean, 'forget'> {
  return stored !== null && stored.subject === subject ? { result: true, change: 'forget' } : { result: false };
}

/**
 * Remembering one approval in its browser's approvals, as a plan over what was read: the approvals as
 * they stand with the new one written (`given`), each field with the expiry its value reads as
 * (undefined: unreadable), and the two longest-lived members of its person's index (`index.top`,
 * member and score). Unreadable or expired approvals go, then the soonest to expire (ties by field) beyond
 * `max`, never the one just given while it can stay; the browser's approvals expire with the
 * last one kept (none kept: they go). The one given, when kept, is listed in its person's index as
 * `index.member` with its expiry, and the index expires with its longest-lived member.
 */
export function putApproval(
  approvals: ReadonlyArray<readonly [field: string, expiresAt: number | undefined]>,
  given: string,
  now: number,
  max: number,
  index: { member: string; top: ReadonlyArray<readonly [member: string, score: number]> },
): ApprovalPut {
  const live: Array<readonly [string, number]> = [];
  const drop: string[] = [];
  for (const [field, expiresAt] of approvals) {
    if (expiresAt !== undefined && expiresAt > now) live.push([field, expiresAt]);
    else drop.push(field);
  }
  const rank = (field: string) => (field === given ? 1 : 0);
  live.sort((a, b) => rank(a[0]) - rank(b[0]) || a[1] - b[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const excess = Math.max(0, live.length - max);
  drop.push(...live.slice(0, excess).map(([field]) => field));
  const kept = live.slice(excess);
  const plan: ApprovalPut = { drop };
  if (kept.length > 0) plan.expireAt = Math.max(...kept.map(([, at]) => at));
  const listed = kept.find(([field]) => field === given);
  if (listed !== undefined) {
    const others = index.top.filter(([member]) => member !== index.member).map(([, score]) => score);
    plan.index = { score: listed[1], expireAt: Math.max(listed[1], ...others) };
  }
  return plan;
}

/** What remembering an approval writes (putApproval). */
export interface ApprovalPut {
  /** The approvals that go (the one given among them when it cannot stay). */
  drop: string[];
  /** When the browser's approvals expire: the latest expiry kept. Absent: none is kept, they go. */
  expireAt?: number;
  /** The given approval's member in its person's index: its score, and the index's expiry after. */
  index?: { score: number; expireAt: number };
}
