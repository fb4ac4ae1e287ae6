// Approvals as hash fields, and the model's transitions (model/approvals.ts) as hash updates.

import {
  APPROVAL_STATES,
  cancelApproval,
  decideApproval,
  useApproval,
  type ApprovalChange,
  type ApprovalRecord,
  type ApprovalState,
  type ApprovalUse,
} from '../../model/approvals.ts';
import { parseEpochMs } from '../../model/credentials.ts';
import type { Fields, HashUpdate } from '../codec.ts';
import type { ApprovalDecisionOutcome } from './types.ts';

export function approvalFields(r: ApprovalRecord): Fields {
  const f: Fields = {
    approvalId: r.approvalId,
    argumentsDigest: r.argumentsDigest,
    rule: r.rule,
    subject: r.subject,
    tool: r.tool,
    arguments: r.arguments,
    approvers: r.approvers,
    notSelf: r.notSelf ? 'true' : 'false',
    state: r.state,
    requestedAt: String(r.requestedAt),
    expiresAt: String(r.expiresAt),
  };
  if (r.issuer !== undefined) f.issuer = r.issuer;
  if (r.clientId !== undefined) f.clientId = r.clientId;
  return { ...f, ...changeFields(r) };
}

function changeFields(c: Partial<ApprovalChange>): Fields {
  const f: Fields = {};
  if (c.state !== undefined) f.state = c.state;
  if (c.decidedBy !== undefined) f.decidedBy = c.decidedBy;
  if (c.decidedAt !== undefined) f.decidedAt = String(c.decidedAt);
  if (c.reason !== undefined) f.reason = c.reason;
  return f;
}

/** A stored approval, or `'corrupt'` without its identity, a known state or its times. */
export function approvalFromFields(f: Fields): ApprovalRecord | 'corrupt' {
  const requestedAt = parseEpochMs(f.requestedAt);
  const expiresAt = parseEpochMs(f.expiresAt);
  const state = f.state as ApprovalState;
  if (!f.approvalId || !/^[0-9a-f]{64}$/.test(f.argumentsDigest ?? '') || !f.subject || !f.tool || !f.rule) return 'corrupt';
  if (f.arguments === undefined || f.approvers === undefined || !APPROVAL_STATES.includes(state)) return 'corrupt';
  if (requestedAt === undefined || expiresAt === undefined) return 'corrupt';
  const r: ApprovalRecord = {
    approvalId: f.approvalId,
    argumentsDigest: f.argumentsDigest!,
    rule: f.rule,
    subject: f.subject,
    tool: f.tool,
    arguments: f.arguments,
    approvers: f.approvers,
    notSelf: f.notSelf === 'true',
    state,
    requestedAt,
    expiresAt,
  };
  if (f.issuer !== undefined) r.issuer = f.issuer;
  if (f.clientId !== undefined) r.clientId = f.clientId;
  if (f.decidedBy !== undefined) r.decidedBy = f.decidedBy;
  const decidedAt = parseEpochMs(f.decidedAt);
  if (decidedAt !== undefined) r.decidedAt = decidedAt;
  if (f.reason !== undefined) r.reason = f.reason;
  return r;
}

const read = (current: Fields | null) => current && approvalFromFields(current);

/** A retry at `now` of the call with `digest`, as an update (model: useApproval). */
export function approvalUseUpdate(digest: string, now: number): (current: Fields | null) => HashUpdate<ApprovalUse> {
  return (current) => {
    const { use, change } = useApproval(read(current), digest, now);
    return change === undefined ? { result: use } : { result: use, set: changeFields(change) };
  };
}

/** A decision at `now`, as an update (model: decideApproval). */
export function approvalDecisionUpdate(
  now: number,
  decision: { approve: boolean; by: string; reason?: string | undefined },
): (current: Fields | null) => HashUpdate<ApprovalDecisionOutcome> {
  return (current) => {
    const { refusal, change } = decideApproval(read(current), now, decision);
    const set = change === undefined ? undefined : changeFields(change);
    const result: ApprovalDecisionOutcome = refusal !== undefined ? { refusal } : { state: change!.state };
    return set === undefined ? { result } : { result, set };
  };
}

/** Offboarding at `now`, as an update (model: cancelApproval); the result says whether it changed. */
export function approvalCancelUpdate(now: number): (current: Fields | null) => HashUpdate<boolean> {
  return (current) => {
    const change = cancelApproval(read(current), now);
    return change === undefined ? { result: false } : { result: true, set: changeFields(change) };
  };
}
