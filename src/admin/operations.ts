// The admin operations (`POST /oauth/<operation>`), as plain functions over the store. The HTTP layer
// (admin/server.ts) has already checked the master token; each body is read against the operation's
// declaration (src/admin/declarations.ts) before its handler here acts on the arguments.

import type { AuditInput } from '../observability/audit.ts';
import type { Clock } from '../model/clock.ts';
import { SUBJECT_CUTOFF_KEPT_MS } from '../model/offboarding.ts';
import { decideToken, generateToken, generateTokenFor, hashToken, type MasterToken, type Principal } from '../model/credentials.ts';
import { personKey } from '../model/person.ts';
import { explainCall } from '../policy/rules.ts';
import type { Policy } from '../policy/rules.ts';
import { HttpError } from '../http/errors.ts';
import { provisionClient, publicClient } from '../model/clients.ts';
import type { Metrics } from '../observability/metrics.ts';
import { defaultProfileRecords, type ProfileLifetimes } from '../model/profiles.ts';
import { GRANT_TYPES } from '../oauth/grants/index.ts';
import type {
  ApprovalStorage,
  AuditStorage,
  ClientStorage,
  HandleStorage,
  ProfileStorage,
  QuotaStorage,
  SubjectCutoffStorage,
  SubjectStorage,
  TokenStorage,
  UpstreamCredentialStorage,
} from '../store/types.ts';
import { limitKey } from '../model/net-address.ts';
import { quotaCounterName, quotaFor, type Quotas } from '../policy/quotas.ts';
import { pageOfGrants, SUBJECT_REVOCATION_BATCH, REBUILD_BATCH } from '../model/person-grants.ts';
import type { CredentialVault } from '../upstream-credentials/vault.ts';
import { ADMIN_OPERATIONS, type OperationName } from './declarations.ts';
import { readArguments, type ArgsOf, type Fields, type OperationSpec } from './spec.ts';

/** The parts of the store the admin operations use. */
export type AdminStore = TokenStorage &
  ClientStorage &
  ProfileStorage &
  AuditStorage &
  QuotaStorage &
  SubjectStorage &
  SubjectCutoffStorage &
  HandleStorage &
  UpstreamCredentialStorage &
  ApprovalStorage;

export interface AdminContext {
  store: AdminStore;
  clock: Clock;
  metrics: Metrics;
  /** For explainPolicy: the master token is a principal of its own. */
  masterToken?: MasterToken;
  /** The per-tool policy (explainPolicy); undefined when none is configured. */
  policy?: Policy | undefined;
  /** The quotas (explainPolicy shows the one that applies), and how per-address quotas count an IPv6 client. */
  quotas?: { quotas: Quotas; ipv6PrefixLength: number } | undefined;
  /** The configured lifetimes of the built-in profiles (seedDefaultProfiles stores them). */
  profileLifetimes?: ProfileLifetimes | undefined;
  /** The kept upstream credentials; undefined while `upstream.credentials.mode` is none. */
  upstreamCredentials?: CredentialVault | undefined;
  /** The identity providers' issuers (the IDP_* one as `defaultIssuer`): a person is (issuer, subject). */
  people?: AdminPeople | undefined;
}

/** Which issuers name people: with several, offboarding must name one. */
export interface AdminPeople {
  defaultIssuer: string | undefined;
  issuers: readonly string[];
}

/** `audit`: what the operation acted on, for its audit event (never a secret; token hashes are cut to 8 hex). */
export type AdminResult = {
  status: number;
  body: unknown;
  audit?: Pick<AuditInput, 'clientId' | 'tokenHashPrefix' | 'subject' | 'detail'>;
};
export type AdminOperation = (ctx: AdminContext, body: Record<string, unknown>) => Promise<AdminResult>;

/** A token's SHA-256, from `token` (hashed here) or `tokenHash`: the declaration lets exactly one through. */
function tokenHashOf(args: { token: string | undefined; tokenHash: string | undefined }): string {
  return args.token !== undefined ? hashToken(args.token) : args.tokenHash!;
}

