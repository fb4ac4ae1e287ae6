// Builds a sidecar from a validated Config: store, listeners, forwarder, metrics; starts and stops it.
// Tests, the demo and src/entry/main.ts all go through here, so what they run is what production runs.

import { once } from 'node:events';
import { networkInterfaces } from 'node:os';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { systemClock, type Clock } from './model/clock.ts';
import type { Config } from './config/load.ts';
import { MasterToken } from './model/credentials.ts';
import { createLogger, describe, type Logger } from './observability/logger.ts';
import { Audit } from './observability/audit.ts';
import { InstrumentedStore, Metrics } from './observability/metrics.ts';
import { createAdminServer, type AdminOverrides } from './admin/server.ts';
import { createIdJagVerifier, createIdpVerifier } from './oauth/idp.ts';
import { AccountSessions } from './oauth/account.ts';
import { oauthRoutes } from './oauth/routes.ts';
import { clientName } from './model/clients.ts';
import type { OAuthContext } from './oauth/context.ts';
import { createIdpSignIn, IdpUnavailable, type IdpSignIn, type IdpTokens } from './oauth/oidc-client.ts';
import * as oidc from 'openid-client';
import type { Route } from './http/serve.ts';
import { upstreamCredentials as wireUpstreamCredentials, type UpstreamCredentials } from './upstream-credentials/wiring.ts';
import { configuredCipher } from './upstream-credentials/cipher.ts';
import { CredentialVault } from './upstream-credentials/vault.ts';
import { groupRulesConfigured } from './oauth/idp-check.ts';
import { createCimdResolver, type CimdResolver } from './oauth/cimd.ts';
import { createForwarder, type Forwarder } from './proxy/forwarder.ts';
import { createProxyServer } from './proxy/server.ts';
import { dpopVerifierFor } from './oauth/dpop.ts';
import { resourceMetadataUrl } from './oauth/resource-metadata.ts';
import { clientAddresses, type ClientAddresses } from './proxy/client-address.ts';
import { LastUseRecorder } from './proxy/last-use.ts';

/** A token's last use is written at most this often: the "last used" people see is that coarse. */
const LAST_USE_INTERVAL_MS = 60_000;
import { HandleGuard } from './proxy/handle-guard.ts';
import { StreamRevocation } from './proxy/stream-revocation.ts';
import { createPolicyGate, type PolicyGate } from './policy/gate.ts';
import { policyOf } from './policy/rules.ts';
import { probeMcpEndpoint, upstreamFailureLogger } from './proxy/upstream-check.ts';
import { limitKey, publicReach } from './http/net-address.ts';
import { FailedAuthLimiter, WindowLimit } from './http/rate-limits.ts';
import { MemoryTokenStore } from './store/memory.ts';
import { RedisTokenStore } from './store/redis.ts';
import { connectRedis, createRedisClient } from './store/redis-connection.ts';
import { LookupCacheSetupError, type LookupCacheFallback, type LookupCacheOptions } from './store/redis-lookup-cache.ts';
import { parseRedisUrl } from './store/redis-url.ts';
import type { QuotaStorage, SignedInUser, TokenStore } from './store/types.ts';
import { jwksRoute } from './assertion/jwks.ts';
import { parseSigningKey, signingKeyText, SigningKeys } from './assertion/keys.ts';
import { AssertionSigner } from './assertion/signer.ts';
import { unusedProfileEdits } from './model/profiles.ts';
import { createTracing } from './observability/tracing.ts';

export interface SidecarOptions {
  config: Config;
  /** Use this store instead of opening the one the config names (tests, demo). */
  store?: TokenStore;
  clock?: Clock;
  logger?: Logger;
  /** Default process metrics (off in tests that run several sidecars in one process). */
  defaultMetrics?: boolean;
  /** Use this Client ID Metadata Document resolver instead of the configured one (tests: a test CA). */
  cimd?: CimdResolver;
  /** The admin listener's `/metrics` and readiness when this process is not the whole sidecar (workers). */
  admin?: AdminOverrides;
  /** Where the `OTEL_*` variables are read (tracing is off unless an OTLP endpoint is named); default: the process's. */
  env?: NodeJS.ProcessEnv;
}

