// Refresh tokens on Redis: what replicas and Cluster add to the part both engines share (./part.ts:
// the read, rotation with the old token, the new pair and its index in one guarded step, and family
// revocation): a reuse's revocation repeated and WAITed for, and on Cluster a layout-1 token revoked
// key by key.

import { Cluster } from 'ioredis';
import { clientBucket, hashBucket, revocationUpdate } from '../records.ts';
import { memberKey } from '../tokens/transitions.ts';
import type { RedisCore } from '../redis-core.ts';
import { KeyspaceRefreshTokens } from './part.ts';
import type { RefreshTokenStorage } from './types.ts';

export class RedisRefreshTokens extends KeyspaceRefreshTokens<RedisCore> implements RefreshTokenStorage {
  /**
   * The rotation revoked the family on the main connection, where a WAIT would hold up every lookup
   * behind it. With replicas, the same (idempotent: HSETNX) revocation is repeated on the transaction
   * connection and WAITed for there (its notice is the rotation's own, sent once after this).
   */
  protected override async reuseRevoked(oldHash: string, now: number): Promise<void> {
    if (await this.core.replicas.hasReplicas()) await this.revokeFamily(oldHash, now);
  }

  /** The family revocation both engines run; on Cluster, a layout-1 token (outside its family's slot) key by key. */
  protected override revokeFamily(tokenHash: string, now: number): Promise<{ familyId: string } | null> {
    return this.core.redis instanceof Cluster ? this.#revokeOnCluster(tokenHash, now) : super.revokeFamily(tokenHash, now);
  }

  async #revokeOnCluster(tokenHash: string, now: number): Promise<{ familyId: string } | null> {
    const [familyId, clientId] = await this.core.redis.hmget(this.core.keys.refreshToken(tokenHash), 'familyId', 'clientId');
    if (familyId == null || clientId == null) return null;
    if (hashBucket(tokenHash) === clientBucket(clientId)) return super.revokeFamily(tokenHash, now);
    return this.core.revokeThrough(async (keyspace) => {
      // A layout-1 token on Cluster (outside its family's slot): it, then each member, revoked on
      // its own (HSETNX revokedAt: idempotent, a repeat finishes an interrupted run).
      if (!(await this.core.updateHash(this.core.keys.refreshToken(tokenHash), revocationUpdate(now), keyspace))) return null;
      const members = await this.core.redis.smembers(this.core.keys.refreshFamily(clientId, familyId));
      await Promise.all(members.map((m) => this.core.updateHash(memberKey(this.core.keys, m), revocationUpdate(now), keyspace)));
      return { familyId };
    });
  }
}
