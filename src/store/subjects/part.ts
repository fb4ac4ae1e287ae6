// The person index, the part both engines share: one batch of a subject's revocation (its access and
// refresh tokens and approvals in one transition, revokeSubjectBatch in ./transitions.ts; its
// user-grade tokens one compare-and-set each), then its notice. How an index is read, batch by batch,
// and everything else of the aggregate are each engine's own (memory.ts, redis.ts).

import type { KeyspaceCore } from '../keyspace-core.ts';
import { consentGrantIds, subjectUserRevocationUpdate, USER_MEMBER } from '../records.ts';
import type { RevocationNotice, SubjectRevocation } from '../types.ts';
import { addBatch, revokeSubjectBatch } from './transitions.ts';

export class KeyspaceSubjects<Core extends KeyspaceCore = KeyspaceCore> {
  /** The engine's core (its own part reads what only that engine has from it). */
  protected readonly core: Core;

  constructor(core: Core) {
    this.core = core;
  }

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
