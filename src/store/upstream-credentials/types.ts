// Credentials kept for users at the upstream, sealed by the caller.

import type { StoredRead, StoredUpstreamCredential } from '../../model/records.ts';

export type { StoredUpstreamCredential };

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
