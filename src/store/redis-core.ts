// What every Redis part of the store shares (src/store/<aggregate>/redis.ts): the main connection and
// its keyspace, the key layout, the token lookups' connection and cache, the transaction connection,
// WAIT after revocations, and what follows every revocation (approvals forgotten, the notice sent).
// A KeyspaceCore (keyspace-core.ts): the parts both engines share (<aggregate>/part.ts) run on it too.

import { Cluster } from 'ioredis';
import { StoreUnavailableError } from './shared.ts';
import {
  consentGrantIds,
  allBuckets,
  clientBucket,
  hashBucket,
  keyLayout,
  subjectDigest,
  type Fields,
  type HashUpdate,
  type KeyLayout,
} from './records.ts';
import { connectRedis, duplicateForTransactions, type RedisClient } from './redis-connection.ts';
import { ClusterLookupCache } from './redis-cluster-lookup-cache.ts';
import { TrackedLookupCache, type LookupCacheOptions } from './redis-lookup-cache.ts';
import { LookupConnection } from './redis-lookups.ts';
import { publishNotice } from './redis-notices.ts';
import { ReplicaWaits, type ReplicationStats } from './redis-replication.ts';
import { RedisKeyspace } from './redis-keyspace.ts';
import { scanNode, scanNodes } from './layout.ts';
import { updateHash, type Keyspace } from './keyspace.ts';
import type { KeyspaceCore } from './keyspace-core.ts';
import type { RevocationNotice } from './types.ts';

export class RedisCore implements KeyspaceCore {
  readonly redis: RedisClient;
  readonly keys: KeyLayout;
  readonly connectTimeoutMs: number;
  readonly replicas: ReplicaWaits;
  /** The keyspace port on the main connection: transitions written once (src/store/keyspace.ts). */
  readonly keyspace: Keyspace;
  /** The token lookups' own connection (the hot path). */
  readonly lookups: LookupConnection;
  /** Set by trackLookups (redis.lookupCache: tracking); undefined: every lookup reads Redis (strict). */
  lookupCache: TrackedLookupCache | ClusterLookupCache | undefined;
  /** WATCH is per connection: transactions run one at a time on a connection of their own. */
  #txClient: RedisClient | undefined;
  #txQueue: Promise<unknown> = Promise.resolve();

  constructor(redis: RedisClient, options: { keyPrefix?: string; connectTimeoutMs?: number } = {}) {
    this.redis = redis;
    this.keys = keyLayout(options.keyPrefix ?? 'mcpauth:');
    this.connectTimeoutMs = options.connectTimeoutMs ?? 5000;
    this.keyspace = new RedisKeyspace(redis);
    this.replicas = new ReplicaWaits(redis);
    this.lookups = new LookupConnection(redis, this.connectTimeoutMs);
  }

  /** Copies of the counters of WAITs issued after revocations. */
  get replicationStats(): ReplicationStats {
    return this.replicas.stats;
  }

  /** Both connections requests depend on are ready (the token lookups' one, once opened). */
  get ready(): boolean {
    return this.redis.status === 'ready' && this.lookups.ready;
  }

  /**
   * Turns the token-lookup cache on (redis.lookupCache: tracking): its two connections are up and
   * tracking confirmed before this resolves. On Cluster, on every master (tracking is per node).
   */
  async trackLookups(options: LookupCacheOptions): Promise<TrackedLookupCache | ClusterLookupCache> {
    if (this.lookupCache) return this.lookupCache;
    this.lookupCache =
      this.redis instanceof Cluster
        ? await ClusterLookupCache.open(this.redis, this.keys, options)
        : await TrackedLookupCache.open(this.redis, this.keys, options);
    return this.lookupCache;
  }

  /**
   * A subject's index key (by the SHA-256 of the subject): its home index (user-grade tokens,
   * approvals), or, given a bucket, the index of that bucket's access and refresh tokens.
   */
  subjectIndex(subject: string, bucket?: string): string {
    return this.keys.subjectGrants(subjectDigest(subject), bucket);
  }

  /**
   * Whether a presented refresh token or code cannot be used with this client in one step on
   * Cluster: it is not in the client's bucket, so it is another client's (answered `invalid`, as the
   * transition would), or one minted before the bucketed layout (not rotated on Cluster: docs/storage.md).
   * Always false off Cluster, where every key is on the one node, and costs nothing there. On Cluster
   * the presented record is read first, so an outage is reported as one, never as `invalid`.
   */
  async outsideClientSlot(hash: string, key: string, clientId: string): Promise<boolean> {
    if (!(this.redis instanceof Cluster) || hashBucket(hash) === clientBucket(clientId)) return false;
    await this.redis.hget(key, 'clientId');
    return true;
  }

