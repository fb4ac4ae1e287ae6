// The proxy listener. What happens to a request reads top to bottom in createProxyServer:
// route (the table) -> parse the Authorization header -> a DPoP proof checked (DPoP scheme) -> master
// check or SHA-256 -> one store round trip -> decide (credentials policy) -> the token's DPoP binding ->
// rewrite identity headers -> stream to the upstream.
// Nothing reaches the upstream before the decision, and a store failure answers 503 (fail closed).
// With forward-auth on, /authz takes the same steps up to the decision for a request an ingress holds,
// and answers it instead of forwarding.
// What the sidecar learns about a request (principal, denial, upstream status) lives on its ProxyRequest.

import { request as httpRequest, type IncomingMessage, type Server, type ServerOptions, type ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Clock } from '../model/clock.ts';
import type { Config } from '../config/load.ts';
import type { LastUseRecorder } from './last-use.ts';
import {
  decideToken,
  hashToken,
  parseAuthorization,
  type AuthorizationScheme,
  type DenialReason,
  type MasterToken,
  type Principal,
} from '../model/credentials.ts';
import {
  bearerTokenRequired,
  dpopChallenge,
  HttpError,
  invalidBearerToken,
  payloadTooLarge,
  writeJson,
  writeJsonText,
} from '../http/errors.ts';
import { pathOf, serve, type Route } from '../http/serve.ts';
import { AUTHZ_PATH, originalRequest } from './forward-auth.ts';
import { accessLogger, type Logger } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import type { StoreHealth, TokenStorage } from '../store/types.ts';
import type { FailedAuthLimiter } from '../http/rate-limits.ts';
import { clientAddresses, type ClientAddresses } from './client-address.ts';
import { writePolicyAnswer, type PolicyGate } from '../policy/gate.ts';
import type { Forwarder } from './forwarder.ts';
import type { HandleGuard } from './handle-guard.ts';
import { createHostCheck } from './host-check.ts';
import { removeHopByHop } from './hop-by-hop.ts';
import { identityHeaderValue } from './identity-value.ts';
import { ProxyRequest } from './request.ts';
import type { AssertionSigner } from '../assertion/signer.ts';
import { DPOP_ALGS_PARAMETER, dpopHeader, DpopProofError, sameValue, type CheckedProof, type DpopVerifier } from '../oauth/dpop.ts';
import { withTrace, type Tracing } from '../observability/tracing.ts';
import { readBody } from '../http/body.ts';
import { parseClientMessages } from '../policy/jsonrpc.ts';
import type { ConnectLinks } from '../upstream-credentials/connect-links.ts';
import { MISSING, urlElicitationRequired, type UpstreamCredentialDelivery } from '../upstream-credentials/delivery.ts';
import { CredentialRefreshUnavailable } from '../upstream-credentials/idp-mode.ts';

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
  /** Checks the DPoP proofs (RFC 9449) that come with DPoP-bound tokens. */
  dpop: DpopVerifier;
  /** Counts failed authentications per client address (shared through the store). */
  authFailures?: FailedAuthLimiter;
  /** Per-tool policy on POST /mcp; undefined when none is configured (bodies stream unparsed). */
  policyGate?: PolicyGate;
  /** Signs the caller assertion each forwarded request carries (upstream.assertion); undefined when off. */
  assertions?: AssertionSigner;
  /** OpenTelemetry tracing; undefined when off. */
  tracing?: Tracing | undefined;
  /** Keeps session and task handles to the principal that received them. */
  handles: HandleGuard;
  /** Notes when each token was last presented (written coarsely, off the request path); undefined: not kept. */
  lastUse?: LastUseRecorder;
  /** The user's own upstream credential (upstream.credentials); undefined while the mode is none (no work at all). */
  upstreamCredentials?: UpstreamCredentialsOnProxy;
}

/** What the proxy needs of upstream credentials: the header for a principal, and a link for a user who has none. */
export interface UpstreamCredentialsOnProxy {
  delivery: UpstreamCredentialDelivery;
  links: ConnectLinks;
  /** What the user is asked to do, for a person (e.g. "connect your GitHub account"). */
  what: string;
}

