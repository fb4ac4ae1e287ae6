// An `approve` rule's `approval:` mapping: who may approve (`self`, the caller; or `claims`, anyone
// whose IdP claims match), whether the caller is excluded (`notSelf`: a second person decides), and
// how long a request and an approval hold (`ttlSeconds`). Checked once at start-up.

import type { ApprovalRecord, ApprovalSettings, Approvers } from '../model/approvals.ts';
import type { SignedInUser } from '../model/records.ts';

const FIELDS = new Set(['approvers', 'notSelf', 'ttlSeconds']);
export const DEFAULT_APPROVAL_TTL_SECONDS = 600;
const MAX_TTL_SECONDS = 86_400;

export function compileApproval(raw: unknown, at: string, problems: string[]): ApprovalSettings | undefined {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    problems.push(`${at} must be a mapping {approvers: self | {claims: {...}}, notSelf?, ttlSeconds?}`);
    return undefined;
  }
  const before = problems.length;
  const a = raw as Record<string, unknown>;
  for (const key of Object.keys(a))
    if (!FIELDS.has(key)) problems.push(`${at}.${key} is not a known field (known: ${[...FIELDS].join(', ')})`);
  const approvers = compileApprovers(a.approvers, `${at}.approvers`, problems);
  const notSelf = a.notSelf ?? false;
  if (typeof notSelf !== 'boolean') problems.push(`${at}.notSelf must be true or false`);
  if (notSelf === true && approvers === 'self') problems.push(`${at}: approvers: self with notSelf: true leaves nobody to approve`);
  const ttlSeconds = a.ttlSeconds ?? DEFAULT_APPROVAL_TTL_SECONDS;
  if (typeof ttlSeconds !== 'number' || !Number.isSafeInteger(ttlSeconds) || ttlSeconds < 10 || ttlSeconds > MAX_TTL_SECONDS)
    problems.push(`${at}.ttlSeconds must be an integer from 10 to ${MAX_TTL_SECONDS}`);
  if (problems.length > before || approvers === undefined) return undefined;
  return Object.freeze({ approvers, notSelf: notSelf as boolean, ttlSeconds: ttlSeconds as number });
}

function compileApprovers(raw: unknown, at: string, problems: string[]): Approvers | undefined {
  if (raw === 'self') return 'self';
  const claims = typeof raw === 'object' && raw !== null && !Array.isArray(raw) ? (raw as Record<string, unknown>).claims : undefined;
  if (typeof claims !== 'object' || claims === null || Array.isArray(claims) || Object.keys(raw as object).length !== 1) {
    problems.push(`${at} must be self, or {claims: {<claim>: [values]}}`);
    return undefined;
  }
  const compiled: Record<string, readonly string[]> = {};
  for (const [claim, values] of Object.entries(claims)) {
    const list = typeof values === 'string' ? [values] : values;
    if (!Array.isArray(list) || list.length === 0 || !list.every((v) => typeof v === 'string' && v.length > 0)) {
      problems.push(`${at}.claims.${claim} must be a non-empty list of strings`);
      continue;
    }
    compiled[claim] = Object.freeze([...(list as string[])]);
  }
  if (Object.keys(compiled).length === 0) {
    problems.push(`${at}.claims must name at least one claim`);
    return undefined;
  }
  return Object.freeze({ claims: Object.freeze(compiled) });
}

/**
 * Whether a signed-in person may decide: the caller when approvers is `self`; otherwise someone whose
 * IdP claims hold, for each listed claim, one of its values (a string claim equal to one, or a list
 * claim containing one), and who is not the caller when `notSelf`.
 */
export function mayApprove(
  approval: { approvers: Approvers; notSelf: boolean },
  caller: { issuer?: string | undefined; subject: string },
  person: { issuer?: string | undefined; subject: string; claims: Readonly<Record<string, unknown>> },
): boolean {
  const self = person.subject === caller.subject && (caller.issuer === undefined || person.issuer === caller.issuer);
  if (approval.approvers === 'self') return self;
  if (approval.notSelf && self) return false;
  return Object.entries(approval.approvers.claims).every(([claim, values]) => {
    const held = person.claims[claim];
    if (typeof held === 'string') return values.includes(held);
    return Array.isArray(held) && held.some((h) => typeof h === 'string' && values.includes(h));
  });
}

/** The claims a signed-in person is matched by: what the sign-in kept (sub, email, groups). */
export function claimsOf(user: SignedInUser): Record<string, unknown> {
  return {
    sub: user.subject,
    iss: user.issuer,
    ...(user.email ? { email: user.email } : {}),
    ...(user.groups ? { groups: user.groups } : {}),
  };
}

/** Whether `user` may decide `approval` (its rule's approvers as stored with it). */
export function mayDecide(approval: ApprovalRecord, user: SignedInUser): boolean {
  let approvers: Approvers;
  try {
    approvers = JSON.parse(approval.approvers) as Approvers;
  } catch {
    return false;
  }
  return mayApprove(
    { approvers, notSelf: approval.notSelf },
    { issuer: approval.issuer, subject: approval.subject },
    { issuer: user.issuer, subject: user.subject, claims: claimsOf(user) },
  );
}

/** The approvers as stored with a request (JSON), read back for the page that checks them. */
export function approversText(approvers: Approvers): string {
  return JSON.stringify(approvers);
}
