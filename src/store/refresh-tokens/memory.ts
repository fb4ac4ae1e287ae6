// Refresh tokens in memory: rotation, the grace window, reuse detection and family revocation are the
// transitions both engines run (./transitions.ts), here on the memory store's maps.

import type { MemoryCore } from '../memory-core.ts';
import { readRecord, refreshTokenFromFields } from '../records.ts';
import type { RotateOutcome } from '../types.ts';
import type { AccessTokenRecord, RefreshTokenRecord, StoredRead, StoredRefreshToken } from '../../model/records.ts';
import { revokeFamily, rotateRefresh } from './transitions.ts';
import type { RefreshTokenStorage } from './types.ts';

export class MemoryRefreshTokens implements RefreshTokenStorage {
  readonly #core: MemoryCore;

  constructor(core: MemoryCore) {
    this.#core = core;
  }

  async getRefreshToken(tokenHash: string): Promise<StoredRead<StoredRefreshToken>> {
    this.#core.check();
    return readRecord(this.#core.get(this.#core.keys.refreshToken(tokenHash)), refreshTokenFromFields);
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
    this.#core.check();
    const outcome = await rotateRefresh(this.#core.keyspace, this.#core, { oldHash, clientId, now, access, refresh, graceMs, successor });
    if (outcome === 'reused') this.#core.notify({ familyIds: [refresh.familyId] });
    return outcome;
  }

  async revokeRefreshFamily(tokenHash: string, now: number): Promise<boolean> {
    this.#core.check();
    const revoked = await revokeFamily(this.#core.keyspace, this.#core.keys, tokenHash, now);
    if (revoked === null) return false;
    this.#core.notify({ familyIds: [revoked.familyId] });
    return true;
  }
}