const MASTER: Principal = Object.freeze({ kind: 'master', subject: 'master' }) as Principal;

export function createProxyServer(deps: ProxyDeps): Server {
  const { config, store, clock, metrics, masterToken, forwarder, authFailures, dpop, handles } = deps;
  const upstreamUrl = new URL(config.upstream.url);
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
        ? ([
            { path: AUTHZ_PATH, methods: 'any', handler: authz },
            { path: `${AUTHZ_PATH}/*`, methods: 'any', handler: authz },
          ] satisfies Route<ProxyRequest>[])
        : []),
      ...(deps.routes ?? []).map((route) => traced(counted(route, metrics.oauth))),
    ],
    onClose(req, res) {
      req.trace?.end(res.headersSent ? res.statusCode : cannedStatus(req), req.upstreamStatus);
      accessLog(access, req, res);
    },
    onStoreUnavailable() {
      metrics.storeErrors.inc();
      metrics.unavailable.inc();
    },
    onNotFound: () => metrics.notFound.inc(),
    onErrorAnswer(answer, path) {
      if (isRequestPath(path) && !COUNTED_WHERE_DECIDED.has(answer.code)) metrics.refused(answer.code);
    },
  });

  /** An OAuth route with a server span per request, its IdP calls among the children. */
  function traced(route: Route<ProxyRequest>): Route<ProxyRequest> {
    const tracing = deps.tracing;
    if (tracing === undefined) return route;
    return {
      ...route,
      handler(req, res, path) {
        req.trace = tracing.startRequest(req.method ?? '', route.path, traceparentOf(req));
        return withTrace(req.trace, () => route.handler(req, res, path));
      },
    };
  }

  async function mcp(req: ProxyRequest, res: ServerResponse, path: string): Promise<void> {
    req.trace = deps.tracing?.startRequest(req.method ?? '', '/mcp', traceparentOf(req));
    refuseAmbiguousFraming(req);
    // The presented session's record is read beside the token lookup: both leave in one write.
    const sessionRead = handles.readSession(req);
    const principal = await admit(req, { method: req.method ?? '', path: pathOf(req.url), host: req.headers.host });
    checkBodyLimit(req, config.proxy.maxBodyBytes);
    // A session id recorded for another principal: refused as unknown before its body is even read.
    const session = await handles.checkSession(sessionRead, principal);
    // With a policy, the body is read and every call in it decided before anything is forwarded, a body
    // on another method is refused, and a GET stream's answer is filtered (a resumption with
    // Last-Event-ID replays earlier list answers there).
    const deciding = performance.now();
    const gated = await deps.policyGate?.decide(req, principal);
    if (deps.policyGate !== undefined) req.trace?.step('policy decision', deciding);
    // A denial no scope would lift is answered here (200, a tool error): nothing is forwarded.
    if (gated !== undefined && 'answer' in gated) {
      if (gated.by === 'policy') metrics.policyAnswered.inc();
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
    if (deps.upstreamCredentials !== undefined) {
      const missing = await addCredential(principal, req.headers, deps.upstreamCredentials);
      // The body may already have been read (a policy, or the task-id scan): its bytes are used then.
      if (missing) return answerMissingCredential(req, res, principal, deps.upstreamCredentials, decided?.body ?? decided?.bodyAsSent);
    }
    const signing = addAssertion(principal, req.headers);
    if (signing !== undefined) await signing;
    // The client left during the lookup (or while its body was read): its response is already closed
    // (and logged), so forwarding would hold an upstream request nobody reads and an in-flight slot.
    if (res.destroyed) return;
    metrics.forwarded.inc();
    // The upstream continues the trace from the sidecar's span of its request.
    if (req.trace !== undefined) req.headers.traceparent = req.trace.upstream(req.method ?? '', upstreamUrl);
    forwarder.forward(req, res, (req.url ?? '/').slice(path.length), decided);
  }

  /**
   * Forward-auth: may the request the ingress holds go to the upstream? The same steps as /mcp up to the
   * decision, per-tool policy decided from the Mcp-Method / Mcp-Name headers (the body stays with the
   * ingress). Allowed: 200, no body, the identity headers for the ingress to copy onto the request it
   * forwards. Otherwise the answer /mcp would give, for the ingress to pass to the client.
   */
  async function authz(req: ProxyRequest, res: ServerResponse, path: string): Promise<void> {
    req.trace = deps.tracing?.startRequest(req.method ?? '', AUTHZ_PATH, traceparentOf(req));
    const original = originalRequest(req, path, addresses);
    if (original.path !== '/mcp') {
      metrics.notFound.inc();
      throw new HttpError('not_found');
    }
    const principal = await admit(req, original);
    const deciding = performance.now();
    await deps.policyGate?.checkForwardAuth(req, principal, original.method);
    if (deps.policyGate !== undefined) req.trace?.step('policy decision', deciding);
    await handles.bindPresentedSession(req, principal);
    const identity = identityHeaders(principal);
    // The ingress copies the credential header like the identity headers; a user without one gets the
    // 401 challenge (the ingress cannot relay a JSON-RPC answer for a body it holds).
    if (deps.upstreamCredentials !== undefined && (await addCredential(principal, identity, deps.upstreamCredentials))) {
      metrics.credentialMissing.inc();
      throw invalidBearerToken(resourceMetadataUrl(deps.publicUrl()));
    }
    const signing = addAssertion(principal, identity);
    if (signing !== undefined) await signing;
    metrics.allowed.inc();
    res.writeHead(200, { 'cache-control': 'no-store', 'content-length': '0', ...identity });
    res.end();
  }

  /**
   * Sets the principal's upstream credential on `headers` (after the client's own Authorization, and
   * any header of the credential's name it sent, are gone). True when a user has none usable: then
   * nothing may be forwarded. An unreachable provider with no valid token left is a 503.
   */
  async function addCredential(
    principal: Principal,
    headers: Record<string, string | string[] | undefined>,
    credentials: UpstreamCredentialsOnProxy,
  ): Promise<boolean> {
    delete headers[credentials.delivery.header];
    let header;
    try {
      header = await credentials.delivery.headerFor(principal);
    } catch (err) {
      if (err instanceof CredentialRefreshUnavailable)
        throw new HttpError('temporarily_unavailable', 'the provider of your upstream credential cannot be reached; retry shortly', {
          headers: { 'retry-after': '5' },
          cause: err,
        });
      throw err;
    }
    if (header === MISSING) {
      metrics.upstreamCredentialsMissing.inc();
      return true;
    }
    if (header !== null) headers[header.name] = header.value;
    return false;
  }

  /**
   * A user without a usable credential. A JSON-RPC request gets, with HTTP 200, the MCP error -32042
   * whose URL elicitation sends the user to a single-use link bound to this principal; anything else
   * (a GET stream, a notification, a batch, a body that is not JSON-RPC) gets the 401 challenge.
   */
  async function answerMissingCredential(
    req: ProxyRequest,
    res: ServerResponse,
    principal: Principal,
    credentials: UpstreamCredentialsOnProxy,
    decidedBody: Buffer | undefined,
  ): Promise<void> {
    let id: string | number | undefined;
    if (req.method === 'POST') {
      try {
        // A body consumed elsewhere and not handed here is never waited for: the 401 answers then.
        if (decidedBody === undefined && req.readableEnded) throw new Error('body already read');
        const body = decidedBody ?? (await readBody(req, config.policy.maxBodyBytes));
        const { messages, batch } = parseClientMessages(body, { maxDepth: config.policy.maxDepth, maxBatch: config.policy.maxBatch });
        const only = messages[0];
        if (!batch && only?.call !== undefined && only.id !== undefined && only.id !== null) id = only.id;
      } catch {
        id = undefined;
      }
    }
    if (id === undefined) {
      metrics.credentialMissing.inc();
      throw invalidBearerToken(resourceMetadataUrl(deps.publicUrl()));
    }
    // Counted once the link is minted: a store that cannot mint it answers 503, counted as unavailable.
    const { link, linkId } = await credentials.links.mint(principal);
    metrics.credentialMissing.inc();
    writeJson(res, 200, urlElicitationRequired(id, `${deps.publicUrl()}/connect/${link}`, linkId, credentials.what), {
      'cache-control': 'no-store',
    });
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
  function admit(req: ProxyRequest, target: RequestTarget): Promise<Principal> {
    checkHost(req, target.host);
    return authenticate(req, target);
  }

  /** Returns the principal (also set on `req`), or throws the HttpError to answer with. Never forwards anything. */
  async function authenticate(req: ProxyRequest, target: RequestTarget): Promise<Principal> {
    const parsed = parseAuthorization(req.rawHeaders);
    if (parsed.kind === 'missing') {
      metrics.denied('missing');
      const metadata = resourceMetadataUrl(deps.publicUrl());
      throw config.oauth.requireDpop ? dpopChallenge(undefined, metadata, DPOP_ALGS_PARAMETER) : bearerTokenRequired(metadata);
    }
    if (parsed.kind === 'malformed') return deny(req, 'malformed', 'bearer');
    const { scheme } = parsed;
    // RFC 9449 §7.1: the proof first (no store round trip for a bad one); its key is compared below.
    const proof = scheme === 'dpop' ? await checkedProof(req, parsed.token, target) : undefined;
    // One SHA-256 a request: the store key, and what the master token is compared with (constant time).
    const tokenHash = hashToken(parsed.token);
    if (masterToken.matchesHash(tokenHash)) {
      // The master token is never bound to a key: presented as DPoP it is refused, as any unbound token is.
      if (proof !== undefined) return deny(req, 'dpop_binding', scheme);
      return (req.principal = MASTER);
    }
    const started = performance.now();
    // One store round trip. A store that cannot answer rejects (StoreUnavailableError): 503, fail closed.
    const found = await store.lookupToken(tokenHash);
    const now = clock.now();
    const decision = decideToken(tokenHash, found, now);
    metrics.validationSeconds.observe((performance.now() - started) / 1000);
    req.trace?.step('token lookup', started, { 'mcp_auth.outcome': decision.ok ? 'valid' : decision.reason });
    if (!decision.ok) return deny(req, decision.reason, scheme);
    const principal = decision.principal;
    // A bound token only with a proof of its key; an unbound one never as DPoP, nor as Bearer where DPoP is required.
    if (principal.dpopJkt !== undefined) {
      if (proof === undefined || !sameValue(proof.jkt, principal.dpopJkt)) return deny(req, 'dpop_binding', scheme);
    } else if (proof !== undefined || config.oauth.requireDpop) {
      return deny(req, 'dpop_binding', scheme);
    }
    // Last, once the request is otherwise accepted: a proof is good for one request, on any replica.
    if (proof !== undefined && !(await dpop.spend(proof))) return deny(req, 'dpop_replay', scheme);
    deps.lastUse?.seen(principal, now);
    return (req.principal = principal);
  }

  /**
   * The request's DPoP proof, checked against the request (method, URL, the token's hash), or a
   * refusal. The URL is the one the client used: PUBLIC_URL with the request's path, or the scheme
   * of PUBLIC_URL with the Host the request named (already checked against the allowed hosts).
   */
  async function checkedProof(req: ProxyRequest, token: string, target: RequestTarget): Promise<CheckedProof> {
    const header = dpopHeader(req.rawHeaders);
    if (header.kind !== 'proof') {
      req.dpopRefusal = header.kind;
      return deny(req, 'dpop_proof', 'dpop');
    }
    const publicUrl = deps.publicUrl();
    const urls = [`${publicUrl}${target.path}`];
    if (target.host !== undefined) urls.push(`${new URL(publicUrl).protocol}//${target.host}${target.path}`);
    try {
      return await dpop.check(header.proof, { method: target.method, urls, accessToken: token });
    } catch (err) {
      if (!(err instanceof DpopProofError)) throw err;
      req.dpopRefusal = err.reason;
      return deny(req, 'dpop_proof', 'dpop', err.reason === 'nonce');
    }
  }

  /**
   * A token that fails. The limit is on failures, never on an address: a valid token is served
   * whatever others behind the same address sent. From an address over the limit a failure gets a bare
   * 429 (no challenge, not counted again); otherwise the 401 and a count, not waited for. The challenge
   * is of the scheme the token came with, or DPoP for a refusal of its binding (RFC 9449 §7.1).
   */
  function deny(req: ProxyRequest, reason: DenialReason, scheme: AuthorizationScheme, nonceMissing = false): never {
    req.denial = reason;
    const address = addresses.client(req);
    const refused = authFailures?.refusal(address);
    if (refused) {
      metrics.denied('rate_limited');
      throw refused;
    }
    metrics.denied(reason);
    void authFailures?.recordFailure(address);
    const metadata = resourceMetadataUrl(deps.publicUrl());
    if (nonceMissing) throw dpopChallenge('use_dpop_nonce', metadata, DPOP_ALGS_PARAMETER, dpop.nonces?.current(clock.now()));
    if (reason === 'dpop_proof' || reason === 'dpop_replay') throw dpopChallenge('invalid_dpop_proof', metadata, DPOP_ALGS_PARAMETER);
    if (scheme === 'dpop' || reason === 'dpop_binding') throw dpopChallenge('invalid_token', metadata, DPOP_ALGS_PARAMETER);
    throw invalidBearerToken(metadata);
  }

  async function health(req: ProxyRequest, res: ServerResponse): Promise<void> {
    await admit(req, { method: req.method ?? '', path: pathOf(req.url), host: req.headers.host });
    metrics.health.inc();
    await answerHealth(res, store, config.upstream);
  }
}

/**
 * Error answers whose outcome is counted where they are decided (a missing or refused token as `denied`
 * with its reason, a store failure as `unavailable`, an unknown path as `not_found`); every other error answer of
 * /mcp, /health and /authz is counted as `refused` with its code.
 */
const COUNTED_WHERE_DECIDED: ReadonlySet<string> = new Set([
  'unauthorized',
  'invalid_token',
  'invalid_dpop_proof',
  'use_dpop_nonce',
  'too_many_requests',
  'temporarily_unavailable',
  'not_found',
]);

/** The request a token is presented for: its method, path (no query) and Host; for /authz, the ingress's original request. */
interface RequestTarget {
  method: string;
  path: string;
  host: string | undefined;
}

/** The paths whose requests are counted by outcome here (the OAuth routes count their own). */
function isRequestPath(path: string): boolean {
  return path === '/mcp' || path === '/health' || path === AUTHZ_PATH || path.startsWith(`${AUTHZ_PATH}/`);
}

/** The request's `traceparent` header when it was sent once (two are ignored, as malformed). */
function traceparentOf(req: IncomingMessage): string | undefined {
  const value = req.headers.traceparent;
  return typeof value === 'string' ? value : undefined;
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
const CLIENT_ADDRESS_HEADERS = new Set([
  'forwarded',
  'x-real-ip',
  'true-client-ip',
  'x-client-ip',
  'x-cluster-client-ip',
  'client-ip',
  'cf-connecting-ip',
  'fastly-client-ip',
]);

function isClientAddressHeader(name: string): boolean {
  return name.startsWith('x-forwarded-') || CLIENT_ADDRESS_HEADERS.has(name);
}

/** Headers whose meaning the sidecar sets or removes (identity, addresses, credentials), by canonical name. */
function isOwnedHeader(canonical: string): boolean {
  return (
    canonical.startsWith('x-mcp-auth-') ||
    isClientAddressHeader(canonical) ||
    canonical === 'authorization' ||
    canonical === 'proxy-authorization'
  );
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
  // A DPoP proof is for this sidecar's check (spent here); the upstream is no audience of it.
  delete headers.dpop;
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
      dpopRefusal: req.dpopRefusal,
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
