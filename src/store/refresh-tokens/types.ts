// Refresh tokens: rotation within a family, the grace window, reuse detection.

import type { AccessTokenRecord, RefreshTokenRecord, StoredRead, StoredRefreshToken } from '../../model/records.ts';

/**
 * `ok`: rotated, the new pair stored. `grace`: the token had already been rotated, but within the
 * grace window (parallel sessions sharing it, a retry); nothing is stored: the caller answers with the
 * successor its first rotation sealed (StoredRefreshToken.successor), the same pair every time.
 * `reused`: it had been rotated before the window; its whole family is now revoked.
 */
export type RotateOutcome = 'ok' | 'grace' | 'invalid' | 'reused' | 'client_revoked';

/** Refresh tokens: rotation within a family, and reuse detection. */
export interface RefreshTokenStorage {
  /** A refresh token as stored (null when unknown or expired from storage; `'corrupt'` when unreadable). */
  getRefreshToken(tokenHash: string): Promise<StoredRead<StoredRefreshToken>>;
  /**
   * Atomically: if `oldHash` is a live, unrotated, unrevoked refresh token of `clientId` whose client
   * is not revoked, marks it rotated, keeps `successor` (the new pair, sealed) on it and stores the new
   * pair in the same family. If it was already rotated less than `graceMs` ago (by `now`; the window
   * runs from the first rotation and is never extended) and its client is not revoked, stores nothing
   * and answers `grace`, however often: the caller answers with the sealed successor. If it was
   * rotated earlier (or `graceMs` is 0 or absent), revokes every token of its family instead and
   * answers `reused`.
   */
  rotateRefreshToken(
    oldHash: string,
    clientId: string,
    now: number,
    access: AccessTokenRecord,
    refresh: RefreshTokenRecord,
    graceMs?: number,
    successor?: string,
  ): Promise<RotateOutcome>;
  /** Revokes a refresh token and every token of its family; false when unknown. */
  revokeRefreshFamily(tokenHash: string, now: number): Promise<boolean>;
}
