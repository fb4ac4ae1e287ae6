// The proxy listener. What happens to a request reads top to bottom in createProxyServer:
// route (the table) -> parse the Authorization header -> master check or SHA-256 -> one store round
// trip -> decide (credentials policy) -> rewrite identity headers -> stream to the upstream.
// Nothing reaches the upstream before the decision, and a store failure answers 503 (fail closed).
// With forward-auth on, /authz takes the same steps up to the decision for a request an ingress holds,
// and answers it instead of forwarding.
// What the sidecar learns about a request (principal, denial, upstream status) lives on its ProxyRequest.

import { request as httpRequest, type IncomingMessage, type Server, type ServerOptions, type ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import { decideToken, hashToken, parseAuthorization, type DenialReason, type MasterToken, type Principal } from '../credentials.ts';
import { bearerTokenRequired, HttpError, invalidBearerToken, payloadTooLarge, writeJson, writeJsonText } from '../errors.ts';
import { pathOf, serve, type Route } from '../http.ts';
import { AUTHZ_PATH, originalRequest } from './forward-auth.ts';
import { accessLogger, type Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import type { StoreHealth, TokenStorage } from '../store/types.ts';
import type { FailedAuthLimiter } from '../rate-limits.ts';
import { clientAddresses, type ClientAddresses } from './client-address.ts';
import { writePolicyAnswer, type PolicyGate } from '../policy/gate.ts';
import type { Forwarder } from './forwarder.ts';
import type { HandleGuard } from './handle-guard.ts';
import { createHostCheck } from './host-check.ts';
import { removeHopByHop } from './hop-by-hop.ts';
import { identityHeaderValue } from './identity-value.ts';
import { ProxyRequest } from './request.ts';
import type { AssertionSigner } from '../assertion/signer.ts';

export interface ProxyDeps {
  config: Config;
  store: TokenStorage & StoreHealth;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  masterToken: MasterToken;
  forwarder: Forwarder;
  /** The external base URL ({base_url}); known only after the listener is bound when PORT=0. */
  publicUrl(): string;
  /** More routes on the proxy listener (the OAuth metadata and endpoints). */
  routes?: readonly Route[];
  /** Counts failed authentications per client address (shared through the store). */
  authFailures?: FailedAuthLimiter;
  /** Per-tool policy on POST /mcp; undefined when none is configured (bodies stream unparsed). */
  policyGate?: PolicyGate;
  /** Signs the caller assertion each forwarded request carries (upstream.assertion); undefined when off. */
  assertions?: AssertionSigner;
  /** Keeps session and task handles to the principal that received them. */
  handles: HandleGuard;
}

const MASTER: Principal = Object.freeze({ kind: 'master', subject: 'master' }) as Principal;

export function createProxyServer(deps: ProxyDeps): Server {
  const { config, store, clock, metrics, masterToken, forwarder, authFailures, handles } = deps;
  const addresses = clientAddresses(config.proxy.trustedProxies);
  const access = accessLogger(deps.logger);
  const checkHost = createHostCheck({
    publicUrl: config.proxy.publicUrl,
    listenHost: config.proxy.host,
    allowedHosts: config.proxy.allowedHosts,
    allowedOrigins: config.proxy.allowedOrigins,
  });

  return serve({
    name: 'proxy',
    logger: deps.logger,
    request: ProxyRequest,
    http: listenerLimits(config),
    routes: [
      { path: '/mcp', methods: 'any', handler: mcp },
      { path: '/health', methods: ['GET'], handler: health },
      ...(config.proxy.forwardAuth
        ? [
            { path: AUTHZ_PATH, methods: 'any', handler: authz },
            { path: `${AUTHZ_PATH}/*`, methods: 'any', handler: authz },
          ] satisfies Route<ProxyRequest>[]
        : []),
      ...(deps.routes ?? []).map((route) => counted(route, metrics.oauth)),
    ],
    onClose: (req, res) => accessLog(access, req, res),
    onStoreUnavailable() {
      metrics.storeErrors.inc();
      metrics.unavailable.inc();
    },
    onNotFound: () => metrics.notFound.inc(),
    onErrorAnswer(answer, path) {
      if (isRequestPath(path) && !COUNTED_WHERE_DECIDED.has(answer.code)) metrics.refused(answer.code);
    },
  });

  async function mcp(req: ProxyRequest, res: ServerResponse, path: string): Promise<void> {
    refuseAmbiguousFraming(req);
    // The presented session's record is read beside the token lookup: both leave in one write.
    const sessionRead = handles.readSession(req);
    const principal = await admit(req, req.headers.host);
    checkBodyLimit(req, config.proxy.maxBodyBytes);
    // A session id recorded for another principal: refused as unknown before its body is even read.
    const session = await handles.checkSession(sessionRead, principal);
    // With a policy, the body is read and every call in it decided before anything is forwarded, a body
    // on another method is refused, and a GET stream's answer is filtered (a resumption with
    // Last-Event-ID replays earlier list answers there).
    const gated = await deps.policyGate?.decide(req, principal);
    // A denial no scope would lift is answered here (200, a tool error): nothing is forwarded.
    if (gated !== undefined && 'answer' in gated) {
      metrics.policyAnswered.inc();
      return writePolicyAnswer(req, res, gated.answer);
    }
    let decided = gated;
    if (req.method === 'POST') {
      const tasks = await handles.checkTasks(req, principal, decided);
      if (tasks.refusal !== undefined) {
        writeJsonText(res, 200, tasks.refusal);
        return;
      }
      decided = tasks.options;
    }
    decided = handles.watchResponse(req, principal, session, decided);
    rewriteHeaders(req, principal, addresses);
    const signing = addAssertion(principal, req.headers);
    if (signing !== undefined) await signing;
    // The client left during the lookup (or while its body was read): its response is already closed
    // (and logged), so forwarding would hold an upstream request nobody reads and an in-flight slot.
    if (res.destroyed) return;
    metrics.forwarded.inc();
    forwarder.forward(req, res, (req.url ?? '/').slice(path.length), decided);
  }

  /**
   * Forward-auth: may the request the ingress holds go to the upstream? The same steps as /mcp up to the
   * decision, per-tool policy decided from the Mcp-Method / Mcp-Name headers (the body stays with the
   * ingress). Allowed: 200, no body, the identity headers for the ingress to copy onto the request it
   * forwards. Otherwise the answer /mcp would give, for the ingress to pass to the client.
   */
  async function authz(req: ProxyRequest, res: ServerResponse, path: string): Promise<void> {
    const original = originalRequest(req, path, addresses);
    if (original.path !== '/mcp') {
      metrics.notFound.inc();
      throw new HttpError('not_found');
    }
    const principal = await admit(req, original.host);
    deps.policyGate?.checkForwardAuth(req, principal, original.method);
    await handles.bindPresentedSession(req, principal);
    const identity = identityHeaders(principal);
    const signing = addAssertion(principal, identity);
    if (signing !== undefined) await signing;
    metrics.allowed.inc();
    res.writeHead(200, { 'cache-control': 'no-store', 'content-length': '0', ...identity });
    res.end();
  }

  /**
   * The signed caller assertion (upstream.assertion) beside the identity headers, on /mcp's forwarded
   * request and in /authz's 200. Usually a cached one, set at once; a new one is signed asynchronously
   * (the promise to wait for).
   */
  function addAssertion(principal: Principal, headers: Record<string, string | string[] | undefined>): Promise<void> | undefined {
    if (deps.assertions === undefined) return undefined;
    const assertion = deps.assertions.assertionFor(principal);
    if (typeof assertion === 'string') {
      headers['x-mcp-auth-assertion'] = assertion;
      return undefined;
    }
    return assertion.then((signed) => {
      headers['x-mcp-auth-assertion'] = signed;
    });
  }

  /** The steps every request for the upstream takes first: the Host it names, then its token. */
  function admit(req: ProxyRequest, host: string | undefined): Promise<Principal> {
    checkHost(req, host);
    return authenticate(req);
  }

  /** Returns the principal (also set on `req`), or throws the HttpError to answer with. Never forwards anything. */
  async function authenticate(req: ProxyRequest): Promise<Principal> {
    const parsed = parseAuthorization(req.rawHeaders);
    if (parsed.kind === 'missing') {
      metrics.denied('missing');
      throw bearerTokenRequired(resourceMetadataUrl(deps.publicUrl()));
    }
    if (parsed.kind === 'malformed') return deny(req, 'malformed');
    // One SHA-256 a request: the store key, and what the master token is compared with (constant time).
    const tokenHash = hashToken(parsed.token);
    if (masterToken.matchesHash(tokenHash)) return (req.principal = MASTER);
    const started = performance.now();
    // One store round trip. A store that cannot answer rejects (StoreUnavailableError): 503, fail closed.
    const found = await store.lookupToken(tokenHash);
    const decision = decideToken(tokenHash, found, clock.now());
    metrics.validationSeconds.observe((performance.now() - started) / 1000);
    if (!decision.ok) return deny(req, decision.reason);
    return (req.principal = decision.principal);
  }

  /**
   * A token that fails. The limit is on failures, never on an address: a valid token is served
   * whatever others behind the same address sent. From an address over the limit a failure gets a bare
   * 429 (no challenge, not counted again); otherwise the 401 and a count, not waited for.
   */
  function deny(req: ProxyRequest, reason: DenialReason): never {
    req.denial = reason;
    const address = addresses.client(req);
    const refused = authFailures?.refusal(address);
    if (refused) {
      metrics.denied('rate_limited');
      throw refused;
    }
    metrics.denied(reason);
    void authFailures?.recordFailure(address);
    throw invalidBearerToken(resourceMetadataUrl(deps.publicUrl()));
  }

  async function health(req: ProxyRequest, res: ServerResponse): Promise<void> {
    await admit(req, req.headers.host);
    metrics.health.inc();
    await answerHealth(res, store, config.upstream);
  }
}

/**
 * Error answers whose outcome is counted where they are decided (a missing or refused token as `denied`
 * with its reason, a store failure as `unavailable`, an unknown path as `not_found`); every other error answer of
 * /mcp, /health and /authz is counted as `refused` with its code.
 */
const COUNTED_WHERE_DECIDED: ReadonlySet<string> = new Set(['unauthorized', 'invalid_token', 'too_many_requests', 'temporarily_unavailable', 'not_found']);

/** The paths whose requests are counted by outcome here (the OAuth routes count their own). */
function isRequestPath(path: string): boolean {
  return path === '/mcp' || path === '/health' || path === AUTHZ_PATH || path.startsWith(`${AUTHZ_PATH}/`);
}

function resourceMetadataUrl(publicUrl: string): string {
  return `${publicUrl}/.well-known/oauth-protected-resource/mcp`;
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

/** The same route, counted in `counter` when it answered without throwing. */
function counted<Req extends IncomingMessage>(route: Route<Req>, counter: { inc(): void }): Route<Req> {
  return {
    ...route,
    async handler(req, res, path) {
      await route.handler(req, res, path);
      counter.inc();
    },
  };
}

/**
 * Node accepts any coding list that ends in chunked ("gzip, chunked", or two headers merged into
 * "identity, chunked") and would pass it on verbatim: an upstream that reads it differently desyncs
 * (request smuggling). Only plain chunked framing is forwarded.
 */
function refuseAmbiguousFraming(req: IncomingMessage): void {
  const te = req.headers['transfer-encoding'];
  if (te !== undefined && te.toLowerCase() !== 'chunked') throw new HttpError('invalid_request', 'unsupported Transfer-Encoding');
}

/** Headers that state the client's address or the original request: only a trusted proxy may send them. */
const CLIENT_ADDRESS_HEADERS = new Set(['forwarded', 'x-real-ip', 'true-client-ip', 'x-client-ip', 'x-cluster-client-ip', 'client-ip', 'cf-connecting-ip', 'fastly-client-ip']);

function isClientAddressHeader(name: string): boolean {
  return name.startsWith('x-forwarded-') || CLIENT_ADDRESS_HEADERS.has(name);
}

/** Headers whose meaning the sidecar sets or removes (identity, addresses, credentials), by canonical name. */
function isOwnedHeader(canonical: string): boolean {
  return canonical.startsWith('x-mcp-auth-') || isClientAddressHeader(canonical) || canonical === 'authorization' || canonical === 'proxy-authorization';
}

const HEADER_SAFE = /^[\x20-\x7e]*$/;

/** Strips what a client could spoof, then states who the sidecar authenticated. */
function rewriteHeaders(req: IncomingMessage, principal: Principal, addresses: ClientAddresses): void {
  const headers = req.headers;
  const remote = addresses.peer(req);
  const fromTrustedProxy = addresses.trusts(remote);
  // First: a header the client names in `Connection` must not outlive the ones the sidecar sets below.
  removeHopByHop(headers);
  for (const name in headers) {
    if (name.startsWith('x-mcp-auth-')) delete headers[name];
    else if (!fromTrustedProxy && isClientAddressHeader(name)) delete headers[name];
    // CGI/WSGI stacks (and some proxies) read `x_mcp_auth_kind` as X-MCP-Auth-Kind: an underscore
    // spelling of a header the sidecar owns is never legitimate, whoever the peer is.
    else if (name.includes('_') && isOwnedHeader(name.replaceAll('_', '-'))) delete headers[name];
  }
  delete headers.authorization;
  // Meant for this hop (RFC 9110 §11.7.2), never for the upstream.
  delete headers['proxy-authorization'];
  // Node has already answered `Expect: 100-continue`; the upstream must not wait for a second one.
  delete headers.expect;
  Object.assign(headers, identityHeaders(principal));
  const priorFor = fromTrustedProxy ? headers['x-forwarded-for'] : undefined;
  headers['x-forwarded-for'] = priorFor ? `${String(priorFor)}, ${remote}` : remote;
  if (!fromTrustedProxy || headers['x-forwarded-proto'] === undefined) {
    headers['x-forwarded-proto'] = (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http';
  }
  if (!fromTrustedProxy || headers['x-forwarded-host'] === undefined) {
    if (headers.host !== undefined) headers['x-forwarded-host'] = headers.host;
  }
}

/**
 * Who the sidecar authenticated, as headers for the upstream: set on every request /mcp forwards, and
 * answered by /authz for the ingress to copy. The one place they are written.
 */
export function identityHeaders(principal: Principal): Record<string, string> {
  const headers: Record<string, string> = {
    'x-mcp-auth-kind': principal.kind,
    'x-mcp-auth-subject': identityHeaderValue(principal.subject),
  };
  if (principal.clientId !== undefined) headers['x-mcp-auth-client-id'] = identityHeaderValue(principal.clientId);
  // The token's granted scope (RFC 6749 §3.3 tokens are printable ASCII): the upstream decides what it allows.
  if (principal.scope !== undefined && HEADER_SAFE.test(principal.scope)) headers['x-mcp-auth-scope'] = principal.scope;
  return headers;
}

/** `max` 0 is no cap. */
function checkBodyLimit(req: IncomingMessage, max: number): void {
  if (max === 0) return;
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > max) throw payloadTooLarge(max);
  // A declared length is exact (Node reads no more). Chunked bodies are counted by the forwarder as
  // they stream (src/proxy/forwarder.ts, maxBodyBytes).
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

function accessLog(logger: Logger, req: ProxyRequest, res: ServerResponse): void {
  if (!logger.isLevelEnabled('info')) return;
  const { principal } = req;
  logger.info(
    {
      method: req.method,
      path: pathOf(req.url),
      status: res.headersSent ? res.statusCode : cannedStatus(req),
      durationMs: Math.round((performance.now() - req.started) * 1000) / 1000,
      authKind: principal?.kind,
      subject: principal?.subject,
      clientId: principal?.clientId,
      denial: req.denial,
      upstreamStatus: req.upstreamStatus,
      aborted: !res.writableFinished || undefined,
      endedBy: req.endedBy,
    },
    'request',
  );
}

/**
 * The status of the canned answer Node's HTTP server writes when it cannot parse the rest of a request
 * (a broken chunk, a body cut short) or the body comes too slowly, before it closes the connection;
 * undefined when the client was sent no status line at all (it left first).
 */
function cannedStatus(req: IncomingMessage): number | undefined {
  const code = (req.socket.errored as NodeJS.ErrnoException | null)?.code;
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return 408;
  if (code === undefined || !code.startsWith('HPE_')) return undefined;
  if (code === 'HPE_HEADER_OVERFLOW') return 431;
  return code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW' ? 413 : 400;
}

/** What the upstream sees of a health probe: no credential, no identity headers, a name it can log. */
export const PROBE_HEADERS = { accept: 'application/json', 'user-agent': 'mcp-bearer-proxy-health-probe' } as const;

/** Any HTTP answer from the upstream within the bound counts as reachable; the response is discarded. */
export function upstreamAnswers(upstreamUrl: string, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const url = new URL(upstreamUrl);
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = send(url, { method: 'GET', headers: PROBE_HEADERS, timeout: timeoutMs }, (res) => {
      res.destroy();
      resolve(true);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve(false));
    req.end();
  });
}
