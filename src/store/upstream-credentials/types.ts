// Credentials kept for users at the upstream, sealed by the caller.

import type { StoredRead } from '../../model/records.ts';

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
