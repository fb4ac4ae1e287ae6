// Rules on one user's kept upstream credentials (one hash per user, a field per issuer and provider),
// each a pure step: what is stored and the inputs in, the answer and the change out. Both stores run
// them under their one compare-and-set on the user's hash (updateHash in src/store/).

import type { StoredUpstreamCredential } from './records.ts';
import type { RecordStep } from './token-records.ts';

/**
 * Replacing a kept credential (a re-encryption under a new key): only while its ciphertext is still
 * `expectedSealed`, so a re-encryption never restores a token a concurrent refresh replaced. One
 * gone or unreadable is not replaced. Answers whether it is.
 */
export function replaceKeptCredential(
  stored: StoredUpstreamCredential | 'corrupt' | null,
  expectedSealed: string,
  replacement: StoredUpstreamCredential,
): RecordStep<boolean, StoredUpstreamCredential> {
  if (stored === null || stored === 'corrupt' || stored.sealed !== expectedSealed) return { result: false };
  return { result: true, change: replacement };
}

/**
 * Which of a user's kept credentials go: all of them, or those of one issuer (`issuer`); a field
 * whose issuer does not read (undefined) goes only with all of them. Answers the fields.
 */
export function forgottenKeptCredentials(
  held: ReadonlyArray<{ field: string; issuer: string | undefined }>,
  issuer: string | undefined,
): string[] {
  return held.filter((c) => issuer === undefined || c.issuer === issuer).map((c) => c.field);
}