export interface Sidecar {
  readonly config: Config;
  readonly store: TokenStore;
  readonly metrics: Metrics;
  readonly audit: Audit;
  readonly logger: Logger;
  readonly proxyServer: Server;
  readonly adminServer: Server;
  readonly forwarder: Forwarder;
  /** Open SSE streams watched for revocation and expiry. */
  readonly streams: StreamRevocation;
  /** When tokens were last presented, queued for a coarse write. */
  readonly lastUse: LastUseRecorder;
  /** Caller assertions for the upstream (upstream.assertion), or undefined when off. */
  readonly assertions: { keys: SigningKeys; signer: AssertionSigner } | undefined;
  /** Binds both listeners; resolves with their URLs. */
  listen(): Promise<{ proxyUrl: string; adminUrl: string }>;
  /** Binds the proxy listener only (a worker process); resolves with its URL. */
  listenProxy(): Promise<string>;
  /** Binds the admin listener only (the primary of worker processes); resolves with its URL. */
  listenAdmin(): Promise<string>;
  /** One request to the upstream's MCP endpoint; logs a warning when it is unreachable or answers 404. */
  probeMcpEndpoint(): Promise<string | undefined>;
  publicUrl(): string;
  /** Graceful stop: no new connections, GET streams ended, in-flight requests given `graceMs`. */
  shutdown(graceMs?: number): Promise<void>;
}

/** Opens the store the config names; a Redis store is connected (and answering) before this resolves. */
export async function openStore(config: Config, clock: Clock, logger: Logger): Promise<TokenStore> {
  if (config.store === 'memory') return new MemoryTokenStore({ clock, keyPrefix: config.redis.keyPrefix });
  const client = createRedisClient({
    url: config.redis.url,
    commandTimeoutMs: config.redis.commandTimeoutMs,
    connectTimeoutMs: config.redis.connectTimeoutMs,
  });
  await connectRedis(client, config.redis.connectTimeoutMs);
  // ioredis reports every failed reconnect attempt; one line per state change is enough for operators.
  let down = false;
  client.on('error', (err: Error) => {
    if (down) return;
    down = true;
    logger.error({ err: describe(err) }, 'redis connection lost: requests are refused with 503 until it is back');
  });
  client.on('ready', () => {
    if (!down) return;
    down = false;
    logger.info('redis connection restored');
  });
  const store = new RedisTokenStore(client, { keyPrefix: config.redis.keyPrefix, connectTimeoutMs: config.redis.connectTimeoutMs });
  if (config.redis.lookupCache === 'tracking') {
    try {
      await store.trackLookups(lookupCacheOptions(config, logger));
    } catch (err) {
      await store.close();
      throw err;
    }
  } else if (config.redis.lookupCache === 'auto') {
    await cacheWherePossible(store, config, logger);
  }
  return store;
}

/**
 * redis.lookupCache: auto. The cache where the store allows it; where it does not, the strict mode with
 * one warning and the metric, never a refusal to start: Redis Cluster (tracking is per node), or a
 * Redis that refuses to track (an ACL user without CLIENT TRACKING, before 6.0). A cache whose own
 * connections cannot be opened within the connect timeout is not waited for either.
 */
async function cacheWherePossible(store: RedisTokenStore, config: Config, logger: Logger): Promise<void> {
  let reason: LookupCacheFallback;
  if (parseRedisUrl(config.redis.url).mode === 'cluster') reason = 'cluster';
  else {
    try {
      await store.trackLookups(lookupCacheOptions(config, logger));
      return;
    } catch (err) {
      reason = err instanceof LookupCacheSetupError ? 'tracking_refused' : 'setup_failed';
      logger.debug({ err: describe(err) }, 'token lookup cache: set-up failed');
    }
  }
  store.lookupCacheFallback = reason;
  logger.warn(
    { reason },
    reason === 'cluster'
      ? 'token lookup cache off (redis.lookupCache: auto): not available on Redis Cluster; every lookup reads Redis (strict mode)'
      : reason === 'tracking_refused'
        ? 'token lookup cache off (redis.lookupCache: auto): Redis refused invalidation tracking (an ACL user without CLIENT ID, CLIENT TRACKING, INFO, SUBSCRIBE on __redis__:invalidate, or Redis before 6.0); every lookup reads Redis (strict mode)'
        : 'token lookup cache off (redis.lookupCache: auto): its connections could not be set up; every lookup reads Redis (strict mode)',
  );
}

