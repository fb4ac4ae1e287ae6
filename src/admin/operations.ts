// The admin operations (`POST /oauth/<operation>`), as plain functions over the store. The HTTP layer
// (admin/server.ts) has already checked the master token; these check their arguments and act.

import type { AuditInput } from '../audit.ts';
import type { Clock } from '../clock.ts';
import { decideToken, generateToken, hashToken, isTokenShaped, type MasterToken, type Principal } from '../credentials.ts';
import { explainCall } from '../policy/rules.ts';
import type { Policy } from '../policy/rules.ts';
import { HttpError } from '../errors.ts';
import { checkScope, provisionClient, publicClient } from '../clients.ts';
import type { Metrics } from '../metrics.ts';
import { defaultProfileRecords, type ProfileLifetimes } from '../profiles.ts';
import { GRANT_TYPES } from '../oauth/grants/index.ts';
import type { AuditStorage, ClientStorage, ProfileStorage, TokenStorage } from '../store/types.ts';

export const MAX_LIFETIME_SECONDS = 31_536_000;
export const MAX_AUDIT_EVENTS = 1000;

/** The parts of the store the admin operations use. */
export type AdminStore = TokenStorage & ClientStorage & ProfileStorage & AuditStorage;

export interface AdminContext {
  store: AdminStore;
  clock: Clock;
  metrics: Metrics;
  /** For explainPolicy: the master token is a principal of its own. */
  masterToken?: MasterToken;
  /** The per-tool policy (explainPolicy); undefined when none is configured. */
  policy?: Policy | undefined;
  /** The configured lifetimes of the built-in profiles (seedDefaultProfiles stores them). */
  profileLifetimes?: ProfileLifetimes | undefined;
}

/** `audit`: what the operation acted on, for its audit event (never a secret; token hashes are cut to 8 hex). */
export type AdminResult = { status: number; body: unknown; audit?: Pick<AuditInput, 'clientId' | 'tokenHashPrefix' | 'detail'> };
export type AdminOperation = (ctx: AdminContext, body: Record<string, unknown>) => Promise<AdminResult>;

/** A token's SHA-256, from `token` (hashed here) or `tokenHash`: exactly one of them. */
function requireTokenHash(body: Record<string, unknown>): string {
  if (body.token !== undefined && body.tokenHash !== undefined) throw new HttpError('invalid_request', 'give either token or tokenHash, not both');
  if (body.token !== undefined) {
    if (typeof body.token !== 'string' || !isTokenShaped(body.token)) throw new HttpError('invalid_request', 'token must be 64 lowercase hex characters');
    return hashToken(body.token);
  }
  if (body.tokenHash !== undefined) {
    if (typeof body.tokenHash !== 'string' || !isTokenShaped(body.tokenHash)) throw new HttpError('invalid_request', 'tokenHash must be 64 lowercase hex characters');
    return body.tokenHash;
  }
  throw new HttpError('invalid_request', 'token or tokenHash is required');
}

function requireClientId(body: Record<string, unknown>): string {
  const id = body.clientId;
  if (typeof id !== 'string' || id.length === 0 || id.length > 128) throw new HttpError('invalid_request', 'clientId must be a non-empty string');
  return id;
}

export const adminOperations: Readonly<Record<string, AdminOperation>> = Object.freeze({
  async createClient(ctx, body) {
    const { client, clientSecret } = await provisionClient(ctx.store, ctx.clock, body, 'admin', GRANT_TYPES);
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
    const created = await ctx.store.seedProfiles(defaultProfileRecords(ctx.clock.now(), ctx.profileLifetimes));
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
    const tokenHash = requireTokenHash(body);
    if (!(await ctx.store.revokeUserToken(tokenHash))) throw new HttpError('not_found');
    ctx.metrics.tokensRevoked.labels('user').inc();
    return { status: 200, body: { tokenHash, revoked: true }, audit: { tokenHashPrefix: tokenHash } };
  },

  /**
   * Dry run of the per-tool policy: what a call (`method`, `name`) made with a token (`token` or
   * `tokenHash`, as it stands in the store now) would get, which rule decides, and why.
   */
  async explainPolicy(ctx, body) {
    const tokenHash = requireTokenHash(body);
    const method = body.method;
    if (typeof method !== 'string' || method.length === 0 || method.length > 256) throw new HttpError('invalid_request', 'method must be a JSON-RPC method name');
    const name = body.name;
    if (name !== undefined && (typeof name !== 'string' || name.length > 4096)) throw new HttpError('invalid_request', 'name must be a string');
    let principal: Principal;
    if (ctx.masterToken?.matchesHash(tokenHash) === true) principal = { kind: 'master', subject: 'master' };
    else {
      const decision = decideToken(tokenHash, await ctx.store.lookupToken(tokenHash), ctx.clock.now());
      if (!decision.ok) return { status: 200, body: { effect: 'deny', decidedBy: 'token', reason: `the token is ${decision.reason}: every request gets 401` }, audit: { tokenHashPrefix: tokenHash } };
      principal = decision.principal;
    }
    const answer = explainCall(ctx.policy, principal, { method, name });
    return { status: 200, body: answer, audit: { tokenHashPrefix: tokenHash, detail: { method, effect: answer.effect } } };
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
