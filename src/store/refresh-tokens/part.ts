// Refresh tokens, written once for both engines: the read, rotation (the grace window and reuse
// detection) and family revocation, the transitions of ./transitions.ts on the core's keyspace, each
// revocation followed by its notice. What replicas and Cluster add on Redis is in redis.ts.

import type { KeyspaceCore } from '../keyspace-core.ts';
import type { RotateOutcome } from '../types.ts';
import type { AccessTokenRecord, RefreshTokenRecord, StoredRead, StoredRefreshToken } from '../../model/records.ts';
import { fieldsOf, readOne } from '../keyspace.ts';
import { readRecord, refreshTokenFromFields } from '../records.ts';
import { revokeFamily, rotateRefresh } from './transitions.ts';
import type { RefreshTokenStorage } from './types.ts';

export class KeyspaceRefreshTokens<Core extends KeyspaceCore = KeyspaceCore> implements RefreshTokenStorage {
  /** The engine's core (its own part reads what only that engine has from it). */
  protected readonly core: Core;

  constructor(core: Core) {
    this.core = core;
  }

  async getRefreshToken(tokenHash: string): Promise<StoredRead<StoredRefreshToken>> {
    return readRecord(
      fieldsOf(await readOne(this.core.keyspace, ['HGETALL', this.core.keys.refreshToken(tokenHash)])),
      refreshTokenFromFields,
    );
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
    const core = this.core;
    if (await core.outsideClientSlot(oldHash, core.keys.refreshToken(oldHash), clientId)) return 'invalid';
    const outcome = await rotateRefresh(core.keyspace, core, { oldHash, clientId, now, access, refresh, graceMs, successor });
    if (outcome === 'reused') {
      await this.reuseRevoked(oldHash, now);
      await core.publish({ familyIds: [refresh.familyId] });
    }
    return outcome;
  }

  async revokeRefreshFamily(tokenHash: string, now: number): Promise<boolean> {
    const revoked = await this.revokeFamily(tokenHash, now);
    if (revoked === null) return false;
    await this.core.publish({ familyIds: [revoked.familyId] });
    return true;
  }

  /**
   * The family revocation (./transitions.ts) through revokeThrough (on Redis with replicas, WAITed
   * for); its family, or null when none.
   */
  protected revokeFamily(tokenHash: string, now: number): Promise<{ familyId: string } | null> {
    return this.core.revokeThrough((keyspace) => revokeFamily(keyspace, this.core.keys, tokenHash, now));
  }

  /** After a rotation found a reuse and revoked the family (in the same step): nothing more here. */
  protected async reuseRevoked(_oldHash: string, _now: number): Promise<void> {}
}
