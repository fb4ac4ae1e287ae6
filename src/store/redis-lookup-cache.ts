// The opt-in token-lookup cache (redis.lookupCache: tracking): token records kept in process and kept
// correct by Redis server-assisted client-side caching (CLIENT TRACKING, RESP2 with REDIRECT, since
// ioredis 5 speaks no RESP3). A cached record is only ever a copy of what Redis held when an
// invalidation for its key could no longer be missed; whenever that cannot be vouched for, the cache is
// empty and unused, and every lookup reads Redis as the strict mode does.
//
// Two connections of its own, both copies of the main one (same server, Sentinel-aware):
// - the subscriber: SUBSCRIBE __redis__:invalidate; Redis pushes there the keys that changed;
// - the data connection: CLIENT TRACKING ON REDIRECT <subscriber's CLIENT ID>; the cache's own reads
//   run on it, so Redis remembers exactly the keys whose records the cache may hold.
// Live = both connections ready, on the incarnation (socket) tracking was confirmed on, and both
// answering a PING every pingIntervalMs. Anything else (close, error, reconnect, an unanswered PING)
// empties the cache and bypasses it until tracking is set up again on the current connections.
// A hit is served only after a barrier sent after the lookup began has come back: a PING on the
// subscriber (Redis queues its reply behind the invalidations of every write it executed before) and a
// read of the database marker (SWAPDB sends no invalidation). So a write whose reply anyone had before
// the request reached the sidecar is applied first: the next request sees it, as in the strict mode.
// Barriers are shared by every lookup that starts in the same turn of the event loop.

import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { ReplyError, type Redis } from 'ioredis';
import { StoreUnavailableError } from './shared.ts';
import type { LookupCacheFallback, LookupCacheStats } from './types.ts';
import type { TokenLookup } from '../model/records.ts';
import type { Logger } from 'pino';
import { orNull, tokenLookupFromFields, type KeyLayout } from './records.ts';
import { asStoreFailure, connectRedis, duplicateConnection } from './redis-connection.ts';
import { heldUntil, invalidateKeys, PendingFills, type TrackedKeyNames } from './lookup-fills.ts';

const INVALIDATION_CHANNEL = '__redis__:invalidate';

export interface LookupCacheOptions {
  /** Token records kept at most; the least recently used one is evicted first. */
  maxEntries: number;
  /** Both connections are PINGed this often; one unanswered within the command timeout drops the cache. */
  pingIntervalMs: number;
  connectTimeoutMs: number;
  logger?: Pick<Logger, 'warn' | 'info'>;
  /** Monotonic milliseconds, for the keys' remaining TTLs (tests move it); default performance.now. */
  now?: () => number;
  /**
   * Tests only: runs after a fill's reads have been answered and before the reply may be cached,
   * which is where an invalidation racing the fill has to be caught.
   */
  beforeFill?: (tokenHash: string) => Promise<void>;
}

/**
 * Redis answered, but refused to set tracking up (before 6.0: no CLIENT TRACKING; an ACL user without
 * CLIENT or without the __redis__:invalidate channel). Start-up stops with this rather than run strict
 * while the operator believes the cache is on.
 */
export class LookupCacheSetupError extends StoreUnavailableError {
  constructor(cause: Error) {
    super(
      `redis.lookupCache is "tracking", but Redis refused to set up invalidation tracking (${cause.message}). It needs Redis 6.0 or later and, with ACLs, a user allowed CLIENT ID, CLIENT TRACKING, INFO, SUBSCRIBE and the channel __redis__:invalidate; or set redis.lookupCache (REDIS_LOOKUP_CACHE) to off`,
      { cause },
    );
    this.name = 'LookupCacheSetupError';
  }
}

export type { LookupCacheFallback, LookupCacheStats };

/** Why the cache is not live (or was emptied): logged and emitted, never secret. */
export type DropReason = 'data_connection_lost' | 'subscriber_lost' | 'ping_failed' | 'database_changed' | 'flush' | 'closed';

/** A cached copy and the monotonic time its keys' TTL runs out (Infinity: no TTL). */
interface Held {
  found: TokenLookup;
  until: number;
}

/**
 * Events: `live` (tracking confirmed, cache in use), `dropped` (reason: emptied and not live), `invalidated` (a key the cache reads changed; argument: how many entries it hit).
 */
