// Mode `idp`: the user's own IdP access token, kept from browser sign-in, refreshed at the IdP shortly
// before it expires. One refresh at a time across replicas: a lock in the store (SET NX with an
// expiry); a replica that loses the race waits, bounded, for the winner's write instead of refreshing.

import type { Clock } from '../model/clock.ts';
import type { Logger } from '../observability/logger.ts';
import type { OneTimeValueStorage } from '../store/types.ts';
import type { CredentialIdentity } from './cipher.ts';
import type { CredentialVault, UpstreamTokens } from './vault.ts';

/** Refreshed this long before the access token expires, so that no request carries one about to lapse. */
export const REFRESH_AHEAD_MS = 60_000;
/** The refresh lock lapses by itself after this: a replica that died mid-refresh blocks no one for long. */
const REFRESH_LOCK_MS = 10_000;
/** How long a replica that lost the race waits for the winner's new tokens before using what it has. */
const REFRESH_WAIT_MS = 3_000;
const REFRESH_POLL_MS = 50;

export type RefreshResult = 'ok' | 'refused' | 'unavailable';

/** The IdP could not be reached to refresh: the request fails (503) instead of going without the credential. */
export class CredentialRefreshUnavailable extends Error {
  override readonly name = 'CredentialRefreshUnavailable';
}

export interface RefreshingSourceOptions {
  /** The record's provider name (`idp`, `oauth:<host>`). */
  provider: string;
  vault: CredentialVault;
  locks: OneTimeValueStorage;
  clock: Clock;
  logger?: Logger | undefined;
  /**
   * Redeems a refresh token at the provider. Throws `unavailable` (an instance of the class given
   * below) when it cannot be reached; anything else means the refresh token is refused.
   */
  refresh(refreshToken: string): Promise<UpstreamTokens>;
  isUnavailable(err: unknown): boolean;
  /** Waits `ms` (injected so tests never sleep on a real timer they cannot control). */
  sleep?: (ms: number) => Promise<void>;
  /**
   * Told of every refresh, with whose credential it was (never its tokens): `ok`, `refused` (for good:
   * the user must sign in or connect again) or `unavailable` (the provider could not be reached).
   */
  onRefresh?: (result: RefreshResult, who: CredentialIdentity) => void;
}

/**
 * A kept credential that refreshes itself: `usable(who)` answers tokens whose access token is not
 * within REFRESH_AHEAD_MS of its expiry (refreshing first when it is), or undefined when the user has
 * none or it can no longer be refreshed (the caller then asks the user to act).
 */
export class RefreshingCredentialSource {
  readonly #o: RefreshingSourceOptions;
  readonly #sleep: (ms: number) => Promise<void>;

  constructor(options: RefreshingSourceOptions) {
    this.#o = options;
    this.#sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  async usable(user: { subject: string; issuer: string }): Promise<UpstreamTokens | undefined> {
    const who: CredentialIdentity = { ...user, provider: this.#o.provider };
    const read = await this.#o.vault.loadSealed(who);
    if (read === undefined) return undefined;
    const kept = read.tokens;
    const now = this.#o.clock.now();
    if (kept.expiresAt === undefined || kept.expiresAt - now > REFRESH_AHEAD_MS) return kept;
    const stillValid = kept.expiresAt > now ? kept : undefined;
    if (kept.refreshToken === undefined) return stillValid;
    const lock = `upstream-credential-refresh:${JSON.stringify([who.subject, who.issuer, who.provider])}`;
    if (await this.#o.locks.useOnce(lock, now + REFRESH_LOCK_MS)) return this.#refresh(who, read, stillValid);
    return (await this.#awaitWinner(who, kept)) ?? stillValid;
  }

  async #refresh(
    who: CredentialIdentity,
    read: { tokens: UpstreamTokens; sealed: string },
    stillValid: UpstreamTokens | undefined,
  ): Promise<UpstreamTokens | undefined> {
    const kept = read.tokens;
    let fresh: UpstreamTokens;
    try {
      fresh = await this.#o.refresh(kept.refreshToken!);
    } catch (err) {
      if (this.#o.isUnavailable(err)) {
        this.#o.onRefresh?.('unavailable', who);
        this.#o.logger?.warn(
          { subject: who.subject, provider: who.provider },
          'refreshing an upstream credential failed: the provider cannot be reached',
        );
        if (stillValid !== undefined) return stillValid;
        throw new CredentialRefreshUnavailable('the provider of the upstream credential cannot be reached', { cause: err });
      }
      this.#o.onRefresh?.('refused', who);
      // The provider refused the refresh token (revoked, expired): once the access token lapses the user
      // must authorize again (the lock keeps retries to one per REFRESH_LOCK_MS meanwhile).
      this.#o.logger?.info(
        { subject: who.subject, provider: who.provider, reason: (err as Error).name },
        'the provider refused to refresh an upstream credential: the user must authorize again',
      );
      return stillValid;
    }
    const saved: UpstreamTokens = {
      ...fresh,
      ...(fresh.refreshToken === undefined && kept.refreshToken !== undefined ? { refreshToken: kept.refreshToken } : {}),
    };
    // Only over the record this refresh started from: a person who disconnected, or was offboarded,
    // while the provider answered stays disconnected, and a newer record written meanwhile stays.
    if (!(await this.#o.vault.replace(who, saved, read.sealed))) {
      this.#o.logger?.info(
        { subject: who.subject, provider: who.provider },
        'an upstream credential changed or was deleted while it was being refreshed: the refreshed tokens are dropped',
      );
      return this.#o.vault.load(who);
    }
    this.#o.onRefresh?.('ok', who);
    return saved;
  }

  /** The winner's new tokens once written (their expiry moves), or undefined after REFRESH_WAIT_MS. */
  async #awaitWinner(who: CredentialIdentity, kept: UpstreamTokens): Promise<UpstreamTokens | undefined> {
    for (let waited = 0; waited < REFRESH_WAIT_MS; waited += REFRESH_POLL_MS) {
      await this.#sleep(REFRESH_POLL_MS);
      const now = await this.#o.vault.load(who);
      if (now === undefined) return undefined;
      if (now.expiresAt !== kept.expiresAt || now.accessToken !== kept.accessToken) return now;
    }
    return undefined;
  }
}
