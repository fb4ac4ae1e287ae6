// The token-lookup cache on Redis Cluster (redis.lookupCache: tracking): the one-node cache's rule
// (redis-lookup-cache.ts, docs/lookup-cache.md) per master. Tracking is per node, so every master gets
// the cache's two connections: an invalidation connection (SUBSCRIBE __redis__:invalidate) and a data
// connection (CLIENT TRACKING ON REDIRECT <its id>) on which the cache's own reads of the keys in that
// master's slots run. Routing is the cache's own, by a slot map read with CLUSTER SLOTS, never
// ioredis's redirections: a read that lands on a node the cache has no tracking on cannot be vouched for.
// A hit waits for a barrier sent after it began to each master owning one of its keys: a PING on that
// master's invalidation connection (its reply is queued behind the invalidations of every write the
// master ran before) and an EXISTS of the slot's probe key on its data connection, which answers MOVED
// or ASK once the master no longer wholly owns the slot. Any sign of a topology change (MOVED, ASK,
// TRYAGAIN, CLUSTERDOWN, a connection of the cache lost, ioredis adding or losing a node or refreshing
// to another slot map) empties the cache and sets all of it up anew, on fresh connections.

import { EventEmitter } from 'node:events';
import { Redis, ReplyError, type Cluster, type RedisOptions } from 'ioredis';
import { BoundedMap } from '../model/bounded-map.ts';
import type { TokenLookup } from '../model/records.ts';
import type { LookupCacheStats } from './types.ts';
import { orNull, tokenLookupFromFields, type KeyLayout } from './records.ts';
import { asStoreFailure, connectRedis } from './redis-connection.ts';
import { heldUntil, invalidateKeys, PendingFills, type TrackedKeyNames } from './lookup-fills.ts';
import { LookupCacheSetupError, type LookupCacheOptions } from './redis-lookup-cache.ts';
import {
  agreesWithIoredis,
  isTopologyReply,
  keySlot,
  masterOf,
  parseClusterSlots,
  sameSlotMap,
  slotProbeKey,
  type ClusterMaster,
  type SlotMap,
} from './cluster-slots.ts';

const INVALIDATION_CHANNEL = '__redis__:invalidate';

/** Why the cache is not live (or was emptied): logged and emitted, never secret. */
export type ClusterDropReason = 'data_connection_lost' | 'subscriber_lost' | 'ping_failed' | 'topology_changed' | 'flush' | 'closed';

/** One master's two connections, confirmed to be that node (CLUSTER MYID) with tracking on. */
export interface ClusterShard {
  readonly master: ClusterMaster;
  readonly data: Redis;
  readonly subscriber: Redis;
}

/** The connections and slot map of one set-up; a new set-up makes new ones. */
interface Generation {
  readonly number: number;
  readonly map: SlotMap;
  readonly shards: ClusterShard[];
}

interface Held {
  found: TokenLookup;
  until: number;
}

/** The slots a turn's hits need vouched for, by master index; and the barrier they wait on. */
interface Turn {
  readonly slots: Map<number, Map<number, string>>;
  readonly vouched: Promise<boolean>;
}

/**
 * Events: `live` (tracking confirmed on every master), `dropped` (reason), `invalidated` (entries hit).
 */
