// Approvals, the part both engines share: a use, a decision and offboarding's cancellation, each the
// model's rule in a compare-and-set on the one record (KeyspaceCore.updateHash). How an approval is
// recorded, read, found by its call's digest and listed is each engine's own (memory.ts, redis.ts).

import type { KeyspaceCore } from '../keyspace-core.ts';
import type { StoredRead } from '../../model/records.ts';
import { approvalCancelUpdate, approvalDecisionUpdate, approvalUseUpdate } from './records.ts';
import type { ApprovalDecisionOutcome, ApprovalRecord, ApprovalStorage, ApprovalUse } from './types.ts';

export abstract class KeyspaceApprovals<Core extends KeyspaceCore = KeyspaceCore> implements ApprovalStorage {
  /** The engine's core (its own part reads what only that engine has from it). */
  protected readonly core: Core;
  /** Most approvals offboarding looks through (the newest first). */
  readonly #maxScanned: number;

  constructor(core: Core, maxScanned: number) {
    this.core = core;
    this.#maxScanned = maxScanned;
  }

  abstract putApproval(record: ApprovalRecord, retainMs: number): Promise<void>;
  abstract getApproval(approvalId: string): Promise<StoredRead<ApprovalRecord>>;
  abstract listApprovals(now: number, limit: number): Promise<ApprovalRecord[]>;
  /** The id of the newest approval of a bound call (by its arguments' digest); null when none. */
  protected abstract approvalOfCall(argumentsDigest: string): Promise<string | null>;

  async useApproval(argumentsDigest: string, now: number): Promise<ApprovalUse> {
    const approvalId = await this.approvalOfCall(argumentsDigest);
    if (approvalId === null) return { outcome: 'none' };
    return this.core.updateHash(this.core.keys.approval(approvalId), approvalUseUpdate(argumentsDigest, now));
  }

  async decideApproval(
    approvalId: string,
    now: number,
    decision: { approve: boolean; by: string; reason?: string | undefined },
  ): Promise<ApprovalDecisionOutcome> {
    return this.core.updateHash(this.core.keys.approval(approvalId), approvalDecisionUpdate(now, decision));
  }

  async cancelSubjectApprovals(subject: string, issuer: string | undefined, now: number): Promise<number> {
    let cancelled = 0;
    for (const r of await this.listApprovals(now, this.#maxScanned)) {
      if (r.subject !== subject || (issuer !== undefined && r.issuer !== issuer)) continue;
      if (await this.core.updateHash(this.core.keys.approval(r.approvalId), approvalCancelUpdate(now))) cancelled++;
    }
    return cancelled;
  }
}
