// Issuing OAuth tokens, for every grant that issues them: the scope granted, the access token (and a
// refresh token when the client's profile gives them) built from the client's profile, the metrics
// and audit event of the issuance, and a dynamically registered client kept alive by its use. Each
// grant stores the pair with the store operation its own checks need (issue, rotate, redeem).

import { randomBytes } from 'node:crypto';
import { clientActor } from '../observability/audit.ts';
import { checkScope, scopeWithin } from '../model/clients.ts';
import { generateTokenFor, hashToken } from '../model/credentials.ts';
import { HttpError } from '../http/errors.ts';
import { GRANT_REFRESH_TOKEN } from '../model/grant-types.ts';
import { resolveProfile } from '../model/profiles.ts';
import { revokedSinceSignIn, tokenUser } from '../model/offboarding.ts';
import type { AccessTokenRecord, ClientRecord, RefreshTokenRecord, SignedInUser } from '../model/records.ts';
import type { OAuthContext } from './context.ts';
import type { DpopBinding, Issued } from './grants/grant.ts';

/** The requested scope, which must lie within `allowed` (when the client has a scope at all). */
export function grantedScope(requested: string | undefined, allowed: string | undefined): string | undefined {
  const scope = checkScope(requested);
  if (scope === undefined) return allowed;
  if (allowed !== undefined && !scopeWithin(scope, allowed))
    throw new HttpError('invalid_scope', 'the requested scope exceeds what this client was granted');
  return scope;
}

/**
 * The scope of a refreshed pair (RFC 6749 §6): the original grant's when none is asked for, else a
 * subset of it. A grant issued without a scope gives none at refresh: asking for one would widen what
 * the user or client was granted, so it is invalid_scope.
 */
export function refreshedScope(requested: string | undefined, granted: string | undefined): string | undefined {
  if (granted === undefined && checkScope(requested) !== undefined) {
    throw new HttpError('invalid_scope', 'the original grant had no scope: a refresh cannot add one');
  }
  return grantedScope(requested, granted);
}

export interface IssuedPair {
  body: Record<string, unknown>;
  access: AccessTokenRecord;
  refresh: RefreshTokenRecord | undefined;
}

export interface PairOptions {
  /** The refresh-token family to continue (a rotation); a new one is started when refresh tokens are due. */
  familyId?: string | undefined;
  /** The user the tokens act for, when they came from one (browser sign-in, an identity assertion). */
  user?: SignedInUser | undefined;
  /** false: an access token alone, whatever the client's profile says. */
  refresh?: boolean;
  /** The key of the request's DPoP proof: the access token (and, per `bindRefresh`, the refresh token) is bound to it. */
  dpop?: DpopBinding | undefined;
}

/**
 * Builds an access token (and a refresh token when the client's profile gives them) for `client`,
 * acting for `options.user` when there is one.
 */
