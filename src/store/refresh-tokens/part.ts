// Refresh tokens, the part both engines share: rotation (the grace window and reuse detection) and
// family revocation, the transitions of ./transitions.ts on the core's keyspace, each revocation
// followed by its notice. The plain read, and on Redis what replicas and Cluster add, are each
// engine's own (memory.ts, redis.ts).

import type { KeyspaceCore } from '../keyspace-core.ts';
import type { RotateOutcome } from '../types.ts';
import type { AccessTokenRecord, RefreshTokenRecord } from '../../model/records.ts';
import { revokeFamily, rotateRefresh } from './transitions.ts';
import type { RefreshTokenStorage } from './types.ts';

export class KeyspaceRefreshTokens<Core extends KeyspaceCore = KeyspaceCore> implements Pick<
  RefreshTokenStorage,
  'rotateRefreshToken' | 'revokeRefreshFamily'
> {
  /** The engine's core (its own part reads what only that engine has from it). */
  protected readonly core: Core;

  constructor(core: Core) {
    this.core = core;
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
