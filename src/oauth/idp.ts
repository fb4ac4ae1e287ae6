// Verifies identity-provider JWTs with `jose`: a remote JWKS (cached, refetched on an unknown `kid` no
// more often than the cooldown, bounded fetch), pinned asymmetric algorithms, exact `iss` and `aud`,
// required `exp` and `sub`, `nbf` honoured, small clock tolerance, then the configured claim rules.
// Two kinds: the JWTs of the RFC 8693 exchange (audience IDP_AUDIENCE, `typ` that of an ID token or
// access token), and Identity Assertion JWT Authorization Grants (ID-JAG: `typ` oauth-id-jag+jwt,
// audience this authorization server, short lived, with `jti` and `client_id`). Any failure is `invalid_grant`; the reason goes to the log only.

import { idpCall } from '../observability/tracing.ts';
import { createRemoteJWKSet, decodeJwt, errors as joseErrors, jwtVerify, type JWTPayload } from 'jose';
import type { Config } from '../config/load.ts';
import { identityProviders } from './providers.ts';

export interface VerifiedIdentity {
  subject: string;
  issuer: string;
  /** Kept in the token record for per-tool policy (principals.emailDomains, principals.groups). */
  email?: string;
  groups?: string[];
}

export interface IdpVerifier {
  verify(jwt: string, now: number): Promise<VerifiedIdentity>;
}

export class IdpRejection extends Error {
  override readonly name = 'IdpRejection';
}

const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/** One key set per configuration and URL, so the exchange and the ID-JAG verifiers share one cache and one fetch. */
const keySets = new WeakMap<Config['idp'], Map<string, ReturnType<typeof createRemoteJWKSet>>>();

/** The IdP's keys at `url`: cached, refetched on an unknown `kid` (a key rotated in) at most once per cooldown. */
function remoteKeys(idp: Config['idp'], url: string): ReturnType<typeof createRemoteJWKSet> {
  let sets = keySets.get(idp);
  if (!sets) keySets.set(idp, (sets = new Map()));
  let keys = sets.get(url);
  if (!keys) {
    keys = createRemoteJWKSet(new URL(url), {
      timeoutDuration: idp.jwksTimeoutMs,
      cooldownDuration: idp.jwksCooldownMs,
      cacheMaxAge: 10 * 60 * 1000,
    });
    sets.set(url, keys);
  }
  return keys;
}

/** The identity a verified payload names, after the claim rules: `sub`, the verified email, the groups. */
function identityOf(idp: Config['idp'], issuer: string, payload: JWTPayload): VerifiedIdentity {
  if (typeof payload.sub !== 'string' || payload.sub.length === 0 || payload.sub.length > 512) throw new IdpRejection('bad sub');
  checkIdentityClaims(idp, payload);
  const identity: VerifiedIdentity = { subject: payload.sub, issuer };
  const email = verifiedEmail(idp, payload);
  if (email !== undefined) identity.email = email;
  const groups = payload[idp.groupsClaim];
  if (Array.isArray(groups)) identity.groups = groups.filter((g): g is string => typeof g === 'string' && g.length <= 256).slice(0, 100);
  return identity;
}

function checkShape(jwt: string): void {
  if (jwt.length > 16384 || !JWT_SHAPE.test(jwt)) throw new IdpRejection('not a compact JWS');
}

/**
 * Whether a verification failure is the IdP's key endpoint being out of reach (our outage: a 503),
 * rather than a token that is not acceptable (`invalid_grant`).
 */
export function idpKeysUnavailable(err: unknown): boolean {
  return err instanceof joseErrors.JWKSTimeout || !(err instanceof joseErrors.JOSEError || err instanceof IdpRejection);
}

/**
 * The JOSE `typ` values a JWT of the RFC 8693 exchange may carry: none (most ID tokens), `JWT`
 * (RFC 7519 §5.1), or `at+jwt` (RFC 9068 access tokens), each compared case-insensitively and with or
 * without the `application/` prefix (RFC 7515 §4.1.9). Any other type is a JWT made for another
 * purpose, which the exchange must not take for an identity: above all an ID-JAG
 * (`oauth-id-jag+jwt`), a single-use grant bound to one client that would otherwise become a
 * seven-day, replayable user token with no client authentication, but also logout tokens, security
 * events, DPoP proofs and client assertions.
 */
