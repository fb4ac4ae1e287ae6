// POST /token (RFC 6749 §3.2): four grants.
//  - authorization_code (RFC 6749 §4.1 + PKCE) after browser sign-in: ./authorization-code-grant.ts.
//  - client_credentials (RFC 6749 §4.4) for confidential clients an admin created with that grant;
//    access-token lifetime from the client's profile, plus a rotating refresh token when the client
//    also has the refresh_token grant and its profile gives refresh tokens a lifetime.
//  - refresh_token (RFC 6749 §6) with rotation on every use and reuse detection (the store's atomic
//    rotateRefreshToken: a rotated token presented again revokes its whole family, unless it comes
//    within oauth.refreshReuseGraceSeconds of the rotation: the client racing itself gets new tokens).
//  - token exchange (RFC 8693): an IdP JWT becomes a user-grade token, `userBearerTokens:<hash>`,
//    valid for a fixed seven days (user-grade lifetimes are not configurable).
// Every answer is `Cache-Control: no-store`; errors are RFC 6749 §5.2 JSON via HttpError.

import type { Form } from '../body.ts';
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { errors as joseErrors } from 'jose';
import { generateToken, hashToken, isTokenShaped, refreshTokenState, TTL_7_DAYS } from '../credentials.ts';
import { HttpError, invalidClient, writeJson } from '../errors.ts';
import { describe } from '../logger.ts';
import { GRANT_AUTHORIZATION_CODE, GRANT_CLIENT_CREDENTIALS, GRANT_REFRESH_TOKEN, GRANT_TOKEN_EXCHANGE, resolveProfile } from '../profiles.ts';
import { userFromFields } from '../store/records.ts';
import type { AccessTokenRecord, ClientRecord, RefreshTokenRecord, SignedInUser } from '../store/types.ts';
import { authorizationCodeGrant } from './authorization-code-grant.ts';
import { checkScope } from '../clients.ts';
import { clientActor, markAudited } from '../audit.ts';
import { authenticateClient, type AuthenticatedClient } from './client-auth.ts';
import { namesThisResource, type OAuthContext } from './context.ts';
import { IdpRejection } from './idp.ts';

export const TOKEN_TYPE_JWT = 'urn:ietf:params:oauth:token-type:jwt';
export const TOKEN_TYPE_ID_TOKEN = 'urn:ietf:params:oauth:token-type:id_token';
export const TOKEN_TYPE_ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';

export const NO_CACHE = { pragma: 'no-cache' };

export async function handleToken(ctx: OAuthContext, req: IncomingMessage, res: ServerResponse, form: Form): Promise<void> {
  const grantType = form.get('grant_type');
  if (grantType === undefined) throw new HttpError('invalid_request', 'grant_type is required');
  checkTarget(ctx, form);
  switch (grantType) {
    case GRANT_CLIENT_CREDENTIALS:
      return clientCredentials(ctx, req, res, form);
    case GRANT_REFRESH_TOKEN:
      return refreshToken(ctx, req, res, form);
    case GRANT_TOKEN_EXCHANGE:
      return tokenExchange(ctx, req, res, form);
    case GRANT_AUTHORIZATION_CODE:
      if (!ctx.signIn) throw new HttpError('unsupported_grant_type', 'browser sign-in (authorization_code) is not configured on this server');
      return authorizationCodeGrant(ctx, req, res, form);
    default:
      throw new HttpError('unsupported_grant_type', `grant_type ${grantType.slice(0, 100)} is not supported`);
  }
}

/** RFC 8707 `resource` and RFC 8693 `audience`: tokens are only ever issued for this sidecar's /mcp. */
function checkTarget(ctx: OAuthContext, form: Form): void {
  for (const name of ['resource', 'audience']) {
    const value = form.get(name);
    if (value !== undefined && !namesThisResource(ctx, value)) {
      throw new HttpError('invalid_target', `tokens of this server are only issued for ${ctx.publicUrl()}/mcp`);
    }
  }
}

/** A client must authenticate (or, if public, identify itself) and hold the grant it uses. */
export async function requireClient(ctx: OAuthContext, req: IncomingMessage, form: Form, grant: string): Promise<AuthenticatedClient> {
  const authenticated = await authenticateClient(req, form, ctx.store);
  if (!authenticated) throw invalidClient(false);
  if (!authenticated.client.grantTypes.includes(grant)) {
    throw new HttpError('unauthorized_client', `this client may not use the ${grant} grant`);
  }
  return authenticated;
}

/** The requested scope, which must lie within `allowed` (when the client has a scope at all). */
export function grantedScope(requested: string | undefined, allowed: string | undefined): string | undefined {
  const scope = checkScope(requested);
  if (scope === undefined) return allowed;
  if (allowed !== undefined) {
    const permitted = new Set(allowed.split(' '));
    if (!scope.split(' ').every((s) => permitted.has(s))) throw new HttpError('invalid_scope', 'the requested scope exceeds what this client was granted');
  }
  return scope;
}

export interface IssuedPair {
  body: Record<string, unknown>;
  access: AccessTokenRecord;
  refresh: RefreshTokenRecord | undefined;
}

