// Approvals of held calls: what one is bound to (a digest of who calls, through which client, which
// tool, with which arguments), and its life as pure state transitions that each store runs under one
// compare-and-set on the record: pending -> approved | denied (a person decides) -> used (the one call
// it lets through), and pending | approved -> expired when its time is up.

import { createHash } from 'node:crypto';

export type ApprovalState = 'pending' | 'approved' | 'denied' | 'used' | 'expired';
export const APPROVAL_STATES: readonly ApprovalState[] = ['pending', 'approved', 'denied', 'used', 'expired'];

/** Who may decide: the caller themselves, or anyone whose IdP claims match (each listed claim holds one of its values). */
export type Approvers = 'self' | { readonly claims: Readonly<Record<string, readonly string[]>> };

/** An approval rule's settings (`approval:` of a rule whose effect is approve). */
export interface ApprovalSettings {
  readonly approvers: Approvers;
  /** The caller may not approve their own call (a second person decides). */
  readonly notSelf: boolean;
  readonly ttlSeconds: number;
}

/** One held call waiting for, or having had, a person's decision. */
export interface ApprovalRecord {
  approvalId: string;
  /** SHA-256 (hex) over issuer, subject, client id, tool and the canonical JSON of the arguments. */
  argumentsDigest: string;
  rule: string;
  subject: string;
  issuer?: string;
  clientId?: string;
  tool: string;
  /** The arguments as canonical JSON: what the approver is shown. */
  arguments: string;
  /** The approval rule's settings, as they were when the call was held. */
  approvers: string;
  notSelf: boolean;
  state: ApprovalState;
  requestedAt: number;
  expiresAt: number;
  decidedBy?: string;
  decidedAt?: number;
  reason?: string;
}

/**
 * JSON with object members in code-point order and no white space: one text for one value, whatever
 * order the client sent its members in.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** What an approval is bound to: SHA-256 over the canonical JSON of [issuer, subject, client id, tool, arguments]. */
export function approvalDigest(call: {
  issuer?: string | undefined;
  subject: string;
  clientId?: string | undefined;
  tool: string;
  arguments: unknown;
}): string {
  const bound = [call.issuer ?? '', call.subject, call.clientId ?? '', call.tool, call.arguments ?? {}];
  return createHash('sha256').update(canonicalJson(bound)).digest('hex');
}

/** What a retried call finds: go on (the approval is now used), wait, the denial, or nothing usable. */
export type ApprovalUse =
  | { outcome: 'forward'; approval: ApprovalRecord }
  | { outcome: 'pending'; approval: ApprovalRecord }
  | { outcome: 'denied'; approval: ApprovalRecord }
  | { outcome: 'none'; expired?: ApprovalRecord };

/** A state change, and the fields it sets. */
export interface ApprovalChange {
  state: ApprovalState;
  decidedBy?: string;
  decidedAt?: number;
  reason?: string;
}

const live = (r: ApprovalRecord, now: number) => now < r.expiresAt;

/**
 * A retry of the held call at `now`, on the record its digest names: an approved, unexpired approval is
 * used (once: the change makes the next retry find it used); a pending or approved one past its time
 * expires; a denial stands until it expires.
 */
export function useApproval(
  stored: ApprovalRecord | 'corrupt' | null,
  digest: string,
  now: number,
): { use: ApprovalUse; change?: ApprovalChange } {
  if (stored === null || stored === 'corrupt' || stored.argumentsDigest !== digest) return { use: { outcome: 'none' } };
  if (stored.state === 'approved' && live(stored, now)) return { use: { outcome: 'forward', approval: stored }, change: { state: 'used' } };
  if (stored.state === 'pending' && live(stored, now)) return { use: { outcome: 'pending', approval: stored } };
  if (stored.state === 'denied' && live(stored, now)) return { use: { outcome: 'denied', approval: stored } };
  if (stored.state === 'pending' || stored.state === 'approved')
    return { use: { outcome: 'none', expired: stored }, change: { state: 'expired' } };
  return { use: { outcome: 'none' } };
}

/** Why a decision was not recorded. */
export type DecisionRefusal = 'not_found' | 'not_pending' | 'expired';

/**
 * A person's (or the admin's) decision at `now`: recorded only on a pending, unexpired approval. A
 * pending one past its time expires instead.
 */
export function decideApproval(
  stored: ApprovalRecord | 'corrupt' | null,
  now: number,
  decision: { approve: boolean; by: string; reason?: string | undefined },
): { refusal?: DecisionRefusal; change?: ApprovalChange } {
  if (stored === null || stored === 'corrupt') return { refusal: 'not_found' };
  if (stored.state !== 'pending') return { refusal: 'not_pending' };
  if (!live(stored, now)) return { refusal: 'expired', change: { state: 'expired' } };
  return {
    change: {
      state: decision.approve ? 'approved' : 'denied',
      decidedBy: decision.by,
      decidedAt: now,
      ...(decision.reason !== undefined ? { reason: decision.reason } : {}),
    },
  };
}

/** Offboarding the caller: a pending or approved, unused approval of theirs is denied, naming why. */
export function cancelApproval(stored: ApprovalRecord | 'corrupt' | null, now: number): ApprovalChange | undefined {
  if (stored === null || stored === 'corrupt' || (stored.state !== 'pending' && stored.state !== 'approved')) return undefined;
  return { state: 'denied', decidedBy: 'offboarding', decidedAt: now, reason: "the caller's access was revoked" };
}
