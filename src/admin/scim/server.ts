// SCIM 2.0 (RFC 7643, RFC 7644) on the admin listener at `/scim/v2`: the directory (Entra ID, Okta)
// creates, finds, changes and deletes the people of one identity provider (`scim.provider`). Its own
// bearer token (SCIM_TOKEN), checked before anything else: the master token does not open SCIM, and
// the SCIM token opens nothing else. A person made inactive or deleted is offboarded at once, as
// `revokeSubject` does (src/admin/operations.ts), and refused at sign-in (src/oauth/directory-gate.ts).

import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpError, httpErrorFor, methodNotAllowed, writeJsonText } from '../../http/errors.ts';
import { parseJsonObject, readBody } from '../../http/body.ts';
import { normalizeAddress } from '../../model/net-address.ts';
import type { FailedAuthLimiter } from '../../http/rate-limits.ts';
import type { Route } from '../../http/serve.ts';
import type { Clock } from '../../model/clock.ts';
import { parseAuthorization, type MasterToken } from '../../model/credentials.ts';
import { leftInactive, userNameKey, type DirectoryChange, type DirectoryUser } from '../../model/directory.ts';
import type { Audit } from '../../observability/audit.ts';
import type { Metrics } from '../../observability/metrics.ts';
import type { DirectoryStorage } from '../../store/types.ts';
import { offboardSubject, type AdminContext, type AdminStore } from '../operations.ts';
import { discovery, MAX_RESULTS, serviceProviderConfig } from './discovery.ts';
import { invalidSyntax, SCIM_MEDIA_TYPE, scimError } from './errors.ts';
import { parseUserFilter } from './filter.ts';
import { applyPatch } from './patch.ts';
import { checkedId, listResponse, pageParameter, readUserBody, userResource } from './resource.ts';

/** Where SCIM lives on the admin listener; every resource's location is under it. */
export const SCIM_BASE = '/scim/v2';

export interface ScimDeps {
  store: AdminStore & DirectoryStorage;
  clock: Clock;
  metrics: Metrics;
  audit: Audit;
  /** The SCIM token (compared in constant time, as the master token is). */
  token: MasterToken;
  /** `scim.match`, `scim.provider`, and the provider's issuer (what a deactivation revokes under). */
  match: 'sub' | 'email';
  provider: string;
  issuer: string | undefined;
  maxBodyBytes: number;
  /** Failed attempts per peer address (shared with the admin operations); undefined: off. */
  failures?: FailedAuthLimiter | undefined;
  /** The identity providers' issuers: a person's handles are named per person (model/person.ts). */
  people?: AdminContext['people'];
}

type Operation = 'createUser' | 'getUser' | 'findUsers' | 'replaceUser' | 'patchUser' | 'deleteUser' | 'discovery' | 'unknown';

interface Answer {
  status: number;
  body?: unknown;
  /** What the audit event records, besides the status. */
  detail?: Record<string, string | number | boolean>;
  user?: DirectoryUser;
}

const UNAUTHORIZED = scimError(401, 'the SCIM token is missing or wrong');

/** The route of `/scim/v2/*` on the admin listener. */
export function scimRoute(deps: ScimDeps): Route {
  const { metrics, audit } = deps;
  return {
    path: `${SCIM_BASE}/*`,
    methods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'],
    async handler(req, res, path) {
      let operation: Operation = 'unknown';
      let authenticated = false;
      try {
        if (!deps.token.matches(bearerOf(req))) {
          await deps.failures?.failed(normalizeAddress(req.socket.remoteAddress));
          throw UNAUTHORIZED;
        }
        authenticated = true;
        const rest = path.slice(SCIM_BASE.length);
        operation = operationOf(req.method ?? '', rest);
        const answer = await dispatch(deps, req, rest, operation);
        metrics.scimRequests.labels(operation, String(answer.status)).inc();
        const event = {
          who: 'scim',
          action: `scim.${operation}`,
          result: 'ok',
          ...subjectOf(deps, answer.user),
          detail: { status: answer.status, ...answer.detail },
        };
        if (req.method === 'GET') audit.logOnly(event);
        else await audit.record(event);
        writeScim(res, answer);
      } catch (err) {
        // As the listener will answer it: a store outage 503, a bug 500 (serve's error mapper logs them).
        const status = httpErrorFor(err).status;
        metrics.scimRequests.labels(operation, String(status)).inc();
        const event = {
          who: authenticated ? 'scim' : 'anonymous',
          action: `scim.${operation}`,
          result: err instanceof HttpError ? err.code : 'server_error',
          detail: { status },
        };
        if (authenticated && status < 500) await audit.record(event);
        else audit.logOnly(event);
        throw err;
      }
    },
  };
}

