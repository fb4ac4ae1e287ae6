// The sidecar as an OpenID Connect relying party of IDP_ISSUER, for browser sign-in. All protocol
// work is openid-client's (certified): discovery, the authorization URL with PKCE S256, state and
// nonce, the code exchange, and ID token validation (issuer, audience, expiry, nonce, signature
// against the IdP's keys). Added here: every IdP call bounded in time, the pinned algorithms, the
// configured claim rules, and a split between "the IdP cannot be reached" and "sign-in refused".

import { idpCall } from '../observability/tracing.ts';
import * as oidc from 'openid-client';
import { createRemoteJWKSet, decodeProtectedHeader, type JWTPayload } from 'jose';
import type { Config } from '../config/load.ts';
import { generateToken } from '../model/credentials.ts';
import { GRANT_AUTHORIZATION_CODE } from '../model/grant-types.ts';
import type { Logger } from '../observability/logger.ts';
import { isLoopbackHost } from '../model/net-address.ts';
import type { SignedInUser } from '../model/records.ts';
import { checkIdentityClaims, IdpRejection, verifiedEmail } from './idp.ts';
import { identityProviders } from './providers.ts';
import { DEFAULT_PROVIDER_NAME } from '../config/keys/idp-providers.ts';

/** The IdP did not answer in time, or answered with a server error: the browser gets a 503 page. */
export class IdpUnavailable extends Error {
  override readonly name = 'IdpUnavailable';
}

/**
 * The IdP refused the sidecar's own client authentication (`invalid_client` at its token endpoint):
 * a configuration error no user can fix, so the page and the log say what to check.
 */
export class IdpClientRefused extends Error {
  override readonly name = 'IdpClientRefused';
  constructor(options?: ErrorOptions) {
    super("the identity provider refused the sidecar's client credentials: check IDP_CLIENT_ID / IDP_CLIENT_SECRET", options);
  }
}

/** A start-up check of the IdP failed; the message is one sentence naming the URL tried and what to fix. */
export class IdpSetupProblem extends Error {
  override readonly name = 'IdpSetupProblem';
}

/** What the sidecar keeps between sending the browser to the IdP and its return. */
export interface IdpLoginState {
  state: string;
  nonce: string;
  codeVerifier: string;
  /** The provider the browser went to, when several are configured (absent: the only one). */
  provider?: string;
}

/** A provider the sign-in page may offer: its name, issuer and home-realm domains. */
export interface SignInProvider {
  readonly name: string;
  readonly issuer: string;
  readonly domains: readonly string[];
}

/** The IdP's own tokens for the signed-in user (kept, encrypted, only for upstream credentials). */
export interface IdpTokens {
  accessToken: string;
  refreshToken?: string;
  /** Epoch ms, from `expires_in`; absent when the IdP does not say. */
  expiresAt?: number;
}

function idpTokensOf(tokens: oidc.TokenEndpointResponse, now: number, keptRefreshToken?: string): IdpTokens {
  const out: IdpTokens = { accessToken: tokens.access_token };
  const refreshToken = tokens.refresh_token ?? keptRefreshToken;
  if (refreshToken !== undefined) out.refreshToken = refreshToken;
  if (typeof tokens.expires_in === 'number' && Number.isFinite(tokens.expires_in))
    out.expiresAt = now + Math.trunc(tokens.expires_in * 1000);
  return out;
}

/** An IdP error on the callback (`error=...`), to be relayed to the MCP client as an RFC 6749 code. */
export class IdpAuthorizationError extends Error {
  override readonly name = 'IdpAuthorizationError';
  readonly error: string;
  constructor(error: string) {
    super(`the identity provider answered ${error}`);
    this.error = error;
  }
}

