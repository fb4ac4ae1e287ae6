// What several aggregates of the store share: a duplicate create, the store being unavailable. The
// records themselves, how a read answers and who signed in are the model's (model/records.ts).

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