/**
 * Builds an access token (and a refresh token when the client's profile gives them) for `client`,
 * acting for `user` when it came from browser sign-in.
 */
export async function buildPair(
  ctx: OAuthContext,
  client: ClientRecord,
  scope: string | undefined,
  familyId: string | undefined,
  user?: SignedInUser,
): Promise<IssuedPair> {
  const now = ctx.clock.now();
  const profile = await resolveProfile(ctx.store, client.profile, now);
  if (!profile) throw new HttpError('unauthorized_client', `the client's profile "${client.profile}" no longer exists`);
  const accessRaw = generateToken();
  const access: AccessTokenRecord = {
    tokenHash: hashToken(accessRaw),
    clientId: client.clientId,
    createdAt: now,
    expiresAt: now + profile.accessTokenLifetimeSeconds * 1000,
  };
  if (scope !== undefined) access.scope = scope;
  if (user !== undefined) access.user = user;
  const body: Record<string, unknown> = { access_token: accessRaw, token_type: 'Bearer', expires_in: profile.accessTokenLifetimeSeconds };
  let refresh: RefreshTokenRecord | undefined;
  const wantsRefresh = client.grantTypes.includes(GRANT_REFRESH_TOKEN) && profile.refreshTokenLifetimeSeconds > 0;
  if (familyId !== undefined || wantsRefresh) {
    const refreshRaw = generateToken();
    const family = familyId ?? randomBytes(16).toString('hex');
    access.familyId = family;
    refresh = {
      tokenHash: hashToken(refreshRaw),
      clientId: client.clientId,
      familyId: family,
      createdAt: now,
      // Sliding: each rotation gives the new refresh token the profile's full lifetime.
      expiresAt: now + Math.max(profile.refreshTokenLifetimeSeconds, 1) * 1000,
    };
    if (scope !== undefined) refresh.scope = scope;
    if (user !== undefined) refresh.user = user;
    body.refresh_token = refreshRaw;
  }
  if (scope !== undefined) body.scope = scope;
  return { body, access, refresh };
}

async function clientCredentials(ctx: OAuthContext, req: IncomingMessage, res: ServerResponse, form: Form): Promise<void> {
  const { client, confidential } = await requireClient(ctx, req, form, GRANT_CLIENT_CREDENTIALS);
  if (!confidential) throw new HttpError('unauthorized_client', 'client_credentials needs a confidential client');
  const scope = grantedScope(form.get('scope'), client.scope);
  const pair = await buildPair(ctx, client, scope, undefined);
  const outcome = await ctx.store.issueTokens(pair.access, pair.refresh);
  if (outcome !== 'ok') throw invalidClient(usedBasic(req));
  await recordIssued(ctx, 'token.client_credentials', client, pair);
  writeJson(res, 200, pair.body, NO_CACHE);
}

async function refreshToken(ctx: OAuthContext, req: IncomingMessage, res: ServerResponse, form: Form): Promise<void> {
  const { client } = await requireClient(ctx, req, form, GRANT_REFRESH_TOKEN);
  const presented = form.get('refresh_token');
  if (presented === undefined) throw new HttpError('invalid_request', 'refresh_token is required');
  const rejected = new HttpError('invalid_grant', 'the refresh token is invalid, expired or revoked');
  if (!isTokenShaped(presented)) throw rejected;
  const oldHash = hashToken(presented);
  const old = await ctx.store.getRefreshToken(oldHash);
  const now = ctx.clock.now();
  if (!old || old.clientId !== client.clientId) throw rejected;
  const state = refreshTokenState(old, now);
  if (state !== 'usable' && state !== 'rotated') throw rejected;
  // RFC 6749 §6: a narrower scope may be asked for, never a wider one than the original grant.
  const scope = grantedScope(form.get('scope'), old.scope);
  // Tokens of a signed-in user stay that user's across rotations.
  const pair = await buildPair(ctx, client, scope, old.familyId, userFromFields(old));
  const graceMs = ctx.config.oauth.refreshReuseGraceSeconds * 1000;
  const outcome = await ctx.store.rotateRefreshToken(oldHash, client.clientId, now, pair.access, pair.refresh!, graceMs);
  if (outcome === 'reused') {
    // A rotated refresh token presented again: stolen or replayed. Its whole family is now revoked.
    ctx.metrics.tokensRevoked.labels('oauth_refresh_family').inc();
    ctx.logger.warn({ clientId: client.clientId, tokenHashPrefix: oldHash.slice(0, 8) }, 'refresh token reused after rotation: its whole family is revoked');
    await ctx.audit.record(
      { who: clientActor(client.clientId), action: 'token.refresh_token', result: 'reuse_detected', clientId: client.clientId, tokenHashPrefix: oldHash, detail: { familyRevoked: true } },
      'warn',
    );
    throw markAudited(rejected);
  }
  if (outcome !== 'ok' && outcome !== 'grace') throw rejected;
  if (outcome === 'grace') {
    // Presented again right after its rotation: two tabs or a retry, not theft. The first answer's
    // tokens were never stored raw, so this is a second pair in the same family.
    ctx.metrics.refreshGraceReuses.inc();
    ctx.logger.info({ clientId: client.clientId, tokenHashPrefix: oldHash.slice(0, 8) }, 'rotated refresh token presented again within the grace window: new tokens issued in its family');
  }
  await keepRegistrationAlive(ctx, client, pair.refresh);
  await recordIssued(ctx, 'token.refresh_token', client, pair, { rotatedFrom: oldHash.slice(0, 8), ...(outcome === 'grace' ? { graceReuse: true } : {}) });
  writeJson(res, 200, pair.body, NO_CACHE);
}

