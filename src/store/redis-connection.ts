// Connections to Redis (ioredis): created fail-fast, connected with a bounded wait at start-up, and
// what counts as Redis failing (turned into StoreUnavailableError) as opposed to a bug in this code.
// No offline queue and a command timeout, so a dead or slow Redis surfaces as an error within the
// bound and the proxy answers 503 instead of letting requests pile up.
// On one server (standalone or Sentinel) the commands of one turn of the event loop leave in one write
// (corkForTurn), instead of through ioredis's auto-pipelining; a cluster keeps auto-pipelining.

import { Redis, Cluster, ReplyError, type RedisOptions, type ClusterOptions } from 'ioredis';
import { StoreUnavailableError } from './shared.ts';
import { parseRedisUrl } from './redis-url.ts';

export type RedisClient = Redis | Cluster;

export interface RedisConnectionOptions {
  url: string;
  /** Bound on every command; past it the command fails (and the request gets 503). */
  commandTimeoutMs: number;
  connectTimeoutMs: number;
  /**
   * A connection that has commands outstanding and receives no byte for this long is destroyed and
   * re-established (default: twice the command timeout, at least 1 s). Without it, a connection whose
   * peer vanished without a FIN or RST (host gone, partition, failover to another machine) stays
   * "ready" and every command on it times out until the kernel gives up, minutes later.
   */
  socketTimeoutMs?: number;
}

export function defaultSocketTimeoutMs(commandTimeoutMs: number): number {
  return Math.max(2 * commandTimeoutMs, 1000);
}

/** Sockets corked until the end of the current turn of the event loop (corkForTurn). */
const corkedThisTurn = new WeakSet<object>();

/**
 * Holds what is written to `client`'s socket until the end of this turn of the event loop, so that
 * every command written to it in the turn leaves in one write: auto-pipelining's batching, without
 * the pipeline object it builds per batch (onto which it copies every Lua script defined on the
 * client) and the second promise per command, which cost a quarter of a strict token check's CPU. A
 * ready connection only: before it is, commands are refused or queued by ioredis. A socket replaced
 * meanwhile (a reconnect) is uncorked all the same; commands on the new one were written at once. A
 * stream without cork()/uncork() (a transport other than node:net's) is written at once: the
 * commands then leave one write each, as they would without this.
 */
function corkForTurn(client: Redis): void {
  if (client.status !== 'ready') return;
  const socket = client.stream as Partial<Pick<typeof client.stream, 'cork' | 'uncork'>> & object;
  if (typeof socket.cork !== 'function' || typeof socket.uncork !== 'function') return;
  if (corkedThisTurn.has(socket)) return;
  corkedThisTurn.add(socket);
  socket.cork();
  setImmediate(() => {
    corkedThisTurn.delete(socket);
    socket.uncork!();
  });
}

/**
 * A client of one server whose commands of a turn leave in one write (corkForTurn), pipelines and
 * scripts included. It relies on ioredis sending every command, a pipeline's and a script's too,
 * through sendCommand (ioredis 5.11, pinned: test/integration/redis-batching.test.ts checks it).
 * Whether a connection batches is a property of the factory (oneServer, duplicateConnection), stated
 * where the connection is made, not of which helper made it: every connection to one server the store
 * opens batches, but those of the lookup cache, whose barrier must leave at once.
 */
class TurnBatchedRedis extends Redis {
  override sendCommand(...args: Parameters<Redis['sendCommand']>): unknown {
    corkForTurn(this);
    return super.sendCommand(...args);
  }
}

/**
 * A connection to one server (standalone at `url`, or the master Sentinel names); `batched`: its
 * commands of a turn leave in one write (TurnBatchedRedis), else each at once.
 */
function oneServer(options: RedisOptions, batched: boolean, url?: string): Redis {
  const Client = batched ? TurnBatchedRedis : Redis;
  return url === undefined ? new Client(options) : new Client(url, options);
}

/**
 * A copy of `redis` with `overrides` (ioredis's duplicate() for a cluster, whose per-node connections
 * it makes itself; for one server a connection of the same factory, batched like the original).
 */
