// Bearer tokens (user-grade records, OAuth access tokens, the records issued with them) and the hot
// path's lookup of both collections by one hash.

import type { SignedInUser, StoredRead } from '../shared.ts';

export interface UserTokenRecord {
  tokenHash: string;
  subject: string;
  issuer: string;
  createdAt: number;
  expiresAt: number;
  /** The exchanged JWT's email and groups, for per-tool policy. */
  email?: string;
  groups?: string[];
  /** DPoP: the thumbprint of the key the token is bound to (exchanged with a proof). */
  dpopJkt?: string;
}

export interface AccessTokenRecord {
  tokenHash: string;
  clientId: string;
  /** Set when the token came from interactive sign-in: the user it acts for. */
  user?: SignedInUser;
  scope?: string;
  /** Refresh-token family this access token was issued with (revoked together on reuse). */
  familyId?: string;
  /** DPoP (RFC 9449): the thumbprint of the key the token is bound to (`cnf.jkt`). */
  dpopJkt?: string;
  createdAt: number;
  expiresAt: number;
}

export interface RefreshTokenRecord {
  tokenHash: string;
  clientId: string;
  /** Every refresh token rotated from the same grant shares one family. */
  familyId: string;
  scope?: string;
  user?: SignedInUser;
  /** DPoP: a public client's refresh token is bound to its key; refreshing needs a proof with it. */
  dpopJkt?: string;
  createdAt: number;
  expiresAt: number;
}

/**
 * A user-grade token as the hot path reads it (parsed at the store boundary, src/store/records.ts):
 * what deciding on it and the principal it makes need, nothing else.
 */
export interface StoredUserToken {
  subject: string;
  issuer?: string;
  /** `revoked` is exactly "true" (exactly "false": not revoked; anything else is a corrupt record). */
  revoked: boolean;
  expiresAt: number;
  email?: string;
  groups?: readonly string[];
  dpopJkt?: string;
}

/** An OAuth access token as the hot path reads it (parsed at the store boundary). */
export interface StoredAccessToken {
  clientId: string;
  /** The IdP user it acts for (interactive sign-in, token exchange); absent for a machine client's token. */
  subject?: string;
  issuer?: string;
  scope?: string;
  familyId?: string;
  /** A `revokedAt` is stored (it counts by its presence, as the scripts read it). */
  revoked: boolean;
  expiresAt: number;
  email?: string;
  groups?: readonly string[];
  dpopJkt?: string;
}

/**
 * Both records a token hash may name, parsed: the user-grade record and the OAuth access-token record,
 * each null when absent and `'corrupt'` when its stored fields do not make one.
 */
export interface TokenLookup {
  user: StoredRead<StoredUserToken>;
  oauth: StoredRead<StoredAccessToken>;
}

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