export const EXCHANGE_JWT_TYPES: readonly string[] = ['jwt', 'at+jwt'];

/** Whether `typ` (the protected header's, undefined when absent) is one the exchange takes. */
export function exchangeTypeAllowed(typ: unknown): boolean {
  if (typ === undefined) return true;
  if (typeof typ !== 'string') return false;
  const type = typ.toLowerCase();
  return EXCHANGE_JWT_TYPES.includes(type.startsWith('application/') ? type.slice('application/'.length) : type);
}

/**
 * With several providers, a JWT goes to the one whose issuer its (not yet verified) `iss` names, and
 * is verified there with that provider's keys, audience and claim rules alone; an issuer no provider
 * has is refused. One provider: its verifier, as is.
 */
function byIssuer<V>(verifiers: ReadonlyMap<string, V>): ((jwt: string) => V) | undefined {
  if (verifiers.size === 0) return undefined;
  if (verifiers.size === 1) {
    const only = [...verifiers.values()][0]!;
    return () => only;
  }
  return (jwt) => {
    checkShape(jwt);
    const { iss } = decodeJwt(jwt);
    const verifier = typeof iss === 'string' ? verifiers.get(iss) : undefined;
    if (verifier === undefined) throw new IdpRejection('issuer of no configured provider');
    return verifier;
  };
}

/** The token exchange's verifier over every provider with an audience and keys; undefined when none has. */
export function createIdpVerifier(idp: Config['idp']): IdpVerifier | undefined {
  const verifiers = new Map<string, IdpVerifier>();
  for (const provider of identityProviders(idp)) {
    const verifier = createProviderVerifier(provider);
    if (verifier) verifiers.set(provider.issuer, verifier);
  }
  const pick = byIssuer(verifiers);
  return pick && { verify: async (jwt, now) => pick(jwt).verify(jwt, now) };
}

function createProviderVerifier(idp: Config['idp']): IdpVerifier | undefined {
  if (!idp.issuer || !idp.audience || !idp.jwksUrl) return undefined;
  const issuer = idp.issuer;
  const audience = idp.audience;
  const jwks = remoteKeys(idp, idp.jwksUrl);

  return {
    async verify(jwt, now) {
      checkShape(jwt);
      // The IdP's key set is fetched (and cached) on the way: an IdP call in the request's trace.
      const { payload, protectedHeader } = await idpCall('IdP token verification', () =>
        jwtVerify(jwt, jwks, {
          issuer,
          audience,
          algorithms: [...idp.algorithms],
          requiredClaims: ['exp', 'sub'],
          clockTolerance: idp.clockToleranceSeconds,
          currentDate: new Date(now),
        }),
      );
      if (!exchangeTypeAllowed(protectedHeader.typ)) throw new IdpRejection('typ not an ID token or access token');
      return identityOf(idp, issuer, payload);
    },
  };
}

/** The JOSE `typ` of an Identity Assertion JWT Authorization Grant. */
export const ID_JAG_TYPE = 'oauth-id-jag+jwt';
/** The longest an ID-JAG may live (`exp` - `iat`) and be old (now - `iat`): IdPs issue them for minutes (Okta: 5). */
export const ID_JAG_MAX_LIFETIME_SECONDS = 600;

/** A verified ID-JAG: the user it asserts and the bindings the token endpoint checks against the request. */
export interface IdJagAssertion extends VerifiedIdentity {
  /** Unique per issuer; used once. */
  jti: string;
  /** The client the IdP issued it to (this server's client id). */
  clientId: string;
  /** The resource it is for, when it names one. */
  resource?: string;
  /** The scopes the IdP granted, as it wrote them (not yet checked as scope tokens). */
  scope?: string;
  /** `exp`, epoch ms. */
  expiresAt: number;
}

export interface IdJagVerifier {
  /** `audience`: this authorization server's issuer identifier. */
  verify(jwt: string, audience: string, now: number): Promise<IdJagAssertion>;
}

/**
 * The ID-JAG verifier, when `idp.idJag` is on with an issuer and keys: `typ` oauth-id-jag+jwt, the
 * pinned algorithms, `iss` the IdP, `aud` this authorization server alone, `exp`, `iat`, `jti`, `sub` and
 * `client_id` present, a lifetime of at most ID_JAG_MAX_LIFETIME_SECONDS, then the claim rules.
 */
