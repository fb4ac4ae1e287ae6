// grant_type=authorization_code (RFC 6749 §4.1.3, OAuth 2.1 §4.1.3): a code from browser sign-in
// becomes an access token acting for the signed-in IdP user, and a refresh token when the client's
// profile gives them. The code must come back with the client it was issued to, the exact redirect
// URI and the PKCE verifier of its S256 challenge; it is redeemed once, atomically, and a second
// redemption revokes what the first issued.

import { hash, timingSafeEqual } from 'node:crypto';
import { clientActor } from '../../observability/audit.ts';
import { hashToken, isTokenShaped } from '../../model/credentials.ts';
import { HttpError } from '../../http/errors.ts';
import { GRANT_AUTHORIZATION_CODE } from '../../model/grant-types.ts';
import { clientRefused } from '../client-auth.ts';
import { buildPair, issued, voidedByOffboarding } from '../issuance.ts';
import { dpopBinding, refusalWithEvent, requireClient, type Grant } from './grant.ts';

/** How long a redeemed code is remembered, so that a replay revokes what it issued. */
export const CODE_REUSE_WINDOW_MS = 10 * 60 * 1000;

/** RFC 7636 §4.1: 43 to 128 unreserved characters. */
const CODE_VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;

/** RFC 7636 §4.6: BASE64URL(SHA256(ASCII(code_verifier))), compared in constant time. */
export function verifierMatches(verifier: string, challenge: string): boolean {
  const computed = Buffer.from(hash('sha256', verifier, 'base64url'));
  const expected = Buffer.from(challenge);
  return computed.length === expected.length && timingSafeEqual(computed, expected);
}

const ACTION = 'token.authorization_code';

export const authorizationCodeGrant: Grant = {
  grantType: GRANT_AUTHORIZATION_CODE,
  action: ACTION,
  enabled: (ctx) => ctx.signIn !== undefined,
  disabledDescription: 'browser sign-in (authorization_code) is not configured on this server',
  registration: 'dynamic',
  parameters: ['code', 'redirect_uri', 'code_verifier'],
  async handle(ctx, request) {
    const { client } = requireClient(request, GRANT_AUTHORIZATION_CODE);
    const { form } = request;
    const code = form.get('code');
    const redirectUri = form.get('redirect_uri');
    const verifier = form.get('code_verifier');
    if (code === undefined) throw new HttpError('invalid_request', 'code is required');
    if (redirectUri === undefined) throw new HttpError('invalid_request', 'redirect_uri is required');
    if (verifier === undefined) throw new HttpError('invalid_request', 'code_verifier is required (PKCE)');
    const rejected = new HttpError('invalid_grant', 'the authorization code is invalid, expired, used or was issued to another client');
    if (!isTokenShaped(code)) throw rejected;
    const codeHash = hashToken(code);
    const stored = await ctx.store.getAuthorizationCode(codeHash);
    // A code of another client is refused without touching it: its presenter may not revoke anything.
    if (!stored || stored === 'corrupt' || stored.clientId !== client.clientId) throw rejected;
    const now = ctx.clock.now();
    const { user } = stored;
    if (stored.redeemedAt === undefined) {
      // The bindings are checked before redemption, so that a wrong guess does not burn a good code.
      if (stored.redirectUri !== redirectUri)
        throw new HttpError('invalid_grant', 'redirect_uri differs from the one of the authorization request');
      if (!CODE_VERIFIER.test(verifier) || !verifierMatches(verifier, stored.codeChallenge))
        throw new HttpError('invalid_grant', 'the code_verifier does not match the code_challenge');
    }
    const pair = await buildPair(ctx, client, stored.scope, { user, dpop: dpopBinding(request) });
    // A code issued under a remembered approval: the grant is linked to it before it exists, so that
    // revoking the grant forgets the approval (a link whose grant never comes to be does no harm).
    const consent = stored.redeemedAt === undefined ? stored.consent : undefined;
    if (consent !== undefined && consent.expiresAt > now) {
      await ctx.store.linkConsentGrant(
        pair.refresh?.familyId ?? pair.access.tokenHash,
        consent.browserHash,
        consent.key,
        consent.expiresAt,
      );
    }
    const outcome = await ctx.store.redeemAuthorizationCode(
      codeHash,
      client.clientId,
      now,
      CODE_REUSE_WINDOW_MS,
      pair.access,
      pair.refresh,
    );
    if (outcome === 'reused') {
      ctx.metrics.tokensRevoked.labels('oauth_code_reuse').inc();
      ctx.logger.warn(
        { clientId: client.clientId, codeHashPrefix: codeHash.slice(0, 8) },
        'authorization code used twice: what its first use issued is revoked',
      );
      throw refusalWithEvent(rejected, {
        who: clientActor(client.clientId),
        action: ACTION,
        result: 'code_reuse',
        clientId: client.clientId,
        subject: user.subject,
        detail: { revoked: true },
      });
    }
    if (outcome === 'client_revoked') throw clientRefused(request.presented);
    if (outcome !== 'ok') throw rejected;
    // The person was offboarded since the sign-in this code comes from: what it issued is revoked.
    if (await voidedByOffboarding(ctx, pair, user, stored.createdAt)) throw rejected;
    return issued(ctx, ACTION, client, pair);
  },
};
