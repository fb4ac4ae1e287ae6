// grant_type=refresh_token (RFC 6749 §6): rotation on every use, with reuse detection (the store's
// atomic rotateRefreshToken). A rotated token presented again revokes its whole family, unless it
// comes within oauth.refreshReuseGraceSeconds of the rotation: a parallel session that still held it
// (or a retry) gets one more pair in the same family, once per rotated token; presented yet again
// within the window it is refused, the family left alone.

import { HttpError } from '../../errors.ts';
import { clientActor } from '../../audit.ts';
import { hashToken, isTokenShaped, refreshTokenState } from '../../credentials.ts';
import { GRANT_REFRESH_TOKEN } from '../../profiles.ts';
import { buildPair, issued, refreshedScope } from '../issuance.ts';
import { refusalWithEvent, requireClient, type Grant } from './grant.ts';

const ACTION = 'token.refresh_token';

export const refreshTokenGrant: Grant = {
  grantType: GRANT_REFRESH_TOKEN,
  action: ACTION,
  enabled: () => true,
  disabledDescription: '',
  registration: 'dynamic',
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
    // Tokens of a signed-in user stay that user's across rotations.
    const pair = await buildPair(ctx, client, scope, { familyId: old.familyId, user: old.user });
    const graceMs = ctx.config.oauth.refreshReuseGraceSeconds * 1000;
    const outcome = await ctx.store.rotateRefreshToken(oldHash, client.clientId, now, pair.access, pair.refresh!, graceMs);
    /** A rotated token presented again: refused, logged and audited as `result`. */
    const replayed = (result: 'reuse_detected' | 'grace_spent', message: string, detail?: { familyRevoked: true }) => {
      ctx.logger.warn({ clientId: client.clientId, tokenHashPrefix: oldHash.slice(0, 8) }, message);
      return refusalWithEvent(rejected, { who: clientActor(client.clientId), action: ACTION, result, clientId: client.clientId, tokenHashPrefix: oldHash, ...(detail ? { detail } : {}) });
    };
    if (outcome === 'reused') {
      // A rotated refresh token presented again: stolen or replayed. Its whole family is now revoked.
      ctx.metrics.tokensRevoked.labels('oauth_refresh_family').inc();
      throw replayed('reuse_detected', 'refresh token reused after rotation: its whole family is revoked', { familyRevoked: true });
    }
    if (outcome === 'grace_spent') {
      // Within the window, but its one grace pair is given: a replay gets no further working pair.
      throw replayed('grace_spent', 'rotated refresh token presented again within the grace window after its one grace pair: refused');
    }
    if (outcome !== 'ok' && outcome !== 'grace') throw rejected;
    if (outcome === 'grace') {
      // Presented again soon after its rotation: a parallel session that held the same token, or a
      // retry. The first answer's tokens were never stored raw, so this is one more pair in the family.
      ctx.metrics.refreshGraceReuses.inc();
      ctx.logger.info({ clientId: client.clientId, tokenHashPrefix: oldHash.slice(0, 8) }, 'rotated refresh token presented again within the grace window: its one grace pair issued in its family');
    }
    return issued(ctx, ACTION, client, pair, { rotatedFrom: oldHash.slice(0, 8), ...(outcome === 'grace' ? { graceReuse: true } : {}) });
  },
};
