// Refresh tokens on Redis: rotation (the old token, the new pair and its index in one guarded step) and
// family revocation, the transitions both engines run (./transitions.ts).

import { Cluster } from 'ioredis';
import { ACCESS_MEMBER, clientBucket, hashBucket, orNull, readRecord, refreshTokenFromFields, revocationUpdate } from '../records.ts';
import type { RedisCore } from '../redis-core.ts';
import type { RotateOutcome } from '../types.ts';
import type { AccessTokenRecord, RefreshTokenRecord, StoredRead, StoredRefreshToken } from '../../model/records.ts';
import { revokeFamily, rotateRefresh } from './transitions.ts';
import type { RefreshTokenStorage } from './types.ts';

export class RedisRefreshTokens implements RefreshTokenStorage {
  readonly #core: RedisCore;

  constructor(core: RedisCore) {
    this.#core = core;
  }

  async getRefreshToken(tokenHash: string): Promise<StoredRead<StoredRefreshToken>> {
    return readRecord(orNull(await this.#core.redis.hgetall(this.#core.keys.refreshToken(tokenHash))), refreshTokenFromFields);
  }

  async rotateRefreshToken(
    oldHash: string,
    clientId: string,
    now: number,
    access: AccessTokenRecord,
    refresh: RefreshTokenRecord,
    graceMs = 0,
    successor?: string,
  ): Promise<RotateOutcome> {
    if (await this.#core.outsideClientSlot(oldHash, this.#core.keys.refreshToken(oldHash), clientId)) return 'invalid';
    const outcome = await rotateRefresh(this.#core.keyspace, this.#core, { oldHash, clientId, now, access, refresh, graceMs, successor });
    if (outcome === 'reused') {
      // The rotation revoked the family on the main connection, where a WAIT would hold up every
      // lookup behind it. With replicas, the same (idempotent: HSETNX) revocation is repeated on the
      // transaction connection and WAITed for there.
      if (await this.#core.replicas.hasReplicas()) await this.revokeRefreshFamily(oldHash, now);
      await this.#core.publish({ familyIds: [refresh.familyId] });
    }
    return outcome;
  }

  /**
   * The family revocation both engines run (./transitions.ts), through revokeThrough: WAITed for when
   * there are replicas. On Cluster, a layout-1 token (outside its family's slot) is revoked key by key.
   */
  async revokeRefreshFamily(tokenHash: string, now: number): Promise<boolean> {
    const revoked =
      this.#core.redis instanceof Cluster
        ? await this.#revokeOnCluster(tokenHash, now)
        : await this.#core.revokeThrough((keyspace) => revokeFamily(keyspace, this.#core.keys, tokenHash, now));
    if (revoked === null) return false;
    await this.#core.publish({ familyIds: [revoked.familyId] });
    return true;
  }

  async #revokeOnCluster(tokenHash: string, now: number): Promise<{ familyId: string } | null> {
    const [familyId, clientId] = await this.#core.redis.hmget(this.#core.keys.refreshToken(tokenHash), 'familyId', 'clientId');
    if (familyId == null || clientId == null) return null;
    if (hashBucket(tokenHash) === clientBucket(clientId))
      return this.#core.revokeThrough((keyspace) => revokeFamily(keyspace, this.#core.keys, tokenHash, now));
    return this.#core.revokeThrough(async (keyspace) => {
      // A layout-1 token on Cluster (outside its family's slot): it, then each member, revoked on
      // its own (HSETNX revokedAt: idempotent, a repeat finishes an interrupted run).
      if (!(await this.#core.updateHash(this.#core.keys.refreshToken(tokenHash), revocationUpdate(now), keyspace))) return null;
      const members = await this.#core.redis.smembers(this.#core.keys.refreshFamily(clientId, familyId));
      await Promise.all(
        members.map((m) =>
          this.#core.updateHash(
            m.startsWith(ACCESS_MEMBER) ? this.#core.keys.accessToken(m.slice(2)) : this.#core.keys.refreshToken(m.slice(2)),
            revocationUpdate(now),
            keyspace,
          ),
        ),
      );
      return { familyId };
    });
  }
}
