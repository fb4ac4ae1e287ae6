// Refresh tokens in memory: the plain read on the store's maps; rotation, the grace window, reuse
// detection and family revocation are the part both engines share (./part.ts), on the memory keyspace.

import type { MemoryCore } from '../memory-core.ts';
import { readRecord, refreshTokenFromFields } from '../records.ts';
import type { StoredRead, StoredRefreshToken } from '../../model/records.ts';
import { KeyspaceRefreshTokens } from './part.ts';
import type { RefreshTokenStorage } from './types.ts';

export class MemoryRefreshTokens extends KeyspaceRefreshTokens<MemoryCore> implements RefreshTokenStorage {
  async getRefreshToken(tokenHash: string): Promise<StoredRead<StoredRefreshToken>> {
    this.core.check();
    return readRecord(this.core.get(this.core.keys.refreshToken(tokenHash)), refreshTokenFromFields);
  }
}