export async function buildPair(
  ctx: OAuthContext,
  client: ClientRecord,
  scope: string | undefined,
  options: PairOptions = {},
): Promise<IssuedPair> {
  const { familyId, user, dpop } = options;
  const now = ctx.clock.now();
  const profile = await resolveProfile(ctx.store, client.profile, now, ctx.config.oauth.profiles);
  if (!profile) throw new HttpError('unauthorized_client', `the client's profile "${client.profile}" no longer exists`);
  if (profile === 'corrupt') {
    ctx.logger.error({ profile: client.profile }, 'a stored profile is unreadable: nothing issued to its clients');
    throw new HttpError('unauthorized_client', `the client's profile "${client.profile}" is unreadable; an administrator must fix it`);
  }
  // A stored profile edited by hand may hold anything: never a token that expires at once, or never.
  if (!lifetime(profile.accessTokenLifetimeSeconds, 1) || !lifetime(profile.refreshTokenLifetimeSeconds, 0)) {
    ctx.logger.error(
      { profile: client.profile },
      'a stored profile has a token lifetime that is not a whole number of seconds in range: nothing issued to its clients',
    );
    throw new HttpError(
      'unauthorized_client',
      `the client's profile "${client.profile}" has no usable token lifetime; an administrator must fix it`,
    );
  }
  const accessRaw = generateTokenFor(client.clientId);
  const access: AccessTokenRecord = {
    tokenHash: hashToken(accessRaw),
    clientId: client.clientId,
    createdAt: now,
    expiresAt: now + profile.accessTokenLifetimeSeconds * 1000,
  };
  if (scope !== undefined) access.scope = scope;
  if (user !== undefined) access.user = tokenUser(user);
  if (dpop !== undefined) access.dpopJkt = dpop.jkt;
  // RFC 9449 §5: a bound token is of type DPoP, and must be presented so.
  const body: Record<string, unknown> = {
    access_token: accessRaw,
    token_type: dpop === undefined ? 'Bearer' : 'DPoP',
    expires_in: profile.accessTokenLifetimeSeconds,
  };
  let refresh: RefreshTokenRecord | undefined;
  const wantsRefresh =
    options.refresh !== false && client.grantTypes.includes(GRANT_REFRESH_TOKEN) && profile.refreshTokenLifetimeSeconds > 0;
  if (familyId !== undefined || wantsRefresh) {
    const refreshRaw = generateTokenFor(client.clientId);
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
    if (user !== undefined) refresh.user = tokenUser(user);
    if (dpop?.bindRefresh === true) refresh.dpopJkt = dpop.jkt;
    body.refresh_token = refreshRaw;
  }
  if (scope !== undefined) body.scope = scope;
  return { body, access, refresh };
}

/**
 * After a pair from a pending artefact (a code, a device approval) is stored: whether its person was
 * offboarded since the sign-in it comes from. If so, the pair is revoked before anyone receives it
 * (the store wrote it, indexed, before this read: see model/offboarding.ts) and the caller refuses.
 */
export async function voidedByOffboarding(ctx: OAuthContext, pair: IssuedPair, user: SignedInUser, issuedAt: number): Promise<boolean> {
  if (!(await revokedSinceSignIn(ctx.store, user, issuedAt))) return false;
  const now = ctx.clock.now();
  await ctx.store.revokeAccessToken(pair.access.tokenHash, now);
  if (pair.refresh !== undefined) await ctx.store.revokeRefreshFamily(pair.refresh.tokenHash, now);
  ctx.logger.info(
    { clientId: pair.access.clientId },
    'a code or device approval of a person offboarded since their sign-in: nothing issued',
  );
  return true;
}

/**
 * After a pair is stored: the client's registration kept alive, the metrics, and the answer with
 * the audit event of the issuance.
 */
export async function issued(
  ctx: OAuthContext,
  action: string,
  client: ClientRecord,
  pair: IssuedPair,
  detail: Record<string, string | boolean> = {},
): Promise<Issued> {
  await keepRegistrationAlive(ctx, client, pair.refresh);
  ctx.metrics.tokensIssued.labels('oauth_access').inc();
  if (pair.refresh) ctx.metrics.tokensIssued.labels('oauth_refresh').inc();
  return {
    body: pair.body,
    event: {
      who: clientActor(client.clientId),
      action,
      result: 'ok',
      clientId: client.clientId,
      ...(pair.access.user !== undefined ? { subject: pair.access.user.subject } : {}),
      tokenHashPrefix: pair.access.tokenHash,
      // A person is the subject at its issuer: the event names both.
      detail: {
        refreshToken: pair.refresh !== undefined,
        ...(pair.access.user !== undefined ? { issuer: pair.access.user.issuer } : {}),
        ...detail,
      },
    },
  };
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

/** The longest lifetime a stored profile may give a token (the configuration allows a year for refresh tokens). */
const MAX_TOKEN_LIFETIME_SECONDS = 365 * 24 * 3600;

/** A lifetime in seconds a token can be issued with: a whole number from `min` to a year. */
function lifetime(seconds: number, min: number): boolean {
  return Number.isSafeInteger(seconds) && seconds >= min && seconds <= MAX_TOKEN_LIFETIME_SECONDS;
}
