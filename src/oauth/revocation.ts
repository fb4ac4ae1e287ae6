// POST /revoke (RFC 7009) and POST /introspect (RFC 7662).
//
// Revocation: the master token may revoke anything; a client may revoke its own access and refresh
// tokens (a refresh token takes its whole family with it); a user-grade token may be revoked by whoever
// holds it (possession is the proof, as with logout). The answer depends only on the caller's own
// authentication, never on the token (RFC 7009 §2.2): an unknown token, another client's, or an OAuth
// token presented without its client all get the same 200 and change nothing, so /revoke is no oracle
// for which tokens exist. Such a request counts as a failed authentication of the address. A storage
// failure answers 503, never a 200 that did nothing.
//
// Introspection: for the master token or an authenticated confidential client (its own OAuth tokens and
// user-grade tokens). Anything not currently valid, or not the caller's to see, is `{"active":false}`,
// and counts as a failed authentication of the address (a client asking about tokens it does not hold
// is guessing).

import { decideToken, hashToken, isTokenShaped, refreshTokenState } from '../model/credentials.ts';
import { HttpError, writeJson } from '../http/errors.ts';
import { clientActor } from '../observability/audit.ts';
import { authenticateClient, clientRefused, type AuthenticatedClient } from './client-auth.ts';
import { callerIsMaster, resourceOf, type FormRequest, type OAuthContext } from './context.ts';

type Caller = { kind: 'master' } | { kind: 'client'; client: AuthenticatedClient } | { kind: 'anonymous' };

async function identifyCaller(ctx: OAuthContext, { req, presented, fetches }: FormRequest): Promise<Caller> {
  if (callerIsMaster(ctx, req)) return { kind: 'master' };
  const client = await authenticateClient(presented, ctx, { fetches });
  return client ? { kind: 'client', client } : { kind: 'anonymous' };
}

export async function handleRevoke(ctx: OAuthContext, request: FormRequest): Promise<void> {
  const { res, form, countMiss } = request;
  const caller = await identifyCaller(ctx, request);
  const token = form.get('token');
  if (token === undefined) throw new HttpError('invalid_request', 'token is required');
  // token_type_hint only orders the lookups (RFC 7009 §2.1); an unknown hint is ignored.
  const revoked = isTokenShaped(token) && (await revoke(ctx, caller, hashToken(token), form.get('token_type_hint') === 'refresh_token'));
  // Low value, and anyone with a registered client can cause thousands: the log only, never the capped stream.
  if (!revoked) {
    ctx.audit.logOnly({ who: actorOf(caller), action: 'revoke', result: 'nothing_revoked' });
    if (caller.kind !== 'master') await countMiss();
  }
  res.statusCode = 200;
  res.setHeader('cache-control', 'no-store');
  res.setHeader('content-length', '0');
  res.end();
}

/** Who revokes, for the audit trail: a user-grade token revoked without credentials was revoked by its holder. */
function actorOf(caller: Caller, userToken = false): string {
  if (caller.kind === 'master') return 'master';
  if (caller.kind === 'client') return clientActor(caller.client.client.clientId);
  return userToken ? 'user' : 'anonymous';
}

/** Revokes what `tokenHash` names, if the caller may; false when it names nothing the caller may revoke. */
async function revoke(ctx: OAuthContext, caller: Caller, tokenHash: string, refreshFirst: boolean): Promise<boolean> {
  const now = ctx.clock.now();
  const mayRevoke = (clientId: string | undefined): boolean =>
    caller.kind === 'master' || (caller.kind === 'client' && clientId === caller.client.client.clientId);
  const tryRefresh = async (): Promise<boolean> => {
    const refresh = await ctx.store.getRefreshToken(tokenHash);
    if (!refresh || refresh === 'corrupt' || !mayRevoke(refresh.clientId)) return false;
    await ctx.store.revokeRefreshFamily(tokenHash, now);
    ctx.metrics.tokensRevoked.labels('oauth_refresh_family').inc();
    await ctx.audit.record({
      who: actorOf(caller),
      action: 'revoke.refresh_token',
      result: 'ok',
      clientId: refresh.clientId,
      tokenHashPrefix: tokenHash,
      detail: { familyRevoked: true },
    });
    return true;
  };
  if (refreshFirst && (await tryRefresh())) return true;
  const found = await ctx.store.lookupToken(tokenHash);
  if (found.user) {
    await ctx.store.revokeUserToken(tokenHash);
    ctx.metrics.tokensRevoked.labels('user').inc();
    await ctx.audit.record({ who: actorOf(caller, true), action: 'revoke.user_token', result: 'ok', tokenHashPrefix: tokenHash });
    return true;
  }
  // An unreadable access token names no client that could be checked: left to the administrator.
  if (found.oauth && found.oauth !== 'corrupt') {
    if (!mayRevoke(found.oauth.clientId)) return false;
    await ctx.store.revokeAccessToken(tokenHash, now);
    ctx.metrics.tokensRevoked.labels('oauth_access').inc();
    await ctx.audit.record({
      who: actorOf(caller),
      action: 'revoke.access_token',
      result: 'ok',
      clientId: found.oauth.clientId,
      tokenHashPrefix: tokenHash,
    });
    return true;
  }
  return !refreshFirst && (await tryRefresh());
}

