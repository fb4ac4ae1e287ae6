// grant_type=urn:ietf:params:oauth:grant-type:device_code (RFC 8628 §3.4, §3.5): the client polls
// with the device code of its device authorization (../device.ts) until the user decided on /device.
// Each poll is one atomic store step: `authorization_pending` while the user has not decided,
// `slow_down` when polled sooner than the interval (which then grows by 5 s), `access_denied`,
// `expired_token`, then, once, the same tokens as the authorization code grant: an access token
// acting for the IdP user who approved, and a refresh token when the client's profile gives them.
// Registered dynamically like the code grant, and enabled with browser sign-in.

import { hashToken, isTokenShaped } from '../../model/credentials.ts';
import { HttpError } from '../../http/errors.ts';
import { GRANT_DEVICE_CODE } from '../../model/grant-types.ts';
import { clientRefused } from '../client-auth.ts';
import { buildPair, issued, voidedByOffboarding } from '../issuance.ts';
import { dpopBinding, requireClient, type Grant } from './grant.ts';

const ACTION = 'token.device_code';

export const deviceCodeGrant: Grant = {
  grantType: GRANT_DEVICE_CODE,
  action: ACTION,
  enabled: (ctx) => ctx.signIn !== undefined,
  disabledDescription: 'device sign-in is not configured on this server (it needs browser sign-in)',
  registration: 'dynamic',
  parameters: ['device_code'],
  async handle(ctx, request) {
    const { client } = requireClient(request, GRANT_DEVICE_CODE);
    const deviceCode = request.form.get('device_code');
    if (deviceCode === undefined) throw new HttpError('invalid_request', 'device_code is required');
    const rejected = new HttpError('invalid_grant', 'the device code is invalid, used or was issued to another client');
    if (!isTokenShaped(deviceCode)) throw rejected;
    const poll = await ctx.store.pollDeviceAuthorization(hashToken(deviceCode), client.clientId, ctx.clock.now());
    switch (poll.outcome) {
      case 'invalid':
        throw rejected;
      case 'expired':
        throw new HttpError('expired_token', 'the device code has expired: start a new device authorization');
      case 'pending':
        throw new HttpError('authorization_pending', 'the user has not yet approved this device');
      case 'slow_down':
        throw new HttpError('slow_down', `polled too often: wait ${poll.interval} seconds between requests`);
      case 'denied':
        throw new HttpError('access_denied', 'the user denied access');
      case 'approved':
        break;
    }
    const { authorization } = poll;
    const pair = await buildPair(ctx, client, authorization.scope, { user: authorization.user, dpop: dpopBinding(request) });
    // The client was deleted since the poll authenticated it: nothing is stored.
    if ((await ctx.store.issueTokens(pair.access, pair.refresh)) !== 'ok') throw clientRefused(request.presented);
    // The person who approved was offboarded since: the approval is void and what it issued revoked.
    if (await voidedByOffboarding(ctx, pair, authorization.user, authorization.createdAt)) throw rejected;
    return issued(ctx, ACTION, client, pair);
  },
};
