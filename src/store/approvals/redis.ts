// Approvals on Redis: one hash per approval, a key naming the newest approval of each bound call, and
// a sorted set of them all (the admin's list, offboarding). Transitions are the model's, each under
// the core's compare-and-set on the one record (RedisCore.updateHash): no script of their own.

import { assertExec, type RedisCore } from '../redis-core.ts';
import { orNull, readRecord } from '../codec.ts';
import type { StoredRead } from '../../model/records.ts';
import { approvalCancelUpdate, approvalDecisionUpdate, approvalFields, approvalFromFields, approvalUseUpdate } from './records.ts';
import type { ApprovalDecisionOutcome, ApprovalRecord, ApprovalStorage, ApprovalUse } from './types.ts';

/** Most approvals offboarding looks through (the newest first). */
const MAX_SCANNED = 10_000;

export class RedisApprovals implements ApprovalStorage {
  readonly #core: RedisCore;

  constructor(core: RedisCore) {
    this.#core = core;
  }

  async putApproval(record: ApprovalRecord, retainMs: number): Promise<void> {
    const { keys, redis } = this.#core;
    const key = keys.approval(record.approvalId);
    const until = Math.trunc(record.expiresAt + retainMs);
    // One transaction (the approval keys share one Cluster slot): the digest never names an approval
    // that is not there, and no approval is kept unlisted.
    assertExec(
      await redis
        .multi()
        .hset(key, approvalFields(record))
        .pexpireat(key, until)
        .set(keys.approvalDigest(record.argumentsDigest), record.approvalId, 'PXAT', until)
        .zadd(keys.approvalIndex(), until, record.approvalId)
        .exec(),
    );
  }

  async getApproval(approvalId: string): Promise<StoredRead<ApprovalRecord>> {
    return readRecord(orNull(await this.#core.redis.hgetall(this.#core.keys.approval(approvalId))), approvalFromFields);
  }

  async useApproval(argumentsDigest: string, now: number): Promise<ApprovalUse> {
    const approvalId = await this.#core.redis.get(this.#core.keys.approvalDigest(argumentsDigest));
    if (approvalId === null) return { outcome: 'none' };
    return this.#core.updateHash(this.#core.keys.approval(approvalId), approvalUseUpdate(argumentsDigest, now));
  }

  async decideApproval(
    approvalId: string,
    now: number,
    decision: { approve: boolean; by: string; reason?: string | undefined },
  ): Promise<ApprovalDecisionOutcome> {
    return this.#core.updateHash(this.#core.keys.approval(approvalId), approvalDecisionUpdate(now, decision));
  }

  async listApprovals(now: number, limit: number): Promise<ApprovalRecord[]> {
    const { keys, redis } = this.#core;
    await redis.zremrangebyscore(keys.approvalIndex(), '-inf', now);
    const ids = await redis.zrevrange(keys.approvalIndex(), 0, limit - 1);
    if (ids.length === 0) return [];
    const pipeline = redis.pipeline();
    for (const id of ids) pipeline.hgetall(keys.approval(id));
    const replies = (await pipeline.exec()) ?? [];
    const records: ApprovalRecord[] = [];
    for (const [err, fields] of replies) {
      if (err) throw err;
      const r = readRecord(orNull(fields as Record<string, string>), approvalFromFields);
      if (r !== null && r !== 'corrupt') records.push(r);
    }
    return records.sort((a, b) => b.requestedAt - a.requestedAt);
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
