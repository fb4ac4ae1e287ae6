// The production store on Redis (ioredis): standalone, Sentinel or Cluster. One part per aggregate
// (src/store/<aggregate>/redis.ts), all on one connection and key layout (redis-core.ts), composed
// into one store; every operation's failure passes through one choke point (asStoreFailure,
// RedisTokenStore below) on its way out. Connections: redis-connection.ts; plans: redis-keyspace.ts;
// WAIT after revocations: redis-replication.ts.

import { KeyspaceApprovals } from './approvals/part.ts';
import { RedisClients } from './clients/redis.ts';
import { RedisCounters } from './counters/redis.ts';
import { StoreDecorator, type StoreOperation } from './decorator.ts';
import { KeyspaceDevices } from './devices/part.ts';
import { KeyspaceDirectory } from './directory/part.ts';
import { RedisHandles } from './handles/redis.ts';
import { RedisInfrastructure } from './infrastructure/redis.ts';
import { composeParts } from './operations.ts';
import type { KeyLayout } from './records.ts';
import { asStoreFailure, type RedisClient } from './redis-connection.ts';
import { RedisCore } from './redis-core.ts';
import type { ClusterLookupCache } from './redis-cluster-lookup-cache.ts';
import { TrackedLookupCache, type LookupCacheFallback, type LookupCacheOptions } from './redis-lookup-cache.ts';
import type { ReplicationStats } from './redis-replication.ts';
import { RedisRefreshTokens } from './refresh-tokens/redis.ts';
import { KeyspaceSignIn } from './sign-in/part.ts';
import { KeyspaceSubjects } from './subjects/part.ts';
import { RedisTokens } from './tokens/redis.ts';
import type { StoreWatch, TokenStore } from './types.ts';
import type { TokenLookup } from '../model/records.ts';
import { RedisUpstreamCredentials } from './upstream-credentials/redis.ts';

/** Every part on one core: the operations on Redis that RedisTokenStore puts its boundary around. */
function redisOperations(core: RedisCore): TokenStore {
  return {
    ...composeParts({
      tokens: new RedisTokens(core),
      clients: new RedisClients(core),
      refreshTokens: new RedisRefreshTokens(core),
      signIn: new KeyspaceSignIn(core),
      devices: new KeyspaceDevices(core),
      handles: new RedisHandles(core),
      subjects: new KeyspaceSubjects(core),
      upstreamCredentials: new RedisUpstreamCredentials(core),
      directory: new KeyspaceDirectory(core),
      counters: new RedisCounters(core),
      infrastructure: new RedisInfrastructure(core),
      approvals: new KeyspaceApprovals(core),
    }),
    close: () => core.close(),
  };
}

/**
 * The choke point: every operation of the store hands its failure to asStoreFailure, so a Redis
 * failure leaves the store as StoreUnavailableError (cause kept for the log) and a bug in this code
 * as itself. The decorator delegates every operation of TokenStore (an operation added later does not
 * compile until it is listed in STORE_OPERATIONS). lookupToken is handed straight through: the Redis
 * operations classify its failures inline, to keep a wrapper's extra promise per call (about
 * 0.2 µs) off the hot path.
 */
export class RedisTokenStore extends StoreDecorator {
  readonly #core: RedisCore;

  constructor(redis: RedisClient, options: { keyPrefix?: string; connectTimeoutMs?: number } = {}) {
    const core = new RedisCore(redis, options);
    super(redisOperations(core));
    this.#core = core;
  }

  protected around<T>(_operation: StoreOperation, call: () => Promise<T>): Promise<T> {
    return storeFailures(call);
  }

  override lookupToken(tokenHash: string): Promise<TokenLookup> {
    return this.inner.lookupToken(tokenHash);
  }

  override close(): Promise<void> {
    return storeFailures(() => this.inner.close());
  }

  /** Set when redis.lookupCache is auto and the cache could not be used: why (the metric says it). */
  lookupCacheFallback: LookupCacheFallback | undefined;

  override get watch(): StoreWatch {
    const core = this.#core;
    const outer = this;
    return {
      ready: () => core.ready,
      replication: () => core.replicationStats,
      get lookupCache() {
        return core.lookupCache;
      },
      get lookupCacheFallback() {
        return outer.lookupCacheFallback;
      },
    };
  }

  /** Copies of the counters of WAITs issued after revocations. */
  get replicationStats(): ReplicationStats {
    return this.#core.replicationStats;
  }

  get keys(): KeyLayout {
    return this.#core.keys;
  }

  /** The main connection (for readiness events and operational checks). */
  get client(): RedisClient {
    return this.#core.redis;
  }

  /** The token lookups' connection, once the first lookup has opened it. */
  get lookupClient(): RedisClient | undefined {
    return this.#core.lookups.client;
  }

  /** The lookup cache on one server (standalone, Sentinel), when on (its state and counters). */
  get lookupCache(): TrackedLookupCache | undefined {
    const cache = this.#core.lookupCache;
    return cache instanceof TrackedLookupCache ? cache : undefined;
  }

  /** The lookup cache on Redis Cluster, when on. */
  get clusterLookupCache(): ClusterLookupCache | undefined {
    const cache = this.#core.lookupCache;
    return cache instanceof TrackedLookupCache ? undefined : cache;
  }

  /**
   * Turns the token-lookup cache on (redis.lookupCache: tracking): its connections are up and tracking
   * confirmed before this resolves (on Cluster, on every master).
   */
  trackLookups(options: LookupCacheOptions): Promise<TrackedLookupCache | ClusterLookupCache> {
    return storeFailures(() => this.#core.trackLookups(options));
  }
}

async function storeFailures<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw asStoreFailure(err);
  }
}