export interface IdpSignIn {
  /** The IdP's issuer, as configured (with several providers: the first's). */
  readonly issuer: string;
  /** The providers a browser may sign in at; more than one: the sign-in pages ask which. */
  readonly providers: readonly SignInProvider[];
  /**
   * Where the browser goes next, and the checks to keep for the callback. `provider`: the name of the
   * one chosen (required when there are several); `loginHint`: an e-mail the user typed, passed on.
   */
  start(provider?: string, loginHint?: string): Promise<{ url: URL; login: IdpLoginState }>;
  /**
   * `query` is the callback's query string. Validates the IdP's callback against `login`, redeems its code, validates the ID token and
   * applies the claim rules. Throws IdpUnavailable, IdpAuthorizationError or IdpRejection.
   */
  finish(query: URLSearchParams, login: IdpLoginState): Promise<{ user: SignedInUser; tokens: IdpTokens }>;
  /**
   * Redeems the user's IdP refresh token for new tokens (the refresh token kept when the IdP does not
   * rotate it). Throws IdpUnavailable, or IdpRejection when the IdP refuses it (revoked, expired).
   */
  refresh(refreshToken: string): Promise<IdpTokens>;
  /**
   * The start-up check: the discovery document, the keys it names, and the sidecar's client
   * credentials at the token endpoint (a code that cannot exist is redeemed: an IdP authenticates the
   * client first, so `invalid_client` means the credentials and `invalid_grant` means they passed).
   * Throws IdpSetupProblem.
   */
  check(): Promise<void>;
}

export interface IdpSignInOptions {
  logger?: Logger;
  /** A rule needs the groups claim (`idp.requiredGroup`, or a policy naming groups): its absence is logged with its cause. */
  groupsNeeded?: boolean;
}

