// Encryption at rest of the upstream credentials kept for users: AES-256-GCM (node:crypto), a random
// 96-bit IV per encryption, and the key id plus the record's identity (subject, issuer, provider) as
// additional authenticated data, so that a ciphertext copied onto another user's record fails to open.

import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { CREDENTIAL_KEY_BYTES, parseCredentialKey } from '../config/keys/shared.ts';

const IV_BYTES = 12;
const TAG_BYTES = 16;
/** Versions the sealed format and the AAD layout, so either can change without misreading old records. */
const FORMAT = 'v1';

/** Whose credential a sealed value is: bound into the ciphertext as additional authenticated data. */
export interface CredentialIdentity {
  subject: string;
  issuer: string;
  /** Which credential of the user: `idp`, `oauth:<provider>` or `exchange:<audience>`. */
  provider: string;
}

/**
 * The cipher of the configured keys (upstream.credentials), or undefined when no mode keeps
 * credentials or the key is not set. The keys were checked with the configuration.
 */
export function configuredCipher(settings: {
  mode: string;
  key?: string | undefined;
  previousKeys: readonly string[];
}): CredentialCipher | undefined {
  const { mode, key, previousKeys } = settings;
  if (mode === 'none' || key === undefined) return undefined;
  const bytes = (text: string) => parseCredentialKey(text) as Buffer;
  return new CredentialCipher(bytes(key), previousKeys.map(bytes));
}

/** A short public name of a key, stored beside each ciphertext: which key opens it (not the key). */
export function keyIdOf(key: Buffer): string {
  return createHash('sha256').update('mcp-bearer-proxy upstream credential key id\0').update(key).digest('hex').slice(0, 16);
}

function additionalData(keyId: string, who: CredentialIdentity): Buffer {
  // JSON of an array: no separator in a subject or issuer can make two identities encode alike.
  return Buffer.from(JSON.stringify([FORMAT, keyId, who.subject, who.issuer, who.provider]), 'utf8');
}

/** The value could not be opened: wrong or unknown key, tampered, or moved from another record. */
export class CredentialDecryptError extends Error {
  override readonly name = 'CredentialDecryptError';
}

/** Seals and opens credentials under the current key; older keys still open what they sealed. */
export class CredentialCipher {
  readonly currentKeyId: string;
  readonly #current: Buffer;
  readonly #byId: ReadonlyMap<string, Buffer>;

  constructor(current: Buffer, previous: readonly Buffer[] = []) {
    if (current.length !== CREDENTIAL_KEY_BYTES || previous.some((k) => k.length !== CREDENTIAL_KEY_BYTES))
      throw new RangeError('credential keys are 32 bytes');
    this.#current = current;
    this.currentKeyId = keyIdOf(current);
    this.#byId = new Map([...previous, current].map((k) => [keyIdOf(k), k]));
  }

  /** Whether `keyId` names a key this cipher holds. */
  knows(keyId: string): boolean {
    return this.#byId.has(keyId);
  }

  /** `plaintext` sealed under the current key for `who`: base64url of IV, ciphertext and tag. */
  seal(plaintext: string, who: CredentialIdentity): { keyId: string; sealed: string } {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#current, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(additionalData(this.currentKeyId, who));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return { keyId: this.currentKeyId, sealed: Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url') };
  }

  /** The plaintext, or CredentialDecryptError (its message names no key material and no plaintext). */
  open(sealed: string, keyId: string, who: CredentialIdentity): string {
    const key = this.#byId.get(keyId);
    if (key === undefined) throw new CredentialDecryptError(`sealed under key ${keyId}, which is not configured`);
    const bytes = Buffer.from(sealed, 'base64url');
    if (bytes.length < IV_BYTES + TAG_BYTES) throw new CredentialDecryptError('sealed value too short');
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, IV_BYTES), { authTagLength: TAG_BYTES });
      decipher.setAAD(additionalData(keyId, who));
      decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
      return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES, bytes.length - TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch {
      throw new CredentialDecryptError('authentication failed (wrong key, altered value, or a value of another record)');
    }
  }
}
