// Browser sign-in: pending requests between its steps, authorization codes, remembered consent
// approvals and account-page sessions.

import type { AccessTokenRecord, RefreshTokenRecord, SignedInUser, StoredRead } from '../../model/records.ts';

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
  /** The identity provider chosen, when several are configured. */
  provider?: string;
  /** An e-mail the user typed to find their provider, passed on to it as `login_hint`. */
  loginHint?: string;
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
      | {
          stage: 'idp';
          nonce: string;
          codeVerifier: string;
          consent: 'given' | 'remembered';
          remember: boolean;
        }
      | { stage: 'user-consent'; user: SignedInUser }
    ))
  | AccountSignInRecord;

/** A sign-in to the account page while the browser is at the IdP: no client, only the IdP login's checks. */
export interface AccountSignInRecord {
  stage: 'account';
  browserHash: string;
  nonce: string;
  codeVerifier: string;
  /** The provider the browser went to, when several are configured. */
  provider?: string;
  /** A path of this server the browser goes back to once signed in (a connect page); absent: the account page. */
  next?: string;
}

/** A person signed in to the account page: who, and until when (under the SHA-256 of its cookie). */
export interface AccountSession {
  user: SignedInUser;
  createdAt: number;
  expiresAt: number;
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