/** The lookup cache's settings from the config (redis.lookupCache: tracking or auto). */
export function lookupCacheOptions(config: Config, logger: Logger): LookupCacheOptions {
  return {
    maxEntries: config.redis.lookupCacheMaxEntries,
    pingIntervalMs: config.redis.lookupCachePingIntervalMs,
    connectTimeoutMs: config.redis.connectTimeoutMs,
    logger,
  };
}

/**
 * The admin listener holds every credential operation behind one secret: on a public address a scanner
 * finds it. Start anyway (that may be intended, behind a firewall), but say so loudly. 0.0.0.0 in a pod
 * or container only reaches its private network, and does not warn.
 */
function warnIfAdminExposed(server: Server, logger: Logger): void {
  const bound = (server.address() as AddressInfo).address;
  const reach = publicReach(bound, networkInterfaces());
  if (reach.length === 0) return;
  logger.warn(
    { adminAddress: bound, publicAddresses: reach },
    `ADMIN LISTENER EXPOSED: it listens on ${bound}, reachable on the public address(es) ${reach.join(', ')}. Anyone who can ` +
      'reach it can try the master token (failed attempts are throttled per address, not stopped). Bind ADMIN_HOST to ' +
      '127.0.0.1 or a private address, or firewall the port (docs/security.md, section 1).',
  );
}

/** Binding each listener (a worker process binds only the proxy's, its primary only the admin's). */
function listenersOf(config: Config, proxyServer: Server, adminServer: Server, logger: Logger, proxyBound: (port: number) => void) {
  return {
    async listenProxy(): Promise<string> {
      proxyServer.listen(config.proxy.port, config.proxy.host);
      await once(proxyServer, 'listening');
      proxyBound((proxyServer.address() as AddressInfo).port);
      return urlOf(proxyServer);
    },
    async listenAdmin(): Promise<string> {
      adminServer.listen(config.admin.port, config.admin.host);
      await once(adminServer, 'listening');
      warnIfAdminExposed(adminServer, logger);
      return urlOf(adminServer);
    },
  };
}

function urlOf(server: Server): string {
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}`;
}

export async function createSidecar(options: SidecarOptions): Promise<Sidecar> {
  const { config } = options;
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? createLogger(config.logLevel, undefined, config.logFormat);
  const metrics = new Metrics({ defaultMetrics: options.defaultMetrics ?? true });
  const rawStore = options.store ?? (await openStore(config, clock, logger));
  // Every store operation timed and its failures counted (mcp_auth_store_operation_*).
  const store = new InstrumentedStore(rawStore, metrics);
  const watch = rawStore.watch;
  if (watch) metrics.watchStore(watch);
  const audit = new Audit({ logger, store, clock, stream: config.audit.stream, maxLen: config.audit.maxLen });
  const masterToken = new MasterToken(config.masterToken);
  const vault = credentialVaultFor(config, store, clock, logger);

  const { forwarder, streams } = await startForwarding(config, store, clock, logger, metrics);
  for (const problem of await unusedProfileEdits(store, config.oauth.profiles)) logger.warn(problem);
  // When each token was last presented (listGrants, the account page): at most one write per token a minute.
  const lastUse = new LastUseRecorder({ store, clock, logger, intervalMs: LAST_USE_INTERVAL_MS, maxTokens: 100_000, batchSize: 500 });
  lastUse.start();

  let boundPublicUrl: string | undefined = config.proxy.publicUrl;
  const publicUrl = () => boundPublicUrl ?? `http://localhost:${config.proxy.port}`;

  const assertions = await assertionsFor(config, store, clock, logger, publicUrl);

  // Every per-address decision (limits, quotas) keys on the client's address behind the trusted proxies.
  const addresses = clientAddresses(config.proxy.trustedProxies);
  const policyGate = policyGateFor(config, { store, clock, metrics, audit, publicUrl, addresses });
  const tracing = await createTracing(options.env ?? process.env);
  const signIn = createIdpSignIn(config.idp, () => `${publicUrl()}/oauth/callback`, { logger, groupsNeeded: groupRulesConfigured(config) });
  const onProxy = wireUpstreamCredentials(config.upstream.credentials, config.idp, {
    store,
    clock,
    logger,
    audit,
    metrics,
    vault,
    signIn,
    publicUrl,
  });
  const failedAuthLimiter = (name: string, perMinute: number, listener: string) =>
    perMinute > 0
      ? new FailedAuthLimiter(new WindowLimit(store, clock, name, perMinute), clock, logger, listener, config.rateLimits.ipv6PrefixLength)
      : undefined;
  const authFailures = failedAuthLimiter('authfail', config.rateLimits.failedAuthPerMinute, 'proxy');
  const dpop = dpopVerifierFor(config, store, clock);
  const proxyServer = createProxyServer({
    config,
    store,
    clock,
    logger,
    metrics,
    masterToken,
    forwarder,
    publicUrl,
    addresses,
    authFailures,
    dpop,
    assertions: assertions?.signer,
    ...(onProxy !== undefined ? { upstreamCredentials: onProxy } : {}),
    routes: proxyRoutesFor(
      options,
      { config, store, clock, logger, metrics, audit, masterToken, signIn, authFailures, dpop, publicUrl, addresses },
      assertions,
      onProxy,
    ),
    policyGate,
    tracing,
    lastUse,
    handles: handleGuardFor(config, { store, clock, metrics, audit, logger }),
  });
  const adminFailures = failedAuthLimiter('adminfail', config.rateLimits.adminFailedAuthPerMinute, 'admin');
  const adminServer = adminServerFor(
    config,
    { store, clock, logger, metrics, audit, masterToken, upstreamCredentials: vault },
    {
      policy: policyGate?.policy,
      failures: adminFailures,
      overrides: options.admin,
    },
  );
  const { listenProxy, listenAdmin } = listenersOf(config, proxyServer, adminServer, logger, (port) => {
    boundPublicUrl ??= `http://localhost:${port}`;
  });

  return sidecarOf({
    config,
    rawStore,
    store,
    metrics,
    audit,
    logger,
    proxyServer,
    adminServer,
    forwarder,
    streams,
    lastUse,
    assertions,
    tracing,
    publicUrl,
    listenProxy,
    listenAdmin,
  });
}