export class ClusterLookupCache extends EventEmitter {
  readonly stats: LookupCacheStats = { hits: 0, misses: 0, bypasses: 0, invalidations: 0, drops: 0, barriers: 0 };
  /** Least recently used first out: a hit makes its entry the newest. */
  readonly #entries: BoundedMap<string, Held>;
  readonly #fills = new PendingFills();
  readonly #main: Cluster;
  readonly #keys: KeyLayout;
  /** The probe keys' common start: the one-node cache's marker key, a slot's hash tag appended. */
  readonly #probeBase: string;
  /** How an invalidated key's name reads as the token it names. */
  readonly #names: TrackedKeyNames;
  readonly #options: LookupCacheOptions;
  readonly #now: () => number;
  /** Bumped by every drop: a fill or barrier of an earlier one counts for nothing. */
  #epoch = 0;
  #generationCount = 0;
  /** The set-up the cache is live on; undefined while it is not. */
  #live: Generation | undefined;
  /** Every connection made and not yet closed, of the live set-up or of one being made. */
  readonly #open = new Set<Redis>();
  #establishing: Promise<void> | undefined;
  #turn: Turn | undefined;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  /** Listeners on ioredis's Cluster, removed at close. */
  readonly #onNodesChanged = (): void => {
    if (this.#live !== undefined) this.#topologyChanged(this.#live);
  };
  readonly #onRefresh = (): void => {
    const live = this.#live;
    if (live !== undefined && !agreesWithIoredis(live.map, this.#main.slots)) this.#topologyChanged(live);
  };

  private constructor(main: Cluster, keys: KeyLayout, options: LookupCacheOptions) {
    super();
    this.#main = main;
    this.#keys = keys;
    this.#names = { userPrefix: keys.userToken(''), accessHashOf: keys.accessTokenHashOf };
    this.#probeBase = keys.lookupCacheMarker();
    this.#options = options;
    this.#entries = new BoundedMap(options.maxEntries);
    this.#now = options.now ?? (() => performance.now());
  }

  /** Sets tracking up on every master within the connect timeout; a cluster that refuses is a start-up error. */
  static async open(main: Cluster, keys: KeyLayout, options: LookupCacheOptions): Promise<ClusterLookupCache> {
    const cache = new ClusterLookupCache(main, keys, options);
    try {
      cache.#watch();
      await cache.#establish(true);
      if (cache.#live === undefined) throw new Error('the cluster changed while invalidation tracking was being set up');
    } catch (err) {
      await cache.close();
      throw err instanceof ReplyError ? new LookupCacheSetupError(err as Error) : asStoreFailure(err);
    }
    return cache;
  }

  get live(): boolean {
    return this.#live !== undefined;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The masters' connections of the live set-up (tests listen to and kill them; operators find them by name). */
  get shards(): readonly ClusterShard[] {
    return this.#live?.shards ?? [];
  }

  /** Resolves once every invalidation any master sent before this call has been applied (a PING on each). */
  async settled(): Promise<void> {
    const live = this.#live;
    if (live === undefined) return;
    await Promise.all(live.shards.map((shard) => this.#answers(live, shard.subscriber, 'subscriber_lost')));
  }

  /** The token's two records: from the cache after the barrier when held, else read (and cached if found). */
  lookup(tokenHash: string, strict: (tokenHash: string) => Promise<TokenLookup>): Promise<TokenLookup> {
    const live = this.#live;
    if (live === undefined) {
      this.stats.bypasses++;
      return strict(tokenHash);
    }
    if (this.#entries.has(tokenHash)) return this.#afterBarrier(live, tokenHash, strict);
    this.stats.misses++;
    return this.#fill(live, tokenHash, strict);
  }

  async #afterBarrier(live: Generation, tokenHash: string, strict: (tokenHash: string) => Promise<TokenLookup>): Promise<TokenLookup> {
    const vouched = await this.#barrier(live, tokenHash);
    if (this.#live !== live) {
      this.stats.bypasses++;
      return strict(tokenHash);
    }
    const held = this.#entries.get(tokenHash);
    if (vouched && held !== undefined) {
      // Past its keys' TTL the copy is dropped: Redis may delete an expired key (and invalidate it) late.
      if (held.until > this.#now()) {
        this.stats.hits++;
        this.#entries.touch(tokenHash);
        return held.found;
      }
      this.#entries.delete(tokenHash);
    }
    this.stats.misses++;
    return this.#fill(live, tokenHash, strict);
  }

  /** The barrier of this turn, with the slots of this token's two keys added to what it vouches for. */
  #barrier(live: Generation, tokenHash: string): Promise<boolean> {
    let turn = this.#turn;
    if (turn === undefined) {
      const slots = new Map<number, Map<number, string>>();
      const vouched = new Promise<boolean>((resolve) => {
        setImmediate(() => {
          // From here on, a lookup that starts needs a barrier sent after it: a new one.
          this.#turn = undefined;
          resolve(this.#vouch(live, slots));
        });
      });
      this.#turn = turn = { slots, vouched };
    }
    for (const key of [this.#keys.userToken(tokenHash), this.#keys.accessToken(tokenHash)]) {
      const slot = keySlot(key);
      const master = live.map.owners[slot]!;
      let probes = turn.slots.get(master);
      if (probes === undefined) turn.slots.set(master, (probes = new Map()));
      if (!probes.has(slot)) probes.set(slot, slotProbeKey(this.#probeBase, slot, key));
    }
    return turn.vouched;
  }

  /**
   * One barrier: on every master the turn's hits need, a PING on its invalidation connection and an
   * EXISTS of each slot's probe key on its data connection, together. True when every one came back
   * on the live set-up and no master refused a slot.
   */
  async #vouch(live: Generation, slots: Map<number, Map<number, string>>): Promise<boolean> {
    if (this.#live !== live) return false;
    this.stats.barriers++;
    const epoch = this.#epoch;
    const answered = await Promise.all(
      [...slots].map(async ([index, probes]) => {
        const shard = live.shards[index]!;
        const probing = shard.data.pipeline();
        for (const key of probes.values()) probing.exists(key);
        const [subscriber, data] = await Promise.all([
          this.#answers(live, shard.subscriber, 'subscriber_lost'),
          probing
            .exec()
            .then((results) => this.#repliesOrLost(live, results) !== undefined)
            .catch(() => this.#lost(live, 'data_connection_lost')),
        ]);
        return subscriber && data;
      }),
    );
    return answered.every(Boolean) && epoch === this.#epoch && this.#live === live;
  }

  async #fill(live: Generation, tokenHash: string, strict: (tokenHash: string) => Promise<TokenLookup>): Promise<TokenLookup> {
    const { mark, end } = this.#fills.begin(tokenHash);
    const epoch = this.#epoch;
    try {
      const sent = this.#now();
      const userKey = this.#keys.userToken(tokenHash);
      const accessKey = this.#keys.accessToken(tokenHash);
      const userShard = live.shards[masterOf(live.map, userKey)]!;
      const accessShard = live.shards[masterOf(live.map, accessKey)]!;
      // Each key read on its own master's tracked connection; one write per master.
      const [readUser, readAccess] =
        userShard === accessShard
          ? await userShard.data
              .pipeline()
              .hgetall(userKey)
              .pttl(userKey)
              .hgetall(accessKey)
              .pttl(accessKey)
              .exec()
              .then((r) => [r, r] as const)
          : await Promise.all([
              userShard.data.pipeline().hgetall(userKey).pttl(userKey).exec(),
              accessShard.data.pipeline().hgetall(accessKey).pttl(accessKey).exec(),
            ]);
      const userReplies = this.#repliesOrLost(live, readUser);
      const accessReplies = this.#repliesOrLost(live, readAccess);
      // A slot that moved: this read proves nothing; the cache is being set up anew, read as strict does.
      if (userReplies === undefined || accessReplies === undefined) return await strict(tokenHash);
      const [user, userTtl] = userReplies as [Record<string, string>, number];
      const [oauth, accessTtl] = (userShard === accessShard ? accessReplies.slice(2) : accessReplies) as [Record<string, string>, number];
      const found = tokenLookupFromFields(tokenHash, orNull(user), orNull(oauth));
      if (this.#options.beforeFill) await this.#options.beforeFill(tokenHash);
      const until = heldUntil(found, sent, userTtl, accessTtl);
      if (
        (found.user !== null || found.oauth !== null) &&
        until > sent &&
        !mark.invalidated &&
        epoch === this.#epoch &&
        this.#live === live
      )
        this.#entries.set(tokenHash, { found, until });
      return found;
    } catch (err) {
      // A read that failed or timed out leaves its connection suspect: this set-up is done with.
      if (!(err instanceof ReplyError)) this.#lost(live, 'data_connection_lost');
      throw asStoreFailure(err);
    } finally {
      end();
    }
  }

  /**
   * A pipeline's replies; undefined (and the set-up dropped) when a reply says the slot map is stale.
   * Another error reply is thrown (WRONGTYPE: the strict mode reports it the same way).
   */
  #repliesOrLost(live: Generation, results: Array<[Error | null, unknown]> | null): unknown[] | undefined {
    if (results === null) throw new Error('the pipeline was discarded');
    const values: unknown[] = [];
    for (const [err, value] of results) {
      if (err !== null && isTopologyReply(err)) {
        this.#topologyChanged(live);
        return undefined;
      }
      if (err !== null) throw err;
      values.push(value);
    }
    return values;
  }

  /** ioredis's Cluster events and the PING timer. */
  #watch(): void {
    this.#main.on('+node', this.#onNodesChanged);
    this.#main.on('-node', this.#onNodesChanged);
    this.#main.on('refresh', this.#onRefresh);
    this.#timer = setInterval(() => void this.#tick(), this.#options.pingIntervalMs);
    this.#timer.unref();
  }

  /** One invalidation message: the keys that changed on one master, or null when it was flushed. */
  #invalidate(keys: unknown): void {
    this.stats.invalidations++;
    if (!Array.isArray(keys)) {
      // FLUSHALL/FLUSHDB on a master (or a message of an unknown shape): everything goes.
      this.#drop('flush');
      void this.#establish(false);
      return;
    }
    const hit = invalidateKeys(keys, this.#names, (tokenHash) => this.#entries.delete(tokenHash), this.#fills);
    this.emit('invalidated', hit);
  }

  /** Empties the cache and stops its use; the set-up's connections are closed (a new set-up makes new ones). */
  #drop(reason: ClusterDropReason): void {
    this.#epoch++;
    this.#entries.clear();
    this.#fills.invalidateAll();
    const live = this.#live;
    if (live === undefined) return;
    this.#live = undefined;
    for (const shard of live.shards) for (const conn of [shard.data, shard.subscriber]) this.#discard(conn);
    this.stats.drops++;
    if (reason !== 'closed')
      this.#options.logger?.warn(
        { reason },
        'token lookup cache off: every lookup reads Redis until invalidation tracking is set up again',
      );
    this.emit('dropped', reason);
  }

  /** A connection of `live` failed, closed or did not answer: drop, and set up anew at once. */
  #lost(live: Generation, reason: ClusterDropReason): false {
    if (this.#live !== live || this.#closed) return false;
    this.#drop(reason);
    void this.#establish(false);
    return false;
  }

  #topologyChanged(live: Generation): void {
    if (this.#live !== live || this.#closed) return;
    this.#options.logger?.warn('token lookup cache: the cluster topology changed; emptied and set up anew');
    // Set up anew at the next PING tick, not at once: while a slot is being moved every barrier on it
    // answers ASK, and one set-up per interval bounds the churn.
    this.#drop('topology_changed');
  }

  /** Sets the cache up on fresh connections to every master (at most one attempt at a time). */
  #establish(atStart: boolean): Promise<void> {
    if (this.#establishing) return this.#establishing;
    const attempt = this.#trySetUp().catch((err: unknown) => {
      if (atStart) throw err;
      // The next PING tick tries again; a connection's trouble was reported by its own events.
    });
    this.#establishing = attempt.finally(() => (this.#establishing = undefined));
    return this.#establishing;
  }

  async #trySetUp(): Promise<void> {
    if (this.#closed || this.#live !== undefined) return;
    const epoch = this.#epoch;
    const number = ++this.#generationCount;
    const map = parseClusterSlots(await this.#main.cluster('SLOTS'));
    const shards = map.masters.map((master) => this.#connect(master));
    const generation: Generation = { number, map, shards };
    try {
      await Promise.all(shards.map((shard) => this.#track(generation, shard)));
      // The map read again from every master, now that tracking is on: a change in between and this
      // set-up is not used (the probes would catch a moved slot; this catches it before any hit).
      for (const shard of shards) {
        if (!sameSlotMap(map, parseClusterSlots(await shard.data.cluster('SLOTS'))))
          throw new Error('the cluster changed while invalidation tracking was being set up');
      }
      if (this.#closed || this.#live !== undefined || epoch !== this.#epoch) throw new Error('superseded');
      if (!shards.every((s) => s.data.status === 'ready' && s.subscriber.status === 'ready')) throw new Error('a connection closed');
    } catch (err) {
      for (const shard of shards) for (const conn of [shard.data, shard.subscriber]) this.#discard(conn);
      throw err;
    }
    this.#epoch++;
    this.#entries.clear();
    this.#live = generation;
    this.#options.logger?.info('token lookup cache live: invalidation tracking set up');
    this.emit('live');
  }

  /**
   * The two connections to `master`: never reconnected (a loss ends the set-up), never re-sending.
   * Plain connections, not the store's turn-batched ones (redis-connection.ts): a barrier is sent from
   * a setImmediate, and a socket corked until the next one would hold it back a turn.
   */
  #connect(master: ClusterMaster): ClusterShard {
    const options = (name: string): RedisOptions => ({
      ...this.#main.options.redisOptions,
      host: master.host,
      port: master.port,
      connectionName: name,
      lazyConnect: true,
      enableOfflineQueue: false,
      enableAutoPipelining: false,
      autoResubscribe: false,
      autoResendUnfulfilledCommands: false,
      retryStrategy: () => null,
      readOnly: false,
    });
    const shard: ClusterShard = {
      master,
      data: new Redis(options('mcpauth-lookup-cache')),
      subscriber: new Redis(options('mcpauth-lookup-invalidations')),
    };
    for (const conn of [shard.data, shard.subscriber]) {
      this.#open.add(conn);
      conn.on('error', () => undefined); // its close follows, and ends the set-up
      conn.once('end', () => this.#open.delete(conn));
    }
    shard.subscriber.on('messageBuffer', (channel: Buffer, keys: unknown) => {
      if (channel.toString() === INVALIDATION_CHANNEL) this.#invalidate(keys);
    });
    return shard;
  }

  /** Connects `shard`, checks both connections reach its master, subscribes, and turns tracking on. */
  async #track(generation: Generation, shard: ClusterShard): Promise<void> {
    const { data, subscriber } = shard;
    await Promise.all([connectRedis(data, this.#options.connectTimeoutMs), connectRedis(subscriber, this.#options.connectTimeoutMs)]);
    // CLIENT ID and CLUSTER MYID first: RESP2 allows only (un)subscribe and PING once subscribed.
    const [redirect, subscriberNode, dataNode] = await Promise.all([
      subscriber.call('CLIENT', 'ID'),
      subscriber.call('CLUSTER', 'MYID'),
      data.call('CLUSTER', 'MYID'),
    ]);
    if (String(subscriberNode) !== shard.master.id || String(dataNode) !== shard.master.id)
      throw new Error('a connection reached another node than its address names in CLUSTER SLOTS');
    await subscriber.subscribe(INVALIDATION_CHANNEL);
    await data.call('CLIENT', 'TRACKING', 'ON', 'REDIRECT', String(redirect));
    for (const [conn, reason] of [
      [data, 'data_connection_lost'],
      [subscriber, 'subscriber_lost'],
    ] as const) {
      conn.once('close', () => {
        if (this.#live?.number === generation.number) this.#lost(this.#live, reason);
      });
    }
  }

  /** PINGs every connection of the live set-up; one that fails or times out ends it. */
  async #tick(): Promise<void> {
    if (this.#closed) return;
    const live = this.#live;
    if (live === undefined) {
      await this.#establish(false);
      return;
    }
    await Promise.all(
      live.shards.flatMap((shard) => [
        this.#answers(live, shard.data, 'ping_failed'),
        this.#answers(live, shard.subscriber, 'ping_failed'),
      ]),
    );
  }

  async #answers(live: Generation, conn: Redis, reason: ClusterDropReason): Promise<boolean> {
    try {
      await conn.ping();
      return this.#live === live;
    } catch {
      return this.#lost(live, reason);
    }
  }

  #discard(conn: Redis): void {
    this.#open.delete(conn);
    conn.disconnect();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#drop('closed');
    this.#closed = true;
    clearInterval(this.#timer);
    this.#main.off('+node', this.#onNodesChanged);
    this.#main.off('-node', this.#onNodesChanged);
    this.#main.off('refresh', this.#onRefresh);
    await this.#establishing?.catch(() => undefined);
    await Promise.all(
      [...this.#open].map(async (c) => {
        this.#open.delete(c);
        if (c.status === 'ready') await c.quit().catch(() => c.disconnect());
        else c.disconnect();
      }),
    );
  }
}
