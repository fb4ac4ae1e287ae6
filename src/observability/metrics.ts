// Prometheus metrics on a registry per sidecar instance (two sidecars in one test process stay apart).
// Hot-path counters are bound to their labels once, so a request builds no label object and looks up
// no child (prom-client 15's bound child still hashes its fixed labels on each call: about 0.15 µs).
// Served unauthenticated at GET /metrics on the admin listener (like /livez and /readyz); no label ever holds
// a token, a hash, a client id or an address, so the scrape reveals traffic shapes, not identities.
// Each metric's `@label` doc comment names the values of one of its labels: the metrics table of
// docs/operations.md is generated from them and from the metrics themselves (`npm run docs:metrics`).

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { DenialReason } from '../model/credentials.ts';
import type { ErrorCode } from '../model/errors.ts';
import { StoreDecorator, type StoreOperation } from '../store/decorator.ts';
import type { StoreWatch, TokenStore } from '../store/types.ts';

export type RequestOutcome = 'forwarded' | 'allowed' | 'connect' | 'denied' | 'refused' | 'unavailable' | 'not_found' | 'health' | 'oauth';

export class Metrics {
  readonly registry = new Registry();
  /**
   * @label outcome `forwarded` (to the upstream), `allowed` (by `/authz`, forward-auth), `connect` (`/authz`'s marked `401` for a user without a usable upstream credential, handed by the ingress to `/authz-connect`, which counts the request's own outcome), `denied` (the token), `refused` (anything else the sidecar answered with an error), `unavailable` (the store failed: `503`), `health` (an authenticated `/health`), `oauth` (an OAuth endpoint, sign-in page or metadata document, whatever it answered), `not_found`
   * @label reason empty, except: for `denied` the denial reason, `missing`, `malformed`, `unknown`, `revoked`, `expired`, `corrupt`, `dpop_proof`, `dpop_replay`, `dpop_binding` (DPoP, docs/dpop.md) or `rate_limited`; for `refused` the error's code, one of the fixed catalogue of src/model/errors.ts: `invalid_request` (framing), `forbidden` (Origin), `insufficient_scope` (policy, a scope would lift it), `insufficient_authorization` (policy, answered at 200 as a tool error; a call a person denied, docs/approval.md), `approval_required` (a call held for a person's approval, answered with the link to approve it: docs/approval.md), `quota_exceeded`, `upstream_credential_missing` (no usable upstream credential: docs/upstream-credentials.md), `temporarily_unavailable` (the provider of the user's upstream credential cannot be reached: `503`), `foreign_handle` (a session or task id bound to another caller, answered as unknown: docs/sessions.md), `method_not_allowed`, `payload_too_large`, `misdirected_request` (Host), and for Node's own answer to a request it could not read whole, before or after a request object exists (a broken request line, header or body `invalid_request`, headers or a body too slow `request_timeout` (408), headers over `proxy.maxHeaderBytes` `request_header_fields_too_large` (431), oversized chunk extensions `payload_too_large`), ...
   */
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
    help: 'Requests (proxy and admin) refused with 503, or cut off after the upstream answered, because the store (Redis) failed or timed out',
    registers: [this.registry],
  });
  /** @label operation the store operation (`lookupToken`, `deleteClient`, `hitCounter`, …): a method of the store's interface */
  readonly storeSeconds = new Histogram({
    name: 'mcp_auth_store_operation_seconds',
    help: 'Latency of store (Redis) operations by operation, failed ones included',
    labelNames: ['operation'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2],
    registers: [this.registry],
  });
  /** @label operation the store operation, as in `mcp_auth_store_operation_seconds` */
  readonly storeOperationErrors = new Counter({
    name: 'mcp_auth_store_operation_errors_total',
    help: 'Store (Redis) operations that failed or timed out, by operation',
    labelNames: ['operation'] as const,
    registers: [this.registry],
  });
  /** The store's own state, read at each scrape (none: up, no replicas, no lookup cache). */
  #store: StoreWatch | undefined;
  readonly storeUp = new Gauge({
    name: 'mcp_auth_store_up',
    help: "1 while the store's connections are ready (Redis: the main one and the token lookups' one), 0 while one is down or reconnecting",
    registers: [this.registry],
    // Over worker processes the lowest wins: 0 when any process's connection is down.
    aggregator: 'min',
    collect: () => {
      this.storeUp.set(this.#store === undefined || this.#store.ready() ? 1 : 0);
    },
  });
  /** @label result `acknowledged`, `unacknowledged` (only when the primary has replicas: docs/redis-ha.md) */
  readonly revocationWaits = new Counter({
    name: 'mcp_auth_revocation_waits_total',
    help: 'WAITs for a replica after a revocation (Redis with replicas), by whether a replica acknowledged in time',
    labelNames: ['result'] as const,
    registers: [this.registry],
    collect: () => {
      const { waits, unacknowledged } = this.#store?.replication() ?? { waits: 0, unacknowledged: 0 };
      this.revocationWaits.reset();
      this.revocationWaits.labels('acknowledged').inc(waits - unacknowledged);
      this.revocationWaits.labels('unacknowledged').inc(unacknowledged);
    },
  });
  /** A counter that reports one of the lookup cache's running totals at each scrape (0 without a cache). */
  #lookupCacheTotal(name: string, help: string, stat: 'invalidations' | 'barriers' | 'drops'): Counter {
    const counter: Counter = new Counter({
      name,
      help,
      registers: [this.registry],
      collect: () => {
        counter.reset();
        counter.inc(this.#lookupCache?.stats[stat] ?? 0);
      },
    });
    return counter;
  }
  /** @label result `hit`, `miss`, `bypass` (docs/lookup-cache.md) */
  readonly lookupCacheLookups = new Counter({
    name: 'mcp_auth_lookup_cache_lookups_total',
    help: 'Token lookups with the lookup cache on (redis.lookupCache: auto or tracking), by result: hit, miss (read from Redis), bypass (cache not live: read from Redis)',
    labelNames: ['result'] as const,
    registers: [this.registry],
    collect: () => {
      const stats = this.#lookupCache?.stats;
      this.lookupCacheLookups.reset();
      if (stats === undefined) return;
      this.lookupCacheLookups.labels('hit').inc(stats.hits);
      this.lookupCacheLookups.labels('miss').inc(stats.misses);
      this.lookupCacheLookups.labels('bypass').inc(stats.bypasses);
    },
  });
  readonly lookupCacheInvalidations = this.#lookupCacheTotal(
    'mcp_auth_lookup_cache_invalidations_total',
    'Invalidation messages the lookup cache received from Redis',
    'invalidations',
  );
  readonly lookupCacheBarriers = this.#lookupCacheTotal(
    'mcp_auth_lookup_cache_barriers_total',
    'Barriers the lookup cache sent to Redis (a PING and a GET, shared by every hit that began in the same turn of the event loop): the Redis work of a hit',
    'barriers',
  );
  readonly lookupCacheDrops = this.#lookupCacheTotal(
    'mcp_auth_lookup_cache_drops_total',
    'Times the whole lookup cache was emptied (a connection lost or silent, a FLUSHDB/FLUSHALL)',
    'drops',
  );
  readonly lookupCacheLive = new Gauge({
    name: 'mcp_auth_lookup_cache_live',
    help: '1 while the lookup cache is in use (invalidation tracking confirmed), 0 while every lookup bypasses it',
    registers: [this.registry],
    // Over worker processes the lowest wins: 0 when any process bypasses its cache.
    aggregator: 'min',
    collect: () => {
      this.lookupCacheLive.set(this.#lookupCache?.live === true ? 1 : 0);
    },
  });
  /** @label reason `tracking_refused`, `setup_failed` */
  readonly lookupCacheUnavailable = new Gauge({
    name: 'mcp_auth_lookup_cache_unavailable',
    help: '1 (with the reason) when redis.lookupCache is auto and the store cannot have the cache: every lookup reads Redis (strict). Reasons: tracking_refused, setup_failed',
    labelNames: ['reason'] as const,
    registers: [this.registry],
    // Over worker processes the highest wins: 1 when any process runs without its cache.
    aggregator: 'max',
    collect: () => {
      this.lookupCacheUnavailable.reset();
      const reason = this.#store?.lookupCacheFallback;
      if (reason !== undefined) this.lookupCacheUnavailable.labels(reason).set(1);
    },
  });
  readonly lookupCacheEntries = new Gauge({
    name: 'mcp_auth_lookup_cache_entries',
    help: 'Token records held by the lookup cache',
    registers: [this.registry],
    collect: () => {
      this.lookupCacheEntries.set(this.#lookupCache?.size ?? 0);
    },
  });
  /** @label status `1xx` … `5xx` (the class of the upstream's status), `error` (refused, reset or timed out: the client got `502`/`504`) */
  readonly upstreamResponses = new Counter({
    name: 'mcp_auth_upstream_responses_total',
    help: 'Upstream responses by status class, and upstream failures',
    labelNames: ['status'] as const,
    registers: [this.registry],
  });
  /** @label result `ok`, `refused`, `unavailable` */
  readonly upstreamCredentialRefreshes = new Counter({
    name: 'mcp_auth_upstream_credential_refreshes_total',
    help: "Refreshes of users' kept upstream credentials at their provider, by result (ok, refused, unavailable)",
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly upstreamCredentialsConnected = new Counter({
    name: 'mcp_auth_upstream_credentials_connected_total',
    help: 'Accounts users connected (or IdP sign-ins renewed) through the connect pages',
    registers: [this.registry],
  });
  readonly upstreamCredentialsMissing = new Counter({
    name: 'mcp_auth_upstream_credentials_missing_total',
    help: 'Requests of a user without a usable upstream credential that needed it (answered with the link to connect or 401, never forwarded); counted once, where the answer is decided: /mcp, or /authz-connect behind an ingress (never /authz)',
    registers: [this.registry],
  });
  readonly openStreams = new Gauge({
    name: 'mcp_auth_open_sse_streams',
    help: 'SSE responses currently streaming through the proxy',
    registers: [this.registry],
  });
  /** @label reason `revoked`, `expired` */
  readonly streamsEnded = new Counter({
    name: 'mcp_auth_streams_ended_total',
    help: 'Open SSE streams the sidecar ended because their token was revoked or expired',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  /** @label kind `user`, `oauth_access`, `oauth_refresh` */
  readonly tokensIssued = new Counter({
    name: 'mcp_auth_tokens_issued_total',
    help: 'Tokens issued by kind',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  /** @label kind `user`, `oauth_access`, `oauth_refresh`, `oauth_refresh_family`, `oauth_code_reuse` (what a second use of an authorization code revoked) */
  readonly tokensRevoked = new Counter({
    name: 'mcp_auth_tokens_revoked_total',
    help: 'Tokens revoked by kind',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  /** @label rule the deciding rule's `name` in policy.rules, or `default` (docs/policy.md); never a tool or an argument */
  readonly policyDenials = new Counter({
    name: 'mcp_auth_policy_denials_total',
    help: 'POST /mcp calls refused by the per-tool policy, by the deciding rule (never by tool or argument)',
    labelNames: ['rule'] as const,
    registers: [this.registry],
  });
  /**
   * @label rule the `approve` rule's `name` in policy.rules (docs/approval.md)
   * @label outcome `requested`, `approved`, `denied` (by a person or the admin), `used` (the held call forwarded), `expired`, `refused` (a retry answered with the denial), `webhook_failed`
   */
  readonly approvals = new Counter({
    name: 'mcp_auth_approvals_total',
    help: 'Calls held for approval, by rule and outcome (never by tool or argument)',
    labelNames: ['rule', 'outcome'] as const,
    registers: [this.registry],
  });
  /** @label rule the quota rule's `name` in policy.quotas, or `#<index>` (docs/quotas.md) */
  readonly quotaRefusals = new Counter({
    name: 'mcp_auth_quota_refusals_total',
    help: '/mcp requests refused over a quota (policy.quotas), by the rule (its name, or #<index>)',
    labelNames: ['rule'] as const,
    registers: [this.registry],
  });
  /** @label handle `session`, `task` (docs/sessions.md) */
  readonly foreignHandles = new Counter({
    name: 'mcp_auth_foreign_handles_total',
    help: 'Requests refused for presenting an MCP session id or task id bound to another caller, by handle (session, task)',
    labelNames: ['handle'] as const,
    registers: [this.registry],
  });
  readonly refreshGraceReuses = new Counter({
    name: 'mcp_auth_refresh_grace_reuses_total',
    help: 'Rotated refresh tokens presented again within the grace window and answered with the pair their rotation issued',
    registers: [this.registry],
  });
  /**
   * @label operation an admin operation's name (the table in docs/admin.md), or `unknown` for a name that is none
   * @label status the HTTP status of the answer (`200`, `400`, `404`, …)
   */
  readonly adminOperations = new Counter({
    name: 'mcp_auth_admin_operations_total',
    help: 'Admin operations by operation and HTTP status',
    labelNames: ['operation', 'status'] as const,
    registers: [this.registry],
  });

  /**
   * @label operation `createUser`, `getUser`, `findUsers`, `replaceUser`, `patchUser`, `deleteUser`, `discovery`, or `unknown`
   * @label status the HTTP status of the answer (`200`, `201`, `204`, `400`, `401`, `404`, `409`, …)
   */
  readonly scimRequests = new Counter({
    name: 'mcp_auth_scim_requests_total',
    help: 'SCIM requests of the directory on the admin listener, by operation and HTTP status',
    labelNames: ['operation', 'status'] as const,
    registers: [this.registry],
  });
  readonly scimDeactivations = new Counter({
    name: 'mcp_auth_scim_deactivations_total',
    help: 'People the directory made inactive or deleted whose access was revoked (retries counted again)',
    registers: [this.registry],
  });
  readonly forwarded = this.requests.labels('forwarded', '');
  /** `/authz` answered 200: the ingress forwards the request itself (forward-auth). */
  readonly allowed = this.requests.labels('allowed', '');
  readonly unavailable = this.requests.labels('unavailable', '');
  readonly health = this.requests.labels('health', '');
  readonly oauth = this.requests.labels('oauth', '');
  readonly notFound = this.requests.labels('not_found', '');
  /** A policy denial no scope would lift, answered by the sidecar at 200 (a tool error): nothing forwarded. */
  readonly policyAnswered = this.requests.labels('refused', 'insufficient_authorization');
  /** A call an `approve` rule holds, answered with the link to approve it (docs/approval.md): nothing forwarded. */
  readonly approvalRequired = this.requests.labels('refused', 'approval_required');
  /** A session or task id bound to another caller, answered as an unknown one: nothing forwarded (docs/sessions.md). */
  readonly foreignHandle = this.requests.labels('refused', 'foreign_handle');
  /** A request over a quota (a tool error at 200, or a 429): its outcome, counted where it is decided. */
  readonly quotaExceeded = this.requests.labels('refused', 'quota_exceeded');
  /**
   * A user without a usable upstream credential (upstream.credentials) on a request that needs it:
   * answered with the link (-32042, or a tool or JSON-RPC error, at 200) or the 401 challenge, nothing
   * forwarded. Counted once the answer is decided, at /mcp or /authz-connect: /authz, which cannot
   * read the body, counts its marked 401 as `connect` instead.
   */
  readonly credentialMissing = this.requests.labels('refused', 'upstream_credential_missing');
  /**
   * `/authz` answered the marked 401 of a user without a usable upstream credential (forward-auth): an
   * ingress that knows the mark hands the request to `/authz-connect`, which counts what became of it
   * (forwarded, or `upstream_credential_missing`); one that does not passes the 401 on.
   */
  readonly connectHandoff = this.requests.labels('connect', '');
  readonly #denied = new Map<DenialReason | 'rate_limited', Counter.Internal>();
  readonly #refused = new Map<ErrorCode, Counter.Internal>();
  readonly #upstream = new Map<string, Counter.Internal>();

  constructor(options: { defaultMetrics?: boolean } = {}) {
    if (options.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry });
  }

  denied(reason: DenialReason | 'rate_limited'): void {
    bound(this.#denied, reason, () => this.requests.labels('denied', reason)).inc();
  }

  /**
   * A request with an acceptable token (or none needed yet) answered with an error the sidecar chose
   * (framing 400, Origin or policy 403, 405, 413, 421, ...), labelled by the error's code: a fixed
   * catalogue, so the label stays bounded.
   */
  refused(code: ErrorCode): void {
    bound(this.#refused, code, () => this.requests.labels('refused', code)).inc();
  }

  streamEnded(reason: 'revoked' | 'expired'): void {
    this.streamsEnded.labels(reason).inc();
  }

  upstreamStatus(status: number | 'error'): void {
    const key = status === 'error' ? 'error' : `${Math.floor(status / 100)}xx`;
    bound(this.#upstream, key, () => this.upstreamResponses.labels(key)).inc();
  }

  /**
   * What `mcp_auth_store_up`, `mcp_auth_revocation_waits_total` and the `mcp_auth_lookup_cache_*`
   * series report at each scrape: the store's own state and counters.
   */
  watchStore(watch: StoreWatch): void {
    this.#store = watch;
  }

  get #lookupCache() {
    return this.#store?.lookupCache;
  }
}

/** The child bound to `key`'s labels, made on first use and kept: later calls look up no child. */
function bound<K>(cache: Map<K, Counter.Internal>, key: K, make: () => Counter.Internal): Counter.Internal {
  let child = cache.get(key);
  if (!child) {
    child = make();
    cache.set(key, child);
  }
  return child;
}

/**
 * The same store, timing every operation into `mcp_auth_store_operation_seconds{operation}` and
 * counting failures in `mcp_auth_store_operation_errors_total{operation}`; `close` and `watch` pass
 * through. One `.then` per call, the hot path's lookupToken included: no promise beyond it.
 */
export class InstrumentedStore extends StoreDecorator {
  readonly #metrics: Metrics;
  /** Each operation's children, bound on first use: later calls look up no child. */
  readonly #bound = new Map<
    StoreOperation,
    { timer: ReturnType<Metrics['storeSeconds']['labels']>; errors: ReturnType<Metrics['storeOperationErrors']['labels']> }
  >();

  constructor(store: TokenStore, metrics: Metrics) {
    super(store);
    this.#metrics = metrics;
  }

  protected around<T>(operation: StoreOperation, call: () => Promise<T>): Promise<T> {
    let bound = this.#bound.get(operation);
    if (bound === undefined) {
      bound = { timer: this.#metrics.storeSeconds.labels(operation), errors: this.#metrics.storeOperationErrors.labels(operation) };
      this.#bound.set(operation, bound);
    }
    const { timer, errors } = bound;
    const started = performance.now();
    return call().then(
      (value) => {
        timer.observe((performance.now() - started) / 1000);
        return value;
      },
      (err: unknown) => {
        timer.observe((performance.now() - started) / 1000);
        errors.inc();
        throw err;
      },
    );
  }
}
