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
