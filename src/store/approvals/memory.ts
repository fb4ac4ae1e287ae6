// Approvals in memory: recorded, read, found and listed on the store's maps (the index a map of its
// own); their uses, decisions and cancellations are the part both engines share (./part.ts).

import type { MemoryCore } from '../memory-core.ts';
import { readRecord } from '../codec.ts';
import type { StoredRead } from '../../model/records.ts';
import { KeyspaceApprovals } from './part.ts';
import { approvalFields, approvalFromFields } from './records.ts';
import type { ApprovalRecord } from './types.ts';

export class MemoryApprovals extends KeyspaceApprovals<MemoryCore> {
  /** approval id -> when its record goes (the Redis sorted set). */
  readonly #index = new Map<string, number>();

  constructor(core: MemoryCore) {
    super(core, Number.MAX_SAFE_INTEGER);
  }

  async putApproval(record: ApprovalRecord, retainMs: number): Promise<void> {
    this.core.check();
    const until = Math.trunc(record.expiresAt + retainMs);
    this.core.put(this.core.keys.approval(record.approvalId), approvalFields(record), until);
    this.core.put(this.core.keys.approvalDigest(record.argumentsDigest), { approvalId: record.approvalId }, until);
    this.#index.set(record.approvalId, until);
  }

  async getApproval(approvalId: string): Promise<StoredRead<ApprovalRecord>> {
    this.core.check();
    return readRecord(this.core.get(this.core.keys.approval(approvalId)), approvalFromFields);
  }

  protected async approvalOfCall(argumentsDigest: string): Promise<string | null> {
    this.core.check();
    return this.core.get(this.core.keys.approvalDigest(argumentsDigest))?.approvalId ?? null;
  }

  async listApprovals(now: number, limit: number): Promise<ApprovalRecord[]> {
    this.core.check();
    const records: ApprovalRecord[] = [];
    for (const [id, until] of this.#index) {
      if (until <= now) {
        this.#index.delete(id);
        continue;
      }
      const r = readRecord(this.core.get(this.core.keys.approval(id)), approvalFromFields);
      if (r !== null && r !== 'corrupt') records.push(r);
    }
    return records.sort((a, b) => b.requestedAt - a.requestedAt).slice(0, limit);
  }
}