async function tokenExchange(ctx: OAuthContext, req: IncomingMessage, res: ServerResponse, form: Form): Promise<void> {
  if (!ctx.idp) throw new HttpError('unsupported_grant_type', 'token exchange is not configured on this server (no identity provider)');
  // Client authentication is optional (the IdP JWT is the credential), but a client that tries must succeed.
  const authenticated = await authenticateClient(req, form, ctx.store);
  if (authenticated && !authenticated.client.grantTypes.includes(GRANT_TOKEN_EXCHANGE)) {
    throw new HttpError('unauthorized_client', 'this client may not use the token exchange grant');
  }
  if (authenticated) await keepRegistrationAlive(ctx, authenticated.client);
  const subjectToken = form.get('subject_token');
  const subjectTokenType = form.get('subject_token_type');
  if (!form.has('subject_token')) throw new HttpError('invalid_request', 'subject_token is required');
  if (subjectTokenType === undefined) throw new HttpError('invalid_request', 'subject_token_type is required');
  if (subjectTokenType !== TOKEN_TYPE_JWT && subjectTokenType !== TOKEN_TYPE_ID_TOKEN) {
    throw new HttpError('invalid_request', `subject_token_type must be ${TOKEN_TYPE_JWT}`);
  }
  if (form.has('actor_token') || form.has('actor_token_type')) throw new HttpError('invalid_request', 'delegation (actor_token) is not supported');
  const requested = form.get('requested_token_type');
  if (requested !== undefined && requested !== TOKEN_TYPE_ACCESS_TOKEN) {
    throw new HttpError('invalid_request', `requested_token_type must be ${TOKEN_TYPE_ACCESS_TOKEN}`);
  }

  // An empty subject token was sent, and is a bad JWT like any other.
  if (subjectToken === undefined) throw new HttpError('invalid_grant', 'the subject token is not acceptable');
  const now = ctx.clock.now();
  let identity;
  try {
    identity = await ctx.idp.verify(subjectToken, now);
  } catch (err) {
    // The IdP's key endpoint being unreachable is our outage, not a bad token.
    if (err instanceof joseErrors.JWKSTimeout || !(err instanceof joseErrors.JOSEError || err instanceof IdpRejection)) {
      ctx.logger.warn({ err: describe(err) }, 'identity provider keys unavailable: token exchange answered 503');
      throw new HttpError('temporarily_unavailable', 'the identity provider cannot be reached', { headers: { 'retry-after': '5' }, cause: err });
    }
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
  });
  ctx.metrics.tokensIssued.labels('user').inc();
  await ctx.audit.record({
    who: 'user',
    action: 'token.token_exchange',
    result: 'ok',
    subject: identity.subject,
    tokenHashPrefix: tokenHash,
    ...(authenticated ? { clientId: authenticated.client.clientId } : {}),
  });
  writeJson(
    res,
    200,
    { access_token: raw, issued_token_type: TOKEN_TYPE_ACCESS_TOKEN, token_type: 'Bearer', expires_in: TTL_7_DAYS / 1000 },
    NO_CACHE,
  );
}

/** Metrics and the audit event of a successful client_credentials or refresh_token grant. */
export async function recordIssued(ctx: OAuthContext, action: string, client: ClientRecord, pair: IssuedPair, detail: Record<string, string | boolean> = {}): Promise<void> {
  ctx.metrics.tokensIssued.labels('oauth_access').inc();
  if (pair.refresh) ctx.metrics.tokensIssued.labels('oauth_refresh').inc();
  await ctx.audit.record({
    who: clientActor(client.clientId),
    action,
    result: 'ok',
    clientId: client.clientId,
    ...(pair.access.user !== undefined ? { subject: pair.access.user.subject } : {}),
    tokenHashPrefix: pair.access.tokenHash,
    detail: { refreshToken: pair.refresh !== undefined, ...detail },
  });
}

/**
 * A dynamically registered client lives while it is used: each grant it completes pushes its expiry
 * to the configured idle lifetime, or past its newest refresh token if that lives longer.
 */
export async function keepRegistrationAlive(ctx: OAuthContext, client: ClientRecord, refresh?: RefreshTokenRecord): Promise<void> {
  if (client.source === 'admin') return;
  const idleMs = ctx.config.oauth.unusedClientTtlSeconds * 1000;
  const refreshMs = refresh ? refresh.expiresAt - ctx.clock.now() : 0;
  await ctx.store.touchClient(client.clientId, Math.max(idleMs, refreshMs));
}

function usedBasic(req: IncomingMessage): boolean {
  return /^basic /i.test(req.headers.authorization ?? '');
}
