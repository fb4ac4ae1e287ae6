// Mode `token-exchange`: RFC 8693 at the IdP's token endpoint, the user's own IdP access token as
// `subject_token` and `upstream.credentials.audience` as `audience`; the answer is kept (encrypted)
// per user and audience until shortly before it expires, and a user's requests that find it due share
// one exchange, so the IdP sees one exchange per lifetime (per replica).

import * as oidc from 'openid-client';
import type { Clock } from '../model/clock.ts';
import { GRANT_TOKEN_EXCHANGE } from '../model/grant-types.ts';
import { tokensOf } from './connect-flow.ts';
import type { CredentialSource } from './delivery.ts';
import { CredentialRefreshUnavailable, REFRESH_AHEAD_MS } from './idp-mode.ts';
import type { CredentialVault, UpstreamTokens } from './vault.ts';

/** The record of the user's own IdP tokens, which the exchange starts from. */
const IDP_PROVIDER = 'idp';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
/** An exchanged token whose lifetime the IdP does not state is reused this long at most. */
const UNSTATED_LIFETIME_MS = 5 * 60_000;

/** One RFC 8693 exchange at the IdP (openid-client); the IdP authenticates the sidecar as its client. */
export async function exchangeAtIdp(
  configuration: () => Promise<oidc.Configuration>,
  subjectToken: string,
  audience: string,
  clock: Clock,
): Promise<UpstreamTokens> {
  const response = await oidc.genericGrantRequest(await configuration(), GRANT_TOKEN_EXCHANGE, {
    subject_token: subjectToken,
    subject_token_type: ACCESS_TOKEN_TYPE,
    requested_token_type: ACCESS_TOKEN_TYPE,
    audience,
  });
  // Only the access token is kept: an exchanged token is renewed by exchanging again, never refreshed.
  const { accessToken, expiresAt } = tokensOf(response, clock.now());
  return { accessToken, expiresAt: expiresAt ?? clock.now() + UNSTATED_LIFETIME_MS };
}

export interface TokenExchangeOptions {
  /** The user's own IdP tokens (kept from sign-in, refreshed). */
  idpTokens: CredentialSource;
  vault: CredentialVault;
  clock: Clock;
  audience: string;
  exchange(subjectToken: string): Promise<UpstreamTokens>;
  isUnavailable(err: unknown): boolean;
}

export class TokenExchangeSource implements CredentialSource {
  readonly #o: TokenExchangeOptions;
  readonly #provider: string;
  /**
   * The exchange under way per user: the requests of a user that find the kept token due while one is
   * in flight wait for it instead of each asking the IdP (one exchange per replica, not one per request).
   */
  readonly #inFlight = new Map<string, Promise<UpstreamTokens | undefined>>();

  constructor(options: TokenExchangeOptions) {
    this.#o = options;
    this.#provider = `exchange:${options.audience}`;
  }

  async usable(user: { subject: string; issuer: string }): Promise<UpstreamTokens | undefined> {
    const who = { ...user, provider: this.#provider };
    const read = await this.#o.vault.loadSealed(who);
    const cached = read?.tokens;
    if (cached?.expiresAt !== undefined && cached.expiresAt - this.#o.clock.now() > REFRESH_AHEAD_MS) return cached;
    const key = JSON.stringify([user.subject, user.issuer]);
    const pending = this.#inFlight.get(key);
    if (pending !== undefined) return pending;
    const exchange = this.#exchange(user, who, read?.sealed);
    this.#inFlight.set(key, exchange);
    try {
      return await exchange;
    } finally {
      this.#inFlight.delete(key);
    }
  }

  async #exchange(
    user: { subject: string; issuer: string },
    who: { subject: string; issuer: string; provider: string },
    readSealed: string | undefined,
  ): Promise<UpstreamTokens | undefined> {
    const idp = await this.#o.idpTokens.usable(user);
    if (idp === undefined) return undefined;
    let exchanged: UpstreamTokens;
    try {
      exchanged = await this.#o.exchange(idp.accessToken);
    } catch (err) {
      if (this.#o.isUnavailable(err))
        throw new CredentialRefreshUnavailable('the identity provider cannot be reached for the token exchange', { cause: err });
      // Refused (the IdP does not allow this audience for this user, or the subject token is no longer
      // accepted): the user is asked to sign in again; nothing is forwarded meanwhile.
      return undefined;
    }
    // Kept only while nothing deleted the user's credentials during the exchange (a disconnect, an
    // offboarding): over the record it renews, compare-and-set; where there was none, written and then
    // taken back if the IdP tokens it came from are gone by then (an offboarding deletes both).
    if (readSealed !== undefined) {
      if (!(await this.#o.vault.replace(who, exchanged, readSealed))) return this.#o.vault.load(who);
      return exchanged;
    }
    await this.#o.vault.save(who, exchanged);
    if ((await this.#o.vault.load({ ...user, provider: IDP_PROVIDER })) === undefined) {
      await this.#o.vault.delete(who);
      return undefined;
    }
    return exchanged;
  }
}
