// The rules on one stored record (src/model/token-records.ts, consents.ts): pure steps, the same in both stores.

import { describe, expect, it } from 'vitest';
import { forgetSubjectApproval } from '../../src/model/consents.ts';
import { createRecord, revokeRecord, revokeSubjectUserToken, revokeUserToken, stampLastUse } from '../../src/model/token-records.ts';

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

describe('revokeUserToken', () => {
  it('sets the flag on a stored token only; a revoked one is answered as revoked, unchanged', () => {
    expect(revokeUserToken(null)).toEqual({ result: false });
    expect(revokeUserToken({ revoked: 'false' })).toEqual({ result: true, change: { revoked: true } });
    expect(revokeUserToken({ revoked: 'true' })).toEqual({ result: true });
  });
});

describe('revokeSubjectUserToken', () => {
  const live = { subject: 'alice', issuer: 'A', revoked: 'false' };

  it("revokes the subject's live token, of the named issuer only", () => {
    expect(revokeSubjectUserToken(live, 'alice', undefined)).toEqual({ result: 'revoked', change: { revoked: true } });
    expect(revokeSubjectUserToken(live, 'alice', 'A')).toEqual({ result: 'revoked', change: { revoked: true } });
    expect(revokeSubjectUserToken(live, 'alice', 'B')).toEqual({ result: 'other_issuer' });
  });

  it("a token gone or another subject's is not held; one revoked, or with a flag that is not live, is left as it is", () => {
    expect(revokeSubjectUserToken(null, 'alice', undefined)).toEqual({ result: 'not_held' });
    expect(revokeSubjectUserToken(live, 'bob', undefined)).toEqual({ result: 'not_held' });
    expect(revokeSubjectUserToken({ ...live, revoked: 'true' }, 'alice', undefined)).toEqual({ result: 'already' });
    expect(revokeSubjectUserToken({ ...live, revoked: 'maybe' }, 'alice', undefined)).toEqual({ result: 'already' });
  });
});

describe('forgetSubjectApproval', () => {
  it("forgets an approval of that person only; one gone, unreadable or another's stays", () => {
    expect(forgetSubjectApproval({ subject: 'alice' }, 'alice')).toEqual({ result: true, change: 'forget' });
    expect(forgetSubjectApproval({ subject: 'bob' }, 'alice')).toEqual({ result: false });
    expect(forgetSubjectApproval({}, 'alice')).toEqual({ result: false });
    expect(forgetSubjectApproval(null, 'alice')).toEqual({ result: false });
  });
});
