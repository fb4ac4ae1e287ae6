// Encryption at rest of kept upstream credentials (src/upstream-credentials/cipher.ts): AES-256-GCM
// with a fresh IV each time, the record's identity bound in, and older keys still opening.

import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CredentialCipher, CredentialDecryptError, keyIdOf } from '../../src/upstream-credentials/cipher.ts';
import { parseCredentialKey } from '../../src/config/keys/shared.ts';

const ALICE = { subject: 'alice', issuer: 'https://idp.example/', provider: 'idp' };
const SECRET = 'gho_0123456789abcdefSECRET';

describe('credential cipher', () => {
  it('seals under the current key and opens it again; the sealed text holds no plaintext', () => {
    const cipher = new CredentialCipher(randomBytes(32));
    const { keyId, sealed } = cipher.seal(SECRET, ALICE);
    expect(keyId).toBe(cipher.currentKeyId);
    expect(sealed).not.toContain('SECRET');
    expect(Buffer.from(sealed, 'base64url').toString('latin1')).not.toContain('SECRET');
    expect(cipher.open(sealed, keyId, ALICE)).toBe(SECRET);
  });

  it('a fresh random IV every time: sealing the same value twice gives two ciphertexts', () => {
    const cipher = new CredentialCipher(randomBytes(32));
    const a = cipher.seal(SECRET, ALICE).sealed;
    const b = cipher.seal(SECRET, ALICE).sealed;
    expect(a).not.toBe(b);
    expect(Buffer.from(a, 'base64url').subarray(0, 12).equals(Buffer.from(b, 'base64url').subarray(0, 12))).toBe(false);
  });

  it.each([
    ['another subject', { ...ALICE, subject: 'mallory' }],
    ['another issuer', { ...ALICE, issuer: 'https://other-idp.example/' }],
    ['another provider', { ...ALICE, provider: 'oauth:github' }],
  ])('a ciphertext moved onto %s does not open', (_label, other) => {
    const cipher = new CredentialCipher(randomBytes(32));
    const { keyId, sealed } = cipher.seal(SECRET, ALICE);
    expect(() => cipher.open(sealed, keyId, other)).toThrow(CredentialDecryptError);
  });

  it('an altered byte, a wrong key, an unknown key id, or a truncated value does not open, and the error names no secret', () => {
    const key = randomBytes(32);
    const cipher = new CredentialCipher(key);
    const { keyId, sealed } = cipher.seal(SECRET, ALICE);
    const bytes = Buffer.from(sealed, 'base64url');
    bytes[20] = bytes[20]! ^ 1;
    const attempts: Array<() => string> = [
      () => cipher.open(bytes.toString('base64url'), keyId, ALICE),
      () => new CredentialCipher(randomBytes(32), [randomBytes(32)]).open(sealed, keyId, ALICE),
      () => cipher.open(sealed, 'ffffffffffffffff', ALICE),
      () => cipher.open(sealed.slice(0, 10), keyId, ALICE),
    ];
    for (const attempt of attempts) {
      let error: unknown;
      try {
        attempt();
      } catch (err) {
        error = err;
      }
      expect(error).toBeInstanceOf(CredentialDecryptError);
      expect(String((error as Error).message)).not.toContain(SECRET);
      expect(String((error as Error).message)).not.toContain(key.toString('hex'));
    }
  });

  it('rotation: a value sealed under an older key opens while that key is listed as previous, and reseals under the new one', () => {
    const oldKey = randomBytes(32);
    const newKey = randomBytes(32);
    const before = new CredentialCipher(oldKey).seal(SECRET, ALICE);
    const rotated = new CredentialCipher(newKey, [oldKey]);
    expect(rotated.knows(before.keyId)).toBe(true);
    expect(rotated.open(before.sealed, before.keyId, ALICE)).toBe(SECRET);
    const after = rotated.seal(SECRET, ALICE);
    expect(after.keyId).toBe(keyIdOf(newKey));
    expect(after.keyId).not.toBe(before.keyId);
    expect(() => new CredentialCipher(newKey).open(before.sealed, before.keyId, ALICE)).toThrow(/not configured/);
  });

  it('keys: 64 hex or base64 of 32 bytes; anything else a reason', () => {
    const bytes = randomBytes(32);
    expect(parseCredentialKey(bytes.toString('hex'))).toEqual(bytes);
    expect(parseCredentialKey(bytes.toString('base64'))).toEqual(bytes);
    expect(parseCredentialKey(bytes.toString('base64url'))).toEqual(bytes);
    expect(parseCredentialKey(randomBytes(16).toString('hex'))).toMatch(/not 32/);
    expect(parseCredentialKey('not a key!')).toMatch(/neither/);
    expect(() => new CredentialCipher(randomBytes(16))).toThrow(RangeError);
  });
});
