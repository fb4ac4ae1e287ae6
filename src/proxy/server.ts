// The proxy listener. What happens to a request reads top to bottom here:
// route -> parse the Authorization header -> master check or SHA-256 -> one store round trip ->
// decide (credentials policy) -> rewrite identity headers -> stream to the upstream.
// Nothing reaches the upstream before the decision, and a store failure answers 503 (fail closed).

import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import { decideToken, hashToken, parseAuthorization, type DenialReason, type MasterToken, type Principal } from '../credentials.ts';
import { HttpError, methodNotAllowed, payloadTooLarge, tooManyRequests, writeJson } from '../errors.ts';
import { answerError, errorMapper, pathOf } from '../http.ts';
import { accessLogger, type Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import type { TokenStore } from '../store/types.ts';
import type { FailedAuthLimiter } from '../rate-limits.ts';
import { clientAddresses } from './client-address.ts';
import { upstreamStatusOf, type Forwarder } from './forwarder.ts';
import { removeHopByHop } from './hop-by-hop.ts';
import { identityHeaderValue } from './identity-value.ts';

/** Extra routes on the proxy listener (OAuth metadata and endpoints); true when handled. */
export type RouteHandler = (req: IncomingMessage, res: ServerResponse, path: string) => Promise<boolean> | boolean;

export interface ProxyDeps {
  config: Config;
  store: TokenStore;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  masterToken: MasterToken;
  forwarder: Forwarder;
  /** The external base URL ({base_url}); known only after the listener is bound when PORT=0. */
  publicUrl(): string;
  routes?: RouteHandler;
  /** Counts failed authentications per client address (shared through the store). */
  authFailures?: FailedAuthLimiter;
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

const INVALID_TOKEN_DESCRIPTION = 'the access token is invalid, expired or revoked';
const MASTER: Principal = Object.freeze({ kind: 'master', subject: 'master' }) as Principal;
const HEADER_SAFE = /^[\x20-\x7e]*$/;

export function createProxyServer(deps: ProxyDeps): Server {
  const { config, store, clock, logger, metrics, masterToken, forwarder, authFailures } = deps;
  const addresses = clientAddresses(config.proxy.trustedProxies);
  const access = accessLogger(logger);
  const mapError = errorMapper({
    logger,
    listener: 'proxy',
    onStoreUnavailable: () => {
      metrics.storeErrors.inc();
      metrics.unavailable.inc();
    },
  });

  function challenge(error: boolean): string {
    const base = `Bearer realm="mcp", resource_metadata="${deps.publicUrl()}/.well-known/oauth-protected-resource/mcp"`;
    return error ? `${base}, error="invalid_token", error_description="${INVALID_TOKEN_DESCRIPTION}"` : base;
  }

  /** Returns the principal, or throws the HttpError to answer with. Never forwards anything. */
  async function authenticate(req: IncomingMessage): Promise<Principal> {
    const parsed = parseAuthorization(req.rawHeaders);
    if (parsed.kind === 'missing') {
      metrics.denied('missing');
      throw new HttpError('unauthorized', 'a bearer token is required', { headers: { 'www-authenticate': challenge(false) } });
    }
    if (authFailures) {
      const retryAfter = authFailures.retryAfter(addresses.client(req));
      if (retryAfter > 0) {
        metrics.denied('rate_limited');
        throw tooManyRequests(retryAfter, 'too many failed authentications from this address');
      }
    }
    if (parsed.kind === 'malformed') return deny(req, 'malformed');
    // One SHA-256 a request: the store key, and what the master token is compared with (constant time).
    const tokenHash = hashToken(parsed.token);
    if (masterToken.matchesHash(tokenHash)) return MASTER;
    const started = performance.now();
    // A store that cannot answer rejects (StoreUnavailableError): the listener's error mapper answers 503.
    const found = await store.lookupToken(tokenHash);
    const decision = decideToken(tokenHash, found, clock.now());
    metrics.validationSeconds.observe((performance.now() - started) / 1000);
    if (!decision.ok) return deny(req, decision.reason);
    return decision.principal;
  }

  function deny(req: IncomingMessage, reason: DenialReason): never {
    metrics.denied(reason);
    authFailures?.recordFailure(addresses.client(req));
    (req as DeniedRequest)[DENIAL] = reason;
    throw new HttpError('invalid_token', INVALID_TOKEN_DESCRIPTION, { headers: { 'www-authenticate': challenge(true) } });
  }

  /** Strips what a client could spoof, then states who the sidecar authenticated. */
  function rewriteHeaders(req: IncomingMessage, principal: Principal): void {
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
    headers['x-mcp-auth-kind'] = principal.kind;
    headers['x-mcp-auth-subject'] = identityHeaderValue(principal.subject);
    if (principal.clientId !== undefined) headers['x-mcp-auth-client-id'] = identityHeaderValue(principal.clientId);
    // The token's granted scope (RFC 6749 §3.3 tokens are printable ASCII): the upstream decides what it allows.
    if (principal.scope !== undefined && HEADER_SAFE.test(principal.scope)) headers['x-mcp-auth-scope'] = principal.scope;
    const priorFor = fromTrustedProxy ? headers['x-forwarded-for'] : undefined;
    headers['x-forwarded-for'] = priorFor ? `${String(priorFor)}, ${remote}` : remote;
    if (!fromTrustedProxy || headers['x-forwarded-proto'] === undefined) {
      headers['x-forwarded-proto'] = (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http';
    }
    if (!fromTrustedProxy || headers['x-forwarded-host'] === undefined) {
      if (headers.host !== undefined) headers['x-forwarded-host'] = headers.host;
    }
  }

  function checkBodyLimit(req: IncomingMessage): void {
    const max = config.proxy.maxBodyBytes;
    if (max === 0) return;
    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > max) {
      throw payloadTooLarge(max);
    }
    // A declared length is exact (Node reads no more). Chunked bodies are counted by the forwarder as
    // they stream (src/proxy/forwarder.ts, maxBodyBytes).
  }

  async function health(res: ServerResponse): Promise<void> {
    const [storeOk, upstreamOk] = await Promise.all([
      store.ping().then(
        () => true,
        () => false,
      ),
      probeUpstream(config.upstream.url, config.upstream.healthTimeoutMs),
    ]);
    const status = storeOk && upstreamOk ? 'ok' : 'unavailable';
    writeJson(res, status === 'ok' ? 200 : 503, {
      status,
      store: storeOk ? 'ok' : 'unavailable',
      upstream: upstreamOk ? 'ok' : 'unavailable',
    });
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    // MCP's Streamable HTTP has no protocol upgrade (WebSocket, h2c), and Node stops parsing a connection
    // once it has handed an upgrade request over: refuse any request naming one, before any token lookup,
    // and close the connection, rather than forward it and leave the client hanging.
    if (req.headers.upgrade !== undefined) throw new HttpError('invalid_request', 'protocol upgrades are not supported', { headers: { connection: 'close' } });
    if (path === '/mcp') {
      // Node accepts any coding list that ends in chunked ("gzip, chunked", or two headers merged into
      // "identity, chunked") and would pass it on verbatim: an upstream that reads it differently
      // desyncs (request smuggling). Only plain chunked framing is forwarded.
      const te = req.headers['transfer-encoding'];
      if (te !== undefined && te.toLowerCase() !== 'chunked') throw new HttpError('invalid_request', 'unsupported Transfer-Encoding');
      const principal = await authenticate(req);
      checkBodyLimit(req);
      rewriteHeaders(req, principal);
      (req as DeniedRequest)[PRINCIPAL] = principal;
      metrics.forwarded.inc();
      forwarder.forward(req, res, q === -1 ? '' : url.slice(q));
      return;
    }
    if (path === '/health') {
      if (req.method !== 'GET' && req.method !== 'HEAD') throw methodNotAllowed('GET, HEAD');
      (req as DeniedRequest)[PRINCIPAL] = await authenticate(req);
      metrics.health.inc();
      await health(res);
      return;
    }
    if (deps.routes && (await deps.routes(req, res, path))) {
      metrics.oauth.inc();
      return;
    }
    metrics.notFound.inc();
    throw new HttpError('not_found');
  }

  const server = createServer(
    {
      maxHeaderSize: config.proxy.maxHeaderBytes,
      requestTimeout: config.proxy.requestTimeoutMs,
      headersTimeout: config.proxy.headersTimeoutMs,
      // Node checks both timeouts only every connectionsCheckingInterval (default 30 s), which would let
      // a slowloris client hold a connection up to 30 s past them: check at a quarter of the headers bound.
      connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(config.proxy.headersTimeoutMs / 4))),
    },
    (req, res) => {
      const started = performance.now();
      const url = req.url ?? '/'; // as the client sent it: forwarding rewrites req.url to the upstream's path
      res.once('close', () => accessLog(access, req, res, url, started));
      // A refused request's body is never read: it is answered, then its connection closed.
      handle(req, res).catch((err: unknown) => answerError(req, res, mapError(err, pathOf(url))));
    },
  );
  // No socket inactivity timeout: an idle SSE stream (only heartbeats, or nothing) must survive.
  server.timeout = 0;
  return server;
}

