// Production TokenStore on Redis (ioredis): standalone, Sentinel or Cluster. Fails fast rather than
// queueing: no offline queue and a command timeout, so a dead or slow Redis surfaces as an error
// within the bound and the proxy answers 503 instead of letting requests pile up.
//
// Revocations and replication (docs/redis-ha.md): when the primary has replicas (Sentinel, or any
// primary whose INFO replication reports connected_slaves > 0), every revocation is written on the
// dedicated transaction connection and followed by `WAIT 1 <timeout>` on that same connection, so it
// returns only once one replica holds it (or the timeout passed: the primary did apply it, so the
// revocation still succeeds). The hot path (lookupToken) never waits for anything.

import { Redis, Cluster, type RedisOptions, type ClusterOptions } from 'ioredis';
import type { TokenLookup } from '../credentials.ts';
import {
  ACCESS_MEMBER,
  REFRESH_MEMBER,
  accessTokenFields,
  auditFields,
  auditFromFields,
  clientFields,
  clientFromFields,
  keyLayout,
  orNull,
  profileFields,
  profileFromFields,
  refreshTokenFields,
  userTokenFields,
  type Fields,
  type KeyLayout,
} from './records.ts';
import type {
  AccessTokenRecord,
  AuditEvent,
  ClientRecord,
  CreateTokenOutcome,
  DeleteClientResult,
  ProfileRecord,
  RefreshTokenRecord,
  RevocationListener,
  RevocationNotice,
  RotateOutcome,
  StoredAuditEvent,
  TokenStore,
  UserTokenRecord,
} from './types.ts';

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

/**
 * Accepted URL forms:
 * - `redis://[user:pass@]host:port[/db]`, `rediss://...` (TLS)
 * - `redis+sentinel://[:pass@]host1:port1,host2:port2/<masterName>[/db]` (`rediss+sentinel` for TLS)
 * - `redis+cluster://[:pass@]host1:port1,host2:port2` (`rediss+cluster` for TLS)
 */
export function parseRedisUrl(url: string):
  | { mode: 'standalone'; url: string }
  | { mode: 'sentinel'; sentinels: Array<{ host: string; port: number }>; name: string; db: number; password?: string; username?: string; tls: boolean }
  | { mode: 'cluster'; nodes: Array<{ host: string; port: number }>; password?: string; username?: string; tls: boolean } {
  const match = /^(rediss?)(\+sentinel|\+cluster)?:\/\/(.*)$/.exec(url);
  if (!match) throw new Error('REDIS_URL must start with redis://, rediss://, redis+sentinel:// or redis+cluster://');
  const [, scheme, variant, rest = ''] = match;
  if (!variant) {
    new URL(url); // throws on a malformed URL
    return { mode: 'standalone', url };
  }
  const at = rest.lastIndexOf('@');
  const auth = at >= 0 ? rest.slice(0, at) : '';
  const afterAuth = at >= 0 ? rest.slice(at + 1) : rest;
  const slash = afterAuth.indexOf('/');
  const hostList = slash >= 0 ? afterAuth.slice(0, slash) : afterAuth;
  const path = slash >= 0 ? afterAuth.slice(slash + 1) : '';
  const hosts = hostList.split(',').filter(Boolean).map((hp) => {
    const m = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(hp);
    if (!m) throw new Error(`REDIS_URL host "${hp}" must be host:port`);
    return { host: m[1]!, port: Number(m[2]) };
  });
  if (hosts.length === 0) throw new Error('REDIS_URL names no host');
  const [user, pass] = auth.includes(':') ? auth.split(':', 2) : [auth, undefined];
  const creds: { password?: string; username?: string } = {};
  if (pass) creds.password = decodeURIComponent(pass);
  if (user) creds.username = decodeURIComponent(user);
  const tls = scheme === 'rediss';
  if (variant === '+cluster') return { mode: 'cluster', nodes: hosts, tls, ...creds };
  const [name, db] = path.split('/');
  if (!name) throw new Error('REDIS_URL for Sentinel must end with /<masterName>');
  return { mode: 'sentinel', sentinels: hosts, name, db: Number(db ?? 0) || 0, tls, ...creds };
}

