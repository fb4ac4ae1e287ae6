// What several aggregates of the store share: how a read answers, who signed in, a duplicate create,
// the store being unavailable.

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

/** A create met a record that already exists (ids are random: a collision is a bug, not an outage). */
export class DuplicateRecordError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DuplicateRecordError';
  }
}

/**
 * The backing store could not answer (connection down, command timed out, replica acknowledgement lost).
 * Stores throw this, and only this, for infrastructure failures, so a listener can tell an outage (503,
 * retry later) from a bug (500).
 */
export class StoreUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreUnavailableError';
  }
}
