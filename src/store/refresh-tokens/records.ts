// Refresh tokens as hash fields and back.

import { parseEpochMs } from '../../model/credentials.ts';
import { type Fields, userFields, userFromFields } from '../codec.ts';
import type { RefreshTokenRecord, StoredRefreshToken } from '../../model/records.ts';

export function refreshTokenFields(r: RefreshTokenRecord): Fields {
  const f: Fields = {
    tokenHash: r.tokenHash,
    clientId: r.clientId,
    familyId: r.familyId,
    createdAt: String(r.createdAt),
    expiresAt: String(r.expiresAt),
  };
  if (r.scope !== undefined) f.scope = r.scope;
  if (r.dpopJkt !== undefined) f.dpopJkt = r.dpopJkt;
  if (r.user !== undefined) Object.assign(f, userFields(r.user));
  return f;
}

/**
 * A stored refresh token, or `'corrupt'` without the fields every use needs: its client, its family
 * and a well-formed expiry. `rotatedAt` and `revokedAt` count by their presence (as the rotation reads
 * them), whatever their value.
 */
export function refreshTokenFromFields(f: Fields): StoredRefreshToken | 'corrupt' {
  const expiresAt = parseEpochMs(f.expiresAt);
  if (!f.clientId || !f.familyId || expiresAt === undefined) return 'corrupt';
  const r: StoredRefreshToken = {
    tokenHash: f.tokenHash ?? '',
    clientId: f.clientId,
    familyId: f.familyId,
    createdAt: Number(f.createdAt),
    expiresAt,
  };
  if (f.scope !== undefined) r.scope = f.scope;
  if (f.dpopJkt !== undefined) r.dpopJkt = f.dpopJkt;
  const user = userFromFields(f);
  if (user !== undefined) r.user = user;
  if (f.rotatedAt !== undefined) r.rotatedAt = Number(f.rotatedAt);
  if (f.successor !== undefined) r.successor = f.successor;
  if (f.revokedAt !== undefined) r.revokedAt = Number(f.revokedAt);
  return r;
}