export async function handleIntrospect(ctx: OAuthContext, request: FormRequest): Promise<void> {
  const { res, form, countMiss } = request;
  const caller = await identifyCaller(ctx, request);
  if (caller.kind === 'anonymous' || (caller.kind === 'client' && !caller.client.confidential)) {
    throw clientRefused(request.presented);
  }
  const token = form.get('token');
  if (token === undefined) throw new HttpError('invalid_request', 'token is required');
  // A token is active only to its own client (a user-grade token has none), the master token, or a
  // client the operator lists: anyone may register a confidential client, and must not learn a
  // stranger's `sub` and `exp` by guessing or holding the stranger's token.
  const visibleTo = (clientId: string | undefined) =>
    caller.kind === 'master' ||
    (clientId !== undefined && clientId === caller.client.client.clientId) ||
    ctx.config.oauth.introspectionClients.includes(caller.client.client.clientId);
  const answer = isTokenShaped(token) ? await introspect(ctx, hashToken(token), visibleTo) : { active: false };
  // The master token is not counted: it may look at anything, and refusing its address would lock out the operator.
  if (answer.active !== true && caller.kind !== 'master') await countMiss();
  writeJson(res, 200, answer);
}

async function introspect(
  ctx: OAuthContext,
  tokenHash: string,
  visibleTo: (clientId: string | undefined) => boolean,
): Promise<Record<string, unknown>> {
  const inactive = { active: false };
  const now = ctx.clock.now();
  const seconds = (ms: number | string | undefined) => Math.floor(Number(ms) / 1000);
  const decision = decideToken(tokenHash, await ctx.store.lookupToken(tokenHash), now);
  if (decision.ok) {
    const p = decision.principal;
    if (p.kind === 'user') {
      if (!visibleTo(undefined)) return inactive;
      return {
        active: true,
        ...tokenBinding(p.dpopJkt),
        sub: p.subject,
        exp: seconds(p.expiresAt),
        aud: resourceOf(ctx),
        auth_kind: 'user',
      };
    }
    if (!visibleTo(p.clientId)) return inactive;
    const out: Record<string, unknown> = {
      active: true,
      ...tokenBinding(p.dpopJkt),
      client_id: p.clientId,
      sub: p.subject,
      exp: seconds(p.expiresAt),
      aud: resourceOf(ctx),
      auth_kind: 'oauth',
    };
    if (p.scope !== undefined) out.scope = p.scope;
    return out;
  }
  const refresh = await ctx.store.getRefreshToken(tokenHash);
  if (!refresh || refresh === 'corrupt' || refreshTokenState(refresh, now) !== 'usable' || !visibleTo(refresh.clientId)) return inactive;
  const out: Record<string, unknown> = {
    active: true,
    token_type: 'refresh_token',
    client_id: refresh.clientId,
    exp: seconds(refresh.expiresAt),
    iat: seconds(refresh.createdAt),
  };
  if (refresh.scope !== undefined) out.scope = refresh.scope;
  if (refresh.dpopJkt !== undefined) out.cnf = { jkt: refresh.dpopJkt };
  return out;
}

/** RFC 9449 §6.2: a bound token is introspected as type DPoP with its key's thumbprint as `cnf.jkt`. */
function tokenBinding(dpopJkt: string | undefined): Record<string, unknown> {
  return dpopJkt === undefined ? { token_type: 'Bearer' } : { token_type: 'DPoP', cnf: { jkt: dpopJkt } };
}