  async scanKeys(pattern: string, count: number, each: (keys: string[]) => Promise<void>): Promise<void> {
    // SCAN is per node: on Cluster every master is scanned. A Cluster client that is not connected
    // lists no master: that is an outage, never an empty database.
    const nodes = scanNodes(this.redis);
    if (this.redis.status !== 'ready' || nodes.length === 0) throw new StoreUnavailableError(`Redis connection is ${this.redis.status}`);
    for (const node of nodes) for await (const keys of scanNode(node, pattern, count)) if (keys.length > 0) await each(keys);
  }

  /**
   * Called after every revocation: forgets the approvals of the revoked grants, then tells every
   * sidecar (notice), and this one's lookup cache first.
   */
  async publish(notice: RevocationNotice, grantIds: string[] = consentGrantIds(notice)): Promise<void> {
    // A revoked grant takes the consent approval it was issued under with it (ConsentStorage).
    await Promise.all(grantIds.map((id) => this.#forgetLinkedConsent(id)));
    // The revocation's invalidations applied before it is reported done: this sidecar's next request
    // sees it, as in the strict mode (other sidecars see it when their invalidation arrives).
    await this.lookupCache?.settled();
    await publishNotice(this.redis, this.keys.revocationChannel(), notice);
  }

  /**
   * Forgets the approval a revoked grant was linked to, then the link (one MULTI: both under {oauth}).
   * Stopped in between, the link is left (it expires), never an approval the link no longer names.
   */
  async #forgetLinkedConsent(grantId: string): Promise<void> {
    const link = this.keys.consentGrant(grantId);
    const { browser, consent } = await this.redis.hgetall(link);
    if (browser === undefined || consent === undefined) return;
    assertExec(await this.redis.multi().hdel(this.keys.consents(browser), consent).del(link).exec());
  }

  /**
   * Runs a revocation write. Without replicas (or on Cluster) it goes out on the main connection as
   * any write does. With replicas it runs on the transaction connection followed by WAIT there: WAIT
   * covers the writes of its own connection, and it blocks that connection, which must therefore not
   * be the main one (every lookup pipelined behind it would wait too).
   */
  async revocation<T>(write: (redis: RedisClient) => Promise<T>): Promise<T> {
    if (!(await this.replicas.hasReplicas())) return write(this.redis);
    return this.transaction(async (tx) => {
      const result = await write(tx);
      await this.replicas.waitForReplica(tx);
      return result;
    });
  }

  /**
   * A revocation written through the keyspace port: on the main connection, or with replicas on the
   * transaction connection followed by WAIT (as `revocation`).
   */
  revokeThrough<T>(write: (keyspace: Keyspace) => Promise<T>): Promise<T> {
    return this.revocation((redis) => write(redis === this.redis ? this.keyspace : new RedisKeyspace(redis)));
  }

  /**
   * A compare-and-set on one hash (updateHash in keyspace.ts). `via`: the keyspace to run on (the
   * transaction connection's, for a revocation WAITed for); the main one by default. One key: one Cluster slot.
   */
  updateHash<R>(key: string, decide: (current: Fields | null) => HashUpdate<R>, via: Keyspace = this.keyspace): Promise<R> {
    return updateHash(via, key, decide);
  }

  /** Runs `fn` alone on the dedicated transaction connection (created on first use). */
  transaction<T>(fn: (tx: RedisClient) => Promise<T>): Promise<T> {
    const run = async (): Promise<T> => {
      // The main connection knows whether Redis is reachable: answer at once (503) rather than wait
      // for a new transaction connection to time out.
      if (this.redis.status !== 'ready') throw new StoreUnavailableError(`Redis connection is ${this.redis.status}`);
      if (!this.#txClient || this.#txClient.status === 'end') {
        const tx = duplicateForTransactions(this.redis);
        tx.on('error', () => undefined); // surfaced through the failing command instead
        await connectRedis(tx, this.connectTimeoutMs);
        this.#txClient = tx;
      }
      const tx = this.#txClient;
      try {
        return await fn(tx);
      } catch (err) {
        // A failed command may leave a WATCH or MULTI half-open on this connection: start clean.
        this.#txClient = undefined;
        tx.disconnect();
        throw err;
      }
    };
    const next = this.#txQueue.then(run, run);
    this.#txQueue = next.catch(() => undefined);
    return next;
  }

  async close(): Promise<void> {
    await this.lookupCache?.close();
    await this.lookups.close();
    await this.#txQueue.catch(() => undefined);
    const clients = [this.redis, this.#txClient].filter((c): c is RedisClient => c !== undefined);
    this.#txClient = undefined;
    await Promise.all(
      clients.map(async (c) => {
        if (c.status === 'ready') await c.quit().catch(() => c.disconnect());
        else c.disconnect();
      }),
    );
  }
}

export function assertExec(result: Array<[Error | null, unknown]> | null): void {
  if (result === null) throw new StoreUnavailableError('transaction aborted');
  for (const [err] of result) if (err) throw err;
}
