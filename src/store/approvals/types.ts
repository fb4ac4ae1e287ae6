// Approvals of held calls: written when a call is held, found again by what it is bound to, decided by
// a person or the admin, used once.

import type { ApprovalRecord, ApprovalState, ApprovalUse, DecisionRefusal } from '../../model/approvals.ts';
import type { StoredRead } from '../../model/records.ts';

export type { ApprovalRecord, ApprovalState, ApprovalUse, DecisionRefusal } from '../../model/approvals.ts';

/** A decision as recorded: the new state, or why it was not. */
export type ApprovalDecisionOutcome = { state: ApprovalState } | { refusal: DecisionRefusal };

export interface ApprovalStorage {
  /**
   * Stores a pending approval, kept `retainMs` past its expiry (so a late retry or the list still
   * sees how it ended), and makes it the one its digest names.
   */
  putApproval(record: ApprovalRecord, retainMs: number): Promise<void>;
  getApproval(approvalId: string): Promise<StoredRead<ApprovalRecord>>;
  /**
   * A retry of the call with this digest at `now`, atomically (model/approvals.ts useApproval under a
   * compare-and-set): of two concurrent retries of an approved call, exactly one gets `forward`.
   */
  useApproval(argumentsDigest: string, now: number): Promise<ApprovalUse>;
  /** Atomically: a decision on a pending, unexpired approval (model/approvals.ts decideApproval). */
  decideApproval(
    approvalId: string,
    now: number,
    decision: { approve: boolean; by: string; reason?: string | undefined },
  ): Promise<ApprovalDecisionOutcome>;
  /** Every approval still kept, newest first, at most `limit`. */
  listApprovals(now: number, limit: number): Promise<ApprovalRecord[]>;
  /** Offboarding: the subject's pending and approved approvals are denied; how many. */
  cancelSubjectApprovals(subject: string, issuer: string | undefined, now: number): Promise<number>;
}
