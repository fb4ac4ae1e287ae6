// Refresh tokens in memory: rotation, the grace window and reuse detection, as ROTATE_REFRESH does them.

import { rotatedWithinGrace } from '../../model/credentials.ts';
import type { MemoryCore } from '../memory-core.ts';
import { readRecord, refreshTokenFromFields } from '../records.ts';
import type { RotateOutcome } from '../types.ts';
import type { AccessTokenRecord, RefreshTokenRecord, StoredRead, StoredRefreshToken } from '../../model/records.ts';
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
    const old = this.#core.get(this.#core.keys.refreshToken(oldHash));
    if (!old || old.clientId !== clientId || old.revokedAt !== undefined || !old.familyId) return 'invalid';
    const rotated = old.rotatedAt !== undefined;
    if (rotated && !rotatedWithinGrace(old.rotatedAt!, now, graceMs)) {
      this.#core.revokeFamily(old.clientId, old.familyId, now);
      return 'reused';
    }
    const state = this.#core.clientState(clientId);
    if (state === 'client_not_found') return 'invalid';
    if (state === 'client_revoked') return 'client_revoked';
    // Within the window: nothing new; the caller answers with the successor the rotation sealed.
    if (rotated) return 'grace';
    old.rotatedAt = String(now);
    if (successor !== undefined) old.successor = successor;
    this.#core.storeAccess(access);
    this.#core.storeRefresh(refresh);
    return 'ok';
  }

  async revokeRefreshFamily(tokenHash: string, now: number): Promise<boolean> {
    this.#core.check();
    const fields = this.#core.get(this.#core.keys.refreshToken(tokenHash));
    if (!fields) return false;
    fields.revokedAt ??= String(now);
    if (fields.familyId && fields.clientId) this.#core.revokeFamily(fields.clientId, fields.familyId, now);
    return true;
  }
}
