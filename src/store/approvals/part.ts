// Approvals, written once for both engines on the core's keyspace: one hash per approval, a key naming
// the newest approval of each bound call, and a sorted set of them all (the admin's list,
// offboarding), recorded together in one step (the three keys share one Cluster slot). A use, a
// decision and offboarding's cancellation are each the model's rule in a compare-and-set on the one
// record (KeyspaceCore.updateHash).

import type { KeyspaceCore } from '../keyspace-core.ts';
import { readRecord } from '../codec.ts';
import { fieldsOf, membersOf, putHashSteps, readOne, type Command } from '../keyspace.ts';
import type { StoredRead } from '../../model/records.ts';
import { approvalCancelUpdate, approvalDecisionUpdate, approvalFields, approvalFromFields, approvalUseUpdate } from './records.ts';
import type { ApprovalDecisionOutcome, ApprovalRecord, ApprovalStorage, ApprovalUse } from './types.ts';

/** Most approvals offboarding looks through (the newest first). */
const MAX_SCANNED = 10_000;

export class KeyspaceApprovals implements ApprovalStorage {
  readonly #core: KeyspaceCore;

  constructor(core: KeyspaceCore) {
    this.#core = core;
  }

  /** The record, the digest's pointer and the index entry, in one step: the digest never names an approval that is not there. */
  async putApproval(record: ApprovalRecord, retainMs: number): Promise<void> {
    const { keys, keyspace } = this.#core;
    const until = Math.trunc(record.expiresAt + retainMs);
    await keyspace.apply({
      guards: [],
      steps: [
        ...putHashSteps(keys.approval(record.approvalId), approvalFields(record), until),
        ['SET', keys.approvalDigest(record.argumentsDigest), record.approvalId, 'PXAT', until],
        ['ZADD', keys.approvalIndex(), until, record.approvalId],
      ],
    });
  }

  async getApproval(approvalId: string): Promise<StoredRead<ApprovalRecord>> {
    return readRecord(fieldsOf(await readOne(this.#core.keyspace, ['HGETALL', this.#core.keys.approval(approvalId)])), approvalFromFields);
  }

  /** The newest first, at most `limit`; the index's entries past their record's time dropped first. */
  async listApprovals(now: number, limit: number): Promise<ApprovalRecord[]> {
    const { keys, keyspace } = this.#core;
    await keyspace.apply({ guards: [], steps: [['ZREMRANGEBYSCORE', keys.approvalIndex(), '-inf', now]] });
    const ids = membersOf(await readOne(keyspace, ['ZREVRANGE', keys.approvalIndex(), 0, limit - 1]));
    if (ids.length === 0) return [];
    // One round trip: the reads are written together.
    const replies = await keyspace.read(ids.map((id): Command => ['HGETALL', keys.approval(id)]));
    const records: ApprovalRecord[] = [];
    for (const reply of replies) {
      const r = readRecord(fieldsOf(reply), approvalFromFields);
      if (r !== null && r !== 'corrupt') records.push(r);
    }
    return records.sort((a, b) => b.requestedAt - a.requestedAt);
  }

  async useApproval(argumentsDigest: string, now: number): Promise<ApprovalUse> {
    const approvalId = await readOne(this.#core.keyspace, ['GET', this.#core.keys.approvalDigest(argumentsDigest)]);
    if (typeof approvalId !== 'string') return { outcome: 'none' };
    return this.#core.updateHash(this.#core.keys.approval(approvalId), approvalUseUpdate(argumentsDigest, now));
  }

  async decideApproval(
    approvalId: string,
    now: number,
    decision: { approve: boolean; by: string; reason?: string | undefined },
  ): Promise<ApprovalDecisionOutcome> {
    return this.#core.updateHash(this.#core.keys.approval(approvalId), approvalDecisionUpdate(now, decision));
  }

  async cancelSubjectApprovals(subject: string, issuer: string | undefined, now: number): Promise<number> {
    let cancelled = 0;
    for (const r of await this.listApprovals(now, MAX_SCANNED)) {
      if (r.subject !== subject || (issuer !== undefined && r.issuer !== issuer)) continue;
      if (await this.#core.updateHash(this.#core.keys.approval(r.approvalId), approvalCancelUpdate(now))) cancelled++;
    }
    return cancelled;
  }
}
