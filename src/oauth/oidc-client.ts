// The sidecar as an OpenID Connect relying party of IDP_ISSUER, for browser sign-in. All protocol
// work is openid-client's (certified): discovery, the authorization URL with PKCE S256, state and
// nonce, the code exchange, and ID token validation (issuer, audience, expiry, nonce, signature
// against the IdP's keys). Added here: every IdP call bounded in time, the pinned algorithms, the
// configured claim rules, and a split between "the IdP cannot be reached" and "sign-in refused".

import * as oidc from 'openid-client';
import { decodeProtectedHeader } from 'jose';
import type { Config } from '../config.ts';
import { isLoopbackHost } from '../net-address.ts';
import type { SignedInUser } from '../store/types.ts';
import { checkIdentityClaims, IdpRejection, verifiedEmail } from './idp.ts';

/** The IdP did not answer in time, or answered with a server error: the browser gets a 503 page. */
export class IdpUnavailable extends Error {
  override readonly name = 'IdpUnavailable';
}

/** What the sidecar keeps between sending the browser to the IdP and its return. */
export interface IdpLoginState {
  state: string;
  nonce: string;
  codeVerifier: string;
}

/** An IdP error on the callback (`error=...`), to be relayed to the MCP client as an RFC 6749 code. */
export class IdpAuthorizationError extends Error {
  override readonly name = 'IdpAuthorizationError';
  constructor(readonly error: string) {
    super(`the identity provider answered ${error}`);
  }
}

export interface IdpSignIn {
  /** The IdP's issuer, as configured. */
  readonly issuer: string;
  /** Where the browser goes next, and the checks to keep for the callback. */
  start(): Promise<{ url: URL; login: IdpLoginState }>;
  /**
   * `query` is the callback's query string. Validates the IdP's callback against `login`, redeems its code, validates the ID token and
   * applies the claim rules. Throws IdpUnavailable, IdpAuthorizationError or IdpRejection.
   */
  finish(query: URLSearchParams, login: IdpLoginState): Promise<SignedInUser>;
}

/** Plain http is allowed only for an IdP on the loopback interface (development, the demo, tests). */
export function idpAllowsHttp(issuer: string): boolean {
  const url = new URL(issuer);
  return url.protocol === 'http:' && isLoopbackHost(url.hostname);
}

function unavailable(err: unknown): boolean {
  if (err instanceof TypeError) return true; // fetch failed: refused, reset, DNS
  if (err instanceof oidc.ResponseBodyError) return err.status >= 500;
  if (err instanceof oidc.ClientError) {
    if (err.code === 'OAUTH_TIMEOUT' || err.code === 'OAUTH_ABORT') return true;
    const cause = err.cause as { status?: unknown } | undefined;
    if (err.code === 'OAUTH_RESPONSE_IS_NOT_CONFORM' && typeof cause?.status === 'number' && cause.status >= 500) return true;
  }
  return false;
}

/** The library's code, message and, for a failed claim check, the claim's name (never its value). */
function describeRefusal(err: unknown): string {
  const e = err as { code?: string; name?: string; message?: string; cause?: { cause?: { claim?: unknown } } };
  const claim = e.cause?.cause?.claim;
  return `${e.code ?? e.name ?? 'Error'}: ${e.message ?? ''}${typeof claim === 'string' ? ` (claim "${claim}")` : ''}`;
}

export function createIdpSignIn(idp: Config['idp'], callbackUrl: () => string): IdpSignIn | undefined {
  const { issuer, clientId, clientSecret } = idp;
  if (issuer === undefined || clientId === undefined || clientSecret === undefined) return undefined;
  const timeoutSeconds = idp.requestTimeoutMs / 1000;
  let discovered: Promise<oidc.Configuration> | undefined;

  /** Discovery once, shared; a failure is forgotten so that the next sign-in tries again. */
  function configuration(): Promise<oidc.Configuration> {
    discovered ??= oidc
      .discovery(new URL(issuer!), clientId!, undefined, oidc.ClientSecretBasic(clientSecret), {
        timeout: timeoutSeconds,
        ...(idpAllowsHttp(issuer!) ? { execute: [oidc.allowInsecureRequests] } : {}),
      })
      .then((config) => {
        config.timeout = timeoutSeconds;
        // Verify the ID token's signature against the IdP's keys too (not only trust TLS to the token endpoint).
        oidc.enableNonRepudiationChecks(config);
        return config;
      });
    const pending = discovered;
    pending.catch(() => {
      if (discovered === pending) discovered = undefined;
    });
    return pending;
  }

  async function call<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      if (err instanceof IdpRejection) throw err;
      if (err instanceof oidc.AuthorizationResponseError) throw new IdpAuthorizationError(err.error);
      if (unavailable(err)) throw new IdpUnavailable((err as Error).message, { cause: err });
      throw new IdpRejection(describeRefusal(err), { cause: err });
    }
  }

  return {
    issuer,
    start: () =>
      call(async () => {
        const config = await configuration();
        const login: IdpLoginState = { state: oidc.randomState(), nonce: oidc.randomNonce(), codeVerifier: oidc.randomPKCECodeVerifier() };
        const url = oidc.buildAuthorizationUrl(config, {
          redirect_uri: callbackUrl(),
          scope: idp.scopes,
          response_type: 'code',
          state: login.state,
          nonce: login.nonce,
          code_challenge: await oidc.calculatePKCECodeChallenge(login.codeVerifier),
          code_challenge_method: 'S256',
        });
        return { url, login };
      }),
    finish: (query, login) =>
      call(async () => {
        const config = await configuration();
        // The redirect URI registered at the IdP (openid-client derives it from this URL), whatever
        // address the request reached the sidecar by.
        const currentUrl = new URL(callbackUrl());
        for (const [k, v] of query) currentUrl.searchParams.append(k, v);
        const tokens = await oidc.authorizationCodeGrant(
          config,
          currentUrl,
          { expectedState: login.state, expectedNonce: login.nonce, pkceCodeVerifier: login.codeVerifier, idTokenExpected: true },
        );
        const idToken = tokens.id_token;
        const claims = tokens.claims();
        if (idToken === undefined || claims === undefined) throw new IdpRejection('no ID token');
        const { alg } = decodeProtectedHeader(idToken);
        if (alg === undefined || !idp.algorithms.includes(alg)) throw new IdpRejection(`ID token algorithm ${String(alg)} is not allowed`);
        if (typeof claims.sub !== 'string' || claims.sub.length === 0 || claims.sub.length > 512) throw new IdpRejection('bad sub');
        checkIdentityClaims(idp, claims);
        const user: SignedInUser = { subject: claims.sub, issuer: claims.iss };
        const email = verifiedEmail(idp, claims);
        if (email !== undefined) user.email = email;
        const groups = claims[idp.groupsClaim];
        if (Array.isArray(groups)) user.groups = groups.filter((g): g is string => typeof g === 'string').slice(0, 100);
        return user;
      }),
  };
}
