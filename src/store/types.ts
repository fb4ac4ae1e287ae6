// The storage boundary: small interfaces by aggregate, all implemented by RedisTokenStore (production)
// and MemoryTokenStore (demo), both held to one contract suite (test/integration/store-contract.ts).
// Stores persist and fetch records atomically; they never decide whether a token is valid.

/** The token-lookup cache's plain counters (store/redis-lookup-cache.ts), read by the metrics at each scrape. */
export interface LookupCacheStats {
  hits: number;
  misses: number;
  /** Lookups that went straight to Redis because the cache was not live. */
  bypasses: number;
  /** Invalidation messages received (a FLUSHDB/FLUSHALL one included). */
  invalidations: number;
  /** Times the whole cache was emptied (connection lost, PING unanswered, flush). */
  drops: number;
  /** Barriers sent (each one PING and one GET, shared by the hits that waited on it). */
  barriers: number;
}

/**
 * Why redis.lookupCache: auto runs without the cache (the strict mode): Redis Cluster, Redis refused
 * tracking, or the cache's connections could not be set up at start.
 */
export type LookupCacheFallback = 'cluster' | 'tracking_refused' | 'setup_failed';

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
 * What a read of one record gives: the record; `'corrupt'` when the stored fields do not make one (a
 * hand edit, a half-written record), which every caller refuses as it refuses an unknown record (fail
 * closed); null when nothing is stored.
 */
export type StoredRead<T> = T | 'corrupt' | null;

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

/**
 * `ok`: rotated, the new pair stored. `grace`: the token had already been rotated, but within the
 * grace window (parallel sessions sharing it, a retry); nothing is stored: the caller answers with the
 * successor its first rotation sealed (StoredRefreshToken.successor), the same pair every time.
 * `reused`: it had been rotated before the window; its whole family is now revoked.
 */
export type RotateOutcome = 'ok' | 'grace' | 'invalid' | 'reused' | 'client_revoked';

/**
 * An authorization code (stored only as the SHA-256 of the code), bound to everything the token
 * request must repeat or prove. Single use; its record outlives the first redemption for a while so
 * that a second one can be recognised and revoke what the first issued.
 */
export interface AuthorizationCodeRecord {
  codeHash: string;
  clientId: string;
  redirectUri: string;
  /** PKCE S256 challenge (base64url SHA-256 of the verifier). */
  codeChallenge: string;
  resource: string;
  scope?: string;
  user: SignedInUser;
  /** The remembered approval the code was issued under: the grant it redeems for is linked to it. */
  consent?: ConsentLink;
  createdAt: number;
  expiresAt: number;
}

/** An authorization code as stored: its record and, once redeemed, when and what that issued. */
export interface StoredAuthorizationCode extends AuthorizationCodeRecord {
  redeemedAt?: number;
  /** The access token and refresh family its redemption issued (revoked when it comes back). */
  accessTokenHash?: string;
  familyId?: string;
}

/** Where an approval lives (ConsentStorage): the browser's hash, its consentKey, and its expiry. */
export interface ConsentLink {
  browserHash: string;
  key: string;
  expiresAt: number;
}

/**
 * A user's remembered approval of a client's sign-in (the consent page), held per browser: the IdP
 * user who approved, the client (and the `createdAt` of its record: a client deleted and created
 * again, or a document client whose record expired and was made anew, is another client), the exact
 * redirect URI and the scope set approved. Used only while it has not expired.
 */
export interface ConsentRecord {
  clientId: string;
  clientCreatedAt: number;
  redirectUri: string;
  issuer: string;
  subject: string;
  /** The scopes approved, space separated; absent when none was asked. */
  scope?: string;
  approvedAt: number;
  expiresAt: number;
}

/** `reused`: the code had been redeemed already; what that redemption issued is now revoked. */
export type RedeemOutcome = 'ok' | 'invalid' | 'reused' | 'client_revoked';

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

export interface DeleteClientResult {
  clientId: string;
  revokedAt: number;
  accessTokensRevoked: number;
  refreshTokensRevoked: number;
}

export type CreateTokenOutcome = 'ok' | 'client_not_found' | 'client_revoked';

/**
 * One audit event (src/observability/audit.ts): an admin operation, an issuance or a revocation. Never a secret:
 * tokens appear only as the first 8 hex characters of their SHA-256.
 */
