// Revocations and replication (docs/redis-ha.md): when the primary has replicas (Sentinel, or any
// primary whose INFO replication reports connected_slaves > 0), a revocation is followed by
// `WAIT 1 <timeout>` on the connection that wrote it, so it returns only once one replica holds it (or
// the timeout passed: the primary did apply it, so the revocation still succeeds). The hot path
// (lookupToken) never waits for anything.

import { Cluster } from 'ioredis';
import { StoreUnavailableError } from './shared.ts';
import type { RedisClient } from './redis-connection.ts';

/** How long a replica count read from INFO replication is trusted (it is also dropped on reconnect). */
const REPLICA_COUNT_TTL_MS = 5000;

/** What the last revocations' WAIT achieved (for operators' checks and the HA tests). */
export interface ReplicationStats {
  /** WAITs issued after a revocation. */
  waits: number;
  /** WAITs that returned before a replica acknowledged the write (the timeout passed, or WAIT failed). */
  unacknowledged: number;
}

export class ReplicaWaits {
  readonly #redis: RedisClient;
  /** Server-side bound of WAIT: below the client's command timeout, so Redis answers before ioredis gives up. */
  readonly #waitTimeoutMs: number;
  /** connected_slaves of the primary, from INFO replication (standalone and Sentinel only). */
  #replicaCount: { count: number; at: number } | undefined;
  #replicaCountPending: Promise<number> | undefined;
  readonly #stats: ReplicationStats = { waits: 0, unacknowledged: 0 };

  /** `redis` is the main connection: it answers INFO, and its reconnects drop the cached count. */
  constructor(redis: RedisClient) {
    this.#redis = redis;
    const commandTimeout = (redis instanceof Cluster ? redis.options.redisOptions?.commandTimeout : redis.options.commandTimeout) ?? 1000;
    this.#waitTimeoutMs = Math.max(10, Math.floor(commandTimeout * 0.8));
    // A reconnect may land on another primary (Sentinel failover): count its replicas afresh.
    redis.on('ready', () => {
      this.#replicaCount = undefined;
    });
  }

  /** Copies of the counters of WAITs issued after revocations. */
  get stats(): ReplicationStats {
    return { ...this.#stats };
  }

  /**
   * Whether the primary has replicas, from INFO replication (cached for REPLICA_COUNT_TTL_MS and
   * dropped on reconnect). Cluster: false; WAIT would have to reach the node owning the slot, and
   * is not issued there (docs/redis-ha.md).
   */
  async hasReplicas(): Promise<boolean> {
    const redis = this.#redis;
    if (redis instanceof Cluster) return false;
    const cached = this.#replicaCount;
    if (cached && Date.now() - cached.at < REPLICA_COUNT_TTL_MS) return cached.count > 0;
    this.#replicaCountPending ??= redis
      .info('replication')
      .then(
        (text) => Number(/^connected_slaves:(\d+)/m.exec(text)?.[1] ?? 0),
        () => 0, // INFO refused or failed: behave as without replicas; the write itself reports a dead Redis
      )
      .then((count) => {
        this.#replicaCount = { count, at: Date.now() };
        this.#replicaCountPending = undefined;
        return count;
      });
    return (await this.#replicaCountPending) > 0;
  }

  /**
   * WAIT 1 on the connection that wrote. A WAIT that times out (no replica acknowledged in time) does
   * not fail the revocation: the primary applied it and is still answering; it is only counted. A WAIT
   * that fails (the connection dropped: typically the primary died) does fail it: whether the write
   * survives the failover is unknown, so the caller gets 503 and retries (every revocation is
   * idempotent) rather than a success that a promotion could undo.
   */
  async waitForReplica(tx: RedisClient): Promise<void> {
    this.#stats.waits++;
    let acked: number;
    try {
      acked = Number(await tx.call('WAIT', '1', String(this.#waitTimeoutMs)));
    } catch (err) {
      this.#stats.unacknowledged++;
      throw new StoreUnavailableError('no replica acknowledged the revocation: the primary stopped answering', { cause: err });
    }
    if (!(acked >= 1)) this.#stats.unacknowledged++;
  }
}