function bearerOf(req: IncomingMessage): string {
  const header = parseAuthorization(req.rawHeaders);
  return header.kind === 'token' && header.scheme === 'bearer' ? header.token : '';
}

/** The audit event's subject: the IdP `sub` a userName carries when that is what it carries. */
function subjectOf(deps: ScimDeps, user: DirectoryUser | undefined): { subject?: string } {
  return deps.match === 'sub' && user !== undefined ? { subject: user.userName } : {};
}

function writeScim(res: ServerResponse, answer: Answer): void {
  if (answer.body === undefined) {
    res.writeHead(answer.status, { 'cache-control': 'no-store', 'content-length': '0' });
    res.end();
    return;
  }
  const headers: Record<string, string> = { 'content-type': SCIM_MEDIA_TYPE };
  if (answer.status === 201 && answer.user !== undefined) headers.location = `${SCIM_BASE}/Users/${answer.user.id}`;
  writeJsonText(res, answer.status, JSON.stringify(answer.body), headers);
}

const USERS = /^\/Users\/([^/]+)$/;

function operationOf(method: string, rest: string): Operation {
  if (rest === '/ServiceProviderConfig' || /^\/(ResourceTypes|Schemas)(\/[^/]+)?$/.test(rest)) return 'discovery';
  if (rest === '/Users') return method === 'POST' ? 'createUser' : method === 'GET' ? 'findUsers' : 'unknown';
  if (USERS.test(rest)) {
    const byMethod: Record<string, Operation> = { GET: 'getUser', PUT: 'replaceUser', PATCH: 'patchUser', DELETE: 'deleteUser' };
    return byMethod[method] ?? 'unknown';
  }
  return 'unknown';
}

async function dispatch(deps: ScimDeps, req: IncomingMessage, rest: string, operation: Operation): Promise<Answer> {
  const method = req.method ?? '';
  const query = new URLSearchParams((req.url ?? '').split('?')[1] ?? '');
  if (operation === 'discovery') {
    if (method !== 'GET') throw methodNotAllowed('GET');
    if (rest === '/ServiceProviderConfig') return { status: 200, body: serviceProviderConfig(SCIM_BASE) };
    const [, kind, id] = rest.split('/');
    return {
      status: 200,
      body: discovery(kind as 'ResourceTypes' | 'Schemas', id === undefined ? undefined : decodeURIComponent(id), SCIM_BASE),
    };
  }
  if (operation === 'unknown') {
    if (rest === '/Users') throw methodNotAllowed('GET, POST');
    if (USERS.test(rest)) throw methodNotAllowed('GET, PUT, PATCH, DELETE');
    throw scimError(404, 'no such resource');
  }
  if (operation === 'findUsers') return findUsers(deps, query);
  if (operation === 'createUser') return createUser(deps, await readScimBody(req, deps.maxBodyBytes));
  const id = checkedId(USERS.exec(rest)![1]!);
  if (operation === 'getUser') {
    const user = await deps.store.getDirectoryUser(id);
    if (user === null || user === 'corrupt' || user.deletedAt !== undefined || user.provider !== deps.provider)
      throw scimError(404, 'no such user');
    return { status: 200, body: userResource(user, SCIM_BASE), user };
  }
  if (operation === 'deleteUser') return deleteUser(deps, id);
  const body = await readScimBody(req, deps.maxBodyBytes);
  const change = (user: DirectoryUser): DirectoryUser => {
    if (user.provider !== deps.provider) throw scimError(404, 'no such user');
    return operation === 'patchUser' ? applyPatch(user, body) : replaced(user, body);
  };
  return changed(deps, await deps.store.updateDirectoryUser(id, change, deps.clock.now()), 200);
}

/** PUT: the user as sent, with what this server owns (id, times) kept; attributes not sent are cleared. */
function replaced(user: DirectoryUser, body: Record<string, unknown>): DirectoryUser {
  const read = readUserBody(body);
  const next: DirectoryUser = { ...user, ...read };
  if (read.externalId === undefined) delete next.externalId;
  return next;
}

