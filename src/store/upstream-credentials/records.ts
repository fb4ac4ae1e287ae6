// Kept upstream credentials as fields of their user's hash, and back.

import { forgottenKeptCredentials, replaceKeptCredential } from '../../model/kept-credentials.ts';
import type { Fields, HashUpdate } from '../codec.ts';
import type { StoredUpstreamCredential } from '../types.ts';

/** The hash field of one kept credential within its user's hash. */
export function upstreamCredentialField(issuer: string, provider: string): string {
  return JSON.stringify([issuer, provider]);
}

/** The stored value of a kept credential: JSON with the identity, key id, ciphertext and times. */
export function upstreamCredentialValue(r: StoredUpstreamCredential): string {
  return JSON.stringify({
    subject: r.subject,
    issuer: r.issuer,
    provider: r.provider,
    keyId: r.keyId,
    sealed: r.sealed,
    ...(r.expiresAt !== undefined ? { expiresAt: r.expiresAt } : {}),
    createdAt: r.createdAt,
  });
}

/** A stored value back into a record; `'corrupt'` when it is not one (a hand edit, another version). */
export function upstreamCredentialFromValue(value: string): StoredUpstreamCredential | 'corrupt' {
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(value) as Record<string, unknown>;
  } catch {
    return 'corrupt';
  }
  if (v === null || typeof v !== 'object') return 'corrupt';
  const texts = ['subject', 'issuer', 'provider', 'keyId', 'sealed'] as const;
  if (!texts.every((k) => typeof v[k] === 'string') || !Number.isSafeInteger(v.createdAt)) return 'corrupt';
  if (v.expiresAt !== undefined && !Number.isSafeInteger(v.expiresAt)) return 'corrupt';
  const record: StoredUpstreamCredential = {
    subject: v.subject as string,
    issuer: v.issuer as string,
    provider: v.provider as string,
    keyId: v.keyId as string,
    sealed: v.sealed as string,
    createdAt: v.createdAt as number,
  };
  if (v.expiresAt !== undefined) record.expiresAt = v.expiresAt as number;
  return record;
}

/**
 * The readable records of one user's hash: a value that does not parse, names another subject or sits
 * under a field other than its own (issuer, provider) is skipped, as a read of it would be corrupt.
 */
export function subjectUpstreamCredentials(fields: Record<string, string>, subject: string): StoredUpstreamCredential[] {
  const out: StoredUpstreamCredential[] = [];
  for (const [field, value] of Object.entries(fields)) {
    const record = upstreamCredentialFromValue(value);
    if (record !== 'corrupt' && record.subject === subject && field === upstreamCredentialField(record.issuer, record.provider))
      out.push(record);
  }
  return out.sort(
    (a, b) =>
      a.createdAt - b.createdAt ||
      upstreamCredentialField(a.issuer, a.provider).localeCompare(upstreamCredentialField(b.issuer, b.provider)),
  );
}

/** A record read under (subject, issuer, provider) must say it is that one: a value copied under another field is corrupt. */
export function sameUpstreamIdentity(
  read: StoredUpstreamCredential | 'corrupt',
  subject: string,
  issuer: string,
  provider: string,
): StoredUpstreamCredential | 'corrupt' {
  if (read === 'corrupt') return read;
  return read.subject === subject && read.issuer === issuer && read.provider === provider ? read : 'corrupt';
}

/** The issuer a credential's field names; undefined when the field does not read as one. */
function issuerOfField(field: string): string | undefined {
  try {
    const id: unknown = JSON.parse(field);
    return Array.isArray(id) && typeof id[0] === 'string' ? id[0] : undefined;
  } catch {
    return undefined;
  }
}

/** Replacing one kept credential while its ciphertext is `expectedSealed` (the model's replaceKeptCredential), as an update of the user's hash. */
export function credentialReplacementUpdate(
  record: StoredUpstreamCredential,
  expectedSealed: string,
): (current: Fields | null) => HashUpdate<boolean> {
  const field = upstreamCredentialField(record.issuer, record.provider);
  return (current) => {
    const value = current?.[field];
    const { result, change } = replaceKeptCredential(
      value === undefined ? null : upstreamCredentialFromValue(value),
      expectedSealed,
      record,
    );
    return change === undefined ? { result } : { result, set: { [field]: upstreamCredentialValue(change) } };
  };
}

/** Deleting a user's kept credentials, all or one issuer's (the model's forgottenKeptCredentials), as an update of the user's hash; answers how many. */
export function credentialsDeletionUpdate(issuer: string | undefined): (current: Fields | null) => HashUpdate<number> {
  return (current) => {
    const held = Object.keys(current ?? {}).map((field) => ({ field, issuer: issuerOfField(field) }));
    const unset = forgottenKeptCredentials(held, issuer);
    return { result: unset.length, unset };
  };
}