/** Creates an ioredis client (not yet connected) with fail-fast settings. */
export function createRedisClient(options: RedisConnectionOptions): RedisClient {
  const parsed = parseRedisUrl(options.url);
  const common: RedisOptions = {
    lazyConnect: true,
    enableOfflineQueue: false,
    enableAutoPipelining: true,
    commandTimeout: options.commandTimeoutMs,
    connectTimeout: options.connectTimeoutMs,
    maxRetriesPerRequest: 1,
    socketTimeout: options.socketTimeoutMs ?? defaultSocketTimeoutMs(options.commandTimeoutMs),
    // Reconnect forever with a short capped backoff: recovery must not need a restart.
    retryStrategy: (times) => Math.min(50 * times, 1000),
  };
  if (parsed.mode === 'standalone') return new Redis(parsed.url, common);
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
    return new Redis(sentinel);
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

/** Connects and waits until Redis answers, or rejects after `timeoutMs` (start-up must not hang). */
export async function connectRedis(client: RedisClient, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  let lastError: unknown;
  const onError = (err: unknown) => {
    lastError = err;
  };
  client.on('error', onError);
  try {
    await Promise.race([
      new Promise<void>((resolve, reject) => {
        client.once('ready', () => resolve());
        // A client that does not reconnect ends after its first failure: no need to wait the timeout.
        client.once('end', () => reject(lastError instanceof Error ? lastError : new Error('connection closed')));
        client.connect().catch((err: unknown) => {
          lastError = err;
        });
      }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          const why = lastError instanceof Error ? `: ${lastError.message}` : '';
          reject(new Error(`no answer within ${timeoutMs} ms${why}`));
        }, timeoutMs);
      }),
    ]);
    await client.ping();
  } catch (err) {
    client.disconnect();
    throw err;
  } finally {
    clearTimeout(timer);
    client.off('error', onError);
  }
}

// Revokes a user-grade record only if it exists (HSET alone would create a bare record).
const REVOKE_USER_TOKEN = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'revoked', 'true')
return 1`;

// Creates tokens only while their client exists and is not revoked; the same script adds them to the
// client's token set, which deleteClient WATCHes, so a create racing a delete either lands before the
// delete's snapshot (and is revoked with it) or sees the client revoked.
// KEYS: client, clientTokens, access, [refresh, family]
// ARGV: accessHash, accessExpiresAt, nAccessArgs, access fields..., [refreshHash, refreshExpiresAt, refresh fields...]
const STORE_TOKENS = `
local function store_tokens(args, offset)
  local n = tonumber(args[offset + 2])
  redis.call('HSET', KEYS[3], unpack(args, offset + 3, offset + 2 + n))
  redis.call('PEXPIREAT', KEYS[3], args[offset + 1])
  redis.call('SADD', KEYS[2], 'a:' .. args[offset])
  if #KEYS >= 5 then
    local r = offset + 3 + n
    redis.call('HSET', KEYS[4], unpack(args, r + 2))
    redis.call('PEXPIREAT', KEYS[4], args[r + 1])
    redis.call('SADD', KEYS[2], 'r:' .. args[r])
    redis.call('SADD', KEYS[5], 'a:' .. args[offset], 'r:' .. args[r])
    redis.call('PEXPIREAT', KEYS[5], args[r + 1])
  end
end
local function client_state()
  if redis.call('EXISTS', KEYS[1]) == 0 then return 'client_not_found' end
  if redis.call('HEXISTS', KEYS[1], 'revokedAt') == 1 then return 'client_revoked' end
  return 'ok'
