// Rules on one stored record (a token, a client), each a pure step: the record as read (the fields it
// looks at; null: none stored) and its inputs in, its answer and the change it makes out. Both stores
// run a step under their one compare-and-set on the record (updateHash in src/store/), so each rule
// is written once, here, and the store only makes it atomic.

import { revokeHolding, type HoldingRevocation } from './offboarding.ts';

/** A step's answer, and what it changes on the record (absent: nothing is written). */
export interface RecordStep<R, C> {
  result: R;
  change?: C;
}

/**
 * Creating a record (a client: a registration never replaces another) only while none is stored.
 * Answers whether it is created.
 */
export function createRecord<T>(stored: object | null, record: T): RecordStep<boolean, T> {
  return stored === null ? { result: true, change: record } : { result: false };
}

/**
 * Revoking a token or a client at `now`: only a record that is stored (a revocation never creates
 * one), and the first revocation time is kept. Answers whether the record is stored.
 */
export function revokeRecord(stored: { readonly revokedAt?: string } | null, now: number): RecordStep<boolean, { revokedAt: number }> {
  if (stored === null) return { result: false };
  if (stored.revokedAt !== undefined) return { result: true };
  return { result: true, change: { revokedAt: now } };
}

/**
 * When a token was last presented, stamped at `at`: on a record that is stored only, and never moved
 * back (a later stamp already there stays; one that does not read as a number is replaced).
 * Answers whether it is stamped.
 */
export function stampLastUse(stored: { readonly lastUsedAt?: string } | null, at: number): RecordStep<boolean, { lastUsedAt: number }> {
  if (stored === null) return { result: false };
  const last = stored.lastUsedAt === undefined ? NaN : Number(stored.lastUsedAt);
  if (last >= at) return { result: false };
  return { result: true, change: { lastUsedAt: at } };
}

/**
 * Revoking a user-grade token (its `revoked` flag): only a record that is stored. Answers whether it
 * is stored (the caller reports it revoked, as it now is).
 */
export function revokeUserToken(stored: { readonly revoked?: string } | null): RecordStep<boolean, { revoked: true }> {
  if (stored === null) return { result: false };
  return stored.revoked === 'true' ? { result: true } : { result: true, change: { revoked: true } };
}

/**
 * A user-grade token in a subject's revocation (offboarding's revokeHolding, its `revoked` flag read
 * as revoked unless it says live): `revoked` when it is the subject's (and the issuer's, when one is
 * named) and was not revoked yet; `already` when it was (or its flag does not read as live);
 * `other_issuer` (its index member stays); `not_held` when it is gone or another subject's.
 */
export type SubjectUserTokenRevocation = HoldingRevocation;

export function revokeSubjectUserToken(
  stored: { readonly subject?: string; readonly issuer?: string; readonly revoked?: string } | null,
  subject: string,
  issuer: string | undefined,
): RecordStep<SubjectUserTokenRevocation, { revoked: true }> {
  const held = stored && { subject: stored.subject, issuer: stored.issuer, revoked: stored.revoked !== 'false' };
  const result = revokeHolding(held, subject, issuer);
  return result === 'revoked' ? { result, change: { revoked: true } } : { result };
}