export interface AuditEvent {
  /**
   * A random id naming the event (a UUID), set when it is recorded: what a client is given to quote
   * (a policy denial's `authorizationContextId`). Absent from events written before it existed.
   */
  eventId?: string;
  /** Epoch ms. */
  at: number;
  /** `master`, `client:<clientId>`, `user` (the holder of a user-grade token) or `anonymous`. */
  who: string;
  /** What was done, e.g. `createClient`, `token.client_credentials`, `revoke.access_token`. */
  action: string;
  /** `ok`, or the error code the caller got (`unauthorized`, `invalid_grant`, ...). */
  result: string;
  clientId?: string;
  /** First 8 hex characters of the token's SHA-256. */
  tokenHashPrefix?: string;
  /** The IdP `sub` of a user-grade token. */
  subject?: string;
  /** Small extra facts (counts, grant type, HTTP status). */
  detail?: Record<string, string | number | boolean>;
}

/** An audit event as read back, newest first, with its stream id (`<ms>-<seq>`). */
export interface StoredAuditEvent extends AuditEvent {
  id: string;
}

/**
 * What one revocation took away, as every sidecar sharing the store hears it: tokens by hash (a user
 * token, an access token), whole clients (deleteClient), whole refresh-token families (a family's
 * access tokens carry its id). Only identifiers, never a secret.
 */
export interface RevocationNotice {
  tokenHashes?: string[];
  clientIds?: string[];
  familyIds?: string[];
}

export interface RevocationListener {
  revoked(notice: RevocationNotice): void;
  /** The subscription was down and is back: notices sent meanwhile are lost, check everything again. */
  missed(): void;
}

/** A create met a record that already exists (ids are random: a collision is a bug, not an outage). */
export class DuplicateRecordError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DuplicateRecordError';
  }
}

// The store by aggregate: each consumer names only the parts it uses (the proxy TokenStorage and
// StoreHealth, the audit trail AuditStorage, the rate limits CounterStorage...). Both stores implement
// them all (TokenStore). Operations throw StoreUnavailableError when the backing store cannot answer.

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

/** OAuth clients and their lifecycle. */
export interface ClientStorage {
  /** Throws DuplicateRecordError when a client with this id exists. */
  createClient(client: ClientRecord): Promise<void>;
  /** null when no such client; `'corrupt'` when its record is unreadable (refused like an unknown client). */
  getClient(clientId: string): Promise<StoredRead<ClientRecord>>;
  /** Every readable client (unreadable records are skipped). */
  listClients(): Promise<ClientRecord[]>;
  /**
   * Atomically sets revokedAt on the client and every access and refresh token it owns, and forgets
   * the session and task handles bound to it (HandleStorage).
   * Idempotent: an already deleted client keeps its first revokedAt and revokes nothing new.
   * null when no such client exists.
   */
  deleteClient(clientId: string, now: number): Promise<DeleteClientResult | null>;
  /** Keeps a dynamically registered client alive for `ttlMs` more (unused registrations expire). */
  touchClient(clientId: string, ttlMs: number): Promise<void>;
}

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

/**
 * How many pending sign-ins (consent not yet given) one client address and one client may hold at
 * once; 0: no bound. `now` decides which held ones have expired.
 */
export interface PendingSignInBounds {
  address: string;
  clientId: string;
  perAddress: number;
  perClient: number;
  now: number;
}

/** Stored; or refused (nothing stored) because `holder` holds its bound, until `retryAt` (epoch ms: its oldest expires). */
export type PendingSignInOutcome = { stored: true } | { stored: false; holder: 'address' | 'client'; retryAt: number };

/**
 * A client's validated authorization request (RFC 6749 §4.1.1 with PKCE), as a browser sign-in
 * carries it between its steps: only what the later steps need, not the client's name (shown once,
 * on the consent page) nor the resource (always this server's /mcp).
 */
export interface AuthorizationRequest {
  clientId: string;
  redirectUri: string;
  codeChallenge: string;
  state: string | undefined;
  scope: string | undefined;
  /**
   * Set when the user approves a device (RFC 8628) rather than a client at a redirect URI: the
   * SHA-256 of the device code the decision goes to (redirectUri and codeChallenge are then empty).
   */
  deviceCodeHash?: string;
}

