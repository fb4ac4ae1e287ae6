// Approvals on Redis: one hash per approval, a key naming the newest approval of each bound call, and
// a sorted set of them all (the admin's list, offboarding). Uses, decisions and cancellations are the
// part both engines share (./part.ts): the model's rules in a compare-and-set on the one record.

import { assertExec, type RedisCore } from '../redis-core.ts';
import { orNull, readRecord } from '../codec.ts';
import type { StoredRead } from '../../model/records.ts';
import { KeyspaceApprovals } from './part.ts';
import { approvalFields, approvalFromFields } from './records.ts';
import type { ApprovalRecord } from './types.ts';

/** Most approvals offboarding looks through (the newest first). */
const MAX_SCANNED = 10_000;

export class RedisApprovals extends KeyspaceApprovals<RedisCore> {
  constructor(core: RedisCore) {
    super(core, MAX_SCANNED);
  }

  async putApproval(record: ApprovalRecord, retainMs: number): Promise<void> {
    const { keys, redis } = this.core;
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
    return readRecord(orNull(await this.core.redis.hgetall(this.core.keys.approval(approvalId))), approvalFromFields);
  }

  protected approvalOfCall(argumentsDigest: string): Promise<string | null> {
    return this.core.redis.get(this.core.keys.approvalDigest(argumentsDigest));
  }

  async listApprovals(now: number, limit: number): Promise<ApprovalRecord[]> {
    const { keys, redis } = this.core;
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
}