/** The proxy listener's routes besides /mcp: the assertion keys, the connect pages, the OAuth endpoints and sign-in. */
function proxyRoutesFor(
  options: SidecarOptions,
  ctx: Omit<OAuthContext, 'idp' | 'idJag' | 'keepIdpTokens' | 'cimd'>,
  assertions: Sidecar['assertions'],
  onProxy: UpstreamCredentials | undefined,
): Route[] {
  return [
    ...(assertions ? [jwksRoute(assertions.keys)] : []),
    ...(onProxy?.routes ?? []),
    ...oauthRoutes({
      ...ctx,
      idp: createIdpVerifier(ctx.config.idp),
      idJag: createIdJagVerifier(ctx.config.idp),
      keepIdpTokens: onProxy?.keepIdpTokens,
      cimd: options.cimd ?? cimdResolverFor(ctx.config, ctx.clock, ctx.logger),
    }),
  ];
}

/** Session and task handles kept to the principal that received them. */
function handleGuardFor(
  config: Config,
  shared: { store: TokenStore; clock: Clock; metrics: Metrics; audit: Audit; logger: Logger },
): HandleGuard {
  const { maxBatch, maxDepth } = config.policy;
  return new HandleGuard({ ...shared, idleMs: config.proxy.handleIdleMs, limits: { maxBatch, maxDepth } });
}

/** The forwarder to the upstream, and the watch (started) that ends its open streams when their token is revoked or expires. */
async function startForwarding(
  config: Config,
  store: TokenStore,
  clock: Clock,
  logger: Logger,
  metrics: Metrics,
): Promise<{ forwarder: Forwarder; streams: StreamRevocation }> {
  const forwarder = createForwarder({
    upstreamUrl: config.upstream.url,
    headersTimeoutMs: config.upstream.headersTimeoutMs,
    maxSockets: config.upstream.maxSockets,
    maxBodyBytes: config.proxy.maxBodyBytes,
    onUpstreamResult: (status) => metrics.upstreamStatus(status),
    onStreamOpen: (req, res) => {
      metrics.openStreams.inc();
      streams.track(req, res);
    },
    onStreamClose: () => metrics.openStreams.dec(),
    onError: upstreamFailureLogger(logger, clock, config.upstream.url),
    onStoreUnavailable: (err) => {
      metrics.storeErrors.inc();
      logger.warn(
        { err: describe(err), listener: 'proxy', path: '/mcp' },
        'store unavailable after the upstream answered: 503, or the response cut (fail closed)',
      );
    },
  });

  // Open streams end when their token is revoked (on any replica) or expires, not only new requests.
  const streams = new StreamRevocation({
    store,
    clock,
    logger,
    metrics,
    recheckMs: config.proxy.streamRecheckMs,
    endStream: (res) => forwarder.endStream(res),
  });
  await streams.start();
  return { forwarder, streams };
}

