// Prometheus metrics on a registry per sidecar instance (two sidecars in one test process stay apart).
// Hot-path counters are bound to their labels once, so a request does no label hashing.

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { DenialReason } from './credentials.ts';

export type RequestOutcome = 'forwarded' | 'denied' | 'unavailable' | 'not_found' | 'health' | 'oauth';

export class Metrics {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: 'mcp_auth_requests_total',
    help: 'Proxy-listener requests by outcome and denial reason',
    labelNames: ['outcome', 'reason'] as const,
    registers: [this.registry],
  });
  readonly validationSeconds = new Histogram({
    name: 'mcp_auth_validation_seconds',
    help: 'Time to validate a bearer token (hash + store lookup + decision)',
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1, 2],
    registers: [this.registry],
  });
  readonly storeErrors = new Counter({
    name: 'mcp_auth_store_errors_total',
    help: 'Store (Redis) operations that failed or timed out',
    registers: [this.registry],
  });
  readonly upstreamResponses = new Counter({
    name: 'mcp_auth_upstream_responses_total',
    help: 'Upstream responses by status class, and upstream failures',
    labelNames: ['status'] as const,
    registers: [this.registry],
  });
  readonly openStreams = new Gauge({
    name: 'mcp_auth_open_sse_streams',
    help: 'SSE responses currently streaming through the proxy',
    registers: [this.registry],
  });
  readonly tokensIssued = new Counter({
    name: 'mcp_auth_tokens_issued_total',
    help: 'Tokens issued by kind',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly tokensRevoked = new Counter({
    name: 'mcp_auth_tokens_revoked_total',
    help: 'Tokens revoked by kind',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly adminOperations = new Counter({
    name: 'mcp_auth_admin_operations_total',
    help: 'Admin operations by operation and HTTP status',
    labelNames: ['operation', 'status'] as const,
    registers: [this.registry],
  });

  readonly forwarded = this.requests.labels('forwarded', '');
  readonly #denied = new Map<DenialReason | 'rate_limited', Counter.Internal>();

  constructor(options: { defaultMetrics?: boolean } = {}) {
    if (options.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry });
  }

  denied(reason: DenialReason | 'rate_limited'): void {
    let child = this.#denied.get(reason);
    if (!child) {
      child = this.requests.labels('denied', reason);
      this.#denied.set(reason, child);
    }
    child.inc();
  }

  upstreamStatus(status: number | 'error'): void {
    this.upstreamResponses.labels(status === 'error' ? 'error' : `${Math.floor(status / 100)}xx`).inc();
  }
}
