// The tokens kept for users at the upstream, encrypted at rest: what is sealed (access and refresh
// token), what stays in clear beside it (identity, key id, expiry, creation), how a record that cannot
// be opened is treated (absent, logged without the token), and re-encryption under the current key.

import type { Clock } from '../model/clock.ts';
import type { Logger } from '../observability/logger.ts';
import type { StoredUpstreamCredential, UpstreamCredentialStorage } from '../store/types.ts';
import { CredentialDecryptError, type CredentialCipher, type CredentialIdentity } from './cipher.ts';

/** A user's tokens at the upstream (or the IdP), in clear: only ever in memory. */
export interface UpstreamTokens {
  accessToken: string;
  refreshToken?: string;
  /** When the access token expires (epoch ms); absent: the provider did not say. */
  expiresAt?: number;
}

/** What a re-encryption did: every record is counted once. */
export interface ReencryptionResult {
  rewritten: number;
  alreadyCurrent: number;
  /** Sealed under a key not configured, or altered: left as they are (and refused when read). */
  unreadable: number;
  /** Replaced by a refresh while being rewritten: the newer one, under the current key, stays. */
  changedMeanwhile: number;
}

export class CredentialVault {
  readonly #store: UpstreamCredentialStorage;
  readonly #cipher: CredentialCipher;
  readonly #clock: Clock;
  readonly #logger: Logger | undefined;

  constructor(options: { store: UpstreamCredentialStorage; cipher: CredentialCipher; clock: Clock; logger?: Logger | undefined }) {
    this.#store = options.store;
    this.#cipher = options.cipher;
    this.#clock = options.clock;
    this.#logger = options.logger;
  }

  /** Seals `tokens` under the current key and writes them as `who`'s record (replacing any). */
  async save(who: CredentialIdentity, tokens: UpstreamTokens): Promise<void> {
    await this.#store.putUpstreamCredential(this.#seal(who, tokens, this.#clock.now()));
  }

  /**
   * `who`'s tokens, or undefined when none is kept or the record cannot be opened (a wrong or
   * retired key, an altered or moved value): such a record is logged, by identity and key id only,
   * and treated as absent, so that the user is asked to connect again and nothing is forwarded.
   */
  async load(who: CredentialIdentity): Promise<UpstreamTokens | undefined> {
    return (await this.loadSealed(who))?.tokens;
  }

  /**
   * `who`'s tokens as load() answers them, with the sealed value they were read from: what replace()
   * compares against, so that a write made from them never puts back a record deleted or renewed meanwhile.
   */
  async loadSealed(who: CredentialIdentity): Promise<{ tokens: UpstreamTokens; sealed: string } | undefined> {
    const record = await this.#store.getUpstreamCredential(who.subject, who.issuer, who.provider);
    if (record === null) return undefined;
    if (record === 'corrupt') {
      this.#logger?.warn(
        { subject: who.subject, provider: who.provider },
        'an upstream credential record is unreadable: treated as absent',
      );
      return undefined;
    }
    const tokens = this.#open(record);
    return tokens === undefined ? undefined : { tokens, sealed: record.sealed };
  }

  /**
   * Writes `tokens` as `who`'s record only while it still holds `expectedSealed` (compare-and-set):
   * false when the record was deleted (disconnected, offboarded) or replaced since it was read.
   */
  replace(who: CredentialIdentity, tokens: UpstreamTokens, expectedSealed: string): Promise<boolean> {
    return this.#store.replaceUpstreamCredential(this.#seal(who, tokens, this.#clock.now()), expectedSealed);
  }

  /** Deletes `who`'s one record; false when there was none. */
  delete(who: CredentialIdentity): Promise<boolean> {
    return this.#store.deleteUpstreamCredential(who.subject, who.issuer, who.provider);
  }

  /** Forgets every credential of `subject` (of one issuer, when given): answers how many. */
  forget(subject: string, issuer?: string): Promise<number> {
    return this.#store.deleteUpstreamCredentials(subject, issuer);
  }

  /** Rewrites every record under the current key (after a rotation; the old key may then be retired). */
  async reencryptAll(): Promise<ReencryptionResult> {
    const result: ReencryptionResult = { rewritten: 0, alreadyCurrent: 0, unreadable: 0, changedMeanwhile: 0 };
    for (const record of await this.#store.listUpstreamCredentials()) {
      if (record.keyId === this.#cipher.currentKeyId) {
        result.alreadyCurrent++;
        continue;
      }
      const tokens = this.#open(record);
      if (tokens === undefined) {
        result.unreadable++;
        continue;
      }
      const rewritten = { ...this.#seal(record, tokens, record.createdAt) };
      if (await this.#store.replaceUpstreamCredential(rewritten, record.sealed)) result.rewritten++;
      else result.changedMeanwhile++;
    }
    return result;
  }

  #seal(who: CredentialIdentity, tokens: UpstreamTokens, createdAt: number): StoredUpstreamCredential {
    const plaintext = JSON.stringify({ a: tokens.accessToken, ...(tokens.refreshToken !== undefined ? { r: tokens.refreshToken } : {}) });
    const { keyId, sealed } = this.#cipher.seal(plaintext, who);
    const record: StoredUpstreamCredential = { subject: who.subject, issuer: who.issuer, provider: who.provider, keyId, sealed, createdAt };
    if (tokens.expiresAt !== undefined) record.expiresAt = tokens.expiresAt;
    return record;
  }

  #open(record: StoredUpstreamCredential): UpstreamTokens | undefined {
    let inside: { a?: unknown; r?: unknown };
    try {
      inside = JSON.parse(this.#cipher.open(record.sealed, record.keyId, record)) as { a?: unknown; r?: unknown };
    } catch (err) {
      const reason = err instanceof CredentialDecryptError ? err.message : 'not the sealed format';
      this.#logger?.warn(
        { subject: record.subject, provider: record.provider, keyId: record.keyId, reason },
        'an upstream credential cannot be decrypted: treated as absent (is UPSTREAM_CREDENTIALS_KEY, or a previous key, the one it was written with?)',
      );
      return undefined;
    }
    if (typeof inside.a !== 'string' || (inside.r !== undefined && typeof inside.r !== 'string')) return undefined;
    const tokens: UpstreamTokens = { accessToken: inside.a };
    if (typeof inside.r === 'string') tokens.refreshToken = inside.r;
    if (record.expiresAt !== undefined) tokens.expiresAt = record.expiresAt;
    return tokens;
  }
}