/** The admin listener: every credential operation, behind the master token. */
function adminServerFor(
  config: Config,
  shared: {
    store: TokenStore;
    clock: Clock;
    logger: Logger;
    metrics: Metrics;
    audit: Audit;
    masterToken: MasterToken;
    upstreamCredentials: CredentialVault | undefined;
  },
  extra: { policy: PolicyGate['policy'] | undefined; failures: FailedAuthLimiter | undefined; overrides: AdminOverrides | undefined },
): Server {
  return createAdminServer({
    ...shared,
    maxBodyBytes: config.admin.maxBodyBytes,
    policy: extra.policy,
    quotas: config.policy.quotas && { quotas: config.policy.quotas, ipv6PrefixLength: config.rateLimits.ipv6PrefixLength },
    profileLifetimes: config.oauth.profiles,
    failures: extra.failures,
    ...extra.overrides,
  });
}

/** The parts of a running sidecar, as createSidecar built them. */
interface SidecarParts {
  config: Config;
  /** The store as opened (what Sidecar.store is). */
  rawStore: TokenStore;
  /** The same store, its operations timed and counted. */
  store: TokenStore;
  metrics: Metrics;
  audit: Audit;
  logger: Logger;
  proxyServer: Server;
  adminServer: Server;
  forwarder: Forwarder;
  streams: StreamRevocation;
  lastUse: LastUseRecorder;
  assertions: Sidecar['assertions'];
  tracing: Awaited<ReturnType<typeof createTracing>>;
  publicUrl: () => string;
  listenProxy: () => Promise<string>;
  listenAdmin: () => Promise<string>;
}

function sidecarOf(parts: SidecarParts): Sidecar {
  // What the sidecar shows is its parts as built, but the store as opened (not the timed wrapper) and
  // no tracing object.
  const { rawStore, store, tracing, ...shown } = parts;
  const { config, logger, proxyServer, adminServer, forwarder, streams, lastUse, audit, assertions, listenProxy, listenAdmin } = shown;
  return {
    ...shown,
    store: rawStore,
    async listen() {
      const proxyUrl = await listenProxy();
      return { proxyUrl, adminUrl: await listenAdmin() };
    },
    async probeMcpEndpoint() {
      const problem = await probeMcpEndpoint(config.upstream.url, config.upstream.healthTimeoutMs);
      if (problem !== undefined) logger.warn({ upstream: config.upstream.url }, `start-up probe: ${problem}`);
      return problem;
    },
    shutdown(graceMs = config.proxy.shutdownGraceMs) {
      assertions?.keys.stop();
      // Spans of the last requests are exported before the process goes.
      return shutDown({ proxyServer, adminServer, forwarder, streams, lastUse, store, logger, audit }, graceMs).finally(() =>
        tracing?.shutdown(),
      );
    },
  };
}

/** The kept upstream credentials, when a mode keeps any (the key was checked with the configuration). */
function credentialVaultFor(config: Config, store: TokenStore, clock: Clock, logger: Logger): CredentialVault | undefined {
  const cipher = configuredCipher(config.upstream.credentials);
  return cipher === undefined ? undefined : new CredentialVault({ store, cipher, clock, logger });
}

/**
 * Caller assertions, when `upstream.assertion` is on: the first signing key is published before the
 * listeners open (a store that cannot take it stops the start-up).
 */
async function assertionsFor(config: Config, store: TokenStore, clock: Clock, logger: Logger, publicUrl: () => string) {
  const { upstream } = config;
  if (!upstream.assertion) return undefined;
  const given = signingKeyText(upstream);
  if (given?.error !== undefined) throw new Error(given.error);
  const keys = new SigningKeys({
    store,
    clock,
    logger,
    assertionLifetimeMs: upstream.assertionLifetimeSeconds * 1000,
    rotationMs: upstream.assertionKeyRotationSeconds * 1000,
    pinned: given === undefined ? undefined : await parseSigningKey(given.text),
  });
  await keys.start();
  const signer = new AssertionSigner({
    keys,
    clock,
    issuer: publicUrl,
    audience: upstream.assertionAudience ?? new URL(upstream.url).origin,
    lifetimeSeconds: upstream.assertionLifetimeSeconds,
  });
  return { keys, signer };
}

