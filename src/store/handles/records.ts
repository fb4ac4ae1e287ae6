// A session or task handle's record and how its owner's indexes name it.

import { createHash } from 'node:crypto';
import { type Fields } from '../codec.ts';
import type { HandleKind, HandleOwner, StoredHandle } from '../types.ts';

/** A handle as named in its owner's indexes (and at the end of its own key): `<kind>:<sha256>`. */
export function handleMember(kind: HandleKind, handleHash: string): string {
  return `${kind}:${handleHash}`;
}

/** How an IdP subject names its handle index: SHA-256 hex (a `sub` may be long or hold any character). */
export function subjectDigest(subject: string): string {
  return createHash('sha256').update(subject).digest('hex');
}

/**
 * Whether its owner's use renews a handle (its expiry and index entries): once a sixteenth of the
 * lifetime has passed since its last renewal (`renewedAt`, epoch ms text), or when that is unreadable
 * or in the future (another replica's clock ahead). claimHandle (transitions.ts) applies it.
 */
export function handleRenewalDue(renewedAt: string | null | undefined, now: number, ttlMs: number): boolean {
  const at = Number(renewedAt ?? NaN);
  return !Number.isFinite(at) || now < at || now - at >= Math.floor(Math.max(1, Math.trunc(ttlMs)) / 16);
}

/** A handle's record: its owner's identity and the indexes that list it. */
export function handleFields(owner: HandleOwner): Fields {
  const f: Fields = { owner: owner.id };
  if (owner.clientId !== undefined) f.clientId = owner.clientId;
  if (owner.subjectHash !== undefined) f.subjectHash = owner.subjectHash;
  return f;
}

/** A handle as read (its owner, last renewal and marks; HMGET's nulls as absent); null: no handle. */
export function storedHandleOf(
  owner: string | null | undefined,
  renewedAt: string | null | undefined,
  urlElicitation: string | null | undefined,
): StoredHandle | null {
  if (!owner) return null;
  const stored: StoredHandle = { owner };
  if (renewedAt !== null && renewedAt !== undefined) stored.renewedAt = renewedAt;
  if (urlElicitation === '1') stored.urlElicitation = true;
  return stored;
}
