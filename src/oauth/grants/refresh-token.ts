// grant_type=refresh_token (RFC 6749 §6): rotation on every use, with reuse detection (the store's
// atomic rotateRefreshToken). A rotated token presented again revokes its whole family, unless it
// comes within oauth.refreshReuseGraceSeconds of its rotation: then it is answered with the SAME pair
// its rotation issued (sealed on the rotated token, ../refresh-successor.ts), however often and in
// whatever order: processes sharing one credentials file all converge on that one pair, the family
// never forks, and nothing more is issued to a replay than the rotation already issued.

import { HttpError, invalidDpopProofAtToken } from '../../http/errors.ts';
import { sameValue } from '../dpop.ts';
import { clientActor } from '../../observability/audit.ts';
import { hashToken, isTokenShaped, refreshTokenState } from '../../model/credentials.ts';
import { GRANT_REFRESH_TOKEN } from '../../model/grant-types.ts';
import type { OAuthContext } from '../context.ts';
import { buildPair, issued, refreshedScope } from '../issuance.ts';
import { openSuccessor, sealSuccessor } from '../refresh-successor.ts';
import { dpopBinding, refusalWithEvent, requireClient, type Grant, type Issued } from './grant.ts';

const ACTION = 'token.refresh_token';

export const refreshTokenGrant: Grant = {
  grantType: GRANT_REFRESH_TOKEN,
  action: ACTION,
  enabled: () => true,
  disabledDescription: '',
  registration: 'dynamic',
  parameters: ['refresh_token', 'scope'],
  async handle(ctx, request) {
    const { client } = requireClient(request, GRANT_REFRESH_TOKEN);
    const presented = request.form.get('refresh_token');
    if (presented === undefined) throw new HttpError('invalid_request', 'refresh_token is required');
    const rejected = new HttpError('invalid_grant', 'the refresh token is invalid, expired or revoked');
    if (!isTokenShaped(presented)) throw rejected;
    const oldHash = hashToken(presented);
    const old = await ctx.store.getRefreshToken(oldHash);
    const now = ctx.clock.now();
    if (!old || old === 'corrupt' || old.clientId !== client.clientId) throw rejected;
    const state = refreshTokenState(old, now);
    if (state !== 'usable' && state !== 'rotated') throw rejected;
    // RFC 6749 §6: a narrower scope may be asked for, never a wider one than the original grant.
    const scope = refreshedScope(request.form.get('scope'), old.scope);
    // RFC 9449 §5: a bound refresh token is used only with a proof signed by its key.
    if (old.dpopJkt !== undefined) {
      if (request.dpopJkt === undefined) throw invalidDpopProofAtToken();
      if (!sameValue(request.dpopJkt, old.dpopJkt)) throw new HttpError('invalid_grant', 'the refresh token is bound to another DPoP key');
    }
    // Tokens of a signed-in user stay that user's across rotations.
    const pair = await buildPair(ctx, client, scope, { familyId: old.familyId, user: old.user, dpop: dpopBinding(request) });
    const graceMs = ctx.config.oauth.refreshReuseGraceSeconds * 1000;
    const successor = await sealSuccessor(presented, {
      access_token: pair.body.access_token as string,
      refresh_token: pair.body.refresh_token as string,
      ...(scope !== undefined ? { scope } : {}),
      accessExpiresAt: pair.access.expiresAt,
    });
    const outcome = await ctx.store.rotateRefreshToken(oldHash, client.clientId, now, pair.access, pair.refresh!, graceMs, successor);
    if (outcome === 'reused') {
      // A rotated refresh token presented after the window: stolen or replayed. Its whole family is now revoked.
      ctx.metrics.tokensRevoked.labels('oauth_refresh_family').inc();
      ctx.logger.warn(
        { clientId: client.clientId, tokenHashPrefix: oldHash.slice(0, 8) },
        'refresh token reused after rotation: its whole family is revoked',
      );
      throw refusalWithEvent(rejected, {
        who: clientActor(client.clientId),
        action: ACTION,
        result: 'reuse_detected',
        clientId: client.clientId,
        tokenHashPrefix: oldHash,
        detail: { familyRevoked: true },
      });
    }
    if (outcome === 'grace') return graceAnswer(ctx, client.clientId, presented, oldHash, rejected);
    if (outcome !== 'ok') throw rejected;
    return issued(ctx, ACTION, client, pair, { rotatedFrom: oldHash.slice(0, 8) });
  },
};

/**
 * A rotated token presented again within the window: the pair its rotation issued, opened with the
 * presented token, `expires_in` what is left of its access token. A token rotated without a sealed
 * pair (by an earlier version) is refused, its family left alone.
 */
async function graceAnswer(ctx: OAuthContext, clientId: string, presented: string, oldHash: string, rejected: HttpError): Promise<Issued> {
  const stored = await ctx.store.getRefreshToken(oldHash);
  const pair =
    stored && stored !== 'corrupt' && stored.successor !== undefined ? await openSuccessor(presented, stored.successor) : undefined;
  if (!pair) {
    ctx.logger.warn(
      { clientId, tokenHashPrefix: oldHash.slice(0, 8) },
      'rotated refresh token presented again within the grace window, but its successor cannot be opened: refused, the family left alone',
    );
    throw refusalWithEvent(rejected, {
      who: clientActor(clientId),
      action: ACTION,
      result: 'grace_unavailable',
      clientId,
      tokenHashPrefix: oldHash,
    });
  }
  ctx.metrics.refreshGraceReuses.inc();
  ctx.logger.info(
    { clientId, tokenHashPrefix: oldHash.slice(0, 8) },
    'rotated refresh token presented again within the grace window: answered with the pair its rotation issued',
  );
  // The pair's access token is bound when its rotation came with a DPoP proof: answered as DPoP then.
  const accessRecord = (await ctx.store.lookupToken(hashToken(pair.access_token))).oauth;
  const body: Record<string, unknown> = {
    access_token: pair.access_token,
    token_type: accessRecord && accessRecord !== 'corrupt' && accessRecord.dpopJkt !== undefined ? 'DPoP' : 'Bearer',
    expires_in: Math.max(0, Math.floor((pair.accessExpiresAt - ctx.clock.now()) / 1000)),
    refresh_token: pair.refresh_token,
    ...(pair.scope !== undefined ? { scope: pair.scope } : {}),
  };
  return {
    body,
    event: {
      who: clientActor(clientId),
      action: ACTION,
      result: 'ok',
      clientId,
      ...(stored && stored !== 'corrupt' && stored.user !== undefined ? { subject: stored.user.subject } : {}),
      tokenHashPrefix: hashToken(pair.access_token),
      detail: { refreshToken: true, rotatedFrom: oldHash.slice(0, 8), graceReuse: true },
    },
  };
}