/** Where openid-client looks for the discovery document of `issuer` (OpenID Connect Discovery §4). */
export function discoveryUrlOf(issuer: string): string {
  return `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
}

/** Fetches and parses a JWKS (jose checks its shape); throws what went wrong. */
export async function fetchJwks(url: string, timeoutMs: number): Promise<void> {
  await createRemoteJWKSet(new URL(url), { timeoutDuration: timeoutMs }).reload();
}

/** `invalid_client` from the IdP's token endpoint, as a JSON body or as a 401 challenge. */
function clientRefused(err: unknown): boolean {
  if (err instanceof oidc.ResponseBodyError) return err.error === 'invalid_client';
  if (err instanceof oidc.WWWAuthenticateChallengeError) return err.cause.some((c) => c.parameters.error === 'invalid_client');
  return false;
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

/** No such provider (a stale or forged choice): the sign-in is refused. */
export class UnknownProvider extends IdpRejection {}

/**
 * Browser sign-in over every provider with a client id and secret: one provider is exactly its own
 * sign-in; with several, each login names its provider and its callback is finished there alone.
 */
export function createIdpSignIn(idp: Config['idp'], callbackUrl: () => string, options: IdpSignInOptions = {}): IdpSignIn | undefined {
  const each = new Map<string, IdpSignIn>();
  for (const provider of identityProviders(idp)) {
    const signIn = createProviderSignIn(provider, callbackUrl, options);
    if (signIn) each.set(provider.name, signIn);
  }
  const all = [...each.values()];
  if (all.length <= 1) return all[0];
  const first = all[0]!;
  const named = (name: string | undefined): IdpSignIn => {
    const signIn = name === undefined ? undefined : each.get(name);
    if (signIn === undefined) throw new UnknownProvider(`no identity provider named ${JSON.stringify(name ?? '')}`);
    return signIn;
  };
  return {
    issuer: first.issuer,
    providers: identityProviders(idp).filter((p) => each.has(p.name)),
    start: async (provider, loginHint) => {
      const { url, login } = await named(provider).start(undefined, loginHint);
      return { url, login: { ...login, provider: provider! } };
    },
    finish: (query, login) => named(login.provider).finish(query, login),
    refresh: (refreshToken) => first.refresh(refreshToken),
    check: () => first.check(),
  };
}

/** One provider's browser sign-in, when it has a client id and secret. */
export function createProviderSignIn(
  idp: Config['idp'] & { name?: string; domains?: readonly string[] },
  callbackUrl: () => string,
  options: IdpSignInOptions = {},
): IdpSignIn | undefined {
  const { issuer, clientId, clientSecret } = idp;
  if (issuer === undefined || clientId === undefined || clientSecret === undefined) return undefined;
  const configuration = sharedDiscovery(issuer, clientId, clientSecret, idp.requestTimeoutMs / 1000);
  return {
    issuer,
    providers: [{ name: idp.name ?? DEFAULT_PROVIDER_NAME, issuer, domains: idp.domains ?? [] }],
    check: () => checkSetup(idp, issuer, configuration, callbackUrl),
    start: (_provider, loginHint) =>
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
          ...(loginHint !== undefined ? { login_hint: loginHint } : {}),
        });
        return { url, login };
      }),
    finish: (query, login) => call(async () => finishLogin(idp, options, await configuration(), callbackUrl(), query, login)),
    refresh: (refreshToken) =>
      call(async () => {
        const config = await configuration();
        const tokens = await oidc.refreshTokenGrant(config, refreshToken);
        return idpTokensOf(tokens, Date.now(), refreshToken);
      }),
  };
}

/** Discovery once, shared; a failure is forgotten so that the next sign-in tries again. */
function sharedDiscovery(
  issuer: string,
  clientId: string,
  clientSecret: string,
  timeoutSeconds: number,
): () => Promise<oidc.Configuration> {
  let discovered: Promise<oidc.Configuration> | undefined;
  return () => {
    discovered ??= oidc
      .discovery(new URL(issuer), clientId, undefined, oidc.ClientSecretBasic(clientSecret), {
        timeout: timeoutSeconds,
        ...(idpAllowsHttp(issuer) ? { execute: [oidc.allowInsecureRequests] } : {}),
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
  };
}

/** One call to the IdP, its failure sorted: unreachable, the client refused, an error relayed, or sign-in refused. */
async function call<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await idpCall('IdP request', work);
  } catch (err) {
    if (err instanceof IdpRejection) throw err;
    if (clientRefused(err)) throw new IdpClientRefused({ cause: err });
    if (err instanceof oidc.AuthorizationResponseError) throw new IdpAuthorizationError(err.error);
    if (unavailable(err)) throw new IdpUnavailable((err as Error).message, { cause: err });
    throw new IdpRejection(describeRefusal(err), { cause: err });
  }
}

/** See IdpSignIn.check. */
async function checkSetup(
  idp: Config['idp'],
  issuer: string,
  configuration: () => Promise<oidc.Configuration>,
  callbackUrl: () => string,
): Promise<void> {
  let config: oidc.Configuration;
  try {
    config = await configuration();
  } catch (err) {
    throw new IdpSetupProblem(
      `cannot use the identity provider's discovery document at ${discoveryUrlOf(issuer)} (${describeRefusal(err)}). Check IDP_ISSUER (idp.issuer): it must be reachable from the sidecar and be the issuer exactly as the IdP's discovery document names it (scheme, host, path, no trailing slash unless the IdP has one)`,
      { cause: err },
    );
  }
  const jwksUri = config.serverMetadata().jwks_uri;
  if (jwksUri === undefined)
    throw new IdpSetupProblem(
      `the identity provider's discovery document at ${discoveryUrlOf(issuer)} names no jwks_uri: ID tokens cannot be verified`,
    );
  try {
    await fetchJwks(jwksUri, idp.requestTimeoutMs);
  } catch (err) {
    throw new IdpSetupProblem(
      `cannot read the identity provider's keys at ${jwksUri} (named by ${discoveryUrlOf(issuer)}): ${describeRefusal(err)}`,
      { cause: err },
    );
  }
  try {
    await oidc.genericGrantRequest(config, GRANT_AUTHORIZATION_CODE, { code: generateToken(), redirect_uri: callbackUrl() });
  } catch (err) {
    const tokenEndpoint = config.serverMetadata().token_endpoint;
    if (clientRefused(err))
      throw new IdpSetupProblem(`${new IdpClientRefused().message} (the token endpoint ${tokenEndpoint} answered invalid_client)`, {
        cause: err,
      });
    if (unavailable(err))
      throw new IdpSetupProblem(`cannot reach the identity provider's token endpoint ${tokenEndpoint}: ${describeRefusal(err)}`, {
        cause: err,
      });
    // Anything else (invalid_grant, as expected) means the client authentication passed.
  }
}

