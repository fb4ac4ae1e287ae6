// Approvals in memory: the same keys and fields as on Redis, the same model transitions.

import type { MemoryCore } from '../memory-core.ts';
import { readRecord } from '../codec.ts';
import type { StoredRead } from '../../model/records.ts';
import { approvalCancelUpdate, approvalDecisionUpdate, approvalFields, approvalFromFields, approvalUseUpdate } from './records.ts';
import type { ApprovalDecisionOutcome, ApprovalRecord, ApprovalStorage, ApprovalUse } from './types.ts';

export class MemoryApprovals implements ApprovalStorage {
  readonly #core: MemoryCore;
  /** approval id -> when its record goes (the Redis sorted set). */
  readonly #index = new Map<string, number>();

  constructor(core: MemoryCore) {
    this.#core = core;
  }

  async putApproval(record: ApprovalRecord, retainMs: number): Promise<void> {
    this.#core.check();
    const until = Math.trunc(record.expiresAt + retainMs);
    this.#core.put(this.#core.keys.approval(record.approvalId), approvalFields(record), until);
    this.#core.put(this.#core.keys.approvalDigest(record.argumentsDigest), { approvalId: record.approvalId }, until);
    this.#index.set(record.approvalId, until);
  }

  async getApproval(approvalId: string): Promise<StoredRead<ApprovalRecord>> {
    this.#core.check();
    return readRecord(this.#core.get(this.#core.keys.approval(approvalId)), approvalFromFields);
  }

  async useApproval(argumentsDigest: string, now: number): Promise<ApprovalUse> {
    this.#core.check();
    const approvalId = this.#core.get(this.#core.keys.approvalDigest(argumentsDigest))?.approvalId;
    if (approvalId === undefined) return { outcome: 'none' };
    return this.#core.updateHash(this.#core.keys.approval(approvalId), approvalUseUpdate(argumentsDigest, now));
  }

  async decideApproval(
    approvalId: string,
    now: number,
    decision: { approve: boolean; by: string; reason?: string | undefined },
  ): Promise<ApprovalDecisionOutcome> {
    this.#core.check();
    return this.#core.updateHash(this.#core.keys.approval(approvalId), approvalDecisionUpdate(now, decision));
  }

  async listApprovals(now: number, limit: number): Promise<ApprovalRecord[]> {
    this.#core.check();
    const records: ApprovalRecord[] = [];
    for (const [id, until] of this.#index) {
      if (until <= now) {
        this.#index.delete(id);
        continue;
      }
      const r = readRecord(this.#core.get(this.#core.keys.approval(id)), approvalFromFields);
      if (r !== null && r !== 'corrupt') records.push(r);
    }
    return records.sort((a, b) => b.requestedAt - a.requestedAt).slice(0, limit);
  }

  async cancelSubjectApprovals(subject: string, issuer: string | undefined, now: number): Promise<number> {
    let cancelled = 0;
    for (const r of await this.listApprovals(now, Number.MAX_SAFE_INTEGER)) {
      if (r.subject !== subject || (issuer !== undefined && r.issuer !== issuer)) continue;
      if (this.#core.updateHash(this.#core.keys.approval(r.approvalId), approvalCancelUpdate(now))) cancelled++;
    }
    return cancelled;
  }
}
