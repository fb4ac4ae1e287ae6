// Verifies identity-provider JWTs for the RFC 8693 exchange with `jose`: a remote JWKS (cached, refetched
// on an unknown `kid` no more often than the cooldown, bounded fetch), pinned asymmetric algorithms,
// exact `iss` and `aud`, required `exp` and `sub`, `nbf` honoured, small clock tolerance, then the
// configured claim rules. Any failure is `invalid_grant`; the reason goes to the log only.

import { createRemoteJWKSet, jwtVerify, type JWTPayload } from 'jose';
import type { Config } from '../config.ts';

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

export function createIdpVerifier(idp: Config['idp']): IdpVerifier | undefined {
  if (!idp.issuer || !idp.audience || !idp.jwksUrl) return undefined;
  const issuer = idp.issuer;
  const audience = idp.audience;
  const jwks = createRemoteJWKSet(new URL(idp.jwksUrl), {
    timeoutDuration: idp.jwksTimeoutMs,
    cooldownDuration: idp.jwksCooldownMs,
    cacheMaxAge: 10 * 60 * 1000,
  });

  return {
    async verify(jwt, now) {
      if (jwt.length > 16384 || !JWT_SHAPE.test(jwt)) throw new IdpRejection('not a compact JWS');
      const { payload } = await jwtVerify(jwt, jwks, {
        issuer,
        audience,
        algorithms: [...idp.algorithms],
        requiredClaims: ['exp', 'sub'],
        clockTolerance: idp.clockToleranceSeconds,
        currentDate: new Date(now),
      });
      if (typeof payload.sub !== 'string' || payload.sub.length === 0 || payload.sub.length > 512) throw new IdpRejection('bad sub');
      checkIdentityClaims(idp, payload);
      const identity: VerifiedIdentity = { subject: payload.sub, issuer };
      const email = verifiedEmail(idp, payload);
      if (email !== undefined) identity.email = email;
      const groups = payload[idp.groupsClaim];
      if (Array.isArray(groups)) identity.groups = groups.filter((g): g is string => typeof g === 'string' && g.length <= 256).slice(0, 100);
      return identity;
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