/**
 * The per-tool policy gate, when `policy.rules` or `policy.quotas` is configured. Quotas without rules
 * need the body read too: every call is then allowed, and only counted.
 */
function policyGateFor(
  config: Config,
  shared: { store: QuotaStorage; clock: Clock; metrics: Metrics; audit: Audit; publicUrl: () => string; addresses: ClientAddresses },
): PolicyGate | undefined {
  const { store, clock, metrics, audit, publicUrl, addresses } = shared;
  const { rules, quotas, maxBodyBytes, maxBatch, maxDepth } = config.policy;
  if (rules === undefined && quotas === undefined) return undefined;
  return createPolicyGate({
    policy: rules === undefined ? policyOf('allow', { rules: [], scopes: [] }) : policyOf(config.policy.default, rules),
    quotas:
      quotas === undefined
        ? undefined
        : { quotas, store, clock, addressOf: (req) => limitKey(addresses.client(req), config.rateLimits.ipv6PrefixLength) },
    limits: { maxBatch, maxDepth },
    maxBodyBytes,
    metrics,
    audit,
    resourceMetadataUrl: () => resourceMetadataUrl(publicUrl()),
  });
}

/** Client ID Metadata Documents, as configured (only browser sign-in uses them). */
function cimdResolverFor(config: Config, clock: Clock, logger: Logger): CimdResolver | undefined {
  const c = config.oauth.clientMetadataDocuments;
  if (!c.enabled) return undefined;
  return createCimdResolver({
    timeoutMs: c.timeoutMs,
    maxBytes: c.maxBytes,
    cacheTtlMs: c.cacheTtlSeconds * 1000,
    maxCacheEntries: c.cacheMaxEntries,
    maxConcurrentFetches: c.maxConcurrentFetches,
    maxConcurrentFetchesPerAddress: c.maxConcurrentFetchesPerAddress,
    failureCacheMs: c.failureCacheSeconds * 1000,
    refetchCooldownMs: c.keySetRefetchCooldownSeconds * 1000,
    allowPrivateAddresses: c.allowPrivateAddresses,
    clock,
    logger,
  });
}

/**
 * Graceful stop: no new connections, GET streams ended (clients resume elsewhere), in-flight requests
 * given `graceMs`, then everything cut and closed.
 */
async function shutDown(
  parts: {
    proxyServer: Server;
    adminServer: Server;
    forwarder: Forwarder;
    streams: StreamRevocation;
    lastUse: LastUseRecorder;
    store: { close(): Promise<void> };
    logger: Logger;
    audit: Audit;
  },
  graceMs: number,
): Promise<void> {
  const { proxyServer, adminServer, forwarder, streams, lastUse, store, logger, audit } = parts;
  const closed = Promise.all([
    proxyServer.listening ? new Promise((r) => proxyServer.close(r)) : undefined,
    adminServer.listening ? new Promise((r) => adminServer.close(r)) : undefined,
  ]);
  proxyServer.closeIdleConnections();
  adminServer.closeIdleConnections();
  const endedStreams = forwarder.endStreams('get');
  let timer: NodeJS.Timeout | undefined;
  const graceOver = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), graceMs);
  });
  const drained = await Promise.race([forwarder.whenIdle().then(() => 'idle' as const), graceOver]);
  clearTimeout(timer);
  const cut = forwarder.endStreams('all');
  proxyServer.closeAllConnections();
  adminServer.closeAllConnections();
  await closed;
  forwarder.close();
  await streams.stop();
  await lastUse.stop();
  // Counts of repeated denials still in their window are recorded, not lost with the process.
  await audit.flushRepeated();
  await store.close();
  logger.info({ endedStreams: endedStreams + cut, drained: drained === 'idle' }, 'shut down');
}

/**
 * SIGTERM or SIGINT starts the sidecar's graceful shutdown once (a second signal changes nothing);
 * the process exits 0 when it is done, 1 when it failed.
 */
export function exitOnStopSignals(sidecar: Pick<Sidecar, 'shutdown'>, logger: Logger): void {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    sidecar.shutdown().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err: describe(err) }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}
