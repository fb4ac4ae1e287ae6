// Reading a store's parsed records in tests: a record the store found unreadable fails the test there.

import type { StoredRead } from '../../src/model/records.ts';

/** The record, or null when none is stored; throws when the store answered `'corrupt'`. */
export function readable<T>(read: StoredRead<T>): T | null {
  if (read === 'corrupt') throw new Error('the store found the record unreadable');
  return read;
}
