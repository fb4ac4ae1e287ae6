// Bearer tokens (user-grade records, OAuth access tokens, the records issued with them) and the hot
// path's lookup of both collections by one hash.

import type { AccessTokenRecord, RefreshTokenRecord, SignedInUser, StoredRead, TokenLookup, UserTokenRecord } from '../../model/records.ts';

export type CreateTokenOutcome = 'ok' | 'client_not_found' | 'client_revoked';

/** Bearer tokens: user-grade records and OAuth access tokens. */
export interface TokenStorage {
  /** Hot path: both collections fetched for one hash, in one round trip. */
  lookupToken(tokenHash: string): Promise<TokenLookup>;
  /** Stores a new user-grade record with revoked="false", expiring (also in storage) at expiresAt. */
  putUserToken(record: UserTokenRecord): Promise<void>;
  /** Sets revoked="true" on an existing record; false when no record has this hash. */
  revokeUserToken(tokenHash: string): Promise<boolean>;
  /** Stores an access token only if its client exists and is not revoked, atomically with that check. */
  createAccessToken(record: AccessTokenRecord): Promise<CreateTokenOutcome>;
  /** Sets revokedAt on an access token; false when unknown. */
  revokeAccessToken(tokenHash: string, now: number): Promise<boolean>;
  /** Stores an access token and, optionally, a refresh token of a new family; same client check. */
  issueTokens(access: AccessTokenRecord, refresh?: RefreshTokenRecord): Promise<CreateTokenOutcome>;
}
