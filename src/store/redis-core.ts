// What every Redis part of the store shares (src/store/<aggregate>/redis.ts): the main connection and
// its scripts, the key layout, the token lookups' connection and cache, the transaction connection,
// WAIT after revocations, and what follows every revocation (approvals forgotten, the notice sent).

import { Cluster, type ChainableCommander } from 'ioredis';
import { StoreUnavailableError } from './shared.ts';
import {
  consentGrantIds,
  allBuckets,
  clientBucket,
  hashBucket,
  keyLayout,
  orNull,
  subjectDigest,
  type Fields,
  type HashUpdate,
  type KeyLayout,
  writesHash,
} from './records.ts';
import { connectRedis, duplicateForTransactions, type RedisClient } from './redis-connection.ts';
import { ClusterLookupCache } from './redis-cluster-lookup-cache.ts';
import { TrackedLookupCache, type LookupCacheOptions } from './redis-lookup-cache.ts';
import { LookupConnection } from './redis-lookups.ts';
import { publishNotice } from './redis-notices.ts';
import { ReplicaWaits, type ReplicationStats } from './redis-replication.ts';
import { defineScripts, flattenFields, type ScriptedClient } from './redis-scripts.ts';
import { RedisKeyspace } from './redis-keyspace.ts';
import type { Keyspace } from './keyspace.ts';
import type { RevocationNotice } from './types.ts';
import { indexedHandlesToForget } from '../model/handles.ts';

/** Attempts of a compare-and-set before it gives up (each lost one means the hash changed meanwhile). */
const MAX_UPDATE_ATTEMPTS = 16;

export class RedisCore {
  readonly redis: RedisClient;
  readonly scripts: ScriptedClient;
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
    this.scripts = defineScripts(redis);
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

  /** Every index of a subject: its home index, then one per bucket (the person index, slot by slot). */
  subjectIndexes(subject: string): string[] {
    return [this.subjectIndex(subject), ...allBuckets().map((bucket) => this.subjectIndex(subject, bucket))];
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
  async revocation<T>(write: (scripts: ScriptedClient) => Promise<T>): Promise<T> {
    if (!(await this.replicas.hasReplicas())) return write(this.scripts);
    return this.transaction(async (tx) => {
      const result = await write(tx as unknown as ScriptedClient);
      await this.replicas.waitForReplica(tx);
      return result;
    });
  }

  /**
   * A revocation written through the keyspace port: on the main connection, or with replicas on the
   * transaction connection followed by WAIT (as `revocation`).
   */
  revokeThrough<T>(write: (keyspace: Keyspace) => Promise<T>): Promise<T> {
    return this.revocation((scripts) =>
      write(scripts === this.scripts ? this.keyspace : new RedisKeyspace(scripts as unknown as RedisClient)),
    );
  }

  /**
   * A compare-and-set on one hash: reads it, asks `decide` what to write, and writes that only while
   * the hash is still exactly as read (COMPARE_AND_SET_HASH compares every field; a hash read as
   * absent must still be absent); when it changed in between, `decide` runs again on what is there
   * now. A rule on a single record lives in src/model/ and runs in both stores (MemoryCore.updateHash),
   * with no script of its own. `via`: the connection to run on (the transaction one, for a revocation
   * WAITed for); the main one by default. One key: one Cluster slot.
   */
  async updateHash<R>(key: string, decide: (current: Fields | null) => HashUpdate<R>, via: ScriptedClient = this.scripts): Promise<R> {
    for (let attempt = 0; attempt < MAX_UPDATE_ATTEMPTS; attempt++) {
      const current = orNull(await via.hgetall(key));
      const update = decide(current);
      if (!writesHash(update)) return update.result;
      const expected = current === null ? [] : flattenFields(current);
      const applied = await via.mcpCompareAndSetHash(
        key,
        String(expected.length / 2),
        ...expected,
        update.drop === true ? '1' : '',
        update.expireAt === undefined ? '' : String(Math.trunc(update.expireAt)),
        String(update.unset?.length ?? 0),
        ...(update.unset ?? []),
        ...(update.set === undefined ? [] : flattenFields(update.set)),
      );
      if (applied === 1) return update.result;
    }
    throw new StoreUnavailableError('updateHash: too much contention, gave up');
  }

  /**
   * A change of several keys of one slot planned over what was read under WATCH: `plan` watches and
   * reads what it needs, asks the model what to write, and answers the writes (always some: a MULTI
   * ends the WATCH, which a plan writing nothing would have to end by hand) with its result. The
   * writes go in one MULTI/EXEC; an EXEC refused because a watched key changed plans again on what is
   * there now. Runs on the transaction connection (WATCH is per connection), one change at a time.
   */
  planned<R>(what: string, plan: (tx: RedisClient) => Promise<{ result: R; write: (multi: ChainableCommander) => void }>): Promise<R> {
    return this.transaction(async (tx) => {
      for (let attempt = 0; attempt < MAX_UPDATE_ATTEMPTS; attempt++) {
        const { result, write } = await plan(tx);
        const multi = tx.multi();
        write(multi);
        const done = await multi.exec();
        if (done === null) continue;
        assertExec(done);
        return result;
      }
      throw new StoreUnavailableError(`${what}: too much contention, gave up`);
    });
  }

  /**
   * Forgets every handle an owner's index lists that is still that owner's (`field` = `value`), then
   * the index (indexedHandlesToForget decides; all under {oauth}: one slot). The index and the handles
   * are watched, so a handle bound, renewed or rebound meanwhile makes the plan start again: a handle
   * is either forgotten or still listed, never left unlisted. Answers how many were forgotten.
   */
  forgetIndexedHandles(index: string, field: string, value: string): Promise<number> {
    const prefix = this.keys.handlePrefix();
    return this.planned('forgetIndexedHandles', async (tx) => {
      const read = await tx.pipeline().watch(index).zrange(index, 0, -1).exec();
      assertExec(read);
      const members = read![1]![1] as string[];
      const keys = members.map((member) => prefix + member);
      const owners = keys.length === 0 ? [] : await this.#watchedFields(tx, keys, field);
      const forget = indexedHandlesToForget(
        members.map((member, i) => [member, owners[i]] as const),
        value,
      );
      return {
        result: forget.length,
        write: (multi) => {
          for (const member of forget) multi.del(prefix + member);
          multi.del(index);
        },
      };
    });
  }

  /** One field of each key, read under a WATCH of those keys (one pipeline: one round trip). */
  async #watchedFields(tx: RedisClient, keys: string[], field: string): Promise<Array<string | null>> {
    const pipeline = tx.pipeline().watch(...keys);
    for (const key of keys) pipeline.hget(key, field);
    const read = await pipeline.exec();
    assertExec(read);
    return read!.slice(1).map(([, value]) => value as string | null);
  }

  /** Runs `fn` alone on the dedicated transaction connection (created on first use). */
  transaction<T>(fn: (tx: RedisClient) => Promise<T>): Promise<T> {
    const run = async (): Promise<T> => {
      // The main connection knows whether Redis is reachable: answer at once (503) rather than wait
      // for a new transaction connection to time out.
      if (this.redis.status !== 'ready') throw new StoreUnavailableError(`Redis connection is ${this.redis.status}`);
      if (!this.#txClient || this.#txClient.status === 'end') {
        const tx = duplicateForTransactions(this.redis);
        defineScripts(tx);
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
