// The person index, the part both engines share: a subject's revocation, index by index and batch by
// batch (its access and refresh tokens and approvals in one transition, revokeSubjectBatch in
// ./transitions.ts; its user-grade tokens one compare-and-set each), each batch then its notice. How
// an index is read in batches (revocationBatches), and everything else of the aggregate, are each
// engine's own (memory.ts, redis.ts).

import { allBuckets } from '../key-layout.ts';
import type { Command } from '../keyspace.ts';
import type { KeyspaceCore } from '../keyspace-core.ts';
import { consentGrantIds, subjectDigest, subjectUserRevocationUpdate, USER_MEMBER } from '../records.ts';
import type { RevocationNotice, SubjectRevocation } from '../types.ts';
import { addBatch, revokeSubjectBatch } from './transitions.ts';

export abstract class KeyspaceSubjects<Core extends KeyspaceCore = KeyspaceCore> {
  /** The engine's core (its own part reads what only that engine has from it). */
  protected readonly core: Core;

  constructor(core: Core) {
    this.core = core;
  }

  /**
   * The subject's indexes one after another (home, then bucket by bucket: each batch's plan runs in
   * one slot); a run stopped half-way is finished by the next, which finds only what is left.
   */
  async revokeSubject(subject: string, issuer: string | undefined, now: number, batchSize: number): Promise<SubjectRevocation> {
    const size = Math.max(1, Math.trunc(batchSize));
    const result: SubjectRevocation = { accessTokensRevoked: 0, refreshTokensRevoked: 0, userTokensRevoked: 0, consentsForgotten: 0 };
    const digest = subjectDigest(subject);
    const { keys } = this.core;
    const indexes = [keys.subjectGrants(digest), ...allBuckets().map((bucket) => keys.subjectGrants(digest, bucket))];
    // Which indexes hold anything, asked in one round (most of a subject's buckets are empty).
    const held = await this.core.keyspace.read(indexes.map((index): Command => ['EXISTS', index]));
    for (const [i, index] of indexes.entries()) {
      if (held[i] !== 1) continue;
      for await (const batch of this.revocationBatches(index, subject, now, size))
        await this.revokeBatch(index, subject, issuer, now, batch, result);
    }
    return result;
  }

  /**
   * The members of one of a subject's indexes that its revocation goes through, at most `size` a
   * batch, members expired by `now` dropped first.
   */
  protected abstract revocationBatches(index: string, subject: string, now: number, size: number): AsyncIterable<string[]>;

  /**
   * Revokes one batch of `index`'s members, counted into `result`. Each write is a revocation
   * (revokeThrough: on Redis with replicas, WAITed for); the user-grade tokens' records are outside
   * any slot of the OAuth records, so theirs is one compare-and-set per token (Cluster routes each to
   * its node), their members then removed but for another issuer's. The batch's notice is sent once.
   */
  protected async revokeBatch(
    index: string,
    subject: string,
    issuer: string | undefined,
    now: number,
    batch: string[],
    result: SubjectRevocation,
  ): Promise<void> {
    const core = this.core;
    const notice: RevocationNotice = {};
    /** The grants revoked in this batch that an approval may be linked to (user-grade tokens never are). */
    let grantIds: string[] = [];
    const inSlot = batch.filter((m) => !m.startsWith(USER_MEMBER));
    if (inSlot.length > 0) {
      const done = await core.revokeThrough((keyspace) => revokeSubjectBatch(keyspace, core.keys, index, subject, issuer, now, inSlot));
      addBatch(result, notice, done);
      grantIds = consentGrantIds(notice);
    }
    const users = batch.filter((m) => m.startsWith(USER_MEMBER));
    if (users.length > 0) {
      const outcomes = await core.revokeThrough((keyspace) =>
        Promise.all(
          users.map(async (m) => core.updateHash(core.keys.userToken(m.slice(2)), subjectUserRevocationUpdate(subject, issuer), keyspace)),
        ),
      );
      const revoked = users.filter((_, i) => outcomes[i] === 'revoked').map((m) => m.slice(2));
      result.userTokensRevoked += revoked.length;
      if (revoked.length > 0) notice.tokenHashes = [...(notice.tokenHashes ?? []), ...revoked];
      const done = users.filter((_, i) => outcomes[i] !== 'other_issuer');
      if (done.length > 0) await core.keyspace.apply({ guards: [], steps: [['ZREM', index, ...done]] });
    }
    if (notice.tokenHashes !== undefined || notice.familyIds !== undefined) await core.publish(notice, grantIds);
  }
}