export function duplicateConnection(
  redis: RedisClient,
  overrides: RedisOptions,
  { batched = true, cluster = {} }: { batched?: boolean; cluster?: ClusterOptions } = {},
): RedisClient {
  if (redis instanceof Cluster)
    return redis.duplicate(undefined, { ...cluster, redisOptions: { ...redis.options.redisOptions, ...overrides } });
  return oneServer({ ...redis.options, ...overrides }, batched);
}

/** Creates an ioredis client (not yet connected) with fail-fast settings. */
export function createRedisClient(options: RedisConnectionOptions): RedisClient {
  const parsed = parseRedisUrl(options.url);
  const common: RedisOptions = {
    lazyConnect: true,
    enableOfflineQueue: false,
    // One server: corkForTurn batches instead (TurnBatchedRedis). A cluster sets its own below.
    enableAutoPipelining: false,
    commandTimeout: options.commandTimeoutMs,
    connectTimeout: options.connectTimeoutMs,
    maxRetriesPerRequest: 1,
    socketTimeout: options.socketTimeoutMs ?? defaultSocketTimeoutMs(options.commandTimeoutMs),
    // Reconnect forever with a short capped backoff: recovery must not need a restart.
    retryStrategy: (times) => Math.min(50 * times, 1000),
  };
  if (parsed.mode === 'standalone') return oneServer(common, true, parsed.url);
  if (parsed.mode === 'sentinel') {
    const sentinel: RedisOptions = {
      ...common,
      sentinels: parsed.sentinels,
      name: parsed.name,
      db: parsed.db,
      sentinelRetryStrategy: (times) => Math.min(100 * times, 1000),
    };
    if (parsed.password !== undefined) sentinel.password = parsed.password;
    if (parsed.username !== undefined) sentinel.username = parsed.username;
    if (parsed.tls) {
      // rediss+sentinel: TLS to the Sentinels and to the data nodes they name. ioredis applies `tls`
      // to the data nodes only with enableTLSForSentinelMode, and to the Sentinels only through
      // sentinelTLS; with `tls` alone both connections were plain TCP.
      sentinel.tls = {};
      sentinel.enableTLSForSentinelMode = true;
      sentinel.sentinelTLS = {};
    }
    return oneServer(sentinel, true);
  }
  const redisOptions: RedisOptions = { ...common };
  if (parsed.password !== undefined) redisOptions.password = parsed.password;
  if (parsed.username !== undefined) redisOptions.username = parsed.username;
  if (parsed.tls) redisOptions.tls = {};
  const cluster: ClusterOptions = {
    lazyConnect: true,
    enableOfflineQueue: false,
    enableAutoPipelining: true,
    redisOptions,
    clusterRetryStrategy: (times) => Math.min(100 * times, 1000),
  };
  return new Cluster(parsed.nodes, cluster);
}

/**
 * Why connecting failed: `refused` (nothing listens at the address), `auth` (Redis turned down the
 * credentials, or wants some and got none), `timeout` (no answer within the connect timeout).
 */
export type RedisConnectFailure = 'refused' | 'auth' | 'timeout';

/** Connecting to Redis failed; the store is unavailable, and at start-up the sidecar stops. */
export class RedisConnectError extends StoreUnavailableError {
  readonly failure: RedisConnectFailure;

  constructor(failure: RedisConnectFailure, message: string, cause: unknown) {
    super(message, { cause });
    this.name = 'RedisConnectError';
    this.failure = failure;
  }
}

// NOAUTH: a password is required and none was sent. WRONGPASS (ACL) and "invalid password" (Redis
// before 6): the credentials are wrong. NOPERM: the ACL user may not run what the store needs.
const AUTH_REPLY = /\b(NOAUTH|WRONGPASS|NOPERM)\b|invalid password/;

/** A failure that waiting will not cure: reported at once instead of after the connect timeout. */
function immediateFailure(err: unknown): RedisConnectError | undefined {
  if (!(err instanceof Error)) return undefined;
  if (AUTH_REPLY.test(err.message)) return new RedisConnectError('auth', err.message, err);
  const refused = [err, (err as { lastNodeError?: unknown }).lastNodeError].some(
    (e) => (e as { code?: unknown } | undefined)?.code === 'ECONNREFUSED',
  );
  if (refused) return new RedisConnectError('refused', err.message, err);
  return undefined;
}

