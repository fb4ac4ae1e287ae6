// The forwarder to the upstream with the watch that ends revoked streams, and the handle guard.

import type { Config } from '../config/load.ts';
import type { Clock } from '../model/clock.ts';
import type { Audit } from '../observability/audit.ts';
import { describe, type Logger } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import type { TokenStore } from '../store/types.ts';
import { createForwarder, type Forwarder } from './forwarder.ts';
import { HandleGuard } from './handle-guard.ts';
import { StreamRevocation } from './stream-revocation.ts';
import { upstreamFailureLogger } from './upstream-check.ts';

/** Session and task handles kept to the principal that received them. */
export function handleGuardFor(
  config: Config,
  shared: { store: TokenStore; clock: Clock; metrics: Metrics; audit: Audit; logger: Logger },
): HandleGuard {
  const { maxBatch, maxDepth } = config.policy;
  return new HandleGuard({
    ...shared,
    idleMs: config.proxy.handleIdleMs,
    limits: { maxBatch, maxDepth },
    defaultIssuer: config.idp.issuer,
  });
}

/** The forwarder to the upstream, and the watch (started) that ends its open streams when their token is revoked or expires. */
export async function startForwarding(
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