end
`;

const ISSUE_TOKENS = `${STORE_TOKENS}
local state = client_state()
if state ~= 'ok' then return state end
store_tokens(ARGV, 1)
return 'ok'`;

// Rotation and reuse detection in one step, so two concurrent refreshes with one token cannot both
// succeed. KEYS: client, clientTokens, access, refresh, family, oldRefresh.
// ARGV: now, clientId, familyId, accessKeyPrefix, refreshKeyPrefix, then the STORE_TOKENS arguments.
const ROTATE_REFRESH = `${STORE_TOKENS}
local old = redis.call('HMGET', KEYS[6], 'clientId', 'revokedAt', 'rotatedAt', 'familyId')
if not old[1] or old[1] ~= ARGV[2] or old[2] or old[4] ~= ARGV[3] then return 'invalid' end
if old[3] then
  for _, m in ipairs(redis.call('SMEMBERS', KEYS[5])) do
    local key = (string.sub(m, 1, 2) == 'a:' and ARGV[4] or ARGV[5]) .. string.sub(m, 3)
    if redis.call('EXISTS', key) == 1 then redis.call('HSETNX', key, 'revokedAt', ARGV[1]) end
  end
  return 'reused'
end
local state = client_state()
if state == 'client_not_found' then return 'invalid' end
if state ~= 'ok' then return state end
redis.call('HSET', KEYS[6], 'rotatedAt', ARGV[1])
store_tokens(ARGV, 6)
return 'ok'`;

// KEYS: refresh token, family. ARGV: now, accessKeyPrefix, refreshKeyPrefix.
const REVOKE_REFRESH_FAMILY = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSETNX', KEYS[1], 'revokedAt', ARGV[1])
for _, m in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  local key = (string.sub(m, 1, 2) == 'a:' and ARGV[2] or ARGV[3]) .. string.sub(m, 3)
  if redis.call('EXISTS', key) == 1 then redis.call('HSETNX', key, 'revokedAt', ARGV[1]) end
end
return 1`;

const REVOKE_ACCESS_TOKEN = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSETNX', KEYS[1], 'revokedAt', ARGV[1])
return 1`;

// Creates a profile only when absent: an admin's edits are never overwritten by seeding.
const SEED_PROFILE = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('SADD', KEYS[2], ARGV[1])
return 1`;

const CREATE_CLIENT = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('SADD', KEYS[2], ARGV[1])
return 1`;

// A fixed window that starts with its first hit; the reply is the count and the ms left in the window.
const HIT_COUNTER = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); ttl = tonumber(ARGV[1]) end
return {count, ttl}`;

interface ScriptedClient {
  mcpHitCounter(key: string, windowMs: string): Promise<[number, number]>;
  mcpRevokeUserToken(key: string): Promise<number>;
  mcpIssueTokens(...keysAndArgs: string[]): Promise<string>;
  mcpRotateRefresh(...keysAndArgs: string[]): Promise<string>;
  mcpRevokeRefreshFamily(token: string, family: string, now: string, accessPrefix: string, refreshPrefix: string): Promise<number>;
  mcpRevokeAccessToken(key: string, now: string): Promise<number>;
  mcpSeedProfile(key: string, index: string, ...argv: string[]): Promise<number>;
  mcpCreateClient(key: string, index: string, ...argv: string[]): Promise<number>;
}

/** Registers the Lua scripts on a connection (the main one and the transaction one). */
function defineScripts(redis: RedisClient): ScriptedClient {
  redis.defineCommand('mcpRevokeUserToken', { numberOfKeys: 1, lua: REVOKE_USER_TOKEN });
  redis.defineCommand('mcpIssueTokens', { lua: ISSUE_TOKENS });
  redis.defineCommand('mcpRotateRefresh', { numberOfKeys: 6, lua: ROTATE_REFRESH });
  redis.defineCommand('mcpRevokeRefreshFamily', { numberOfKeys: 2, lua: REVOKE_REFRESH_FAMILY });
  redis.defineCommand('mcpRevokeAccessToken', { numberOfKeys: 1, lua: REVOKE_ACCESS_TOKEN });
  redis.defineCommand('mcpSeedProfile', { numberOfKeys: 2, lua: SEED_PROFILE });
  redis.defineCommand('mcpCreateClient', { numberOfKeys: 2, lua: CREATE_CLIENT });
  redis.defineCommand('mcpHitCounter', { numberOfKeys: 1, lua: HIT_COUNTER });
  return redis as unknown as ScriptedClient;
}

function flatten(fields: Fields): string[] {
  const out: string[] = [];
  for (const k in fields) out.push(k, fields[k]!);
  return out;
}

const MAX_TRANSACTION_ATTEMPTS = 16;