type Handlers = {
  [K in OperationName]: (ctx: AdminContext, args: ArgsOf<(typeof ADMIN_OPERATIONS)[K]['fields']>) => Promise<AdminResult>;
};

/** Most approvals listApprovals reads (the newest). */
const MAX_APPROVALS_LISTED = 1000;

const handlers: Handlers = {
  async createClient(ctx, args) {
    const { client, clientSecret } = await provisionClient(ctx.store, ctx.clock, args, 'admin', GRANT_TYPES);
    return { status: 201, body: { ...publicClient(client), clientSecret }, audit: { clientId: client.clientId } };
  },

  async listClients(ctx) {
    const clients = await ctx.store.listClients();
    return { status: 200, body: { clients: clients.map(publicClient) }, audit: { detail: { count: clients.length } } };
  },

  async deleteClient(ctx, { clientId }) {
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

  async createAccessToken(ctx, { clientId, lifetimeSeconds: lifetime, scope }) {
    const accessToken = generateTokenFor(clientId);
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

  async revokeUserToken(ctx, args) {
    const tokenHash = tokenHashOf(args);
    if (!(await ctx.store.revokeUserToken(tokenHash))) throw new HttpError('not_found');
    ctx.metrics.tokensRevoked.labels('user').inc();
    return { status: 200, body: { tokenHash, revoked: true }, audit: { tokenHashPrefix: tokenHash } };
  },

  /**
   * A person's or a client's grants, one per refresh family, standalone access token or user-grade
   * token: a page of `limit`, from `cursor` on, with the cursor of the next page while there is one.
   */
  async listGrants(ctx, { subject, issuer, clientId, limit, cursor }) {
    const now = ctx.clock.now();
    if (clientId !== undefined && (await ctx.store.getClient(clientId)) === null) throw new HttpError('not_found');
    const listed =
      subject !== undefined ? await ctx.store.listSubjectTokens(subject, now, issuer) : await ctx.store.listClientTokens(clientId!, now);
    const tokens = issuer === undefined ? listed : listed.filter((t) => t.issuer === issuer);
    const page = await pageOfGrants(
      ctx.store,
      clientId === undefined ? tokens : tokens.filter((t) => t.clientId === clientId),
      limit,
      cursor,
    );
    return {
      status: 200,
      body: page,
      audit: {
        ...(subject === undefined ? {} : { subject }),
        ...(clientId === undefined ? {} : { clientId }),
        detail: { count: page.grants.length, ...(issuer === undefined ? {} : { issuer }) },
      },
    };
  },

  /**
   * Offboarding: everything the person holds ends at once (tokens revoked, approvals and session
   * handles forgotten, open streams ended through the revocation notices). Idempotent.
   */
  async revokeSubject(ctx, { subject, issuer }) {
    const issuers = ctx.people?.issuers ?? [];
    // Two providers' people may share a `sub`: offboarding one of them must say which.
    if (issuer === undefined && issuers.length > 1)
      throw new HttpError('invalid_request', `issuer is required: several identity providers are configured (${issuers.join(', ')})`);
    const { body, detail } = await offboardSubject(ctx, subject, issuer);
    return { status: 200, body, audit: { subject, detail } };
  },

  /** Indexes records written before the subject index existed. */
  async rebuildSubjectIndex(ctx) {
    const rebuilt = await ctx.store.rebuildSubjectIndex(ctx.clock.now(), REBUILD_BATCH);
    return { status: 200, body: rebuilt, audit: { detail: { ...rebuilt } } };
  },

  /**
   * Dry run of the per-tool policy: what a call (`method`, `name`) made with a token (`token` or
   * `tokenHash`, as it stands in the store now) would get, which rule decides, and why.
   */
  async explainPolicy(ctx, args) {
    const tokenHash = tokenHashOf(args);
    const { method, name } = args;
    let principal: Principal;
    if (ctx.masterToken?.matchesHash(tokenHash) === true) principal = { kind: 'master', subject: 'master' };
    else {
      const decision = decideToken(tokenHash, await ctx.store.lookupToken(tokenHash), ctx.clock.now(), ctx.people?.defaultIssuer);
      if (!decision.ok)
        return {
          status: 200,
          body: { effect: 'deny', decidedBy: 'token', reason: `the token is ${decision.reason}: every request gets 401` },
          audit: { tokenHashPrefix: tokenHash },
        };
      principal = decision.principal;
    }
    const answer = explainCall(ctx.policy, principal, {
      method,
      name,
      ...(args.arguments === undefined ? {} : { arguments: args.arguments }),
    });
    const quota = await explainQuota(ctx, principal, { method, name }, args.address);
    return {
      status: 200,
      body: { ...answer, ...(quota ? { quota } : {}) },
      audit: { tokenHashPrefix: tokenHash, detail: { method, effect: answer.effect } },
    };
  },

  /** Every kept upstream credential rewritten under the current key: counts only, never a token. */
  async reencryptUpstreamCredentials(ctx) {
    if (ctx.upstreamCredentials === undefined)
      throw new HttpError(
        'invalid_request',
        'upstream credentials are off (upstream.credentials.mode is none): nothing is kept to re-encrypt',
      );
    const result = await ctx.upstreamCredentials.reencryptAll();
    return { status: 200, body: result, audit: { detail: { ...result } } };
  },

  /** The newest audit events (empty when `audit.stream` is off), newest first. */
  async listApprovals(ctx, { state, subject }) {
    const all = await ctx.store.listApprovals(ctx.clock.now(), MAX_APPROVALS_LISTED);
    const approvals = all
      .filter((a) => (state === undefined || a.state === state) && (subject === undefined || a.subject === subject))
      .map(({ arguments: _, approvers: __, notSelf: ___, reason: ____, rule: _____, ...shown }) => shown);
    return { status: 200, body: { approvals }, audit: { detail: { count: approvals.length } } };
  },

  async decideApproval(ctx, { approvalId, decision, reason }) {
    if (decision === undefined) throw new HttpError('invalid_request', 'decision must be approve or deny');
    if (!/^[0-9a-f]{32}$/.test(approvalId)) throw new HttpError('not_found', 'no such approval');
    const now = ctx.clock.now();
    const outcome = await ctx.store.decideApproval(approvalId, now, { approve: decision === 'approve', by: 'admin', reason });
    if ('refusal' in outcome) {
      if (outcome.refusal === 'not_found') throw new HttpError('not_found', 'no such approval');
      throw new HttpError('invalid_request', `the approval is ${outcome.refusal === 'expired' ? 'expired' : 'no longer pending'}`);
    }
    const record = await ctx.store.getApproval(approvalId);
    if (record !== null && record !== 'corrupt') ctx.metrics.approvals.labels(record.rule, outcome.state).inc();
    return {
      status: 200,
      body: { approvalId, state: outcome.state },
      audit: { detail: { approvalId, decision, event: 'approval_decided' } },
    };
  },

  async listAuditEvents(ctx, { count }) {
    const events = await ctx.store.listAuditEvents(count);
    return { status: 200, body: { events }, audit: { detail: { count: events.length } } };
  },
};

/**
 * Everything a person holds ends at once: what `revokeSubject` does, and what the directory's
 * deactivation of a person does (src/admin/scim/). `detail`: the counts, for an audit event.
 */
export async function offboardSubject(
  ctx: Pick<AdminContext, 'store' | 'clock' | 'metrics' | 'people'>,
  subject: string,
  issuer: string | undefined,
): Promise<{ body: Record<string, unknown> & { subject: string }; detail: Record<string, string | number> }> {
  const now = ctx.clock.now();
  // The cut-off first: what is pending for the person (codes, device approvals, account sessions,
  // connect links and flows) is refused from here on, and what a redemption writes after the index
  // is revoked below finds it (model/offboarding.ts).
  await ctx.store.markSubjectRevoked(subject, issuer, now, now + SUBJECT_CUTOFF_KEPT_MS);
  const revoked = await ctx.store.revokeSubject(subject, issuer, now, SUBJECT_REVOCATION_BATCH);
  // Handles are indexed by the person (model/person.ts): the subject alone for the default provider's.
  const issuers = ctx.people?.issuers ?? [];
  const defaultIssuer = ctx.people?.defaultIssuer;
  const handleIssuer = issuer ?? (issuers.length === 1 ? issuers[0]! : (defaultIssuer ?? ''));
  const handlesForgotten = await ctx.store.forgetSubjectHandles(personKey({ issuer: handleIssuer, subject }, defaultIssuer));
  // The credentials kept for the person at the upstream (connected accounts, IdP tokens) go too; the
  // audit event names their providers (never a token).
  const providers = (await ctx.store.listSubjectUpstreamCredentials(subject))
    .filter((c) => issuer === undefined || c.issuer === issuer)
    .map((c) => c.provider);
  const connectedAccountsDeleted = await ctx.store.deleteUpstreamCredentials(subject, issuer);
  const approvalsCancelled = await ctx.store.cancelSubjectApprovals(subject, issuer, now);
  ctx.metrics.tokensRevoked.labels('oauth_access').inc(revoked.accessTokensRevoked);
  ctx.metrics.tokensRevoked.labels('oauth_refresh').inc(revoked.refreshTokensRevoked);
  ctx.metrics.tokensRevoked.labels('user').inc(revoked.userTokensRevoked);
  const body = { subject, ...revoked, connectedAccountsDeleted, handlesForgotten, approvalsCancelled };
  const { subject: _, ...counts } = body;
  const disconnected: Record<string, string> =
    providers.length === 0 ? {} : { upstreamCredentialsDisconnected: [...new Set(providers)].sort().join(' ') };
  return { body, detail: { ...counts, ...(issuer === undefined ? {} : { issuer }), ...disconnected } };
}

/**
 * The quota that would count the call (the first matching rule), and what is left of it now: read, never
 * taken. A per-address rule needs the client's `address`; without it only the rule is shown.
 */
async function explainQuota(
  ctx: AdminContext,
  principal: Principal,
  call: { method: string; name: string | undefined },
  address: string | undefined,
) {
  if (ctx.quotas === undefined) return undefined;
  const match = quotaFor(
    ctx.quotas.quotas,
    {
      principal,
      address: address === undefined ? '' : limitKey(address, ctx.quotas.ipv6PrefixLength),
      defaultIssuer: ctx.people?.defaultIssuer,
    },
    call,
  );
  if (match === undefined) return undefined;
  const { label, per, limit, windowSeconds } = match.rule;
  const shown = { rule: label, per, limit, windowSeconds };
  if (per === 'address' && address === undefined)
    return { ...shown, note: 'counted per client address: give `address` to see what is left' };
  const read = await ctx.store.takeQuota(quotaCounterName(match), 0, limit, windowSeconds * 1000, ctx.clock.now());
  return { ...shown, used: read.used, remaining: Math.max(0, limit - read.used), resetAt: new Date(read.resetAt).toISOString() };
}

/** An operation's handler behind its declaration: the body is read against the fields first (400 `invalid_request`). */
function declared(name: OperationName): AdminOperation {
  const spec: OperationSpec = ADMIN_OPERATIONS[name];
  // The handler of `name` takes the arguments of `name`'s declaration (Handlers says so, key by key).
  const handle = handlers[name] as (ctx: AdminContext, args: ArgsOf<Fields>) => Promise<AdminResult>;
  return (ctx, body) => {
    const read = readArguments(spec, body);
    if (!read.ok) throw new HttpError('invalid_request', read.problem);
    return handle(ctx, read.args);
  };
}

export const adminOperations: Readonly<Record<string, AdminOperation>> = Object.freeze(
  Object.fromEntries(Object.keys(ADMIN_OPERATIONS).map((name) => [name, declared(name as OperationName)])),
);
