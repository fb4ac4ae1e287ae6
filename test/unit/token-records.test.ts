// The rules on one stored record (src/model/token-records.ts): pure steps, the same in both stores.

import { describe, expect, it } from 'vitest';
import { createRecord, revokeRecord, stampLastUse } from '../../src/model/token-records.ts';

describe('revokeRecord', () => {
  it('revokes a stored record at now, never one not stored', () => {
    expect(revokeRecord(null, 5)).toEqual({ result: false });
    expect(revokeRecord({}, 5)).toEqual({ result: true, change: { revokedAt: 5 } });
  });

  it('keeps the first revocation time, whatever it reads as', () => {
    expect(revokeRecord({ revokedAt: '3' }, 5)).toEqual({ result: true });
    expect(revokeRecord({ revokedAt: 'hand-edited' }, 5)).toEqual({ result: true });
  });
});

describe('createRecord', () => {
  it('creates the record only while none is stored', () => {
    expect(createRecord(null, { a: '1' })).toEqual({ result: true, change: { a: '1' } });
    expect(createRecord({ a: 'first' }, { a: '1' })).toEqual({ result: false });
  });
});

describe('stampLastUse', () => {
  it('stamps a stored record only, and never moves the stamp back', () => {
    expect(stampLastUse(null, 5)).toEqual({ result: false });
    expect(stampLastUse({}, 5)).toEqual({ result: true, change: { lastUsedAt: 5 } });
    expect(stampLastUse({ lastUsedAt: '4' }, 5)).toEqual({ result: true, change: { lastUsedAt: 5 } });
    expect(stampLastUse({ lastUsedAt: '5' }, 5)).toEqual({ result: false });
    expect(stampLastUse({ lastUsedAt: '9' }, 5)).toEqual({ result: false });
  });

  it('replaces a stamp that does not read as a number', () => {
    expect(stampLastUse({ lastUsedAt: 'yesterday' }, 5)).toEqual({ result: true, change: { lastUsedAt: 5 } });
  });
});