/** See IdpSignIn.finish: the code redeemed, the ID token and the claim rules checked, the user they name. */
async function finishLogin(
  idp: Config['idp'],
  options: IdpSignInOptions,
  config: oidc.Configuration,
  callbackUrl: string,
  query: URLSearchParams,
  login: IdpLoginState,
): Promise<{ user: SignedInUser; tokens: IdpTokens }> {
  // The redirect URI registered at the IdP (openid-client derives it from this URL), whatever
  // address the request reached the sidecar by.
  const currentUrl = new URL(callbackUrl);
  for (const [k, v] of query) currentUrl.searchParams.append(k, v);
  const tokens = await oidc.authorizationCodeGrant(config, currentUrl, {
    expectedState: login.state,
    expectedNonce: login.nonce,
    pkceCodeVerifier: login.codeVerifier,
    idTokenExpected: true,
  });
  const idToken = tokens.id_token;
  const idTokenClaims = tokens.claims();
  if (idToken === undefined || idTokenClaims === undefined) throw new IdpRejection('no ID token');
  const { alg } = decodeProtectedHeader(idToken);
  if (alg === undefined || !idp.algorithms.includes(alg)) throw new IdpRejection(`ID token algorithm ${String(alg)} is not allowed`);
  if (typeof idTokenClaims.sub !== 'string' || idTokenClaims.sub.length === 0 || idTokenClaims.sub.length > 512)
    throw new IdpRejection('bad sub');
  const claims = await withUserinfo(idp, options, config, tokens.access_token, idTokenClaims);
  checkIdentityClaims(idp, claims);
  const user: SignedInUser = { subject: idTokenClaims.sub, issuer: idTokenClaims.iss };
  const email = verifiedEmail(idp, claims);
  if (email !== undefined) user.email = email;
  const groups = claims[idp.groupsClaim];
  if (Array.isArray(groups)) user.groups = groups.filter((g): g is string => typeof g === 'string').slice(0, 100);
  return { user, tokens: idpTokensOf(tokens, Date.now()) };
}

/**
 * The ID token's claims, completed from userinfo when it lacks the email or the groups claim: many
 * IdPs (a generic OpenID provider, Okta's org server, oidc-provider) release profile claims only
 * there. The ID token wins where both speak; openid-client checks that userinfo's `sub` is the ID
 * token's. Userinfo failing is logged and sign-in goes on with what the ID token says.
 */
async function withUserinfo(
  idp: Config['idp'],
  options: IdpSignInOptions,
  config: oidc.Configuration,
  accessToken: string,
  idTokenClaims: oidc.IDToken,
): Promise<JWTPayload> {
  const complete =
    typeof idTokenClaims.email === 'string' &&
    idTokenClaims[idp.emailVerifiedClaim] !== undefined &&
    idTokenClaims[idp.groupsClaim] !== undefined;
  let userinfoTried = false;
  let claims: JWTPayload = idTokenClaims;
  if (!complete && config.serverMetadata().userinfo_endpoint !== undefined) {
    userinfoTried = true;
    try {
      const userinfo = await oidc.fetchUserInfo(config, accessToken, idTokenClaims.sub);
      claims = { ...userinfo, ...idTokenClaims };
    } catch (err) {
      if (unavailable(err)) throw err;
      options.logger?.warn(
        { reason: describeRefusal(err) },
        'the identity provider refused the userinfo request: signing in with the ID token claims alone',
      );
    }
  }
  if (options.groupsNeeded && claims[idp.groupsClaim] === undefined) warnGroupsMissing(idp, options, config, userinfoTried);
  return claims;
}

/** Which of the two causes keeps the groups claim away, and what to set. */
function warnGroupsMissing(idp: Config['idp'], options: IdpSignInOptions, config: oidc.Configuration, userinfoTried: boolean): void {
  const offered = config.serverMetadata().scopes_supported ?? [];
  const asked = idp.scopes.split(' ');
  const where = userinfoTried ? 'the ID token nor userinfo' : 'the ID token (and the IdP has no userinfo endpoint)';
  if (offered.includes('groups') && !asked.includes('groups')) {
    options.logger?.warn(
      { cause: 'scope not asked', claim: idp.groupsClaim, scopes: idp.scopes },
      `neither ${where} carries the "${idp.groupsClaim}" claim, and the identity provider offers a "groups" scope the sidecar does not ask for: add groups to IDP_SCOPES (idp.scopes); group rules refuse this user until then`,
    );
    return;
  }
  options.logger?.warn(
    { cause: 'claim not released', claim: idp.groupsClaim, scopes: idp.scopes },
    `neither ${where} carries the "${idp.groupsClaim}" claim: have the identity provider release it for this client (Keycloak: a "Group Membership" mapper; Okta: a groups claim on the authorization server; Entra ID: groupMembershipClaims in the app manifest), or set idp.groupsClaim to the claim it uses; group rules refuse this user until then`,
  );
}
