// Builds a sidecar from a validated Config: store, listeners, forwarder, metrics; starts and stops it.
// Tests, the demo and src/entry/main.ts all go through here, so what they run is what production runs.

import type { Server } from 'node:http';
import { systemClock, type Clock } from './model/clock.ts';
import type { Config } from './config/load.ts';
import { MasterToken } from './model/credentials.ts';
import { createLogger, describe, type Logger } from './observability/logger.ts';
import { Audit } from './observability/audit.ts';
import { InstrumentedStore, Metrics } from './observability/metrics.ts';
import type { AdminOverrides } from './admin/server.ts';
import { adminServerFor } from './admin/wiring.ts';
import { createIdpSignIn } from './oauth/oidc-client.ts';
import { credentialVault, upstreamCredentials as wireUpstreamCredentials } from './upstream-credentials/wiring.ts';
import { groupRulesConfigured } from './oauth/idp-check.ts';
import type { CimdResolver } from './oauth/cimd.ts';
import { proxyRoutesFor } from './oauth/wiring.ts';
import type { Forwarder } from './proxy/forwarder.ts';
import type { PolicyGate } from './proxy/policy-gate.ts';
import { createProxyServer } from './proxy/server.ts';
import { dpopVerifierFor } from './oauth/dpop.ts';
import { clientAddresses } from './http/client-address.ts';
import { LastUseRecorder } from './proxy/last-use.ts';
import { handleGuardFor, startForwarding } from './proxy/wiring.ts';
import type { StreamRevocation } from './proxy/stream-revocation.ts';
import { policyGateFor } from './policy/wiring.ts';
import { probeMcpEndpoint } from './proxy/upstream-check.ts';
import { listenersOf } from './http/listeners.ts';
import { FailedAuthLimiter, WindowLimit } from './http/rate-limits.ts';
import { openStore } from './store/wiring.ts';
import type { TokenStore } from './store/types.ts';
import { assertionsFor } from './assertion/wiring.ts';
import type { SigningKeys } from './assertion/keys.ts';
import type { AssertionSigner } from './assertion/signer.ts';
import { unusedProfileEdits } from './model/profiles.ts';
import { createTracing } from './observability/tracing.ts';

export { lookupCacheOptions, openStore } from './store/wiring.ts';

/** A token's last use is written at most this often: the "last used" people see is that coarse. */
const LAST_USE_INTERVAL_MS = 60_000;

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
  const vault = credentialVault(config.upstream.credentials, { store, clock, logger });

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
  const policyGate = policyGateFor(config, { store, clock, metrics, audit, publicUrl, addresses, logger });
  const tracing = await createTracing(options.env ?? process.env);
  const signIn = createIdpSignIn(config.idp, () => `${publicUrl()}/oauth/callback`, { logger, groupsNeeded: groupRulesConfigured(config) });
  const shared = { store, clock, logger, audit, metrics, vault, signIn, publicUrl };
  const onProxy = wireUpstreamCredentials(config.upstream.credentials, config.idp, shared);
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
      { config, store, clock, logger, metrics, audit, masterToken, signIn, authFailures, dpop, publicUrl, addresses },
      { cimd: options.cimd, assertions, onProxy },
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
    { policy: policyGate?.policy, failures: adminFailures, overrides: options.admin },
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
    policyGate,
    assertions,
    tracing,
    publicUrl,
    listenProxy,
    listenAdmin,
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
  /** The per-tool policy gate, when one is configured (a graceful stop waits for its approval notices). */
  policyGate: PolicyGate | undefined;
  assertions: Sidecar['assertions'];
  tracing: Awaited<ReturnType<typeof createTracing>>;
  publicUrl: () => string;
  listenProxy: () => Promise<string>;
  listenAdmin: () => Promise<string>;
}

function sidecarOf(parts: SidecarParts): Sidecar {
  // What the sidecar shows is its parts as built, but the store as opened (not the timed wrapper) and
  // no tracing object.
  const { rawStore, store, tracing, policyGate, ...shown } = parts;
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
      return shutDown({ proxyServer, adminServer, forwarder, streams, lastUse, store, logger, audit, policyGate }, graceMs).finally(() =>
        tracing?.shutdown(),
      );
    },
  };
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
    policyGate: PolicyGate | undefined;
  },
  graceMs: number,
): Promise<void> {
  const { proxyServer, adminServer, forwarder, streams, lastUse, store, logger, audit, policyGate } = parts;
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
  // Approvers are told of the calls held last (each notice is bounded by its own timeout).
  await policyGate?.settled();
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
