// The admin operations (`POST /oauth/<operation>`), as plain functions over the store. The HTTP layer
// (admin/server.ts) has already checked the master token; these check their arguments and act.

import type { AuditInput } from '../audit.ts';
import type { Clock } from '../clock.ts';
import { generateToken, hashToken, isTokenShaped } from '../credentials.ts';
import { HttpError } from '../errors.ts';
import { checkScope, provisionClient, publicClient } from '../clients.ts';
import type { Metrics } from '../metrics.ts';
import { defaultProfileRecords } from '../profiles.ts';
import type { TokenStore } from '../store/types.ts';

export const MAX_LIFETIME_SECONDS = 31_536_000;
export const MAX_AUDIT_EVENTS = 1000;

export interface AdminContext {
  store: TokenStore;
  clock: Clock;
  metrics: Metrics;
}

/** `audit`: what the operation acted on, for its audit event (never a secret; token hashes are cut to 8 hex). */
export type AdminResult = { status: number; body: unknown; audit?: Pick<AuditInput, 'clientId' | 'tokenHashPrefix' | 'detail'> };
export type AdminOperation = (ctx: AdminContext, body: Record<string, unknown>) => Promise<AdminResult>;

function requireClientId(body: Record<string, unknown>): string {
  const id = body.clientId;
  if (typeof id !== 'string' || id.length === 0 || id.length > 128) throw new HttpError('invalid_request', 'clientId must be a non-empty string');
  return id;
}

export const adminOperations: Readonly<Record<string, AdminOperation>> = Object.freeze({
  async createClient(ctx, body) {
    const { client, clientSecret } = await provisionClient(ctx.store, ctx.clock, body, 'admin');
    return { status: 201, body: { ...publicClient(client), clientSecret }, audit: { clientId: client.clientId } };
  },

  async listClients(ctx) {
    const clients = await ctx.store.listClients();
    return { status: 200, body: { clients: clients.map(publicClient) }, audit: { detail: { count: clients.length } } };
  },

  async deleteClient(ctx, body) {
    const clientId = requireClientId(body);
    const result = await ctx.store.deleteClient(clientId, ctx.clock.now());
    if (!result) throw new HttpError('not_found');
    ctx.metrics.tokensRevoked.labels('oauth_access').inc(result.accessTokensRevoked);
    ctx.metrics.tokensRevoked.labels('oauth_refresh').inc(result.refreshTokensRevoked);
    return {
      status: 200,
      body: result,
      audit: { clientId, detail: { accessTokensRevoked: result.accessTokensRevoked, refreshTokensRevoked: result.refreshTokensRevoked } },
    };
  },

  async seedDefaultProfiles(ctx) {
    const created = await ctx.store.seedProfiles(defaultProfileRecords(ctx.clock.now()));
    const profiles = await ctx.store.listProfiles();
    return { status: 200, body: { profiles, created }, audit: { detail: { created: created.join(' ') } } };
  },

  async createAccessToken(ctx, body) {
    const clientId = requireClientId(body);
    const lifetime = body.lifetimeSeconds;
    if (typeof lifetime !== 'number' || !Number.isInteger(lifetime) || lifetime < 1 || lifetime > MAX_LIFETIME_SECONDS) {
      throw new HttpError('invalid_request', `lifetimeSeconds must be an integer from 1 to ${MAX_LIFETIME_SECONDS}`);
    }
    const scope = checkScope(body.scope);
    const accessToken = generateToken();
    const now = ctx.clock.now();
    const expiresAt = now + lifetime * 1000;
    const record = { tokenHash: hashToken(accessToken), clientId, createdAt: now, expiresAt, ...(scope === undefined ? {} : { scope }) };
    const outcome = await ctx.store.createAccessToken(record);
    if (outcome === 'client_not_found') throw new HttpError('not_found');
    if (outcome === 'client_revoked') throw new HttpError('invalid_request', 'the client has been deleted; it must be registered again');
    ctx.metrics.tokensIssued.labels('oauth_access').inc();
    const response: Record<string, unknown> = { accessToken, tokenType: 'Bearer', expiresAt, expiresIn: lifetime, clientId };
    if (scope !== undefined) response.scope = scope;
    return { status: 201, body: response, audit: { clientId, tokenHashPrefix: record.tokenHash, detail: { lifetimeSeconds: lifetime } } };
  },

  async revokeUserToken(ctx, body) {
    let tokenHash: string;
    if (body.token !== undefined && body.tokenHash !== undefined) throw new HttpError('invalid_request', 'give either token or tokenHash, not both');
    if (body.token !== undefined) {
      if (typeof body.token !== 'string' || !isTokenShaped(body.token)) throw new HttpError('invalid_request', 'token must be 64 lowercase hex characters');
      tokenHash = hashToken(body.token);
    } else if (body.tokenHash !== undefined) {
      if (typeof body.tokenHash !== 'string' || !isTokenShaped(body.tokenHash)) throw new HttpError('invalid_request', 'tokenHash must be 64 lowercase hex characters');
      tokenHash = body.tokenHash;
    } else {
      throw new HttpError('invalid_request', 'token or tokenHash is required');
    }
    if (!(await ctx.store.revokeUserToken(tokenHash))) throw new HttpError('not_found');
    ctx.metrics.tokensRevoked.labels('user').inc();
    return { status: 200, body: { tokenHash, revoked: true }, audit: { tokenHashPrefix: tokenHash } };
  },

  /** The newest audit events (empty when `audit.stream` is off), newest first; `count` 1..1000, default 100. */
  async listAuditEvents(ctx, body) {
    const count = body.count ?? 100;
    if (typeof count !== 'number' || !Number.isInteger(count) || count < 1 || count > MAX_AUDIT_EVENTS) {
      throw new HttpError('invalid_request', `count must be an integer from 1 to ${MAX_AUDIT_EVENTS}`);
    }
    const events = await ctx.store.listAuditEvents(count);
    return { status: 200, body: { events }, audit: { detail: { count: events.length } } };
  },
});
