// Offboarding's one rule for everything a person's index lists (revokeHolding): the same answers for
// a token record and a remembered approval, whatever the store read them from.

import { describe, expect, it } from 'vitest';
import { revokeHolding } from '../../src/model/offboarding.ts';

describe('revokeHolding', () => {
  const held = { subject: 'alice', issuer: 'A', revoked: false };

  it("revokes the subject's unrevoked holding, at any issuer or at the one named", () => {
    expect(revokeHolding(held, 'alice', undefined)).toBe('revoked');
    expect(revokeHolding(held, 'alice', 'A')).toBe('revoked');
  });

  it("leaves another issuer's holding listed, and one revoked already alone", () => {
    expect(revokeHolding(held, 'alice', 'B')).toBe('other_issuer');
    expect(revokeHolding({ ...held, revoked: true }, 'alice', undefined)).toBe('already');
    expect(revokeHolding({ ...held, revoked: true }, 'alice', 'B')).toBe('other_issuer');
  });

  it("answers not held for nothing stored, another subject's, or a subject that is not text", () => {
    expect(revokeHolding(null, 'alice', undefined)).toBe('not_held');
    expect(revokeHolding(held, 'bob', undefined)).toBe('not_held');
    expect(revokeHolding({ subject: ['alice'], issuer: 'A', revoked: false }, 'alice', undefined)).toBe('not_held');
  });
});
