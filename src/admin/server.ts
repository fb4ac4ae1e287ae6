// The admin listener (loopback by default): `POST /oauth/<operation>` with a JSON body, gated by the
// master token (`callerToken` in the body or `Authorization: Bearer`), plus unauthenticated
// `GET /livez`, `GET /readyz` and `GET /metrics`. Order of checks: method, size, JSON, master token,
// operation, arguments; so a caller without the master token learns nothing about operations.
// Every operation, refused or done, is one audit event (src/observability/audit.ts).

import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Clock } from '../model/clock.ts';
import { hashToken, isTokenShaped, parseAuthorization, type MasterToken } from '../model/credentials.ts';
import type { Audit, AuditInput } from '../observability/audit.ts';
import { HttpError, httpErrorFor, storeUnavailable, writeJson } from '../http/errors.ts';
import type { Logger } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import type { DirectoryStorage, StoreHealth } from '../store/types.ts';
import { serve } from '../http/serve.ts';
import { adminOperations, type AdminContext, type AdminStore } from './operations.ts';
import type { Policy } from '../policy/rules.ts';
import type { ProfileLifetimes } from '../model/profiles.ts';
import { normalizeAddress } from '../model/net-address.ts';
import { isFailureRefusal, type FailedAuthLimiter } from '../http/rate-limits.ts';
import { parseJsonObject, readBody } from '../http/body.ts';
import type { CredentialVault } from '../upstream-credentials/vault.ts';
import { asScimError } from './scim/errors.ts';
import { SCIM_BASE, scimRoute, type ScimDeps } from './scim/server.ts';

export interface AdminDeps extends AdminOverrides {
  store: AdminStore & DirectoryStorage & StoreHealth;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  audit: Audit;
  masterToken: MasterToken;
  maxBodyBytes: number;
  /** The per-tool policy, for `explainPolicy`; undefined when none is configured. */
  policy?: Policy | undefined;
  /** The quotas, for `explainPolicy` (what is left); undefined when none are configured. */
  quotas?: AdminContext['quotas'];
  /** The configured lifetimes of the built-in profiles, for `seedDefaultProfiles`. */
  profileLifetimes?: ProfileLifetimes | undefined;
  /** The kept upstream credentials, for `reencryptUpstreamCredentials`; undefined while the mode is none. */
  upstreamCredentials?: CredentialVault | undefined;
  /** The identity providers' issuers (revokeSubject requires one when there are several). */
  people?: AdminContext['people'];
  /** Failed master-token attempts per peer address (shared through the store); undefined: off. */
  failures?: FailedAuthLimiter | undefined;
  /** SCIM for the directory, with its own token; undefined: off (`/scim/v2` answers 404). */
  scim?: Pick<ScimDeps, 'token' | 'match' | 'provider' | 'issuer'> | undefined;
}

/** What a primary of worker processes answers instead of its own process's view. */
export interface AdminOverrides {
  /** The `/metrics` text (the primary's registry summed with every worker's). */
  scrape?: () => Promise<string>;
  /** Why the process group is not ready (workers not all listening); undefined when it is. */
  notReady?: () => string | undefined;
}

const UNAUTHORIZED = new HttpError('unauthorized');
/** `POST /oauth/<operation>`. */
const OPERATIONS = '/oauth/';