/** A bounded body of SCIM's media type (application/json accepted too, as both directories may send it). */
async function readScimBody(req: IncomingMessage, max: number): Promise<Record<string, unknown>> {
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== SCIM_MEDIA_TYPE && type !== 'application/json') throw invalidSyntax(`the body must be ${SCIM_MEDIA_TYPE}`);
  const raw = await readBody(req, max);
  try {
    return parseJsonObject(raw);
  } catch {
    throw invalidSyntax('the body must be a JSON object');
  }
}

async function findUsers(deps: ScimDeps, query: URLSearchParams): Promise<Answer> {
  const filter = query.get('filter');
  const startIndex = pageParameter(query.get('startIndex'), 1, 1, Number.MAX_SAFE_INTEGER);
  const count = pageParameter(query.get('count'), MAX_RESULTS, 0, MAX_RESULTS);
  if (filter === null) {
    // Okta's connection test lists the users (`?startIndex=1&count=2`); the directories otherwise filter.
    const { total, users } = await deps.store.listDirectoryUsers(deps.provider, startIndex - 1, count);
    return {
      status: 200,
      body: { ...listResponse(users, SCIM_BASE, 1, count), totalResults: total, startIndex },
      detail: { results: users.length },
    };
  }
  const { index, value } = parseUserFilter(filter);
  const user = await deps.store.findDirectoryUser(deps.provider, index, value);
  const found = user !== null && user !== 'corrupt' && user.deletedAt === undefined ? [user] : [];
  return { status: 200, body: listResponse(found, SCIM_BASE, startIndex, count), detail: { results: found.length } };
}

async function createUser(deps: ScimDeps, body: Record<string, unknown>): Promise<Answer> {
  const now = deps.clock.now();
  const user: DirectoryUser = {
    id: randomUUID(),
    provider: deps.provider,
    ...readUserBody(body),
    createdAt: now,
    updatedAt: now,
    version: 1,
  };
  return changed(deps, await deps.store.createDirectoryUser(user), 201);
}

async function deleteUser(deps: ScimDeps, id: string): Promise<Answer> {
  const before = await deps.store.getDirectoryUser(id);
  if (before !== null && before !== 'corrupt' && before.provider !== deps.provider) throw scimError(404, 'no such user');
  const change = await deps.store.deleteDirectoryUser(id, deps.clock.now());
  // A second DELETE (a directory's retry) answers as the first did.
  if (change.outcome === 'deleted_before') return { status: 204, ...(await offboard(deps, change)), user: change.before };
  const answer = await changed(deps, change, 204);
  return { ...answer, body: undefined };
}

/** The answer to a create or change, after its effect on the person's access. */
async function changed(deps: ScimDeps, change: DirectoryChange, status: number): Promise<Answer> {
  if (change.outcome === 'not_found' || change.outcome === 'deleted_before') throw scimError(404, 'no such user');
  if (change.outcome === 'conflict') throw scimError(409, 'a user with this userName exists', 'uniqueness');
  const effect = await offboard(deps, change);
  return {
    status,
    body: userResource(change.after, SCIM_BASE),
    user: change.after,
    detail: { id: change.after.id, active: change.after.active, ...effect.detail },
  };
}

/**
 * A person the change leaves inactive (or deleted) loses everything at once, as `revokeSubject` takes
 * it: each identity the userName names (its `sub`, or, by email, everyone seen signing in with it).
 */
async function offboard(deps: ScimDeps, change: DirectoryChange): Promise<{ detail: Record<string, string | number | boolean> }> {
  const user = leftInactive(change);
  if (user === undefined) return { detail: {} };
  const identities =
    deps.match === 'sub'
      ? [{ subject: user.userName, issuer: deps.issuer }]
      : await deps.store.linkedDirectoryIdentities(deps.provider, userNameKey(user.userName));
  const totals: Record<string, number> = {};
  for (const identity of identities) {
    const { detail } = await offboardSubject(deps, identity.subject, identity.issuer);
    for (const [key, value] of Object.entries(detail)) if (typeof value === 'number') totals[key] = (totals[key] ?? 0) + value;
  }
  deps.metrics.scimDeactivations.inc();
  return { detail: { offboarded: identities.length, ...totals } };
}
