// The proxy listener. What happens to a request reads top to bottom:
// route (the table) -> decide (src/proxy/decide.ts: admit (src/proxy/authenticate.ts: Host, then the
// token: parse the Authorization header -> a DPoP proof checked -> master check or SHA-256 -> one store
// round trip -> decide), the session, the upstream credential, the policy: one decision, a value) ->
// render it: /mcp (src/proxy/mcp-handler.ts): rewrite identity headers, stream to the upstream; or /authz
// (src/proxy/forward-auth.ts, forward-auth on): answer the ingress that holds the request; or
// /authz-connect (forward-auth and upstream credentials on): take on a request the ingress hands over.
// Nothing reaches the upstream before the decision, and a store failure answers 503 (fail closed).
// What the sidecar learns about a request (principal, denial, upstream status) lives on its ProxyRequest.
// The handlers take their dependencies explicitly (a ProxyContext, built once here).

import type { IncomingMessage, Server, ServerOptions, ServerResponse } from 'node:http';
import type { Config } from '../config/load.ts';
import { writeJson, type ErrorCode } from '../http/errors.ts';
import { cannedStatus, loggedPath, pathOf, serve, type CannedStatus, type Route } from '../http/serve.ts';
import { AUTHZ_PATH, CONNECT_ANSWER_PATH, handleAuthz, handleConnectAnswer } from './forward-auth.ts';
import { accessLogger, NO_ACCESS_FIELDS, type AccessLog } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import type { StoreHealth } from '../store/types.ts';
import { ProxyRequest } from './request.ts';
import { withTrace } from '../observability/tracing.ts';
import { admit, traceparentOf } from './authenticate.ts';
import { proxyContext, type ProxyContext, type ProxyDeps } from './context.ts';
import { countOutcome, isDecision, settle } from './decision.ts';
import { handleMcp } from './mcp-handler.ts';
import { upstreamAnswers } from './upstream-check.ts';

export type { ProxyDeps, UpstreamCredentialsOnProxy } from './context.ts';
export { identityHeaders } from './identity-headers.ts';

export function createProxyServer(deps: ProxyDeps): Server {
  const ctx = proxyContext(deps);
  const { config, metrics } = ctx;
  const access = accessLogger(deps.logger);
  // One handler function per route, made once: a request allocates no closure here.
  const mcp = (req: ProxyRequest, res: ServerResponse, path: string) => handleMcp(ctx, req, res, path);
  const authz = (req: ProxyRequest, res: ServerResponse, path: string) => handleAuthz(ctx, req, res, path);
  const connectAnswer = (req: ProxyRequest, res: ServerResponse) => handleConnectAnswer(ctx, req, res);
  const health = (req: ProxyRequest, res: ServerResponse) => handleHealth(ctx, req, res);
  const isOAuthPath = routeMatcher(deps.routes ?? []);

  return serve({
    name: 'proxy',
    logger: deps.logger,
    request: ProxyRequest,
    http: listenerLimits(config),
    routes: [
      { path: '/mcp', methods: 'any', handler: mcp },
      { path: '/health', methods: ['GET'], handler: health },
      ...(config.proxy.forwardAuth
        ? ([
            { path: AUTHZ_PATH, methods: 'any', handler: authz },
            { path: `${AUTHZ_PATH}/*`, methods: 'any', handler: authz },
          ] satisfies Route<ProxyRequest>[])
        : []),
      ...(config.proxy.forwardAuth && ctx.upstreamCredentials !== undefined
        ? ([{ path: CONNECT_ANSWER_PATH, methods: 'any', handler: connectAnswer }] satisfies Route<ProxyRequest>[])
        : []),
      ...(deps.routes ?? []).map((route) => traced(ctx, counted(route, metrics))),
    ],
    onClose(req, res) {
      const canned = res.headersSent ? undefined : cannedAnswer(req);
      // Node's own answer: counted as a refusal under its code, unless a decision was counted first.
      if (canned !== undefined) countOutcome(metrics, req, 'refused', canned.code);
      const status = res.headersSent ? res.statusCode : canned?.status;
      req.trace?.end(status, req.upstreamStatus);
      if (!req.unlogged) accessLog(access, req, res, status);
    },
    // What no decision counted (decision.ts): the store failing, an unknown path, an OAuth route's
    // error answer (its outcome is `oauth`, whatever it answered), and any other error answer (a
    // refusal before any decision, a bug) under its code.
    onStoreUnavailable(req) {
      metrics.storeErrors.inc();
      countOutcome(metrics, req, 'unavailable');
    },
    onNotFound: (req) => countOutcome(metrics, req, 'not_found'),
    // Node's own answer before any request object: counted and logged as a refusal under its code.
    onEarlyRefusal(status) {
      metrics.refused(CANNED_CODE[status]);
      earlyRefusalLog(access, status);
    },
    onErrorAnswer(answer, path, req) {
      if (!isRequestPath(path) && isOAuthPath(path)) countOutcome(metrics, req, 'oauth');
      else countOutcome(metrics, req, 'refused', answer.code);
    },
  });
}