export function createAdminServer(deps: AdminDeps): Server {
  const { store, logger, metrics, masterToken, audit } = deps;

  function isMaster(req: IncomingMessage, body: Record<string, unknown>): boolean {
    const header = parseAuthorization(req.rawHeaders);
    // Both checks always run, so the time taken does not say which form was tried.
    const viaHeader = masterToken.matches(header.kind === 'token' && header.scheme === 'bearer' ? header.token : '');
    const viaBody = masterToken.matches(body.callerToken);
    return viaHeader || viaBody;
  }

  async function operation(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const name = path.slice(OPERATIONS.length);
    const known = Object.hasOwn(adminOperations, name);
    let who = 'anonymous';
    let body: Record<string, unknown> = {};
    // The peer itself: the admin listener sits behind no proxy whose forwarding headers it could trust.
    const address = normalizeAddress(req.socket.remoteAddress);
    try {
      body = parseJsonObject(await readBody(req, deps.maxBodyBytes));
      // The right token is always served; a wrong one from an address past the limit gets a bare 429.
      if (!isMaster(req, body)) {
        await deps.failures?.failed(address);
        throw UNAUTHORIZED;
      }
      who = 'master';
      delete body.callerToken;
      const op = known ? adminOperations[name] : undefined;
      if (!op) throw new HttpError('not_found');
      const { policy, quotas, profileLifetimes, upstreamCredentials, people } = deps;
      const context = { store, clock: deps.clock, metrics, masterToken, policy, quotas, profileLifetimes, upstreamCredentials, people };
      const result = await op(context, body);
      metrics.adminOperations.labels(name, String(result.status)).inc();
      await audit.record({ who, action: name, result: 'ok', ...result.audit, detail: { status: result.status, ...result.audit?.detail } });
      writeJson(res, result.status, result.body);
    } catch (err) {
      // A failure refused past the limit costs no audit line: a scanner's flood stays out of the log.
      if (isFailureRefusal(err)) throw err;
      const answer = httpErrorFor(err);
      // An unauthenticated caller's operation name and body are not echoed into the trail.
      const target = who === 'master' ? auditTarget(body) : {};
      void audit.record({ who, action: known ? name : 'unknown', result: answer.code, ...target, detail: { status: answer.status } });
      throw err;
    }
  }

  async function readyz(_req: IncomingMessage, res: ServerResponse): Promise<void> {
    // Not ready is this probe's answer, not a failure: no error log, no store-error count.
    try {
      await store.ping();
    } catch (err) {
      throw storeUnavailable(err);
    }
    const workers = deps.notReady?.();
    if (workers !== undefined) return writeJson(res, 503, { status: 'unavailable', store: 'ok', workers });
    writeJson(res, 200, { status: 'ok', store: 'ok' });
  }

  async function scrape(_req: IncomingMessage, res: ServerResponse): Promise<void> {
    const text = await (deps.scrape ?? (() => metrics.registry.metrics()))();
    res.setHeader('content-type', metrics.registry.contentType);
    res.end(text);
  }

  const server = serve({
    name: 'admin',
    logger,
    // connectionsCheckingInterval: Node checks both timeouts only every 30 s by default.
    http: { requestTimeout: 15000, headersTimeout: 10000, maxHeaderSize: 16384, connectionsCheckingInterval: 1000 },
    routes: [
      { path: `${OPERATIONS}*`, methods: ['POST'], handler: operation },
      { path: '/livez', methods: ['GET'], handler: (_req, res) => writeJson(res, 200, { status: 'ok' }) },
      { path: '/readyz', methods: ['GET'], handler: readyz },
      { path: '/metrics', methods: ['GET'], handler: scrape },
      ...(deps.scim === undefined
        ? []
        : [
            scimRoute({
              ...deps.scim,
              store,
              clock: deps.clock,
              metrics,
              audit,
              maxBodyBytes: deps.maxBodyBytes,
              failures: deps.failures,
              people: deps.people,
            }),
          ]),
    ],
    onStoreUnavailable: () => metrics.storeErrors.inc(),
    answerAs: (answer, path) => (deps.scim !== undefined && path.startsWith(`${SCIM_BASE}/`) ? asScimError(answer) : answer),
    onErrorAnswer(answer, path) {
      if (!path.startsWith(OPERATIONS)) return;
      const name = path.slice(OPERATIONS.length);
      metrics.adminOperations.labels(Object.hasOwn(adminOperations, name) ? name : 'unknown', String(answer.status)).inc();
    },
  });
  return server;
}

/** What a refused operation was about, from its arguments: the client, or the token (as a hash prefix). */
function auditTarget(body: Record<string, unknown>): Pick<AuditInput, 'clientId' | 'tokenHashPrefix'> {
  const out: Pick<AuditInput, 'clientId' | 'tokenHashPrefix'> = {};
  if (typeof body.clientId === 'string') out.clientId = body.clientId; // kept only if shaped like one (Audit.record)
  if (typeof body.tokenHash === 'string' && isTokenShaped(body.tokenHash)) out.tokenHashPrefix = body.tokenHash;
  else if (typeof body.token === 'string' && isTokenShaped(body.token)) out.tokenHashPrefix = hashToken(body.token);
  return out;
}