/**
 * A browser sign-in in progress, between two of its steps, bound to the browser it started in (the
 * SHA-256 of its cookie). `consent`: the consent page is shown; `idp`: the browser is at the IdP
 * (its login's nonce and PKCE verifier, and whether consent was given or an approval remembered);
 * `user-consent`: back from the IdP, the signed-in user is asked.
 */
export type AuthorizationRequestRecord =
  | ({ request: AuthorizationRequest; browserHash: string } & (
      | { stage: 'consent' }
      | { stage: 'idp'; nonce: string; codeVerifier: string; consent: 'given' | 'remembered'; remember: boolean }
      | { stage: 'user-consent'; user: SignedInUser }
    ))
  | AccountSignInRecord;

/** A sign-in to the account page while the browser is at the IdP: no client, only the IdP login's checks. */
export interface AccountSignInRecord {
  stage: 'account';
  browserHash: string;
  nonce: string;
  codeVerifier: string;
  /** A path of this server the browser goes back to once signed in (a connect page); absent: the account page. */
  next?: string;
}

/** A person signed in to the account page: who, and until when (under the SHA-256 of its cookie). */
export interface AccountSession {
  user: SignedInUser;
  createdAt: number;
  expiresAt: number;
}

/**
 * Offboarding's cut-off: when a person was last revoked (`revokeSubject`). What was issued for them
 * at or before it and is still pending (a code not yet redeemed, a device approval not yet polled, an
 * account-page session, a connect link or a connect flow in progress) is refused when it is used.
 */
export interface SubjectCutoffStorage {
  /**
   * Records that everything issued for `subject` (at `issuer`, or at every issuer when undefined) at
   * or before `at` is void; kept until `keepUntil` (the longest any such artefact lives).
   */
  markSubjectRevoked(subject: string, issuer: string | undefined, at: number, keepUntil: number): Promise<void>;
  /** The latest cut-off that applies to `subject` at `issuer` (its own or the every-issuer one), or undefined. */
  subjectRevokedAt(subject: string, issuer: string): Promise<number | undefined>;
}

/** Account-page sessions, under the SHA-256 of a random cookie value (the value itself is never stored). */
export interface AccountSessionStorage {
  /** Stores a session until its expiresAt. */
  putAccountSession(sessionHash: string, session: AccountSession): Promise<void>;
  /** The session, while it lives; null when unknown, expired by `now` or unreadable. */
  getAccountSession(sessionHash: string, now: number): Promise<AccountSession | null>;
  /** Ends a session (sign-out); false when none was stored. */
  deleteAccountSession(sessionHash: string): Promise<boolean>;
}