/** An OAuth route with a server span per request, its IdP calls among the children. */
function traced(ctx: ProxyContext, route: Route<ProxyRequest>): Route<ProxyRequest> {
  const tracing = ctx.tracing;
  if (tracing === undefined) return route;
  return {
    ...route,
    handler(req, res, path) {
      req.trace = tracing.startRequest(req.method ?? '', route.path, traceparentOf(req));
      return withTrace(req.trace, () => route.handler(req, res, path));
    },
  };
}

/** GET /health: admitted like /mcp, then the store's and the upstream's state. */
export async function handleHealth(ctx: ProxyContext, req: ProxyRequest, res: ServerResponse): Promise<void> {
  const admitted = await admit(ctx, req, { method: req.method ?? '', path: pathOf(req.url), host: req.headers.host });
  if (isDecision(admitted)) throw settle(ctx.metrics, req, admitted).error!;
  countOutcome(ctx.metrics, req, 'health');
  await answerHealth(res, ctx.store, ctx.config.upstream);
}

/** The paths of requests for the upstream and /health, whose error answers count as refused, under their code. */
function isRequestPath(path: string): boolean {
  return path === '/mcp' || path === '/health' || path === AUTHZ_PATH || path.startsWith(`${AUTHZ_PATH}/`) || path === CONNECT_ANSWER_PATH;
}

/** Whether a path is one of `routes` (an exact path, or under a prefix route's). */
function routeMatcher(routes: readonly Route[]): (path: string) => boolean {
  const exact = new Set(routes.filter((r) => !r.path.endsWith('*')).map((r) => r.path));
  const prefixes = routes.filter((r) => r.path.endsWith('*')).map((r) => r.path.slice(0, -1));
  return (path) => exact.has(path) || prefixes.some((prefix) => path.startsWith(prefix));
}

/** The node:http bounds of the proxy listener. */
function listenerLimits(config: Config): ServerOptions {
  return {
    maxHeaderSize: config.proxy.maxHeaderBytes,
    requestTimeout: config.proxy.requestTimeoutMs,
    headersTimeout: config.proxy.headersTimeoutMs,
    // Node checks both timeouts only every connectionsCheckingInterval (default 30 s), which would let
    // a slowloris client hold a connection up to 30 s past them: check at a quarter of the headers bound.
    connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(config.proxy.headersTimeoutMs / 4))),
  };
}

/** The same route, counted as `oauth` when it answered without throwing (its error answers: onErrorAnswer). */
function counted(route: Route<ProxyRequest>, metrics: Metrics): Route<ProxyRequest> {
  return {
    ...route,
    async handler(req, res, path) {
      await route.handler(req, res, path);
      countOutcome(metrics, req, 'oauth');
    },
  };
}

async function answerHealth(res: ServerResponse, store: StoreHealth, upstream: Config['upstream']): Promise<void> {
  const [storeOk, upstreamOk] = await Promise.all([
    store.ping().then(
      () => true,
      () => false,
    ),
    upstreamAnswers(upstream.url, upstream.healthTimeoutMs),
  ]);
  const status = storeOk && upstreamOk ? 'ok' : 'unavailable';
  writeJson(res, status === 'ok' ? 200 : 503, {
    status,
    store: storeOk ? 'ok' : 'unavailable',
    upstream: upstreamOk ? 'ok' : 'unavailable',
  });
}

function accessLog(log: AccessLog, req: ProxyRequest, res: ServerResponse, status: number | undefined): void {
  if (!log.enabled) return;
  const { principal } = req;
  log.write({
    method: req.method,
    path: loggedPath(pathOf(req.url)),
    status,
    durationMs: Math.round((performance.now() - req.started) * 1000) / 1000,
    authKind: principal?.kind,
    subject: principal?.subject,
    clientId: principal?.clientId,
    outcome: req.outcome,
    reason: req.reason,
    denial: req.denial,
    dpopRefusal: req.dpopRefusal,
    upstreamStatus: req.upstreamStatus,
    aborted: !res.writableFinished || undefined,
    endedBy: req.endedBy,
  });
}

/**
 * The canned answer Node's HTTP server writes when it cannot parse the rest of a request (a broken
 * chunk, a body cut short) or the body comes too slowly, before it closes the connection: its status
 * and the code it is counted under; undefined when the client was sent no status line at all (it left
 * first).
 */
function cannedAnswer(req: IncomingMessage): { status: number; code: ErrorCode } | undefined {
  const status = cannedStatus((req.socket.errored as NodeJS.ErrnoException | null)?.code);
  return status === undefined ? undefined : { status, code: CANNED_CODE[status] };
}

/** The code a canned answer is counted and logged under, by its status. */
const CANNED_CODE: Record<CannedStatus, ErrorCode> = {
  400: 'invalid_request',
  408: 'request_timeout',
  413: 'payload_too_large',
  431: 'request_header_fields_too_large',
};

/** The access line of a request Node refused before there was one: no method, path or principal to name. */
function earlyRefusalLog(log: AccessLog, status: CannedStatus): void {
  log.write({ ...NO_ACCESS_FIELDS, status, outcome: 'refused', reason: CANNED_CODE[status] });
}
