// Access and user-grade tokens as hash fields and back.

import { parseEpochMs } from '../../model/credentials.ts';
import {
  revokeRecord,
  revokeSubjectUserToken,
  revokeUserToken,
  stampLastUse,
  type SubjectUserTokenRevocation,
} from '../../model/token-records.ts';
import { type Fields, type HashUpdate, stepUpdate, JKT_PATTERN, freezeRecord, strictStringArray, userFields } from '../codec.ts';
import type {
  AccessTokenRecord,
  StoredAccessToken,
  StoredUserToken,
  SubjectToken,
  TokenLookup,
  UserTokenRecord,
} from '../../model/records.ts';

/**
 * A stored token of a subject's index as a SubjectToken, or null when it is not a live, unrevoked
 * record of `subject` at `now` (absent, expired, revoked, unreadable, another subject's): such a
 * member is dropped from the index. `lastUsedAt` is read when recorded.
 */
export function subjectTokenFromFields(
  kind: SubjectToken['kind'],
  tokenHash: string,
  f: Fields | null,
  now: number,
  subject?: string,
): SubjectToken | null {
  if (f === null || !f.subject || !f.issuer) return null;
  if (subject !== undefined && f.subject !== subject) return null;
  const expiresAt = parseEpochMs(f.expiresAt);
  if (expiresAt === undefined || expiresAt <= now) return null;
  if (kind === 'user' ? f.revoked !== 'false' : f.revokedAt !== undefined) return null;
  const t: SubjectToken = { kind, tokenHash, subject: f.subject, issuer: f.issuer, createdAt: Number(f.createdAt ?? 0), expiresAt };
  if (f.clientId !== undefined && kind !== 'user') t.clientId = f.clientId;
  if (f.familyId !== undefined && kind !== 'user') t.familyId = f.familyId;
  if (f.scope !== undefined) t.scope = f.scope;
  const lastUsedAt = parseEpochMs(f.lastUsedAt);
  if (lastUsedAt !== undefined) t.lastUsedAt = lastUsedAt;
  return t;
}

export function userTokenFields(r: UserTokenRecord): Fields {
  // The IdP identity (subject, issuer, email, groups) is written as a sign-in token's is: one encoding.
  return {
    tokenHash: r.tokenHash,
    ...userFields(r),
    revoked: 'false',
    createdAt: String(r.createdAt),
    expiresAt: String(r.expiresAt),
    ...(r.dpopJkt !== undefined ? { dpopJkt: r.dpopJkt } : {}),
  };
}

export function accessTokenFields(r: AccessTokenRecord): Fields {
  const f: Fields = {
    tokenHash: r.tokenHash,
    clientId: r.clientId,
    createdAt: String(r.createdAt),
    expiresAt: String(r.expiresAt),
  };
  if (r.scope !== undefined) f.scope = r.scope;
  if (r.familyId !== undefined) f.familyId = r.familyId;
  if (r.dpopJkt !== undefined) f.dpopJkt = r.dpopJkt;
  if (r.user !== undefined) Object.assign(f, userFields(r.user));
  return f;
}

/**
 * The binding, email and groups of a token record, added to `into`; false when a field is present
 * and unreadable: a binding that is not a thumbprint cannot be checked (never read as unbound), and a
 * groups field that is not a list of strings is no identity a policy may see half-read.
 */
function tokenClaims(f: Fields, into: { issuer?: string; email?: string; groups?: readonly string[]; dpopJkt?: string }): boolean {
  if (f.dpopJkt !== undefined) {
    if (!JKT_PATTERN.test(f.dpopJkt)) return false;
    into.dpopJkt = f.dpopJkt;
  }
  if (f.issuer) into.issuer = f.issuer;
  if (f.email) into.email = f.email;
  if (f.groups !== undefined) {
    const groups = strictStringArray(f.groups);
    if (groups === undefined) return false;
    into.groups = Object.freeze(groups);
  }
  return true;
}

/**
 * A stored user-grade token, or `'corrupt'`: a `tokenHash` field other than its key's, `revoked`
 * other than exactly "true" or "false", `expiresAt` not an integer, an empty subject, an unreadable
 * binding or groups.
 */
export function userTokenFromFields(f: Fields, tokenHash: string): StoredUserToken | 'corrupt' {
  if (f.tokenHash !== undefined && f.tokenHash !== tokenHash) return 'corrupt';
  if (f.revoked !== 'false' && f.revoked !== 'true') return 'corrupt';
  const expiresAt = parseEpochMs(f.expiresAt);
  if (expiresAt === undefined || !f.subject) return 'corrupt';
  const r: StoredUserToken = { subject: f.subject, revoked: f.revoked === 'true', expiresAt };
  return tokenClaims(f, r) ? r : 'corrupt';
}

/**
 * A stored OAuth access token, or `'corrupt'`: a `tokenHash` field other than its key's, `expiresAt`
 * not an integer, no client, an unreadable binding or groups. `revokedAt` counts by its presence.
 */
export function accessTokenFromFields(f: Fields, tokenHash: string): StoredAccessToken | 'corrupt' {
  if (f.tokenHash !== undefined && f.tokenHash !== tokenHash) return 'corrupt';
  const expiresAt = parseEpochMs(f.expiresAt);
  if (expiresAt === undefined || !f.clientId) return 'corrupt';
  const r: StoredAccessToken = { clientId: f.clientId, revoked: f.revokedAt !== undefined, expiresAt };
  if (f.subject) r.subject = f.subject;
  if (f.scope) r.scope = f.scope;
  if (f.familyId) r.familyId = f.familyId;
  return tokenClaims(f, r) ? r : 'corrupt';
}

/** Both records of a token hash from their raw fields (null: none stored), parsed and frozen. */
export function tokenLookupFromFields(tokenHash: string, user: Fields | null, oauth: Fields | null): TokenLookup {
  return {
    user: user === null ? null : freezeRecord(userTokenFromFields(user, tokenHash)),
    oauth: oauth === null ? null : freezeRecord(accessTokenFromFields(oauth, tokenHash)),
  };
}

/** Revoking a token or a client at `now` (the model's revokeRecord) as an update of its hash. */
export function revocationUpdate(now: number): (current: Fields | null) => HashUpdate<boolean> {
  return (current) => stepUpdate(revokeRecord(current, now));
}

/** A token's last use stamped at `at` (the model's stampLastUse) as an update of its hash. */
export function lastUseUpdate(at: number): (current: Fields | null) => HashUpdate<boolean> {
  return (current) => stepUpdate(stampLastUse(current, Math.trunc(at)));
}

/** Revoking a user-grade token (the model's revokeUserToken) as an update of its hash. */
export function userRevocationUpdate(current: Fields | null): HashUpdate<boolean> {
  return stepUpdate(revokeUserToken(current));
}

/** A user-grade token in `subject`'s revocation (the model's revokeSubjectUserToken) as an update of its hash. */
export function subjectUserRevocationUpdate(
  subject: string,
  issuer: string | undefined,
): (current: Fields | null) => HashUpdate<SubjectUserTokenRevocation> {
  return (current) => stepUpdate(revokeSubjectUserToken(current, subject, issuer));
}
