// The rules on one stored record (src/model/token-records.ts): pure steps, the same in both stores.

import { describe, expect, it } from 'vitest';
import { revokeRecord } from '../../src/model/token-records.ts';

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