/** How long a replica count read from INFO replication is trusted (it is also dropped on reconnect). */
const REPLICA_COUNT_TTL_MS = 5000;

/** What the last revocations' WAIT achieved (for operators' checks and the HA tests). */
export interface ReplicationStats {
  /** WAITs issued after a revocation. */
  waits: number;
  /** WAITs that returned before a replica acknowledged the write (the timeout passed). */
  unacknowledged: number;
}

export class RedisTokenStore implements TokenStore {
  readonly #redis: RedisClient;
  readonly #scripts: ScriptedClient;
  readonly #keys: KeyLayout;
  /** WATCH is per connection: transactions run one at a time on a connection of their own. */
  #txClient: RedisClient | undefined;
  #txQueue: Promise<unknown> = Promise.resolve();
  readonly #connectTimeoutMs: number;
  /** Server-side bound of WAIT: below the client's command timeout, so Redis answers before ioredis gives up. */
  readonly #waitTimeoutMs: number;
  /** connected_slaves of the primary, from INFO replication (standalone and Sentinel only). */
  #replicaCount: { count: number; at: number } | undefined;
  #replicaCountPending: Promise<number> | undefined;
  readonly #replication: ReplicationStats = { waits: 0, unacknowledged: 0 };

  constructor(redis: RedisClient, options: { keyPrefix?: string; connectTimeoutMs?: number } = {}) {
    this.#redis = redis;
    this.#keys = keyLayout(options.keyPrefix ?? 'mcpauth:');
    this.#connectTimeoutMs = options.connectTimeoutMs ?? 5000;
    const commandTimeout = (redis instanceof Cluster ? redis.options.redisOptions?.commandTimeout : redis.options.commandTimeout) ?? 1000;
    this.#waitTimeoutMs = Math.max(10, Math.floor(commandTimeout * 0.8));
    this.#scripts = defineScripts(redis);
    // A reconnect may land on another primary (Sentinel failover): count its replicas afresh.
    redis.on('ready', () => {
      this.#replicaCount = undefined;
    });
  }

  /** Copies of the counters of WAITs issued after revocations. */
  get replicationStats(): ReplicationStats {
    return { ...this.#replication };
  }

  get keys(): KeyLayout {
    return this.#keys;
  }

  /** The main connection (for readiness events and operational checks). */
  get client(): RedisClient {
    return this.#redis;
  }

  async lookupToken(tokenHash: string): Promise<TokenLookup> {
    // Two reads issued together; auto-pipelining sends them in one write, so one round trip.
    const [user, oauth] = await Promise.all([
      this.#redis.hgetall(this.#keys.userToken(tokenHash)),
      this.#redis.hgetall(this.#keys.accessToken(tokenHash)),
    ]);
    return { user: orNull(user), oauth: orNull(oauth) };
  }

  async ping(): Promise<void> {
    await this.#redis.ping();
  }

  async putUserToken(record: UserTokenRecord): Promise<void> {
    const key = this.#keys.userToken(record.tokenHash);
    const result = await this.#redis
      .multi()
      .hset(key, userTokenFields(record))
      .pexpireat(key, record.expiresAt)
      .exec();
    assertExec(result);
  }

  async revokeUserToken(tokenHash: string): Promise<boolean> {
    const revoked = await this.#revocation(async (scripts) => (await scripts.mcpRevokeUserToken(this.#keys.userToken(tokenHash))) === 1);
    if (revoked) await this.#publish({ tokenHashes: [tokenHash] });
    return revoked;
  }

  async createClient(client: ClientRecord): Promise<void> {
    const created = await this.#scripts.mcpCreateClient(
      this.#keys.client(client.clientId),
      this.#keys.clientIndex(),
      client.clientId,
      ...flatten(clientFields(client)),
    );
    if (created !== 1) throw new Error('client already exists');
  }

