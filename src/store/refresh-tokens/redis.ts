// Refresh tokens on Redis: rotation (ROTATE_REFRESH: the old token, the new pair and its index in one
// step), family revocation.

import { Cluster } from 'ioredis';
import { ACCESS_MEMBER, clientBucket, hashBucket, orNull, readRecord, refreshTokenFromFields, revocationUpdate } from '../records.ts';
import type { RedisCore } from '../redis-core.ts';
import type { RotateOutcome } from '../types.ts';
import type { AccessTokenRecord, RefreshTokenRecord, StoredRead, StoredRefreshToken } from '../../model/records.ts';
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
    const outcome = await this.#core.scripts.mcpRotateRefresh(
      this.#core.keys.client(clientId),
      this.#core.keys.clientTokens(clientId),
      this.#core.keys.accessToken(access.tokenHash),
      this.#core.keys.refreshToken(refresh.tokenHash),
      this.#core.keys.refreshFamily(clientId, refresh.familyId),
      this.#core.keys.refreshToken(oldHash),
      String(now),
      clientId,
      refresh.familyId,
      this.#core.keys.accessTokenTemplate(),
      this.#core.keys.refreshTokenTemplate(),
      String(Math.max(0, Math.floor(graceMs))),
      successor ?? '',
      ...this.#core.tokenArgs(access, refresh),
    );
    if (outcome === 'reused') {
      // The script revoked the family on the main connection, where a WAIT would hold up every
      // lookup behind it. With replicas, the same (idempotent: HSETNX) revocation is repeated on the
      // transaction connection and WAITed for there.
      if (await this.#core.replicas.hasReplicas()) await this.revokeRefreshFamily(oldHash, now);
      await this.#core.publish({ familyIds: [refresh.familyId] });
      return outcome;
    }
    if (outcome === 'ok' || outcome === 'grace' || outcome === 'invalid' || outcome === 'client_revoked') return outcome;
    throw new TypeError(`unexpected script reply: ${String(outcome)}`);
  }

  async revokeRefreshFamily(tokenHash: string, now: number): Promise<boolean> {
    const [familyId, clientId] = await this.#core.redis.hmget(this.#core.keys.refreshToken(tokenHash), 'familyId', 'clientId');
    if (familyId == null || clientId == null) return false;
    const revoked = await this.#core.revocation(async (scripts) => {
      if (this.#core.redis instanceof Cluster && hashBucket(tokenHash) !== clientBucket(clientId)) {
        // A layout-1 token on Cluster (outside its family's slot): it, then each member, revoked on
        // its own (HSETNX revokedAt: idempotent, a repeat finishes an interrupted run).
        if (!(await this.#core.updateHash(this.#core.keys.refreshToken(tokenHash), revocationUpdate(now), scripts))) return false;
        const members = await this.#core.redis.smembers(this.#core.keys.refreshFamily(clientId, familyId));
        await Promise.all(
          members.map((m) =>
            this.#core.updateHash(
              m.startsWith(ACCESS_MEMBER) ? this.#core.keys.accessToken(m.slice(2)) : this.#core.keys.refreshToken(m.slice(2)),
              revocationUpdate(now),
              scripts,
            ),
          ),
        );
        return true;
      }
      const done = await scripts.mcpRevokeRefreshFamily(
        this.#core.keys.refreshToken(tokenHash),
        this.#core.keys.refreshFamily(clientId, familyId),
        String(now),
        this.#core.keys.accessTokenTemplate(),
        this.#core.keys.refreshTokenTemplate(),
      );
      return done === 1;
    });
    if (revoked) await this.#core.publish({ familyIds: [familyId] });
    return revoked;
  }
}
