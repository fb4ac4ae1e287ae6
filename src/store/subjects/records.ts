// A subject's index members, its cut-offs and its remembered approvals, as hash fields and values.

import { createHash } from 'node:crypto';
import { forgetSubjectApproval } from '../../model/consents.ts';
import { parseEpochMs } from '../../model/credentials.ts';
import { type Fields, type HashUpdate } from '../codec.ts';
import type { ConsentRecord, RevocationNotice } from '../types.ts';

/** Members of a client's token set: `a:<hash>` for access tokens, `r:<hash>` for refresh tokens. */
export const ACCESS_MEMBER = 'a:';
export const REFRESH_MEMBER = 'r:';
/** Members of a subject's index besides `a:` and `r:`: user-grade tokens and remembered approvals. */
export const USER_MEMBER = 'u:';
export const CONSENT_MEMBER = 'c:';

/** A remembered approval as a member of its subject's index: `c:<browserHash>:<consentKey>`. */
export function consentMember(browserHash: string, key: string): string {
  return `${CONSENT_MEMBER}${browserHash}:${key}`;
}

/** The browser and field of a consent member; null when it is not one. */
export function parseConsentMember(member: string): { browserHash: string; key: string } | null {
  const m = /^c:([0-9a-f]{64}):([0-9a-f]{64})$/.exec(member);
  return m ? { browserHash: m[1]!, key: m[2]! } : null;
}

/** The field of a cut-off that applies to every issuer (an issuer is a URL: never `*`). */
export const EVERY_ISSUER = '*';

/** The latest cut-off among a subject's cut-off fields that applies at `issuer`; undefined when none does. */
export function cutoffFromFields(f: Fields | null, issuer: string): number | undefined {
  if (f === null) return undefined;
  const applying = [parseEpochMs(f[issuer]), parseEpochMs(f[EVERY_ISSUER])].filter((t): t is number => t !== undefined);
  return applying.length === 0 ? undefined : Math.max(...applying);
}

/**
 * The field an approval is kept under in its browser's hash: one per IdP user, client and redirect
 * URI (a SHA-256, so that long ids and URIs make short fields).
 */
export function consentKey(c: Pick<ConsentRecord, 'issuer' | 'subject' | 'clientId' | 'redirectUri'>): string {
  return createHash('sha256')
    .update(JSON.stringify([c.issuer, c.subject, c.clientId, c.redirectUri]))
    .digest('hex');
}

/** An approval as its hash field's value: JSON (a subject's revocation, revokeSubjectBatch, reads its `subject` and `issuer`). */
export function consentValue(c: ConsentRecord): string {
  const v: Record<string, string | number> = {
    clientId: c.clientId,
    clientCreatedAt: c.clientCreatedAt,
    redirectUri: c.redirectUri,
    issuer: c.issuer,
    subject: c.subject,
    approvedAt: c.approvedAt,
    expiresAt: c.expiresAt,
  };
  if (c.scope !== undefined) v.scope = c.scope;
  return JSON.stringify(v);
}

/** The approval of a hash field's value, if it is whole and not expired at `now`; otherwise null. */
export function consentFromValue(value: string, now: number): ConsentRecord | null {
  let v: unknown;
  try {
    v = JSON.parse(value);
  } catch {
    return null;
  }
  if (typeof v !== 'object' || v === null) return null;
  const r = v as Record<string, unknown>;
  const texts = ['clientId', 'redirectUri', 'issuer', 'subject'] as const;
  const times = ['clientCreatedAt', 'approvedAt', 'expiresAt'] as const;
  if (!texts.every((k) => typeof r[k] === 'string') || !times.every((k) => Number.isSafeInteger(r[k]))) return null;
  if ((r.expiresAt as number) <= now || (r.scope !== undefined && typeof r.scope !== 'string')) return null;
  const c: ConsentRecord = {
    clientId: r.clientId as string,
    clientCreatedAt: r.clientCreatedAt as number,
    redirectUri: r.redirectUri as string,
    issuer: r.issuer as string,
    subject: r.subject as string,
    approvedAt: r.approvedAt as number,
    expiresAt: r.expiresAt as number,
  };
  if (r.scope !== undefined) c.scope = r.scope as string;
  return c;
}

/** A browser's approvals as putApproval reads them: each field with its approval's expiry (undefined: unreadable or expired). */
export function approvalExpiries(fields: Fields, now: number): Array<[string, number | undefined]> {
  return Object.entries(fields).map(([field, value]) => [field, consentFromValue(value, now)?.expiresAt]);
}

/** The grant ids a revocation notice names (refresh families, token hashes): the approvals they were issued under go. */
export function consentGrantIds(notice: RevocationNotice): string[] {
  return [...(notice.familyIds ?? []), ...(notice.tokenHashes ?? [])];
}

/** The person a stored approval names (its JSON value's `subject`); null when gone or unreadable. */
function approvalOf(value: string | undefined): { subject?: unknown } | null {
  if (value === undefined) return null;
  try {
    const v: unknown = JSON.parse(value);
    return typeof v === 'object' && v !== null ? (v as { subject?: unknown }) : null;
  } catch {
    return null;
  }
}

/** Forgetting approval `key` for `subject` (the model's forgetSubjectApproval) as an update of the browser's approvals. */
export function approvalForgetUpdate(key: string, subject: string): (current: Fields | null) => HashUpdate<boolean> {
  return (current) => {
    const { result, change } = forgetSubjectApproval(approvalOf(current?.[key]), subject);
    return change === undefined ? { result } : { result, unset: [key] };
  };
}