export function createIdJagVerifier(idp: Config['idp']): IdJagVerifier | undefined {
  const verifiers = new Map<string, IdJagVerifier>();
  for (const provider of identityProviders(idp)) {
    const verifier = createProviderIdJagVerifier(provider);
    if (verifier) verifiers.set(provider.issuer, verifier);
  }
  const pick = byIssuer(verifiers);
  return pick && { verify: async (jwt, audience, now) => pick(jwt).verify(jwt, audience, now) };
}

function createProviderIdJagVerifier(idp: Config['idp']): IdJagVerifier | undefined {
  if (!idp.idJag || !idp.issuer || !idp.jwksUrl) return undefined;
  const issuer = idp.issuer;
  const jwks = remoteKeys(idp, idp.jwksUrl);

  return {
    async verify(jwt, audience, now) {
      checkShape(jwt);
      const { payload } = await jwtVerify(jwt, jwks, {
        issuer,
        audience,
        typ: ID_JAG_TYPE,
        algorithms: [...idp.algorithms],
        requiredClaims: ['exp', 'iat', 'jti', 'sub', 'client_id'],
        maxTokenAge: ID_JAG_MAX_LIFETIME_SECONDS,
        clockTolerance: idp.clockToleranceSeconds,
        currentDate: new Date(now),
      });
      // One audience: this authorization server. jose takes an array that merely contains it; an
      // assertion addressed to several parties at once is valid at each of them, and is refused, as
      // client assertions are. A one-element array is that string (RFC 7519 §4.1.3) and is taken.
      if (Array.isArray(payload.aud) && payload.aud.length !== 1) throw new IdpRejection('several audiences');
      const { exp, iat, jti, client_id: clientId, resource, scope } = payload;
      if (typeof exp !== 'number' || typeof iat !== 'number' || exp - iat > ID_JAG_MAX_LIFETIME_SECONDS)
        throw new IdpRejection('lifetime too long');
      if (typeof jti !== 'string' || jti.length === 0 || jti.length > 256) throw new IdpRejection('bad jti');
      if (typeof clientId !== 'string' || clientId.length === 0 || clientId.length > 2048) throw new IdpRejection('bad client_id');
      if (resource !== undefined && typeof resource !== 'string') throw new IdpRejection('bad resource');
      if (scope !== undefined && typeof scope !== 'string') throw new IdpRejection('bad scope');
      const assertion: IdJagAssertion = { ...identityOf(idp, issuer, payload), jti, clientId, expiresAt: exp * 1000 };
      if (resource !== undefined) assertion.resource = resource;
      if (scope !== undefined && scope !== '') assertion.scope = scope;
      return assertion;
    },
  };
}

/**
 * The IdP's `email`, when it counts: whoever can set their own address at the IdP (self-service
 * profiles, social logins, guest accounts) must not get another domain's rights. It counts when the
 * IdP says it verified it (`idp.emailVerifiedClaim` is `true`), or, with `idp.requireVerifiedEmail:
 * false`, when the IdP does not say otherwise. Undefined: no email is kept or matched.
 */
export function verifiedEmail(idp: Config['idp'], claims: JWTPayload): string | undefined {
  const email = claims.email;
  if (typeof email !== 'string' || email.length === 0 || email.length > 320) return undefined;
  const verified = claims[idp.emailVerifiedClaim];
  if (verified === true) return email;
  return verified === undefined && !idp.requireVerifiedEmail ? email : undefined;
}

/** The configured claim rules (email domains, required group), for exchanged JWTs and signed-in users alike. */
export function checkIdentityClaims(idp: Config['idp'], payload: JWTPayload): void {
  if (idp.allowedEmailDomains.length > 0) {
    const email = verifiedEmail(idp, payload)?.toLowerCase();
    if (email === undefined) throw new IdpRejection(typeof payload.email === 'string' ? 'email not verified' : 'no email');
    const domain = email.includes('@') ? email.slice(email.lastIndexOf('@') + 1) : '';
    if (!idp.allowedEmailDomains.includes(domain)) throw new IdpRejection('email domain not allowed');
  }
  if (idp.requiredGroup !== undefined) {
    const groups = payload[idp.groupsClaim];
    if (!Array.isArray(groups) || !groups.includes(idp.requiredGroup)) throw new IdpRejection('required group missing');
  }
}
