// Offboarding's cut-off: `revokeSubject` revokes what a person holds (their indexed tokens) and records
// when it did, so that what was issued for them before and is still pending (a code not yet redeemed,
// a device approval not yet polled, an account-page session, a connect link, a connect flow) is
// refused when it is used. A pending artefact is stamped with the sign-in (or link) it comes from.
//
// Race-free without a cross-key script: revokeSubject writes the cut-off before it revokes the index,
// and what redeems a pending artefact writes its tokens (indexed) before it reads the cut-off. Either
// the write came first and the revocation's scan finds it, or the read comes after the cut-off and
// the redemption revokes what it just wrote before answering: nobody ever receives it.

import type { SignedInUser, SubjectCutoffs } from './records.ts';

/**
 * How long a cut-off is kept: longer than anything pending it voids lives (sign-in steps and codes
 * last minutes, an account-page session 15 minutes, a connect link 10, a device code its lifetime).
 */
export const SUBJECT_CUTOFF_KEPT_MS = 24 * 60 * 60 * 1000;

/**
 * Something a person's index lists (an access, refresh or user-grade token, a remembered approval) as
 * their offboarding reads it: whose it is, at which issuer, and whether it is revoked already.
 */
export interface Holding {
  readonly subject?: unknown;
  readonly issuer?: unknown;
  readonly revoked: boolean;
}

/**
 * What offboarding does with one thing listed for a person: `revoked` when it is the subject's (and
 * the issuer's, when one is named) and was not revoked yet; `already` when it was; `other_issuer`
 * (it stays listed: another issuer's revocation may come); `not_held` when it is gone or another
 * subject's (it leaves the index).
 */
export type HoldingRevocation = 'revoked' | 'already' | 'other_issuer' | 'not_held';

/** The one rule of offboarding for every kind of thing a person's index lists (null: nothing stored). */
export function revokeHolding(held: Holding | null, subject: string, issuer: string | undefined): HoldingRevocation {
  if (held === null || held.subject !== subject) return 'not_held';
  if (issuer !== undefined && held.issuer !== issuer) return 'other_issuer';
  return held.revoked ? 'already' : 'revoked';
}

/** Whether something issued at `issuedAt` is void: its person was revoked at or after that instant. */
function voidedByRevocation(revokedAt: number | undefined, issuedAt: number): boolean {
  return revokedAt !== undefined && issuedAt <= revokedAt;
}

/** Whether what was issued for `who` at `issuedAt` (epoch ms) was voided by their offboarding since. */
export async function revokedSince(store: SubjectCutoffs, who: { subject: string; issuer: string }, issuedAt: number): Promise<boolean> {
  return voidedByRevocation(await store.subjectRevokedAt(who.subject, who.issuer), issuedAt);
}

/** Whether what `user`'s sign-in (at `user.signedInAt`, else `issuedAt`) led to was voided by their offboarding since. */
export function revokedSinceSignIn(store: SubjectCutoffs, user: SignedInUser, issuedAt: number): Promise<boolean> {
  return revokedSince(store, user, user.signedInAt ?? issuedAt);
}

/** The person as kept on tokens: the sign-in's instant is a property of the sign-in, not of what it grants. */
export function tokenUser(user: SignedInUser): SignedInUser {
  if (user.signedInAt === undefined) return user;
  const { signedInAt: _, ...rest } = user;
  return rest;
}
