// The rules on one user's kept upstream credentials (src/model/kept-credentials.ts): pure steps.

import { describe, expect, it } from 'vitest';
import { forgottenKeptCredentials, replaceKeptCredential } from '../../src/model/kept-credentials.ts';
import type { StoredUpstreamCredential } from '../../src/store/types.ts';

const kept: StoredUpstreamCredential = {
  subject: 'alice',
  issuer: 'https://idp.example/',
  provider: 'idp',
  keyId: 'k1',
  sealed: 'first',
  createdAt: 1,
};

describe('replaceKeptCredential', () => {
  it('replaces only while the ciphertext is the one expected', () => {
    const next = { ...kept, sealed: 'rewrapped', keyId: 'k2' };
    expect(replaceKeptCredential(kept, 'first', next)).toEqual({ result: true, change: next });
    expect(replaceKeptCredential({ ...kept, sealed: 'refreshed' }, 'first', next)).toEqual({ result: false });
  });

  it('never writes one gone or unreadable', () => {
    expect(replaceKeptCredential(null, 'first', kept)).toEqual({ result: false });
    expect(replaceKeptCredential('corrupt', 'first', kept)).toEqual({ result: false });
  });
});

describe('forgottenKeptCredentials', () => {
  const held = [
    { field: 'a', issuer: 'A' },
    { field: 'b', issuer: 'B' },
    { field: 'junk', issuer: undefined },
  ];

  it("all of them, or one issuer's; an unreadable field only with all", () => {
    expect(forgottenKeptCredentials(held, undefined)).toEqual(['a', 'b', 'junk']);
    expect(forgottenKeptCredentials(held, 'A')).toEqual(['a']);
    expect(forgottenKeptCredentials(held, 'C')).toEqual([]);
  });
});