/**
 * Connects and waits until Redis answers. A refused connection or rejected credentials fail at once;
 * anything else (no route, a Redis still loading) is retried until `timeoutMs` (start-up must not
 * hang). Rejects with RedisConnectError.
 */
export async function connectRedis(client: RedisClient, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  let onError: ((err: unknown) => void) | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      let lastError: unknown;
      onError = (err: unknown) => {
        lastError = err;
        const failure = immediateFailure(err);
        if (failure) reject(failure);
      };
      client.on('error', onError);
      client.once('ready', () => resolve());
      // A client that does not reconnect ends after its first failure: no need to wait the timeout.
      client.once('end', () =>
        reject(immediateFailure(lastError) ?? new RedisConnectError('timeout', describeLast('connection closed', lastError), lastError)),
      );
      timer = setTimeout(
        () => reject(new RedisConnectError('timeout', describeLast(`no answer within ${timeoutMs} ms`, lastError), lastError)),
        timeoutMs,
      );
      client.connect().catch(onError);
    });
    await client.ping();
  } catch (err) {
    client.disconnect();
    throw immediateFailure(err) ?? asStoreFailure(err);
  } finally {
    clearTimeout(timer);
    if (onError) client.off('error', onError);
  }
}

function describeLast(what: string, lastError: unknown): string {
  return lastError instanceof Error ? `${what}: ${lastError.message}` : what;
}

/** Base class of ioredis's own errors: Redis error replies, aborted commands, Cluster failures. */
const RedisError = Object.getPrototypeOf(ReplyError) as new (...args: never[]) => Error;

/**
 * The one place that decides whether an error means "Redis cannot answer now". ioredis reports error
 * replies (READONLY, OOM, CLUSTERDOWN, NOSCRIPT...) and aborted commands as its RedisError classes,
 * and a closed connection, a command timeout or an unwritable stream as plain Errors; node:net
 * reports socket failures with a system code (ECONNRESET, and ECONNREFUSED on an AggregateError when
 * every address of a name refused). These become StoreUnavailableError, keeping the original as
 * `cause`. Anything else (a TypeError, a RangeError, Node's ERR_* argument errors) is a bug in the
 * calling code and passes unchanged, so it is answered 500, not mistaken for an outage.
 */
export function asStoreFailure(err: unknown): unknown {
  if (err instanceof StoreUnavailableError || !(err instanceof Error)) return err;
  if (err instanceof RedisError || Object.getPrototypeOf(err) === Error.prototype || isSystemError(err)) {
    return new StoreUnavailableError(`Redis failed: ${err.message}`, { cause: err });
  }
  return err;
}

function isSystemError(err: Error): boolean {
  const code = (err as { code?: unknown }).code;
  return (
    typeof code === 'string' && /^E[A-Z]/.test(code) && !code.startsWith('ERR_') && !(err instanceof TypeError || err instanceof RangeError)
  );
}

/**
 * A copy of `redis` for the token lookups: no command or socket timeout of ioredis's (a timer per
 * command and per write; the lookups are bounded by ReadDeadlines instead, one timer for all) and no
 * Lua scripts defined on it (ioredis copies every script of a client onto each auto-pipelined batch).
 * On one server (standalone or Sentinel) it batches the reads of a turn like every connection of the
 * store; a cluster keeps auto-pipelining: its commands go to the node of each key's slot, which only
 * ioredis knows.
 */
export function duplicateForLookups(redis: RedisClient): RedisClient {
  return duplicateConnection(redis, { commandTimeout: undefined, socketTimeout: undefined, enableAutoPipelining: false });
}

/**
 * A copy of `redis` for WATCH/MULTI transactions and WAIT that never reconnects and never re-sends:
 * ioredis would otherwise replay an unanswered MULTI..EXEC on a fresh connection after a cut, without
 * the WATCH that guarded it, so a token created in between could survive its client's deletion. A
 * cut fails the operation instead; the caller's retry starts again from WATCH on a new connection.
 */
export function duplicateForTransactions(redis: RedisClient): RedisClient {
  const noReplay = { autoResendUnfulfilledCommands: false, retryStrategy: () => null };
  return duplicateConnection(redis, noReplay, { cluster: { clusterRetryStrategy: () => null } });
}
