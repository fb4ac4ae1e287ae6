// The records the store keeps and the model decides on, as the store's interfaces take and give them:
// clients and profiles, tokens and their lookup, device authorizations, a person's tokens, who signed
// in, and what a read of one record answers. The store imports them; the model never imports the store.

/** Who signed in at the IdP (interactive sign-in): kept with codes and tokens for per-user policy. */
export interface SignedInUser {
  /** The IdP `sub`: the subject of tokens issued from an authorization code. */
  subject: string;
  issuer: string;
  email?: string;
  groups?: string[];
  /**
   * When this sign-in at the IdP completed (epoch ms): a code, device approval or consent that comes
   * from a sign-in made at or before the person's offboarding is refused. Not kept on tokens.
   */
  signedInAt?: number;
}

/**
 * What a read of one record gives: the record; `'corrupt'` when the stored fields do not make one (a
 * hand edit, a half-written record), which every caller refuses as it refuses an unknown record (fail
 * closed); null when nothing is stored.
 */
export type StoredRead<T> = T | 'corrupt' | null;

export type TokenEndpointAuthMethod = 'client_secret_basic' | 'client_secret_post' | 'private_key_jwt' | 'none';

export interface ClientRecord {
  clientId: string;
  /** SHA-256 hex of the client secret; absent for public clients. */
  clientSecretHash?: string;
  clientName?: string;
  redirectUris: string[];
  grantTypes: string[];
  scope?: string;
  profile: string;
  tokenEndpointAuthMethod: TokenEndpointAuthMethod;
  /** private_key_jwt of a registered client: its public keys (a JWKS as JSON text), or where they are (https). */
  jwks?: string;
  jwksUri?: string;
  /** `admin` (createClient), `dcr` (POST /register) or `cimd` (a Client ID Metadata Document, first used at /authorize). */
  source: 'admin' | 'dcr' | 'cimd';
  createdAt: number;
  revokedAt?: number;
}

export interface ProfileRecord {
  name: string;
  description: string;
  /** Default lifetime of access tokens issued to clients of this profile. */
  accessTokenLifetimeSeconds: number;
  /** Lifetime of refresh tokens issued to clients of this profile (0: no refresh tokens). */
  refreshTokenLifetimeSeconds: number;
  /** Grant types a client of this profile gets when its creator names none. */
  grantTypes: string[];
  createdAt: number;
}

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

/** A refresh token as stored: its record and what has happened to it since. */
export interface StoredRefreshToken extends RefreshTokenRecord {
  /** Set by its rotation (epoch ms): presented again, it is a retry within the grace window or reuse. */
  rotatedAt?: number;
  /**
   * Set by its rotation: the pair it was rotated to, sealed with a key only the raw token (never
   * stored) derives. Within the grace window, presenting the token again answers with this same pair.
   */
  successor?: string;
  revokedAt?: number;
}

/**
 * A device authorization (RFC 8628 §3.2), stored under the SHA-256 of its device code; its user code
 * (normalised) is found through an index under the SHA-256 of that code while it waits for the user.
 * `interval`: the seconds the client must leave between polls, grown by 5 at each `slow_down`.
 */
export interface DeviceAuthorizationRecord {
  deviceCodeHash: string;
  userCodeHash: string;
  clientId: string;
  scope?: string;
  createdAt: number;
  expiresAt: number;
  interval: number;
}

/**
 * A device authorization as stored: `pending` until the user decides, then `approved` (with the user
 * who approved) or `denied`; `redeemed` once a poll took the approval (tokens are issued once).
 */
export interface StoredDeviceAuthorization extends DeviceAuthorizationRecord {
  status: 'pending' | 'approved' | 'denied' | 'redeemed';
  user?: SignedInUser;
  lastPolledAt?: number;
}

/**
 * One poll of the token endpoint (RFC 8628 §3.5): `invalid` (unknown, another client's, or already
 * redeemed), `expired`, `slow_down` (polled sooner than the interval; the interval is now `interval`),
 * `pending`, `denied`, or `approved`: the authorization, now redeemed, whose tokens the caller issues.
 */
export type DevicePollOutcome =
  | { outcome: 'invalid' | 'expired' | 'pending' | 'denied' }
  | { outcome: 'slow_down'; interval: number }
  | { outcome: 'approved'; authorization: StoredDeviceAuthorization & { user: SignedInUser } };

/**
 * One live token an IdP subject holds, as the subject index finds it: a user-grade token, or an OAuth
 * access or refresh token issued for the subject (sign-in, token exchange, ID-JAG). Never the token.
 */
export interface SubjectToken {
  kind: 'user' | 'access' | 'refresh';
  tokenHash: string;
  subject: string;
  issuer: string;
  /** OAuth tokens: the client holding them. */
  clientId?: string;
  /** OAuth tokens of a refresh family: the grant they belong to. */
  familyId?: string;
  scope?: string;
  createdAt: number;
  expiresAt: number;
  /** When the token was last presented, as recorded (coarse: at most about once a minute). */
  lastUsedAt?: number;
}

/**
 * What the model's functions ask of the store, as its interfaces declare it (ClientStorage,
 * ProfileStorage, SubjectCutoffStorage): a store is passed as itself.
 */
export interface ClientRecords {
  createClient(client: ClientRecord): Promise<void>;
  getClient(clientId: string): Promise<StoredRead<ClientRecord>>;
}

export interface ProfileRecords {
  getProfile(name: string): Promise<StoredRead<ProfileRecord>>;
  getProfileFields(name: string): Promise<Record<string, string> | null>;
}

export interface SubjectCutoffs {
  subjectRevokedAt(subject: string, issuer: string): Promise<number | undefined>;
}

/**
 * A credential kept for a user at the upstream (an IdP token, a connected account, an exchanged
 * token), as stored: encrypted by the caller (src/upstream-credentials/cipher.ts), the identity in
 * clear because it is bound into the ciphertext and names the record.
 */
export interface StoredUpstreamCredential {
  subject: string;
  issuer: string;
  /** Which credential of the user: `idp`, `oauth:<provider>` or `exchange:<audience>`. */
  provider: string;
  /** The id of the key `sealed` was encrypted under. */
  keyId: string;
  /** base64url of IV, ciphertext and tag: the tokens, never in clear. */
  sealed: string;
  /** When the access token inside expires (epoch ms), when known: read without decrypting. */
  expiresAt?: number;
  createdAt: number;
}