export class TrackedLookupCache extends EventEmitter {
  readonly stats: LookupCacheStats = { hits: 0, misses: 0, bypasses: 0, invalidations: 0, drops: 0, barriers: 0 };
  readonly #entries = new Map<string, Held>();
  /** Fills in flight: an invalidation of their token marks them, and they are not cached. */
  readonly #fills = new PendingFills();
  readonly #data: Redis;
  readonly #sub: Redis;
  readonly #keys: KeyLayout;
  /** How an invalidated key's name reads as the token it names. */
  readonly #names: TrackedKeyNames;
  readonly #options: LookupCacheOptions;
  readonly #now: () => number;
  #live = false;
  /** Bumped on every drop: a fill that started in an earlier epoch is never cached. */
  #epoch = 0;
  /** Bumped on every close, error or reconnect of each connection (a new socket is a new incarnation). */
  #dataIncarnation = 0;
  #subIncarnation = 0;
  /** The incarnation of the subscriber that is subscribed, its CLIENT ID and its server's run_id. */
  #subscribed: { incarnation: number; id: number; server: string } | undefined;
  /** The incarnation of the data connection tracking is on for, the subscriber it redirects to, its own id. */
  #tracking: { incarnation: number; redirect: number; id: number } | undefined;
  #establishing: Promise<void> | undefined;
  /** The database marker's value when the cache went live; a barrier that reads another drops the cache. */
  #marker: string | undefined;
  /** The barrier the lookups of this turn wait on; unset the moment it is sent (later lookups need a later one). */
  #nextBarrier: Promise<boolean> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  private constructor(main: Redis, keys: KeyLayout, options: LookupCacheOptions) {
    super();
    this.#keys = keys;
    this.#names = { userPrefix: keys.userToken(''), accessHashOf: keys.accessTokenHashOf };
    this.#options = options;
    this.#now = options.now ?? (() => performance.now());
    // No auto-pipelining: a barrier sends one command on each connection, and ioredis would wrap it in
    // a pipeline of its own each time (an object with every command of the client, allocated and run
    // per barrier). The fill's four reads go as one explicit pipeline: one write, as before.
    // Written at once, not batched for the turn: a hit's barrier leaves when the hit asks for it.
    this.#data = duplicateConnection(
      main,
      { connectionName: 'mcpauth-lookup-cache', enableAutoPipelining: false },
      { batched: false },
    ) as Redis;
    this.#sub = duplicateConnection(
      main,
      { connectionName: 'mcpauth-lookup-invalidations', autoResubscribe: false, enableAutoPipelining: false },
      { batched: false },
    ) as Redis;
  }

  /**
   * Connects both connections and sets tracking up once, within the connect timeout: a Redis that
   * cannot track (before 6.0, or an ACL without CLIENT) is a start-up error, not a silent strict mode.
   */
  static async open(main: Redis, keys: KeyLayout, options: LookupCacheOptions): Promise<TrackedLookupCache> {
    const cache = new TrackedLookupCache(main, keys, options);
    try {
      await Promise.all([connectRedis(cache.#data, options.connectTimeoutMs), connectRedis(cache.#sub, options.connectTimeoutMs)]);
      cache.#watch();
      await cache.#establish(true);
      if (!cache.#live) throw new Error('a connection closed while invalidation tracking was being set up');
    } catch (err) {
      await cache.close();
      throw err instanceof ReplyError ? new LookupCacheSetupError(err as Error) : asStoreFailure(err);
    }
    return cache;
  }

  get live(): boolean {
    return this.#live;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The two connections themselves (operational checks; tests hold the subscriber's reads back). */
  get connections(): { data: Redis; subscriber: Redis } {
    return { data: this.#data, subscriber: this.#sub };
  }

  /** CLIENT IDs of the two connections (operators and tests find them in CLIENT LIST by name too). */
  get clientIds(): { data: number | undefined; subscriber: number | undefined } {
    return { data: this.#tracking?.id, subscriber: this.#subscribed?.id };
  }

  /**
   * Resolves once every invalidation Redis sent before this call has been applied: a PING on the
   * subscriber, whose reply Redis queues behind the invalidations of every write it already executed.
   * A writer that awaits its write and then this knows the cache no longer holds what it overwrote.
   * Never rejects: a PING that fails empties the cache instead, which serves the writer as well.
   */
  async settled(): Promise<void> {
    if (!this.#live) return;
    await this.#answers(this.#sub);
  }

  /**
   * The token's two records: from the cache when live and held, else read (on the tracked connection
   * when live, filling the cache if a record was found; through `strict`, the store's own read, when not).
   */
  lookup(tokenHash: string, strict: (tokenHash: string) => Promise<TokenLookup>): Promise<TokenLookup> {
    if (!this.#live) {
      this.stats.bypasses++;
      return strict(tokenHash);
    }
    if (this.#entries.has(tokenHash)) return this.#afterBarrier(tokenHash, strict);
    this.stats.misses++;
    return this.#fill(tokenHash);
  }

  /**
   * A held record is served only once a barrier sent after this lookup began has come back: every
   * invalidation of a write executed before it has then been applied (the entry is gone if its keys
   * changed), and the database is still the one the cache was filled from.
   */
  async #afterBarrier(tokenHash: string, strict: (tokenHash: string) => Promise<TokenLookup>): Promise<TokenLookup> {
    const vouched = await this.#barrier();
    if (!this.#live) {
      this.stats.bypasses++;
      return strict(tokenHash);
    }
    const held = this.#entries.get(tokenHash);
    if (vouched && held !== undefined) {
      // Least recently used order: Map keeps insertion order, so a hit moves to the end.
      this.#entries.delete(tokenHash);
      // Past its key's TTL the copy is dropped: Redis deletes an expired key (and sends its
      // invalidation) only when its expiry cycle samples it or a client touches it, which can take
      // minutes with many keys; the cache must not outlive what Redis would answer.
      if (held.until > this.#now()) {
        this.stats.hits++;
        this.#entries.set(tokenHash, held);
        return held.found;
      }
    }
    this.stats.misses++;
    return this.#fill(tokenHash);
  }

  /** The barrier of this turn of the event loop: sent once every lookup of the turn has asked for it. */
  #barrier(): Promise<boolean> {
    if (this.#nextBarrier) return this.#nextBarrier;
    const next = new Promise<boolean>((resolve) => {
      setImmediate(() => {
        // From here on, a lookup that starts needs a barrier sent after it: a new one.
        this.#nextBarrier = undefined;
        resolve(this.#vouch());
      });
    });
    this.#nextBarrier = next;
    return next;
  }

  /**
   * One barrier: a PING on the subscriber and a GET of the database marker, together. True when both
   * came back on the connections tracking was confirmed on and the marker is unchanged. A failure or a
   * timeout drops the cache (as an unanswered PING does); another marker (SWAPDB, FLUSHDB) drops it
   * and sets tracking up again at once.
   */
  async #vouch(): Promise<boolean> {
    if (!this.#live) return false;
    this.stats.barriers++;
    const dataIncarnation = this.#dataIncarnation;
    const subIncarnation = this.#subIncarnation;
    const [subAnswered, marker] = await Promise.all([
      this.#answers(this.#sub),
      this.#data.get(this.#keys.lookupCacheMarker()).then(
        (value) => ({ value }),
        () => this.#cut(this.#data, dataIncarnation),
      ),
    ]);
    if (
      !subAnswered ||
      marker === undefined ||
      dataIncarnation !== this.#dataIncarnation ||
      subIncarnation !== this.#subIncarnation ||
      !this.#live
    )
      return false;
    if (marker.value !== this.#marker) {
      this.#options.logger?.warn('token lookup cache: the database it was filled from was swapped or flushed; emptied');
      this.#drop('database_changed');
      void this.#establish(false);
      return false;
    }
    return true;
  }

  async #fill(tokenHash: string): Promise<TokenLookup> {
    const { mark, end } = this.#fills.begin(tokenHash);
    const epoch = this.#epoch;
    const dataIncarnation = this.#dataIncarnation;
    try {
      // Taken before the reads are sent, so a TTL read back is never counted from later than it ran.
      const sent = this.#now();
      const userKey = this.#keys.userToken(tokenHash);
      const accessKey = this.#keys.accessToken(tokenHash);
      // Reads issued together, in one write, so one round trip. The TTLs bound how long a copy may be
      // served (a key given a short TTL by hand included).
      const [user, oauth, userTtl, accessTtl] = replies(
        await this.#data.pipeline().hgetall(userKey).hgetall(accessKey).pttl(userKey).pttl(accessKey).exec(),
      ) as [Record<string, string>, Record<string, string>, number, number];
      // Parsed once, here: a hit hands out the same frozen records.
      const found = tokenLookupFromFields(tokenHash, orNull(user), orNull(oauth));
      if (this.#options.beforeFill) await this.#options.beforeFill(tokenHash);
      const until = heldUntil(found, sent, userTtl, accessTtl);
      // Misses are never cached; a reply that an invalidation, a drop or a reconnect overtook neither.
      if ((found.user !== null || found.oauth !== null) && until > sent && !mark.invalidated && epoch === this.#epoch && this.#live)
        this.#hold(tokenHash, { found, until });
      return found;
    } catch (err) {
      // A read that failed or timed out leaves the connection suspect (a reply that never comes holds
      // every later one behind it): cut it as an unanswered PING would, so the next lookups read
      // as the strict mode does until the cache is set up again.
      if (!(err instanceof ReplyError)) this.#cut(this.#data, dataIncarnation);
      throw asStoreFailure(err);
    } finally {
      end();
    }
  }

  #hold(tokenHash: string, held: Held): void {
    this.#entries.delete(tokenHash);
    this.#entries.set(tokenHash, held);
    if (this.#entries.size > this.#options.maxEntries) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
  }

  /** Connection events and the PING timer: every loss drops the cache, every `ready` sets tracking up again. */
  #watch(): void {
    const watchOne = (conn: Redis, lost: DropReason, bump: () => void) => {
      // An error on the socket is followed by its close, which starts a new incarnation.
      conn.on('error', () => this.#drop(lost));
      conn.on('close', () => {
        bump();
        this.#drop(lost);
      });
      conn.on('ready', () => {
        bump();
        this.#drop(lost);
        void this.#establish(false);
      });
    };
    watchOne(this.#data, 'data_connection_lost', () => this.#dataIncarnation++);
    watchOne(this.#sub, 'subscriber_lost', () => this.#subIncarnation++);
    this.#sub.on('messageBuffer', (channel: Buffer, keys: unknown) => {
      if (channel.toString() === INVALIDATION_CHANNEL) this.#invalidate(keys);
    });
    this.#timer = setInterval(() => void this.#tick(), this.#options.pingIntervalMs);
    this.#timer.unref();
  }

  /** One invalidation message: the keys that changed, or null when the database was flushed. */
  #invalidate(keys: unknown): void {
    this.stats.invalidations++;
    if (!Array.isArray(keys)) {
      // FLUSHDB/FLUSHALL (or a message of an unknown shape): everything goes, the database marker
      // with it; the cache is used again once set up anew (a new marker).
      this.#drop('flush');
      void this.#establish(false);
      return;
    }
    const hit = invalidateKeys(keys, this.#names, (tokenHash) => this.#entries.delete(tokenHash), this.#fills);
    this.emit('invalidated', hit);
  }

  /** Empties the cache and stops its use until it is set up again (tracking confirmed, the marker read). */
  #drop(reason: DropReason): void {
    this.#epoch++;
    this.#entries.clear();
    this.#fills.invalidateAll();
    if (!this.#live) return;
    this.#live = false;
    this.stats.drops++;
    if (reason !== 'closed')
      this.#options.logger?.warn(
        { reason },
        'token lookup cache off: every lookup reads Redis until invalidation tracking is set up again',
      );
    this.emit('dropped', reason);
  }

  /** Sets tracking up on the current connections (at most one attempt at a time). */
  #establish(atStart: boolean): Promise<void> {
    if (this.#establishing) return this.#establishing;
    const attempt = this.#trySetUp().catch((err: unknown) => {
      if (atStart) throw err;
      // Connection trouble is reported by the connections' own events; the next PING tick retries.
    });
    this.#establishing = attempt.finally(() => (this.#establishing = undefined));
    return this.#establishing;
  }

  async #trySetUp(): Promise<void> {
    if (this.#closed || this.#live || this.#data.status !== 'ready' || this.#sub.status !== 'ready') return;
    const dataIncarnation = this.#dataIncarnation;
    const subIncarnation = this.#subIncarnation;
    if (this.#subscribed?.incarnation !== subIncarnation) {
      // CLIENT ID and INFO first: RESP2 allows only (un)subscribe and PING on a subscribed connection.
      const [id, info] = await Promise.all([this.#sub.call('CLIENT', 'ID'), this.#sub.info('server')]);
      await this.#sub.subscribe(INVALIDATION_CHANNEL);
      if (subIncarnation !== this.#subIncarnation) return;
      this.#subscribed = { incarnation: subIncarnation, id: Number(id), server: runIdOf(info) };
    }
    const { id: redirect, server } = this.#subscribed;
    if (this.#tracking?.incarnation !== dataIncarnation || this.#tracking.redirect !== redirect) {
      const [id, info] = await Promise.all([this.#data.call('CLIENT', 'ID'), this.#data.info('server')]);
      if (runIdOf(info) !== server) {
        // A client id means nothing on another server (it may even name a stranger's connection there):
        // both connections start over and find the same server again (e.g. one of them reconnected
        // through Sentinel to a new primary while the other is still on the old one).
        this.#options.logger?.warn(
          'token lookup cache: its two connections reached different Redis servers (a failover?); reconnecting both',
        );
        for (const conn of [this.#data, this.#sub]) if (conn.status === 'ready') conn.disconnect(true);
        return;
      }
      await this.#data.call('CLIENT', 'TRACKING', 'ON', 'REDIRECT', String(redirect));
      if (dataIncarnation !== this.#dataIncarnation) return;
      this.#tracking = { incarnation: dataIncarnation, redirect, id: Number(id) };
    }
    // The database marker: set by the first cache to go live on this database, read by every barrier.
    const markerKey = this.#keys.lookupCacheMarker();
    await this.#data.set(markerKey, randomBytes(16).toString('hex'), 'NX');
    const marker = await this.#data.get(markerKey);
    if (marker === null) return; // flushed in between: the next tick tries again
    if (this.#closed || this.#live || dataIncarnation !== this.#dataIncarnation || subIncarnation !== this.#subIncarnation) return;
    this.#marker = marker;
    this.#epoch++;
    this.#entries.clear();
    this.#live = true;
    this.#options.logger?.info('token lookup cache live: invalidation tracking set up');
    this.emit('live');
  }

  /**
   * Both connections must answer a PING within the command timeout. A silent one (peer gone without a
   * FIN, a stalled subscriber) would leave invalidations undelivered: drop, and reconnect it.
   */
  async #tick(): Promise<void> {
    if (this.#closed) return;
    if (!this.#live) {
      await this.#establish(false);
      return;
    }
    await Promise.all([this.#answers(this.#data), this.#answers(this.#sub)]);
  }

  /**
   * PINGs `conn`: true when it answered. One that fails or times out drops the cache and is reconnected
   * (a new incarnation).
   */
  async #answers(conn: Redis): Promise<boolean> {
    const incarnation = this.#incarnationOf(conn);
    try {
      await conn.ping();
      return true;
    } catch {
      this.#cut(conn, incarnation);
      return false;
    }
  }

  /** A command on `conn` (of `incarnation`) failed or timed out: drop the cache and reconnect it. */
  #cut(conn: Redis, incarnation: number): undefined {
    // A command that outlived its socket (ioredis re-sends it on the next one) says nothing of the new
    // socket: the close already dropped the cache, and the new one is not to be cut for it.
    if (this.#closed || incarnation !== this.#incarnationOf(conn)) return undefined;
    // This socket is done with: tracking is set up again only on the one that replaces it.
    if (conn === this.#data) this.#dataIncarnation++;
    else this.#subIncarnation++;
    this.#drop('ping_failed');
    if (conn.status === 'ready') conn.disconnect(true);
    return undefined;
  }

  #incarnationOf(conn: Redis): number {
    return conn === this.#data ? this.#dataIncarnation : this.#subIncarnation;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#drop('closed');
    this.#closed = true;
    clearInterval(this.#timer);
    await Promise.all(
      [this.#data, this.#sub].map(async (c) => {
        if (c.status === 'ready') await c.quit().catch(() => c.disconnect());
        else c.disconnect();
      }),
    );
  }
}

/** The server's run_id from `INFO server`: the same id names the same running server. */
function runIdOf(info: string): string {
  const found = /^run_id:([0-9a-f]+)\r?$/m.exec(info);
  if (!found) throw new TypeError('INFO server has no run_id');
  return found[1]!;
}

/** A pipeline's replies in order; its first failed command's error is thrown (as Promise.all would). */
function replies(results: Array<[Error | null, unknown]> | null): unknown[] {
  if (results === null) throw new Error('the pipeline was discarded');
  return results.map(([err, value]) => {
    if (err !== null) throw err;
    return value;
  });
}
