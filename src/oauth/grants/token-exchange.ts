// grant_type=urn:ietf:params:oauth:grant-type:token-exchange (RFC 8693): a JWT of the configured IdP
// becomes a user-grade token, `userBearerTokens:<hash>`, valid for a fixed seven days (user-grade
// lifetimes are not configurable). The IdP JWT is the credential, so client authentication is
// optional, but a client that tries must succeed and hold the grant. The JWT must be typed as an ID
// token or access token (idp.ts, EXCHANGE_JWT_TYPES): an ID-JAG, a single-use grant bound to one
// client, is refused here even when the exchange's audience matches it.

import { generateToken, hashToken, TTL_7_DAYS } from '../../model/credentials.ts';
import { HttpError } from '../../http/errors.ts';
import { GRANT_TOKEN_EXCHANGE } from '../../model/grant-types.ts';
import { keepRegistrationAlive } from '../issuance.ts';
import { idpOutage, requireClient, type Grant } from './grant.ts';
import { DEACTIVATED_DESCRIPTION } from '../directory-gate.ts';

export const TOKEN_TYPE_JWT = 'urn:ietf:params:oauth:token-type:jwt';
export const TOKEN_TYPE_ID_TOKEN = 'urn:ietf:params:oauth:token-type:id_token';
export const TOKEN_TYPE_ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';

export const tokenExchangeGrant: Grant = {
  grantType: GRANT_TOKEN_EXCHANGE,
  action: 'token.token_exchange',
  enabled: (ctx) => ctx.idp !== undefined,
  disabledDescription: 'token exchange is not configured on this server (no identity provider)',
  registration: 'dynamic',
  parameters: ['subject_token', 'subject_token_type', 'actor_token', 'actor_token_type', 'requested_token_type'],
  async handle(ctx, request) {
    const { form } = request;
    const authenticated = requireClient(request, GRANT_TOKEN_EXCHANGE, { optional: true });
    if (authenticated) await keepRegistrationAlive(ctx, authenticated.client);
    const subjectToken = form.get('subject_token');
    const subjectTokenType = form.get('subject_token_type');
    if (!form.has('subject_token')) throw new HttpError('invalid_request', 'subject_token is required');
    if (subjectTokenType === undefined) throw new HttpError('invalid_request', 'subject_token_type is required');
    if (subjectTokenType !== TOKEN_TYPE_JWT && subjectTokenType !== TOKEN_TYPE_ID_TOKEN) {
      throw new HttpError('invalid_request', `subject_token_type must be ${TOKEN_TYPE_JWT}`);
    }
    if (form.has('actor_token') || form.has('actor_token_type'))
      throw new HttpError('invalid_request', 'delegation (actor_token) is not supported');
    const requested = form.get('requested_token_type');
    if (requested !== undefined && requested !== TOKEN_TYPE_ACCESS_TOKEN) {
      throw new HttpError('invalid_request', `requested_token_type must be ${TOKEN_TYPE_ACCESS_TOKEN}`);
    }

    // An empty subject token was sent, and is a bad JWT like any other.
    if (subjectToken === undefined) throw new HttpError('invalid_grant', 'the subject token is not acceptable');
    const now = ctx.clock.now();
    let identity;
    try {
      identity = await ctx.idp!.verify(subjectToken, now);
    } catch (err) {
      // The IdP's key endpoint being unreachable is our outage, not a bad token.
      const outage = idpOutage(ctx, err, 'token exchange');
      if (outage) throw outage;
      ctx.logger.info({ reason: (err as Error).message, code: (err as { code?: string }).code }, 'token exchange refused');
      throw new HttpError('invalid_grant', 'the subject token is not acceptable');
    }

    const raw = generateToken();
    const tokenHash = hashToken(raw);
    await ctx.store.putUserToken({
      tokenHash,
      subject: identity.subject,
      issuer: identity.issuer,
      createdAt: now,
      expiresAt: now + TTL_7_DAYS,
      ...(identity.email !== undefined ? { email: identity.email } : {}),
      ...(identity.groups !== undefined ? { groups: identity.groups } : {}),
      ...(request.dpopJkt !== undefined ? { dpopJkt: request.dpopJkt } : {}),
    });
    // Read after the write (directory-gate.ts): a deactivation racing this exchange finds the token, or is seen here.
    if (await ctx.directory?.refuses(identity)) {
      await ctx.store.revokeUserToken(tokenHash);
      ctx.logger.info({}, 'token exchange refused: the directory made this person inactive');
      throw new HttpError('invalid_grant', DEACTIVATED_DESCRIPTION);
    }
    ctx.metrics.tokensIssued.labels('user').inc();
    return {
      body: {
        access_token: raw,
        issued_token_type: TOKEN_TYPE_ACCESS_TOKEN,
        token_type: request.dpopJkt === undefined ? 'Bearer' : 'DPoP',
        expires_in: TTL_7_DAYS / 1000,
      },
      event: {
        who: 'user',
        action: 'token.token_exchange',
        result: 'ok',
        subject: identity.subject,
        tokenHashPrefix: tokenHash,
        ...(authenticated ? { clientId: authenticated.client.clientId } : {}),
      },
    };
  },
};