/** Browser sign-in: pending requests between its steps, and authorization codes. */
export interface AuthorizationCodeStorage {
  /**
   * Short-lived state of a browser sign-in in progress (consent pending, then the IdP round trip),
   * under the SHA-256 of a random handle; gone at `expiresAt`.
   */
  putAuthorizationRequest(requestHash: string, record: AuthorizationRequestRecord, expiresAt: number): Promise<void>;
  /**
   * The first step's request, stored like putAuthorizationRequest only while its client address and
   * its client each hold fewer than their bound of pending ones (counted until each expires); the
   * check, the count and the write are one atomic step.
   */
  putPendingSignIn(
    requestHash: string,
    record: AuthorizationRequestRecord,
    expiresAt: number,
    bounds: PendingSignInBounds,
  ): Promise<PendingSignInOutcome>;
  /** Atomically reads and deletes it: each handle is usable once. null when unknown or expired, `'corrupt'` when unreadable. */
  takeAuthorizationRequest(requestHash: string): Promise<StoredRead<AuthorizationRequestRecord>>;
  putAuthorizationCode(record: AuthorizationCodeRecord): Promise<void>;
  /** A code as stored (redeemed or not); null when unknown or gone from storage, `'corrupt'` when unreadable. */
  getAuthorizationCode(codeHash: string): Promise<StoredRead<StoredAuthorizationCode>>;
  /**
   * Atomically: if the code is unredeemed, unexpired, of `clientId`, and its client is not revoked,
   * marks it redeemed (remembering what it issued, kept `retainMs` for reuse detection) and stores
   * the tokens. If it was redeemed before, revokes what that redemption issued and answers `reused`.
   */
  redeemAuthorizationCode(
    codeHash: string,
    clientId: string,
    now: number,
    retainMs: number,
    access: AccessTokenRecord,
    refresh?: RefreshTokenRecord,
  ): Promise<RedeemOutcome>;
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

/** How many device authorizations one client address, and the whole server, may hold at once (0: no bound). */
export interface DeviceAuthorizationBounds {
  address: string;
  perAddress: number;
  total: number;
  now: number;
}

/**
 * Stored; or refused, nothing stored: `holder` holds its bound until `retryAt` (epoch ms, its oldest
 * expires), or `user_code`: the user code is one a waiting authorization already has (draw another).
 */
export type DeviceAuthorizationOutcome =
  { stored: true } | { stored: false; holder: 'address' | 'total'; retryAt: number } | { stored: false; holder: 'user_code' };

/**
 * One poll of the token endpoint (RFC 8628 §3.5): `invalid` (unknown, another client's, or already
 * redeemed), `expired`, `slow_down` (polled sooner than the interval; the interval is now `interval`),
 * `pending`, `denied`, or `approved`: the authorization, now redeemed, whose tokens the caller issues.
 */
export type DevicePollOutcome =
  | { outcome: 'invalid' | 'expired' | 'pending' | 'denied' }
  | { outcome: 'slow_down'; interval: number }
  | { outcome: 'approved'; authorization: StoredDeviceAuthorization & { user: SignedInUser } };

/** Device authorizations (RFC 8628): created by the client, decided by the user, polled by the client. */
export interface DeviceAuthorizationStorage {
  /**
   * Stores a pending authorization (and its user code's index, until `expiresAt`; the record itself is
   * kept `retainMs` longer so that a late poll is told it expired), only while its client address and
   * the server hold fewer than their bound (counted until each expires) and no waiting authorization
   * has the same user code: the checks and the writes are one atomic step.
   */
  putDeviceAuthorization(
    record: DeviceAuthorizationRecord,
    retainMs: number,
    bounds: DeviceAuthorizationBounds,
  ): Promise<DeviceAuthorizationOutcome>;
  /** The authorization a user code names while it waits for the user's decision; null otherwise. */
  findDeviceAuthorization(userCodeHash: string): Promise<StoredRead<StoredDeviceAuthorization>>;
  /**
   * Atomically: if the authorization is pending and unexpired at `now`, records the decision (`user`
   * approved, or undefined: denied) and forgets its user code; false (nothing changed) otherwise.
   */
  decideDeviceAuthorization(deviceCodeHash: string, now: number, user: SignedInUser | undefined): Promise<boolean>;
  /** Atomically: one poll by `clientId` at `now`, as DevicePollOutcome says; an approval is taken once. */
  pollDeviceAuthorization(deviceCodeHash: string, clientId: string, now: number): Promise<DevicePollOutcome>;
}

/**
 * Remembered consent approvals, per browser: under the SHA-256 of a random cookie value (the value
 * itself is never stored), one approval per IdP user, client and redirect URI (consentKey). Every
 * revocation that names a grant linked to an approval (a refresh family, or the access token of a
 * grant without refresh token: what a RevocationNotice lists) also forgets that approval.
 */
export interface ConsentStorage {
  /**
   * Records `consent` for the browser, replacing that user's approval of the same client and redirect
   * URI. Approvals expired by `now` are dropped; beyond `maxPerBrowser` the ones expiring soonest go
   * first. The browser's set expires with its last approval.
   */
  putConsent(browserHash: string, consent: ConsentRecord, now: number, maxPerBrowser: number): Promise<void>;
  /** The browser's approvals not expired at `now`. */
  listConsents(browserHash: string, now: number): Promise<ConsentRecord[]>;
  /**
   * Links a grant issued under an approval (`grantId`: its refresh family id, or its access token's
   * hash when it has no refresh token) to that approval, until `expiresAt`: revoking the grant then
   * forgets the approval.
   */
  linkConsentGrant(grantId: string, browserHash: string, consentKey: string, expiresAt: number): Promise<void>;
  /** Forgets one approval of `subject` in a browser (the account page); false when no such approval of that subject is kept. */
  forgetConsent(browserHash: string, consentKey: string, subject: string): Promise<boolean>;
}

/** Client profiles (token lifetimes and default grants). */
export interface ProfileStorage {
  /** Creates each profile that does not exist yet; returns the names created. Never overwrites. */
  seedProfiles(profiles: readonly ProfileRecord[]): Promise<string[]>;
  /** null when no such profile is stored; `'corrupt'` when its record is unreadable (never replaced by a default). */
  getProfile(name: string): Promise<StoredRead<ProfileRecord>>;
  /** The stored fields under a profile's key as they are (hand edits included); null when absent. */
  getProfileFields(name: string): Promise<Record<string, string> | null>;
  /** Every readable profile (unreadable records are skipped). */
  listProfiles(): Promise<ProfileRecord[]>;
}

/** Counters shared by every replica (rate limits). */
export interface CounterStorage {
  /**
   * Counts one event in a fixed window shared by every replica: the count so far in the current
   * window and the ms until it ends. The window starts with the first event.
   */
  hitCounter(name: string, windowMs: number): Promise<{ count: number; resetMs: number }>;
}

/** The state of one quota counter after a take (see QuotaStorage). */
export interface QuotaOutcome {
  /** The units asked for were within the limit and are now counted (a read: the next one would be). */
  allowed: boolean;
  /** Units counted in the current window, after this take. */
  used: number;
  /** Epoch ms at which the current window ends and the count starts again at 0. */
  resetAt: number;
}

/** Quota counters shared by every replica (`policy.quotas`). */
export interface QuotaStorage {
  /**
   * Takes `cost` units of the counter `name`, all or nothing, in one atomic step across replicas: they
   * are counted when the window's count plus `cost` stays within `limit`, else nothing is. Windows are
   * fixed and aligned to the epoch: window N is [N * windowMs, (N + 1) * windowMs), N from `now` (the
   * sidecar's clock); a counter already in a later window (a replica whose clock is ahead) stays in it.
   * `cost` 0 reads the counter without counting.
   */
  takeQuota(name: string, cost: number, limit: number, windowMs: number, now: number): Promise<QuotaOutcome>;
}

/** One-time values (a signed assertion's `jti`), shared by every replica. */
export interface OneTimeValueStorage {
  /**
   * Records `name` until `expiresAt` (epoch ms), atomically across replicas: true the first time,
   * false while an earlier record of the same name lives. A name already past its expiry is not kept
   * (true): the caller refuses expired values before asking.
   */
  useOnce(name: string, expiresAt: number): Promise<boolean>;
}

/** The capped audit stream. */
/**
 * Which capped stream an audit event goes to: `admin` (what the master token did) or `requests`
 * (everything else), each capped on its own so that request floods cannot evict admin events.
 */
export type AuditTrail = 'admin' | 'requests';

export interface AuditStorage {
  /** Appends to the trail's capped stream (about `maxLen` newest events are kept); returns the id. */
  appendAudit(event: AuditEvent, maxLen: number, trail?: AuditTrail): Promise<string>;
  /** The newest `count` audit events of both trails, newest first. */
  listAuditEvents(count: number): Promise<StoredAuditEvent[]>;
}

/** Revocations as they happen, from every sidecar sharing the backend (ends open streams). */
export interface RevocationNotices {
  /**
   * Delivers a notice for every revocation made through any store on the same backend (every replica,
   * this one included) until the returned function is called. Hand edits in Redis send none.
   */
  subscribeRevocations(listener: RevocationListener): Promise<() => Promise<void>>;
}

/**
 * A public key the upstream may verify caller assertions with (src/assertion/), as every replica lists
 * it: the key as a public JWK (JSON text, never a private part) and until when it is listed.
 */
export interface PublishedSigningKey {
  kid: string;
  /** The public JWK as JSON text. */
  jwk: string;
  /** Epoch ms; the key leaves the list then. */
  expiresAt: number;
}

/** Public keys of caller assertions, shared by every replica (one key of storage: Cluster-safe). */
export interface SigningKeyStorage {
  /**
   * Lists `key` until its `expiresAt`; a later call may extend that, never shorten it. Entries expired
   * by `now` are dropped on the way.
   */
  publishSigningKey(key: PublishedSigningKey, now: number): Promise<void>;
  /** Every key listed and not expired at `now`, sorted by kid. */
  listSigningKeys(now: number): Promise<PublishedSigningKey[]>;
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

/** Credentials kept for users at the upstream (per-user records, not in deleteClient's slot). */
export interface UpstreamCredentialStorage {
  /** Writes (or overwrites) the record of (subject, issuer, provider). */
  putUpstreamCredential(record: StoredUpstreamCredential): Promise<void>;
  getUpstreamCredential(subject: string, issuer: string, provider: string): Promise<StoredRead<StoredUpstreamCredential>>;
  /**
   * Overwrites the record only while its `sealed` is still `expectedSealed` (compare-and-set):
   * re-encryption never puts back a token a refresh replaced meanwhile. False when it changed or is gone.
   */
  replaceUpstreamCredential(record: StoredUpstreamCredential, expectedSealed: string): Promise<boolean>;
  /** Deletes every record of `subject` (of that issuer only, when given); answers how many. */
  deleteUpstreamCredentials(subject: string, issuer?: string): Promise<number>;
  /** Deletes the one record of (subject, issuer, provider): a person disconnecting one account. False when there was none. */
  deleteUpstreamCredential(subject: string, issuer: string, provider: string): Promise<boolean>;
  /** Every readable record of `subject` (all issuers; unreadable ones are skipped): what the account page lists. */
  listSubjectUpstreamCredentials(subject: string): Promise<StoredUpstreamCredential[]>;
  /** Every readable record (unreadable ones are skipped): for re-encryption under a new key. */
  listUpstreamCredentials(): Promise<StoredUpstreamCredential[]>;
}

/**
 * What an upstream hands a caller and later takes back as the only proof of whose it is: an MCP
 * session (`Mcp-Session-Id`) or a task (`taskId`). Stored only as the SHA-256 of the handle.
 */
export type HandleKind = 'session' | 'task';

/**
 * Who a handle belongs to. `id` is the whole identity compared on every use (kind, subject and client
 * id together: src/proxy/handles.ts); `clientId` and `subjectHash` (SHA-256 hex of an IdP subject) name
 * the indexes that deleteClient and forgetSubjectHandles find the handle by.
 */
export interface HandleOwner {
  id: string;
  clientId?: string;
  subjectHash?: string;
}

/** `owned`: recorded for this owner (its life extended). `foreign`: for another. `unknown`: not recorded. */
export type HandleUse = 'owned' | 'foreign' | 'unknown';

/**
 * A handle's record as stored: its owner's identity, its last renewal (epoch ms text, if any), and for
 * a session whether its client declared URL-mode elicitation when it initialized.
 */
export interface StoredHandle {
  owner: string;
  renewedAt?: string;
  urlElicitation?: true;
}

/** `bound`: recorded now for this owner. */
export type HandleBinding = 'bound' | 'owned' | 'foreign';

/**
 * Session and task handles bound to the principal that received them (or, in forward-auth, first
 * presented them), with a sliding lifetime. An owner holds at most `maxPerOwner` live handles per index
 * (client, subject): past it, its handle least recently used is forgotten.
 */
export interface HandleStorage {
  /**
   * The handle's record, read only (one plain read, which a caller can issue beside the token lookup
   * so both leave in one write); null when none. Its owner's use is then decided by the caller, and
   * a use due a renewal (handleRenewalDue) goes through useHandle.
   */
  readHandle(kind: HandleKind, handleHash: string): Promise<StoredHandle | null>;
  /**
   * Whose the handle is, in one round trip; when it is `owner`'s, its life is extended to `now + ttlMs`.
   * A handle recorded for another owner is left as it is.
   */
  useHandle(kind: HandleKind, handleHash: string, owner: HandleOwner, now: number, ttlMs: number, maxPerOwner: number): Promise<HandleUse>;
  /**
   * Like useHandle, but a handle not recorded yet is recorded for `owner` (atomically with the read),
   * marked `urlElicitation` when asked (a session whose `initialize` declared it); an existing record's
   * mark is left as it is.
   */
  bindHandle(
    kind: HandleKind,
    handleHash: string,
    owner: HandleOwner,
    now: number,
    ttlMs: number,
    maxPerOwner: number,
    marks?: { urlElicitation?: boolean },
  ): Promise<HandleBinding>;
  /** Forgets one handle (a session ended by DELETE); false when none was recorded. */
  forgetHandle(kind: HandleKind, handleHash: string): Promise<boolean>;
  /** Forgets every handle of an IdP subject (whatever client it came through); returns how many. */
  forgetSubjectHandles(subject: string): Promise<number>;
}

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

/** A remembered approval of an IdP subject, with the browser it is kept for (never the cookie). */
export interface SubjectConsent extends ConsentRecord {
  browserHash: string;
  /** Its field in the browser's approvals (consentKey). */
  key: string;
}

/** What revoking a subject took away, by kind. */
export interface SubjectRevocation {
  accessTokensRevoked: number;
  refreshTokensRevoked: number;
  userTokensRevoked: number;
  consentsForgotten: number;
}

/** What a rebuild of the subject index went through: records read and index members written. */
export interface SubjectIndexRebuild {
  scanned: number;
  indexed: number;
}

/**
 * The per-subject index: from an IdP subject to everything it holds (user-grade tokens, OAuth access
 * and refresh tokens, remembered consents). Members are written with their record; members whose
 * record has expired, been deleted or revoked are dropped when read, so a read is exact. Work on a
 * subject goes in batches of at most `batchSize` members (bounded time per Redis command, bounded
 * memory).
 */
export interface SubjectStorage {
  /** Every live, unrevoked token of the subject at `now` (of `issuer` only, when given). */
  listSubjectTokens(subject: string, now: number, issuer?: string): Promise<SubjectToken[]>;
  /** Every live, unrevoked access and refresh token of a client at `now`. */
  listClientTokens(clientId: string, now: number): Promise<SubjectToken[]>;
  /** Every remembered approval of the subject not expired at `now`. */
  listSubjectConsents(subject: string, now: number): Promise<SubjectConsent[]>;
  /**
   * Revokes everything the subject holds (of `issuer` only, when given): user-grade tokens get
   * revoked="true", access and refresh tokens revokedAt, approvals are forgotten; every sidecar is told
   * (open streams end). A second call finds nothing left: zeros. Handles are HandleStorage's.
   */
  revokeSubject(subject: string, issuer: string | undefined, now: number, batchSize: number): Promise<SubjectRevocation>;
  /** Indexes every stored record of a subject (records written before the index existed), scanning in batches. */
  rebuildSubjectIndex(now: number, batchSize: number): Promise<SubjectIndexRebuild>;
  /**
   * Records when tokens were last presented (`lastUsedAt` on each record still stored; a time never
   * goes back). Called in batches by the last-use recorder, not per request.
   */
  recordLastUse(uses: ReadonlyArray<{ tokenHash: string; kind: 'user' | 'oauth'; at: number }>): Promise<void>;
}

/** Whether the store answers at all (readiness, /health). */
export interface StoreHealth {
  /** Throws when the backing store cannot answer. */
  ping(): Promise<void>;
}

/**
 * What a store lets the metrics watch at each scrape, when it has such state (the Redis store does;
 * the memory store has none).
 */
export interface StoreWatch {
  /** Whether its connection can answer now (`mcp_auth_store_up`). */
  ready(): boolean;
  /** Copies of its counts of replica waits after revocations. */
  replication(): { waits: number; unacknowledged: number };
  /** The token-lookup cache, when it is on: its state and counters. */
  readonly lookupCache?: { readonly stats: LookupCacheStats; readonly live: boolean; readonly size: number } | undefined;
  /** With redis.lookupCache: auto, why the cache is not used (the strict mode), when it is not. */
  readonly lookupCacheFallback?: LookupCacheFallback | undefined;
}

/** A whole store, as built at start-up and closed at shutdown. */
export interface TokenStore
  extends
    TokenStorage,
    ClientStorage,
    HandleStorage,
    SubjectStorage,
    SubjectCutoffStorage,
    AccountSessionStorage,
    RefreshTokenStorage,
    AuthorizationCodeStorage,
    DeviceAuthorizationStorage,
    ConsentStorage,
    ProfileStorage,
    CounterStorage,
    QuotaStorage,
    OneTimeValueStorage,
    AuditStorage,
    RevocationNotices,
    SigningKeyStorage,
    UpstreamCredentialStorage,
    StoreHealth {
  /** What the metrics watch, when the store has it. */
  readonly watch?: StoreWatch | undefined;
  close(): Promise<void>;
}