const DENIAL = Symbol('denial');
const PRINCIPAL = Symbol('principal');
type DeniedRequest = IncomingMessage & { [DENIAL]?: string; [PRINCIPAL]?: Principal };

function accessLog(logger: Logger, req: IncomingMessage, res: ServerResponse, url: string, started: number): void {
  if (!logger.isLevelEnabled('info')) return;
  const r = req as DeniedRequest;
  const q = url.indexOf('?');
  logger.info(
    {
      method: req.method,
      path: q === -1 ? url : url.slice(0, q),
      status: res.statusCode,
      durationMs: Math.round((performance.now() - started) * 1000) / 1000,
      authKind: r[PRINCIPAL]?.kind,
      subject: r[PRINCIPAL]?.subject,
      clientId: r[PRINCIPAL]?.clientId,
      denial: r[DENIAL],
      upstreamStatus: upstreamStatusOf(req),
      aborted: !res.writableFinished || undefined,
    },
    'request',
  );
}

/** What the upstream sees of a health probe: no credential, no identity headers, a name it can log. */
export const PROBE_HEADERS = { accept: 'application/json', 'user-agent': 'mcp-bearer-proxy-health-probe' } as const;

/** Any HTTP answer from the upstream within the bound counts as reachable; the response is discarded. */
export function probeUpstream(upstreamUrl: string, timeoutMs: number): Promise<boolean> {
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
