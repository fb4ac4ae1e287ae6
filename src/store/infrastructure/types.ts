// What the store carries for the sidecar itself: the audit streams, revocation notices, the caller
// assertions' public keys, and health.

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

/** Whether the store answers at all (readiness, /health). */
export interface StoreHealth {
  /** Throws when the backing store cannot answer. */
  ping(): Promise<void>;
}