  async getClient(clientId: string): Promise<ClientRecord | null> {
    const fields = orNull(await this.#redis.hgetall(this.#keys.client(clientId)));
    return fields && clientFromFields(fields);
  }

  async listClients(): Promise<ClientRecord[]> {
    const ids = (await this.#redis.smembers(this.#keys.clientIndex())).sort();
    const all = await Promise.all(ids.map((id) => this.#redis.hgetall(this.#keys.client(id))));
    const out: ClientRecord[] = [];
    const expired: string[] = [];
    all.forEach((fields, i) => {
      if (!orNull(fields)) {
        expired.push(ids[i]!);
        return;
      }
      const client = clientFromFields(fields);
      if (client) out.push(client);
    });
    // Registrations that expired unused leave their id behind in the index; drop it here.
    if (expired.length > 0) await this.#redis.srem(this.#keys.clientIndex(), ...expired);
    return out;
  }

  async deleteClient(clientId: string, now: number): Promise<DeleteClientResult | null> {
    const deleted = await this.#deleteClient(clientId, now);
    if (deleted) await this.#publish({ clientIds: [clientId] });
    return deleted;
  }

  #deleteClient(clientId: string, now: number): Promise<DeleteClientResult | null> {
    return this.#transaction(async (tx) => {
      const clientKey = this.#keys.client(clientId);
      const setKey = this.#keys.clientTokens(clientId);
      for (let attempt = 0; attempt < MAX_TRANSACTION_ATTEMPTS; attempt++) {
        await tx.watch(clientKey, setKey);
        const [revokedAtText, exists] = await Promise.all([tx.hget(clientKey, 'revokedAt'), tx.exists(clientKey)]);
        if (!exists) {
          // UNWATCH names no key: on Cluster it alone would go to any node, not necessarily the one
          // holding this WATCH. Pipelined with a command on the watched key, it goes to that node.
          assertExec(await tx.pipeline().exists(clientKey).unwatch().exec());
          return null;
        }
        const revokedAt = revokedAtText !== null ? Number(revokedAtText) : now;
        const members = await tx.smembers(setKey);
        const tokenKeys = members.map((m) =>
          m.startsWith(ACCESS_MEMBER) ? this.#keys.accessToken(m.slice(2)) : this.#keys.refreshToken(m.slice(2)),
        );
        // Only live, not yet revoked tokens are touched; the expiry is re-applied so a token that
        // expires between this read and EXEC is deleted again rather than left behind without a TTL.
        const states = await Promise.all(tokenKeys.map((k) => tx.hmget(k, 'expiresAt', 'revokedAt')));
        const multi = tx.multi();
        if (revokedAtText === null) multi.hset(clientKey, 'revokedAt', String(revokedAt));
        let accessTokensRevoked = 0;
        let refreshTokensRevoked = 0;
        members.forEach((member, i) => {
          const [expiresAt, alreadyRevoked] = states[i]!;
          if (expiresAt === null || alreadyRevoked !== null) return;
          const key = tokenKeys[i]!;
          multi.hset(key, 'revokedAt', String(revokedAt));
          multi.pexpireat(key, Number(expiresAt));
          if (member.startsWith(ACCESS_MEMBER)) accessTokensRevoked++;
          else if (member.startsWith(REFRESH_MEMBER)) refreshTokensRevoked++;
        });
        multi.del(setKey);
        const result = await multi.exec();
        if (result === null) {
          // A watched key changed (e.g. a token was created): retry. A steady stream of new tokens
          // would abort every attempt, so first mark the client revoked on its own (same script as
          // for one access token: EXISTS, then HSETNX revokedAt): from then on no token can be added
          // to its set and the next attempt revokes every remaining token.
          if (revokedAtText === null) await tx.eval(REVOKE_ACCESS_TOKEN, 1, clientKey, String(revokedAt));
          continue;
        }
        assertExec(result);
        if (await this.#hasReplicas()) await this.#waitForReplica(tx);
        return { clientId, revokedAt, accessTokensRevoked, refreshTokensRevoked };
      }
      throw new Error('deleteClient: too much contention, gave up');
    });
  }

  async createAccessToken(record: AccessTokenRecord): Promise<CreateTokenOutcome> {
    return this.issueTokens(record);
  }

  /** Arguments of the STORE_TOKENS Lua fragment for an access token and an optional refresh token. */
  #tokenArgs(access: AccessTokenRecord, refresh?: RefreshTokenRecord): string[] {
    const accessArgs = flatten(accessTokenFields(access));
    const args = [access.tokenHash, String(access.expiresAt), String(accessArgs.length), ...accessArgs];
    if (refresh) args.push(refresh.tokenHash, String(refresh.expiresAt), ...flatten(refreshTokenFields(refresh)));
    return args;
  }

  async issueTokens(access: AccessTokenRecord, refresh?: RefreshTokenRecord): Promise<CreateTokenOutcome> {
    const keys = [this.#keys.client(access.clientId), this.#keys.clientTokens(access.clientId), this.#keys.accessToken(access.tokenHash)];
    if (refresh) keys.push(this.#keys.refreshToken(refresh.tokenHash), this.#keys.refreshFamily(refresh.familyId));
    const outcome = await this.#scripts.mcpIssueTokens(String(keys.length), ...keys, ...this.#tokenArgs(access, refresh));
    if (outcome === 'ok' || outcome === 'client_not_found' || outcome === 'client_revoked') return outcome;
    throw new Error(`unexpected script reply: ${String(outcome)}`);
  }

  async getRefreshToken(tokenHash: string): Promise<Fields | null> {
    return orNull(await this.#redis.hgetall(this.#keys.refreshToken(tokenHash)));
  }

  async rotateRefreshToken(
    oldHash: string,
    clientId: string,
    now: number,
    access: AccessTokenRecord,
    refresh: RefreshTokenRecord,
  ): Promise<RotateOutcome> {
    const outcome = await this.#scripts.mcpRotateRefresh(
      this.#keys.client(clientId),
      this.#keys.clientTokens(clientId),
      this.#keys.accessToken(access.tokenHash),
      this.#keys.refreshToken(refresh.tokenHash),
      this.#keys.refreshFamily(refresh.familyId),
      this.#keys.refreshToken(oldHash),
      String(now),
      clientId,
      refresh.familyId,
      this.#keys.accessToken(''),
      this.#keys.refreshToken(''),
      ...this.#tokenArgs(access, refresh),
    );
    if (outcome === 'reused') {
      // The script revoked the family on the main connection, where a WAIT would hold up every
      // lookup behind it. With replicas, the same (idempotent: HSETNX) revocation is repeated on the
      // transaction connection and WAITed for there.
      if (await this.#hasReplicas()) await this.revokeRefreshFamily(oldHash, now);
      await this.#publish({ familyIds: [refresh.familyId] });
      return outcome;
    }
    if (outcome === 'ok' || outcome === 'invalid' || outcome === 'client_revoked') return outcome;
    throw new Error(`unexpected script reply: ${String(outcome)}`);
  }

  async revokeRefreshFamily(tokenHash: string, now: number): Promise<boolean> {
    const familyId = await this.#redis.hget(this.#keys.refreshToken(tokenHash), 'familyId');
    if (familyId === null) return false;
    const revoked = await this.#revocation(async (scripts) => {
      const done = await scripts.mcpRevokeRefreshFamily(
        this.#keys.refreshToken(tokenHash),
        this.#keys.refreshFamily(familyId),
        String(now),
        this.#keys.accessToken(''),
        this.#keys.refreshToken(''),
      );
      return done === 1;
    });
    if (revoked) await this.#publish({ familyIds: [familyId] });
    return revoked;
  }

  async touchClient(clientId: string, ttlMs: number): Promise<void> {
    await this.#redis.pexpire(this.#keys.client(clientId), ttlMs);
  }

  async revokeAccessToken(tokenHash: string, now: number): Promise<boolean> {
    const revoked = await this.#revocation(async (scripts) => (await scripts.mcpRevokeAccessToken(this.#keys.accessToken(tokenHash), String(now))) === 1);
    if (revoked) await this.#publish({ tokenHashes: [tokenHash] });
    return revoked;
  }

  async hitCounter(name: string, windowMs: number): Promise<{ count: number; resetMs: number }> {
    const [count, resetMs] = await this.#scripts.mcpHitCounter(this.#keys.rateCounter(name), String(windowMs));
    return { count, resetMs };
  }

  async seedProfiles(profiles: readonly ProfileRecord[]): Promise<string[]> {
    const created: string[] = [];
    for (const profile of profiles) {
      const done = await this.#scripts.mcpSeedProfile(
        this.#keys.profile(profile.name),
        this.#keys.profileIndex(),
        profile.name,
        ...flatten(profileFields(profile)),
      );
      if (done === 1) created.push(profile.name);
    }
    return created;
  }

  async getProfile(name: string): Promise<ProfileRecord | null> {
    const fields = orNull(await this.#redis.hgetall(this.#keys.profile(name)));
    return fields && profileFromFields(fields);
  }

  async listProfiles(): Promise<ProfileRecord[]> {
    const names = (await this.#redis.smembers(this.#keys.profileIndex())).sort();
    const all = await Promise.all(names.map((n) => this.#redis.hgetall(this.#keys.profile(n))));
    const out: ProfileRecord[] = [];
    for (const fields of all) {
      const profile = orNull(fields) && profileFromFields(fields);
      if (profile) out.push(profile);
    }
    return out;
  }

  async appendAudit(event: AuditEvent, maxLen: number): Promise<string> {
    const id = await this.#redis.xadd(this.#keys.auditStream(), 'MAXLEN', '~', String(maxLen), '*', ...flatten(auditFields(event)));
    if (id === null) throw new Error('XADD returned no id');
    return id;
  }

  async listAuditEvents(count: number): Promise<StoredAuditEvent[]> {
    if (count <= 0) return [];
    const entries = await this.#redis.xrevrange(this.#keys.auditStream(), '+', '-', 'COUNT', count);
    return entries.map(([id, flat]) => {
      const fields: Fields = {};
      for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
      return auditFromFields(id, fields);
    });
  }

  /**
   * A connection of its own in subscriber mode. It reconnects as the main one does; after a reconnect
   * it subscribes again and only then reports `missed`, so a revocation is either delivered or already
   * written when the listener re-checks.
   */
  async subscribeRevocations(listener: RevocationListener): Promise<() => Promise<void>> {
    const channel = this.#keys.revocationChannel();
    const sub = duplicateForSubscription(this.#redis);
    let subscribedBefore = false;
    let closing = false;
    sub.on('error', () => undefined); // the main connection reports outages; this one just reconnects
    sub.on('message', (from: string, text: string) => {
      if (from !== channel) return;
      const notice = parseNotice(text);
      if (notice) listener.revoked(notice);
    });
    const subscribe = async (): Promise<void> => {
      await sub.subscribe(channel);
      if (subscribedBefore) listener.missed();
      subscribedBefore = true;
    };
    sub.on('ready', () => {
      // The first subscription is awaited below; a failed one here waits for the next 'ready'.
      if (subscribedBefore && !closing) subscribe().catch(() => undefined);
    });
    await connectRedis(sub, this.#connectTimeoutMs);
    try {
      await subscribe();
    } catch (err) {
      sub.disconnect();
      throw err;
    }
    return async () => {
      closing = true;
      await sub.quit().catch(() => sub.disconnect());
    };
  }

  /**
   * Tells every subscribed sidecar what was revoked. The revocation itself is already stored: a lost
   * notice only delays the end of open streams to the listeners' next re-check, so it fails nothing.
   */
  async #publish(notice: RevocationNotice): Promise<void> {
    await this.#redis.publish(this.#keys.revocationChannel(), JSON.stringify(notice)).catch(() => undefined);
  }

  async close(): Promise<void> {
    await this.#txQueue.catch(() => undefined);
    const clients = [this.#redis, this.#txClient].filter((c): c is RedisClient => c !== undefined);
    this.#txClient = undefined;
    await Promise.all(
      clients.map(async (c) => {
        if (c.status === 'ready') await c.quit().catch(() => c.disconnect());
        else c.disconnect();
      }),
    );
  }

  /**
   * Runs a revocation write. Without replicas (or on Cluster) it goes out on the main connection as
   * any write does. With replicas it runs on the transaction connection followed by WAIT there: WAIT
   * covers the writes of its own connection, and it blocks that connection, which must therefore not
   * be the main one (every lookup pipelined behind it would wait too).
   */
  async #revocation<T>(write: (scripts: ScriptedClient) => Promise<T>): Promise<T> {
    if (!(await this.#hasReplicas())) return write(this.#scripts);
    return this.#transaction(async (tx) => {
      const result = await write(tx as unknown as ScriptedClient);
      await this.#waitForReplica(tx);
      return result;
    });
  }

  /**
   * Whether the primary has replicas, from INFO replication (cached for REPLICA_COUNT_TTL_MS and
   * dropped on reconnect). Cluster: false; WAIT would have to reach the node owning the slot, and
   * is not issued there (docs/redis-ha.md).
   */
  async #hasReplicas(): Promise<boolean> {
    if (this.#redis instanceof Cluster) return false;
    const cached = this.#replicaCount;
    if (cached && Date.now() - cached.at < REPLICA_COUNT_TTL_MS) return cached.count > 0;
    this.#replicaCountPending ??= this.#redis
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
  async #waitForReplica(tx: RedisClient): Promise<void> {
    this.#replication.waits++;
    let acked: number;
    try {
      acked = Number(await tx.call('WAIT', '1', String(this.#waitTimeoutMs)));
    } catch (err) {
      this.#replication.unacknowledged++;
      throw err;
    }
    if (!(acked >= 1)) this.#replication.unacknowledged++;
  }

  /** Runs `fn` alone on the dedicated transaction connection (created on first use). */
  #transaction<T>(fn: (tx: RedisClient) => Promise<T>): Promise<T> {
    const run = async (): Promise<T> => {
      // The main connection knows whether Redis is reachable: answer at once (503) rather than wait
      // for a new transaction connection to time out.
      if (this.#redis.status !== 'ready') throw new Error(`Redis connection is ${this.#redis.status}`);
      if (!this.#txClient || this.#txClient.status === 'end') {
        const tx = duplicateForTransactions(this.#redis);
        defineScripts(tx);
        tx.on('error', () => undefined); // surfaced through the failing command instead
        await connectRedis(tx, this.#connectTimeoutMs);
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
}

/**
 * The transaction connection never reconnects and never re-sends: ioredis would otherwise replay an
 * unanswered MULTI..EXEC on a fresh connection after a cut, without the WATCH that guarded it, so a
 * token created in between could survive its client's deletion. A cut fails the operation instead;
 * the caller's retry starts again from WATCH (and #transaction opens a new connection).
 */
function duplicateForTransactions(redis: RedisClient): RedisClient {
  if (redis instanceof Cluster) {
    return redis.duplicate(undefined, {
      clusterRetryStrategy: () => null,
      redisOptions: { ...redis.options.redisOptions, autoResendUnfulfilledCommands: false, retryStrategy: () => null },
    });
  }
  return redis.duplicate({ autoResendUnfulfilledCommands: false, retryStrategy: () => null });
}

/** The subscriber connection: re-subscribed by subscribeRevocations itself (to know when it is done). */
function duplicateForSubscription(redis: RedisClient): RedisClient {
  if (redis instanceof Cluster) return redis.duplicate(undefined, { redisOptions: { ...redis.options.redisOptions, autoResubscribe: false } });
  return redis.duplicate({ autoResubscribe: false });
}

const NOTICE_ID = /^[0-9A-Za-z_-]{1,128}$/;

/** A notice from the channel, or null: anything not shaped as one (the channel is open to any Redis client) is ignored. */
function parseNotice(text: string): RevocationNotice | null {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return null;
  }
  if (raw === null || typeof raw !== 'object') return null;
  const notice: RevocationNotice = {};
  for (const field of ['tokenHashes', 'clientIds', 'familyIds'] as const) {
    const list = (raw as Record<string, unknown>)[field];
    if (list === undefined) continue;
    if (!Array.isArray(list) || !list.every((v) => typeof v === 'string' && NOTICE_ID.test(v))) return null;
    notice[field] = list as string[];
  }
  return notice;
}

function assertExec(result: Array<[Error | null, unknown]> | null): void {
  if (result === null) throw new Error('transaction aborted');
  for (const [err] of result) if (err) throw err;
}
