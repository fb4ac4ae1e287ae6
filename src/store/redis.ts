// The production store on Redis (ioredis): standalone, Sentinel or Cluster. Every operation's failure
// passes through one choke point (asStoreFailure, RedisTokenStore at the bottom) on its way out.
// Connections: redis-connection.ts; scripts: redis-scripts.ts; WAIT after revocations: redis-replication.ts.

import { Cluster, type Redis } from 'ioredis';
import { StoreUnavailableError } from '../http/errors.ts';
import {
  ACCESS_MEMBER,
  CONSENT_MEMBER,
  REFRESH_MEMBER,
  USER_MEMBER,
  consentMember,
  parseConsentMember,
  accountSessionFields,
  accountSessionFromFields,
  subjectTokenFromFields,
  accessTokenFields,
  authorizationCodeFields,
  authorizationCodeFromFields,
  authorizationRequestFields,
  authorizationRequestFromFields,
  DEVICE_SLOW_DOWN_SECONDS,
  deviceAuthorizationFields,
  deviceAuthorizationFromFields,
  userFields,
  reuseNotice,
  auditFields,
  auditFromFields,
  newestAuditFirst,
  pendingSignInMember,
  clientFields,
  clientFromFields,
  consentFromValue,
  consentGrantIds,
  consentKey,
  consentValue,
  keyLayout,
  handleMember,
  handleRenewalDue,
  subjectDigest,
  cutoffFromFields,
  EVERY_ISSUER,
  orNull,
  profileFields,
  profileFromFields,
  tokenLookupFromFields,
  refreshTokenFields,
  refreshTokenFromFields,
  readRecord,
  listedSigningKeys,
  signingKeyValue,
  userTokenFields,
  upstreamCredentialField,
  upstreamCredentialFromValue,
  sameUpstreamIdentity,
  subjectUpstreamCredentials,
  upstreamCredentialValue,
  type Fields,
  type KeyLayout,
} from './records.ts';
import { asStoreFailure, connectRedis, duplicateForTransactions, type RedisClient } from './redis-connection.ts';
import { TrackedLookupCache, type LookupCacheFallback, type LookupCacheOptions } from './redis-lookup-cache.ts';
import { publishNotice, subscribeNotices } from './redis-notices.ts';
import { LookupConnection } from './redis-lookups.ts';
import { ReplicaWaits, type ReplicationStats } from './redis-replication.ts';
import { defineScripts, flattenFields, type ScriptedClient } from './redis-scripts.ts';
import { StoreDecorator, type StoreOperation } from './decorator.ts';
import {
  DuplicateRecordError,
  type DeviceAuthorizationBounds,
  type DeviceAuthorizationOutcome,
  type DeviceAuthorizationRecord,
  type DevicePollOutcome,
  type SignedInUser,
  type StoredDeviceAuthorization,
  type AccessTokenRecord,
  type AuthorizationCodeRecord,
  type AuthorizationRequestRecord,
  type AuditEvent,
  type AuditTrail,
  type PendingSignInBounds,
  type PendingSignInOutcome,
  type ClientRecord,
  type ConsentRecord,
  type CreateTokenOutcome,
  type DeleteClientResult,
  type HandleBinding,
  type HandleKind,
  type HandleOwner,
  type HandleUse,
  type StoredHandle,
  type ProfileRecord,
  type PublishedSigningKey,
  type StoredUpstreamCredential,
  type RedeemOutcome,
  type RefreshTokenRecord,
  type RevocationListener,
  type RevocationNotice,
  type RotateOutcome,
  type StoredAuditEvent,
  type StoredAuthorizationCode,
  type StoredRead,
  type TokenLookup,
  type StoredRefreshToken,
  type QuotaOutcome,
  type AccountSession,
  type SubjectConsent,
  type SubjectIndexRebuild,
  type SubjectRevocation,
  type SubjectToken,
  type StoreWatch,
  type TokenStore,
  type UserTokenRecord,
} from './types.ts';

const MAX_TRANSACTION_ATTEMPTS = 16;
/** Members of a subject's index (or a client's token set) read per round trip when listing. */
const SUBJECT_READ_BATCH = 500;

/** SCANs one node for keys matching `pattern`, `count` at a time, handing each non-empty batch to `each`. */
async function scanKeys(node: Redis, pattern: string, count: number, each: (keys: string[]) => Promise<void>): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', count);
    cursor = next;
    if (keys.length > 0) await each(keys);
  } while (cursor !== '0');
}

/** A key prefix as a SCAN MATCH pattern: its glob characters (`*`, `?`, `[`, `]`, `\\`) taken literally. */
function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/** The operations on Redis; RedisTokenStore below is what the rest of the code gets. */
class RedisOperations implements TokenStore {
  readonly #redis: RedisClient;
  readonly #scripts: ScriptedClient;
  readonly #keys: KeyLayout;
  /** WATCH is per connection: transactions run one at a time on a connection of their own. */
  #txClient: RedisClient | undefined;
  #txQueue: Promise<unknown> = Promise.resolve();
  readonly #connectTimeoutMs: number;
  readonly #replicas: ReplicaWaits;
  /** Set by trackLookups (redis.lookupCache: tracking); undefined: every lookup reads Redis (strict). */
  #lookupCache: TrackedLookupCache | undefined;
  readonly #readLookup = (tokenHash: string): Promise<TokenLookup> => this.#read(tokenHash);
  /** The token lookups' own connection (the hot path). */
  readonly #lookups: LookupConnection;

  constructor(redis: RedisClient, options: { keyPrefix?: string; connectTimeoutMs?: number } = {}) {
    this.#redis = redis;
    this.#keys = keyLayout(options.keyPrefix ?? 'mcpauth:');
    this.#connectTimeoutMs = options.connectTimeoutMs ?? 5000;
    this.#scripts = defineScripts(redis);
    this.#replicas = new ReplicaWaits(redis);
    this.#lookups = new LookupConnection(redis, this.#connectTimeoutMs);
  }

  /** Copies of the counters of WAITs issued after revocations. */
  get replicationStats(): ReplicationStats {
    return this.#replicas.stats;
  }

  get keys(): KeyLayout {
    return this.#keys;
  }

  /** The main connection (for readiness events and operational checks). */
  get client(): RedisClient {
    return this.#redis;
  }

  /** The token lookups' connection, once the first lookup has opened it. */
  get lookupClient(): RedisClient | undefined {
    return this.#lookups.client;
  }

  /** The lookup cache, when on (its state and counters). */
  get lookupCache(): TrackedLookupCache | undefined {
    return this.#lookupCache;
  }

  /**
   * Turns the token-lookup cache on (redis.lookupCache: tracking): its two connections are up and
   * tracking confirmed before this resolves. Standalone and Sentinel only: tracking is per node.
   */
  async trackLookups(options: LookupCacheOptions): Promise<TrackedLookupCache> {
    if (this.#redis instanceof Cluster) throw new TypeError('the token lookup cache (CLIENT TRACKING) is not supported on Redis Cluster');
    if (this.#lookupCache) return this.#lookupCache;
    this.#lookupCache = await TrackedLookupCache.open(this.#redis, this.#keys, options);
    return this.#lookupCache;
  }

  /** The hot path: one per proxied request. */
  lookupToken(tokenHash: string): Promise<TokenLookup> {
    const cache = this.#lookupCache;
    return cache === undefined ? this.#read(tokenHash) : cache.lookup(tokenHash, this.#readLookup);
  }

  /**
   * Both records of a token, read now. It applies the choke point's classifier itself (a try/catch
   * costs nothing until something throws; the decorator's wrapper would add a promise per call).
   */
  async #read(tokenHash: string): Promise<TokenLookup> {
    try {
      const [user, oauth] = await this.#lookups.readHashes(this.#keys.userToken(tokenHash), this.#keys.accessToken(tokenHash));
      return tokenLookupFromFields(tokenHash, orNull(user), orNull(oauth));
    } catch (err) {
      throw asStoreFailure(err);
    }
  }

  async ping(): Promise<void> {
    await Promise.all([this.#redis.ping(), this.#lookups.ping()]);
  }

  /** Both connections requests depend on are ready (the token lookups' one, once opened). */
  get ready(): boolean {
    return this.#redis.status === 'ready' && this.#lookups.ready;
  }

  async putUserToken(record: UserTokenRecord): Promise<void> {
    const key = this.#keys.userToken(record.tokenHash);
    // The index first: the record lives outside the {oauth} slot, so the two cannot be one MULTI on
    // Cluster. Failing between the two leaves a member naming no record (dropped when read), never a
    // token its subject's revocation cannot find.
    await this.#scripts.mcpIndexSubject(this.#subjectIndex(record.subject), USER_MEMBER + record.tokenHash, String(record.expiresAt));
    const result = await this.#redis.multi().hset(key, userTokenFields(record)).pexpireat(key, record.expiresAt).exec();
    assertExec(result);
  }

  async revokeUserToken(tokenHash: string): Promise<boolean> {
    const revoked = await this.#revocation(async (scripts) => (await scripts.mcpRevokeUserToken(this.#keys.userToken(tokenHash))) === 1);
    if (revoked) await this.#publish({ tokenHashes: [tokenHash] });
    return revoked;
  }

  async createClient(client: ClientRecord): Promise<void> {
    const created = await this.#scripts.mcpCreateIndexed(
      this.#keys.client(client.clientId),
      this.#keys.clientIndex(),
      client.clientId,
      ...flattenFields(clientFields(client)),
    );
    if (created !== 1) throw new DuplicateRecordError(`client ${client.clientId} already exists`);
  }

  async getClient(clientId: string): Promise<StoredRead<ClientRecord>> {
    return this.#getRecord(this.#keys.client(clientId), clientFromFields);
  }

  async listClients(): Promise<ClientRecord[]> {
    return this.#listIndexed(this.#keys.clientIndex(), this.#keys.client, clientFromFields);
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
      const handlesKey = this.#keys.handlesByClient(clientId);
      for (let attempt = 0; attempt < MAX_TRANSACTION_ATTEMPTS; attempt++) {
        await tx.watch(clientKey, setKey, handlesKey);
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
        // The client's session and task handles (a member whose handle is now someone else's is stale).
        const handleKeys = (await tx.zrange(handlesKey, 0, -1)).map((member) => this.#keys.handlePrefix() + member);
        const handleOwners = await Promise.all(handleKeys.map((k) => tx.hget(k, 'clientId')));
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
        handleKeys.forEach((key, i) => {
          if (handleOwners[i] === clientId) multi.del(key);
        });
        multi.del(handlesKey);
        const result = await multi.exec();
        if (result === null) {
          // A watched key changed (e.g. a token was created): retry. A steady stream of new tokens
          // would abort every attempt, so first mark the client revoked on its own (same script as
          // for one access token: EXISTS, then HSETNX revokedAt): from then on no token can be added
          // to its set and the next attempt revokes every remaining token.
          if (revokedAtText === null) await (tx as unknown as ScriptedClient).mcpMarkRevoked(clientKey, String(revokedAt));
          continue;
        }
        assertExec(result);
        if (await this.#replicas.hasReplicas()) await this.#replicas.waitForReplica(tx);
        return { clientId, revokedAt, accessTokensRevoked, refreshTokensRevoked };
      }
      throw new StoreUnavailableError('deleteClient: too much contention, gave up');
    });
  }

  async readHandle(kind: HandleKind, handleHash: string): Promise<StoredHandle | null> {
    // Read beside the token lookup, on its connection: the two leave in one write.
    const key = this.#keys.handle(kind, handleHash);
    const [owner, renewedAt, urlElicitation] = await this.#lookups.read((client) =>
      client.hmget(key, 'owner', 'renewedAt', 'urlElicitation'),
    );
    if (owner === null || owner === undefined) return null;
    const stored: StoredHandle = { owner };
    if (renewedAt !== null && renewedAt !== undefined) stored.renewedAt = renewedAt;
    if (urlElicitation === '1') stored.urlElicitation = true;
    return stored;
  }

  /**
   * The common case is one plain read (HMGET: cheaper for Redis than a script); the script runs only
   * when the owner's use is due a renewal (handleRenewalDue), and decides again atomically.
   */
  async useHandle(
    kind: HandleKind,
    handleHash: string,
    owner: HandleOwner,
    now: number,
    ttlMs: number,
    maxPerOwner: number,
  ): Promise<HandleUse> {
    const [stored, renewedAt] = await this.#redis.hmget(this.#keys.handle(kind, handleHash), 'owner', 'renewedAt');
    if (stored === null) return 'unknown';
    if (stored !== owner.id) return 'foreign';
    if (!handleRenewalDue(renewedAt, now, ttlMs)) return 'owned';
    return this.#claimHandle('use', kind, handleHash, owner, now, ttlMs, maxPerOwner) as Promise<HandleUse>;
  }

  bindHandle(
    kind: HandleKind,
    handleHash: string,
    owner: HandleOwner,
    now: number,
    ttlMs: number,
    maxPerOwner: number,
    marks?: { urlElicitation?: boolean },
  ): Promise<HandleBinding> {
    return this.#claimHandle(
      'bind',
      kind,
      handleHash,
      owner,
      now,
      ttlMs,
      maxPerOwner,
      marks?.urlElicitation === true,
    ) as Promise<HandleBinding>;
  }

  async #claimHandle(
    mode: 'use' | 'bind',
    kind: HandleKind,
    handleHash: string,
    owner: HandleOwner,
    now: number,
    ttlMs: number,
    maxPerOwner: number,
    urlElicitation = false,
  ): Promise<HandleUse | HandleBinding> {
    const outcome = await this.#scripts.mcpClaimHandle(
      this.#keys.handle(kind, handleHash),
      this.#keys.handlesByClient(owner.clientId ?? ''),
      this.#keys.handlesBySubject(owner.subjectHash ?? ''),
      mode,
      owner.id,
      owner.clientId ?? '',
      owner.subjectHash ?? '',
      String(now),
      String(Math.max(1, Math.trunc(ttlMs))),
      String(Math.max(1, Math.trunc(maxPerOwner))),
      handleMember(kind, handleHash),
      this.#keys.handlePrefix(),
      urlElicitation ? '1' : '',
    );
    if (
      outcome === 'owned' ||
      outcome === 'foreign' ||
      (mode === 'use' && outcome === 'unknown') ||
      (mode === 'bind' && outcome === 'bound')
    )
      return outcome;
    throw new TypeError(`unexpected script reply: ${String(outcome)}`);
  }

  async forgetHandle(kind: HandleKind, handleHash: string): Promise<boolean> {
    const deleted = await this.#scripts.mcpForgetHandle(
      this.#keys.handle(kind, handleHash),
      this.#keys.handlesByClient(''),
      this.#keys.handlesBySubject(''),
      handleMember(kind, handleHash),
    );
    return deleted === 1;
  }

  async forgetSubjectHandles(subject: string): Promise<number> {
    const subjectHash = subjectDigest(subject);
    return this.#scripts.mcpForgetIndexedHandles(
      this.#keys.handlesBySubject(subjectHash),
      this.#keys.handlePrefix(),
      'subjectHash',
      subjectHash,
    );
  }

  /**
   * A subject's index, a batch at a time (ZSCAN, COUNT `batchSize`): members expired by `now` are
   * dropped first, a bounded number per command.
   */
  async *#subjectMembers(index: string, now: number, batchSize: number): AsyncGenerator<string[]> {
    for (;;) {
      const expired = await this.#redis.zrangebyscore(index, '-inf', String(now), 'LIMIT', 0, batchSize);
      if (expired.length === 0) break;
      await this.#redis.zrem(index, ...expired);
    }
    let cursor = '0';
    do {
      const [next, flat] = await this.#redis.zscan(index, cursor, 'COUNT', batchSize);
      cursor = next;
      const members: string[] = [];
      for (let i = 0; i < flat.length; i += 2) members.push(flat[i]!);
      if (members.length > 0) yield members;
    } while (cursor !== '0');
  }

  /** The records token members name, read together; each as a SubjectToken or null (to be dropped). */
  async #readTokens(members: string[], now: number, subject?: string): Promise<Array<SubjectToken | null>> {
    return Promise.all(
      members.map(async (member) => {
        const hash = member.slice(2);
        if (member.startsWith(USER_MEMBER))
          return subjectTokenFromFields('user', hash, orNull(await this.#redis.hgetall(this.#keys.userToken(hash))), now, subject);
        if (member.startsWith(ACCESS_MEMBER))
          return subjectTokenFromFields('access', hash, orNull(await this.#redis.hgetall(this.#keys.accessToken(hash))), now, subject);
        if (member.startsWith(REFRESH_MEMBER))
          return subjectTokenFromFields('refresh', hash, orNull(await this.#redis.hgetall(this.#keys.refreshToken(hash))), now, subject);
        return null;
      }),
    );
  }

  async listSubjectTokens(subject: string, now: number, issuer?: string): Promise<SubjectToken[]> {
    const index = this.#subjectIndex(subject);
    const out: SubjectToken[] = [];
    for await (const batch of this.#subjectMembers(index, now, SUBJECT_READ_BATCH)) {
      const members = batch.filter((m) => !m.startsWith(CONSENT_MEMBER));
      const tokens = await this.#readTokens(members, now, subject);
      const gone = members.filter((_, i) => tokens[i] === null);
      if (gone.length > 0) await this.#redis.zrem(index, ...gone);
      for (const token of tokens) if (token !== null && (issuer === undefined || token.issuer === issuer)) out.push(token);
    }
    return out;
  }

  async listClientTokens(clientId: string, now: number): Promise<SubjectToken[]> {
    const out: SubjectToken[] = [];
    let cursor = '0';
    do {
      const [next, members] = await this.#redis.sscan(this.#keys.clientTokens(clientId), cursor, 'COUNT', SUBJECT_READ_BATCH);
      cursor = next;
      for (const token of await this.#readTokens(members, now)) if (token !== null) out.push(token);
    } while (cursor !== '0');
    return out;
  }

  async listSubjectConsents(subject: string, now: number): Promise<SubjectConsent[]> {
    const index = this.#subjectIndex(subject);
    const out: SubjectConsent[] = [];
    for await (const batch of this.#subjectMembers(index, now, SUBJECT_READ_BATCH)) {
      const gone: string[] = [];
      for (const member of batch.filter((m) => m.startsWith(CONSENT_MEMBER))) {
        const where = parseConsentMember(member);
        const value = where && (await this.#redis.hget(this.#keys.consents(where.browserHash), where.key));
        const consent = value ? consentFromValue(value, now) : null;
        if (consent && consent.subject === subject) out.push({ ...consent, browserHash: where!.browserHash, key: where!.key });
        else gone.push(member);
      }
      if (gone.length > 0) await this.#redis.zrem(index, ...gone);
    }
    return out;
  }

  async revokeSubject(subject: string, issuer: string | undefined, now: number, batchSize: number): Promise<SubjectRevocation> {
    const index = this.#subjectIndex(subject);
    const size = Math.max(1, Math.trunc(batchSize));
    const result: SubjectRevocation = { accessTokensRevoked: 0, refreshTokensRevoked: 0, userTokensRevoked: 0, consentsForgotten: 0 };
    for await (const batch of this.#subjectMembers(index, now, size)) {
      const notice: RevocationNotice = {};
      /** The grants revoked in this batch that an approval may be linked to (user-grade tokens never are). */
      let grantIds: string[] = [];
      const inSlot = batch.filter((m) => !m.startsWith(USER_MEMBER));
      if (inSlot.length > 0) {
        const [access, refresh, consents, hashes, families] = await this.#revocation((scripts) =>
          scripts.mcpRevokeSubjectBatch(
            index,
            String(now),
            issuer ?? '',
            subject,
            this.#keys.accessToken(''),
            this.#keys.refreshToken(''),
            this.#keys.consents(''),
            ...inSlot,
          ),
        );
        result.accessTokensRevoked += access;
        result.refreshTokensRevoked += refresh;
        result.consentsForgotten += consents;
        if (hashes !== '') notice.tokenHashes = hashes.split(' ');
        if (families !== '') notice.familyIds = families.split(' ');
        grantIds = consentGrantIds(notice);
      }
      const users = batch.filter((m) => m.startsWith(USER_MEMBER));
      if (users.length > 0) {
        // Outside the {oauth} slot: one small script per token (Cluster routes each to its node).
        const outcomes = await this.#revocation((scripts) =>
          Promise.all(users.map((m) => scripts.mcpRevokeSubjectUserToken(this.#keys.userToken(m.slice(2)), subject, issuer ?? ''))),
        );
        const revoked = users.filter((_, i) => outcomes[i] === 1).map((m) => m.slice(2));
        result.userTokensRevoked += revoked.length;
        if (revoked.length > 0) notice.tokenHashes = [...(notice.tokenHashes ?? []), ...revoked];
        const done = users.filter((_, i) => outcomes[i] !== -2);
        if (done.length > 0) await this.#redis.zrem(index, ...done);
      }
      if (notice.tokenHashes !== undefined || notice.familyIds !== undefined) await this.#publish(notice, grantIds);
    }
    return result;
  }

  async rebuildSubjectIndex(now: number, batchSize: number): Promise<SubjectIndexRebuild> {
    const size = Math.max(1, Math.trunc(batchSize));
    const total: SubjectIndexRebuild = { scanned: 0, indexed: 0 };
    // SCAN is per node: on Cluster every master is scanned. A Cluster client that is not connected
    // lists no master: that is an outage, never an empty database.
    const nodes: Redis[] = this.#redis instanceof Cluster ? this.#redis.nodes('master') : [this.#redis];
    if (this.#redis.status !== 'ready' || nodes.length === 0) throw new StoreUnavailableError(`Redis connection is ${this.#redis.status}`);
    const tokenKinds = [
      [this.#keys.userToken(''), USER_MEMBER],
      [this.#keys.accessToken(''), ACCESS_MEMBER],
      [this.#keys.refreshToken(''), REFRESH_MEMBER],
    ] as const;
    for (const node of nodes) {
      for (const [prefix, kind] of tokenKinds) {
        await scanKeys(node, `${escapeGlob(prefix)}*`, size, async (keys) => {
          total.scanned += keys.length;
          const states = await Promise.all(keys.map((k) => this.#redis.hmget(k, 'subject', 'expiresAt')));
          const writes: Array<Promise<unknown>> = [];
          keys.forEach((key, i) => {
            const [subject, expiresText] = states[i]!;
            const expiresAt = Number(expiresText);
            if (!subject || !Number.isSafeInteger(expiresAt) || expiresAt <= now) return;
            writes.push(this.#scripts.mcpIndexSubject(this.#subjectIndex(subject), kind + key.slice(prefix.length), String(expiresAt)));
          });
          await Promise.all(writes);
          total.indexed += writes.length;
        });
      }
      const consentsPrefix = this.#keys.consents('');
      await scanKeys(node, `${escapeGlob(consentsPrefix)}*`, size, async (keys) => {
        for (const key of keys) {
          const browserHash = key.slice(consentsPrefix.length);
          let cursor = '0';
          do {
            const [next, flat] = await this.#redis.hscan(key, cursor, 'COUNT', size);
            cursor = next;
            const writes: Array<Promise<unknown>> = [];
            for (let i = 0; i + 1 < flat.length; i += 2) {
              total.scanned++;
              const consent = consentFromValue(flat[i + 1]!, now);
              if (consent)
                writes.push(
                  this.#scripts.mcpIndexSubject(
                    this.#subjectIndex(consent.subject),
                    consentMember(browserHash, flat[i]!),
                    String(consent.expiresAt),
                  ),
                );
            }
            await Promise.all(writes);
            total.indexed += writes.length;
          } while (cursor !== '0');
        }
      });
    }
    return total;
  }

  async recordLastUse(uses: ReadonlyArray<{ tokenHash: string; kind: 'user' | 'oauth'; at: number }>): Promise<void> {
    await Promise.all(
      uses.map((use) =>
        this.#scripts.mcpRecordLastUse(
          use.kind === 'user' ? this.#keys.userToken(use.tokenHash) : this.#keys.accessToken(use.tokenHash),
          String(Math.trunc(use.at)),
        ),
      ),
    );
  }

  async createAccessToken(record: AccessTokenRecord): Promise<CreateTokenOutcome> {
    return this.issueTokens(record);
  }

  /** A subject's index key (by the SHA-256 of the subject). */
  #subjectIndex(subject: string): string {
    return this.#keys.subjectGrants(subjectDigest(subject));
  }

  /** Arguments of the STORE_TOKENS Lua fragment for an access token and an optional refresh token. */
  #tokenArgs(access: AccessTokenRecord, refresh?: RefreshTokenRecord): string[] {
    const accessArgs = flattenFields(accessTokenFields(access));
    const user = access.user ?? refresh?.user;
    const args = [
      user === undefined ? '' : this.#subjectIndex(user.subject),
      access.tokenHash,
      String(access.expiresAt),
      String(accessArgs.length),
      ...accessArgs,
    ];
    if (refresh) args.push(refresh.tokenHash, String(refresh.expiresAt), ...flattenFields(refreshTokenFields(refresh)));
    return args;
  }

  async issueTokens(access: AccessTokenRecord, refresh?: RefreshTokenRecord): Promise<CreateTokenOutcome> {
    const keys = [this.#keys.client(access.clientId), this.#keys.clientTokens(access.clientId), this.#keys.accessToken(access.tokenHash)];
    if (refresh) keys.push(this.#keys.refreshToken(refresh.tokenHash), this.#keys.refreshFamily(refresh.familyId));
    const outcome = await this.#scripts.mcpIssueTokens(String(keys.length), ...keys, ...this.#tokenArgs(access, refresh));
    if (outcome === 'ok' || outcome === 'client_not_found' || outcome === 'client_revoked') return outcome;
    throw new TypeError(`unexpected script reply: ${String(outcome)}`);
  }

  async getRefreshToken(tokenHash: string): Promise<StoredRead<StoredRefreshToken>> {
    return readRecord(orNull(await this.#redis.hgetall(this.#keys.refreshToken(tokenHash))), refreshTokenFromFields);
  }

  async rotateRefreshToken(
    oldHash: string,
    clientId: string,
    now: number,
    access: AccessTokenRecord,
    refresh: RefreshTokenRecord,
    graceMs = 0,
    successor?: string,
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
      String(Math.max(0, Math.floor(graceMs))),
      successor ?? '',
      ...this.#tokenArgs(access, refresh),
    );
    if (outcome === 'reused') {
      // The script revoked the family on the main connection, where a WAIT would hold up every
      // lookup behind it. With replicas, the same (idempotent: HSETNX) revocation is repeated on the
      // transaction connection and WAITed for there.
      if (await this.#replicas.hasReplicas()) await this.revokeRefreshFamily(oldHash, now);
      await this.#publish({ familyIds: [refresh.familyId] });
      return outcome;
    }
    if (outcome === 'ok' || outcome === 'grace' || outcome === 'invalid' || outcome === 'client_revoked') return outcome;
    throw new TypeError(`unexpected script reply: ${String(outcome)}`);
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

  async putAuthorizationRequest(requestHash: string, record: AuthorizationRequestRecord, expiresAt: number): Promise<void> {
    const key = this.#keys.authorizationRequest(requestHash);
    assertExec(await this.#redis.multi().hset(key, authorizationRequestFields(record)).pexpireat(key, expiresAt).exec());
  }

  async putPendingSignIn(
    requestHash: string,
    record: AuthorizationRequestRecord,
    expiresAt: number,
    bounds: PendingSignInBounds,
  ): Promise<PendingSignInOutcome> {
    const [outcome, oldest] = await this.#scripts.mcpPutPendingSignIn(
      this.#keys.authorizationRequest(requestHash),
      this.#keys.pendingSignInsByAddress(bounds.address),
      this.#keys.pendingSignInsByClient(bounds.clientId),
      String(bounds.now),
      String(Math.trunc(expiresAt)),
      String(bounds.perAddress),
      String(bounds.perClient),
      pendingSignInMember(requestHash),
      ...flattenFields(authorizationRequestFields(record)),
    );
    if (outcome === 'ok') return { stored: true };
    if (outcome === 'address' || outcome === 'client') return { stored: false, holder: outcome, retryAt: Number(oldest) };
    throw new Error(`unexpected script reply: ${String(outcome)}`);
  }

  async takeAuthorizationRequest(requestHash: string): Promise<StoredRead<AuthorizationRequestRecord>> {
    const flat = await this.#scripts.mcpTakeHash(this.#keys.authorizationRequest(requestHash));
    const fields: Fields = {};
    for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
    return readRecord(orNull(fields), authorizationRequestFromFields);
  }

  async putAuthorizationCode(record: AuthorizationCodeRecord): Promise<void> {
    const key = this.#keys.authorizationCode(record.codeHash);
    assertExec(await this.#redis.multi().hset(key, authorizationCodeFields(record)).pexpireat(key, record.expiresAt).exec());
  }

  async getAuthorizationCode(codeHash: string): Promise<StoredRead<StoredAuthorizationCode>> {
    return readRecord(orNull(await this.#redis.hgetall(this.#keys.authorizationCode(codeHash))), authorizationCodeFromFields);
  }

  async redeemAuthorizationCode(
    codeHash: string,
    clientId: string,
    now: number,
    retainMs: number,
    access: AccessTokenRecord,
    refresh?: RefreshTokenRecord,
  ): Promise<RedeemOutcome> {
    const keys = [this.#keys.client(clientId), this.#keys.clientTokens(clientId), this.#keys.accessToken(access.tokenHash)];
    if (refresh) keys.push(this.#keys.refreshToken(refresh.tokenHash), this.#keys.refreshFamily(refresh.familyId));
    keys.push(this.#keys.authorizationCode(codeHash));
    const outcome = await this.#scripts.mcpRedeemCode(
      String(keys.length),
      ...keys,
      String(now),
      clientId,
      this.#keys.accessToken(''),
      this.#keys.refreshToken(''),
      this.#keys.refreshFamily(''),
      String(retainMs),
      ...this.#tokenArgs(access, refresh),
    );
    if (outcome === 'reused') {
      // What the first redemption issued was revoked by the script; its open streams end now.
      const code = orNull(await this.#redis.hgetall(this.#keys.authorizationCode(codeHash)));
      if (code) await this.#publish(reuseNotice(code));
      return outcome;
    }
    if (outcome === 'ok' || outcome === 'invalid' || outcome === 'client_revoked') return outcome;
    throw new Error(`unexpected script reply: ${String(outcome)}`);
  }

  async putDeviceAuthorization(
    record: DeviceAuthorizationRecord,
    retainMs: number,
    bounds: DeviceAuthorizationBounds,
  ): Promise<DeviceAuthorizationOutcome> {
    const [outcome, oldest] = await this.#scripts.mcpPutDeviceAuthorization(
      this.#keys.deviceAuthorization(record.deviceCodeHash),
      this.#keys.deviceUserCode(record.userCodeHash),
      this.#keys.pendingDevicesByAddress(bounds.address),
      this.#keys.pendingDevicesAll(),
      String(bounds.now),
      String(Math.trunc(record.expiresAt)),
      String(Math.trunc(record.expiresAt + retainMs)),
      String(bounds.perAddress),
      String(bounds.total),
      pendingSignInMember(record.deviceCodeHash),
      record.deviceCodeHash,
      ...flattenFields(deviceAuthorizationFields(record)),
    );
    if (outcome === 'ok') return { stored: true };
    if (outcome === 'user_code') return { stored: false, holder: 'user_code' };
    if (outcome === 'address' || outcome === 'total') return { stored: false, holder: outcome, retryAt: Number(oldest) };
    throw new Error(`unexpected script reply: ${String(outcome)}`);
  }

  async findDeviceAuthorization(userCodeHash: string): Promise<StoredRead<StoredDeviceAuthorization>> {
    const deviceCodeHash = await this.#redis.hget(this.#keys.deviceUserCode(userCodeHash), 'deviceCodeHash');
    if (deviceCodeHash === null) return null;
    return readRecord(orNull(await this.#redis.hgetall(this.#keys.deviceAuthorization(deviceCodeHash))), deviceAuthorizationFromFields);
  }

  async decideDeviceAuthorization(deviceCodeHash: string, now: number, user: SignedInUser | undefined): Promise<boolean> {
    const decided = await this.#scripts.mcpDecideDeviceAuthorization(
      this.#keys.deviceAuthorization(deviceCodeHash),
      String(now),
      this.#keys.deviceUserCode(''),
      user ? 'approved' : 'denied',
      ...(user ? flattenFields(userFields(user)) : []),
    );
    return decided === 1;
  }

  async pollDeviceAuthorization(deviceCodeHash: string, clientId: string, now: number): Promise<DevicePollOutcome> {
    const [outcome, ...rest] = await this.#scripts.mcpPollDeviceAuthorization(
      this.#keys.deviceAuthorization(deviceCodeHash),
      String(now),
      clientId,
      String(DEVICE_SLOW_DOWN_SECONDS),
    );
    switch (outcome) {
      case 'invalid':
      case 'expired':
      case 'pending':
      case 'denied':
        return { outcome };
      case 'slow_down':
        return { outcome, interval: Number(rest[0]) };
      case 'approved': {
        const fields: Fields = {};
        for (let i = 0; i + 1 < rest.length; i += 2) fields[rest[i]!] = rest[i + 1]!;
        const authorization = deviceAuthorizationFromFields(fields);
        if (authorization === 'corrupt' || authorization.user === undefined) return { outcome: 'invalid' };
        return { outcome, authorization: { ...authorization, user: authorization.user } };
      }
      default:
        throw new Error(`unexpected script reply: ${String(outcome)}`);
    }
  }

  async putConsent(browserHash: string, consent: ConsentRecord, now: number, maxPerBrowser: number): Promise<void> {
    const field = consentKey(consent);
    await this.#scripts.mcpPutConsent(
      this.#keys.consents(browserHash),
      this.#subjectIndex(consent.subject),
      String(now),
      String(maxPerBrowser),
      field,
      consentValue(consent),
      consentMember(browserHash, field),
    );
  }

  async listConsents(browserHash: string, now: number): Promise<ConsentRecord[]> {
    const fields = await this.#redis.hgetall(this.#keys.consents(browserHash));
    return Object.values(fields).flatMap((value) => consentFromValue(value, now) ?? []);
  }

  async linkConsentGrant(grantId: string, browserHash: string, key: string, expiresAt: number): Promise<void> {
    const link = this.#keys.consentGrant(grantId);
    assertExec(await this.#redis.multi().hset(link, { browser: browserHash, consent: key }).pexpireat(link, expiresAt).exec());
  }

  async forgetConsent(browserHash: string, key: string, subject: string): Promise<boolean> {
    const forgotten = await this.#scripts.mcpForgetSubjectConsent(
      this.#keys.consents(browserHash),
      this.#subjectIndex(subject),
      key,
      subject,
      consentMember(browserHash, key),
    );
    return forgotten === 1;
  }

  async markSubjectRevoked(subject: string, issuer: string | undefined, at: number, keepUntil: number): Promise<void> {
    const key = this.#keys.subjectCutoff(subjectDigest(subject));
    assertExec(
      await this.#redis
        .multi()
        .hset(key, issuer ?? EVERY_ISSUER, String(at))
        .pexpireat(key, keepUntil)
        .exec(),
    );
  }

  async subjectRevokedAt(subject: string, issuer: string): Promise<number | undefined> {
    return cutoffFromFields(orNull(await this.#redis.hgetall(this.#keys.subjectCutoff(subjectDigest(subject)))), issuer);
  }

  async putAccountSession(sessionHash: string, session: AccountSession): Promise<void> {
    const key = this.#keys.accountSession(sessionHash);
    assertExec(await this.#redis.multi().hset(key, accountSessionFields(session)).pexpireat(key, session.expiresAt).exec());
  }

  async getAccountSession(sessionHash: string, now: number): Promise<AccountSession | null> {
    return accountSessionFromFields(orNull(await this.#redis.hgetall(this.#keys.accountSession(sessionHash))), now);
  }

  async deleteAccountSession(sessionHash: string): Promise<boolean> {
    return (await this.#redis.del(this.#keys.accountSession(sessionHash))) === 1;
  }

  async touchClient(clientId: string, ttlMs: number): Promise<void> {
    await this.#redis.pexpire(this.#keys.client(clientId), ttlMs);
  }

  async revokeAccessToken(tokenHash: string, now: number): Promise<boolean> {
    const revoked = await this.#revocation(
      async (scripts) => (await scripts.mcpMarkRevoked(this.#keys.accessToken(tokenHash), String(now))) === 1,
    );
    if (revoked) await this.#publish({ tokenHashes: [tokenHash] });
    return revoked;
  }

  async hitCounter(name: string, windowMs: number): Promise<{ count: number; resetMs: number }> {
    const [count, resetMs] = await this.#scripts.mcpHitCounter(this.#keys.rateCounter(name), String(windowMs));
    return { count, resetMs };
  }

  async takeQuota(name: string, cost: number, limit: number, windowMs: number, now: number): Promise<QuotaOutcome> {
    const [allowed, used, resetAt] = await this.#scripts.mcpTakeQuota(
      this.#keys.quotaCounter(name),
      String(cost),
      String(limit),
      String(windowMs),
      String(Math.trunc(now)),
    );
    return { allowed: allowed === 1, used, resetAt: Number(resetAt) };
  }

  async useOnce(name: string, expiresAt: number): Promise<boolean> {
    // SET NX is the check and the write in one command; PXAT ends it when the value would be refused
    // anyway. With replicas it is acknowledged by one before answering, as revocations are: a failover
    // must not forget a value and let it be used a second time.
    const set = await this.#revocation((scripts) => scripts.set(this.#keys.oneTimeValue(name), '1', 'PXAT', Math.trunc(expiresAt), 'NX'));
    return set === 'OK';
  }

  async seedProfiles(profiles: readonly ProfileRecord[]): Promise<string[]> {
    const created: string[] = [];
    for (const profile of profiles) {
      const done = await this.#scripts.mcpCreateIndexed(
        this.#keys.profile(profile.name),
        this.#keys.profileIndex(),
        profile.name,
        ...flattenFields(profileFields(profile)),
      );
      if (done === 1) created.push(profile.name);
    }
    return created;
  }

  async getProfile(name: string): Promise<StoredRead<ProfileRecord>> {
    return this.#getRecord(this.#keys.profile(name), profileFromFields);
  }

  async getProfileFields(name: string): Promise<Fields | null> {
    return orNull(await this.#redis.hgetall(this.#keys.profile(name)));
  }

  async listProfiles(): Promise<ProfileRecord[]> {
    return this.#listIndexed(this.#keys.profileIndex(), this.#keys.profile, profileFromFields);
  }

  async appendAudit(event: AuditEvent, maxLen: number, trail: AuditTrail = 'requests'): Promise<string> {
    const stream = trail === 'admin' ? this.#keys.adminAuditStream() : this.#keys.auditStream();
    const id = await this.#redis.xadd(stream, 'MAXLEN', '~', String(maxLen), '*', ...flattenFields(auditFields(event)));
    if (id === null) throw new TypeError('XADD returned no id');
    return id;
  }

  async listAuditEvents(count: number): Promise<StoredAuditEvent[]> {
    if (count <= 0) return [];
    // Two keys, two commands (they may live in different Cluster slots), merged by time.
    const [admin, requests] = await Promise.all([
      this.#redis.xrevrange(this.#keys.adminAuditStream(), '+', '-', 'COUNT', count),
      this.#redis.xrevrange(this.#keys.auditStream(), '+', '-', 'COUNT', count),
    ]);
    return [...admin, ...requests]
      .map(([id, flat]) => {
        const fields: Fields = {};
        for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
        return auditFromFields(id, fields);
      })
      .sort(newestAuditFirst)
      .slice(0, count);
  }

  async publishSigningKey(key: PublishedSigningKey, now: number): Promise<void> {
    await this.#scripts.mcpPublishSigningKey(this.#keys.signingKeys(), String(now), key.kid, signingKeyValue(key), String(key.expiresAt));
  }

  async listSigningKeys(now: number): Promise<PublishedSigningKey[]> {
    const all = await this.#redis.hgetall(this.#keys.signingKeys());
    return listedSigningKeys(all, now);
  }

  async putUpstreamCredential(record: StoredUpstreamCredential): Promise<void> {
    const key = this.#keys.upstreamCredentials(record.subject);
    // Two keys in two slots on a Cluster: the index first, so a listed key may be gone (dropped when
    // walked) but a written record is never missing from the walk.
    await this.#redis.sadd(this.#keys.upstreamCredentialIndex(), key);
    await this.#redis.hset(key, upstreamCredentialField(record.issuer, record.provider), upstreamCredentialValue(record));
  }

  async getUpstreamCredential(subject: string, issuer: string, provider: string): Promise<StoredRead<StoredUpstreamCredential>> {
    // Read on every forwarded request that carries the user's credential: on the token lookups'
    // connection, sent with the other reads of its turn (see LookupConnection).
    const key = this.#keys.upstreamCredentials(subject);
    const value = await this.#lookups.read((client) => client.hget(key, upstreamCredentialField(issuer, provider)));
    return value === null ? null : sameUpstreamIdentity(upstreamCredentialFromValue(value), subject, issuer, provider);
  }

  async replaceUpstreamCredential(record: StoredUpstreamCredential, expectedSealed: string): Promise<boolean> {
    const key = this.#keys.upstreamCredentials(record.subject);
    return (
      (await this.#scripts.mcpReplaceUpstreamCredential(
        key,
        upstreamCredentialField(record.issuer, record.provider),
        expectedSealed,
        upstreamCredentialValue(record),
      )) === 1
    );
  }

  async deleteUpstreamCredentials(subject: string, issuer?: string): Promise<number> {
    return this.#scripts.mcpDeleteUpstreamCredentials(this.#keys.upstreamCredentials(subject), issuer ?? '');
  }

  async deleteUpstreamCredential(subject: string, issuer: string, provider: string): Promise<boolean> {
    // An emptied hash is gone with its last field; its index member is dropped when next walked.
    return (await this.#redis.hdel(this.#keys.upstreamCredentials(subject), upstreamCredentialField(issuer, provider))) === 1;
  }

  async listSubjectUpstreamCredentials(subject: string): Promise<StoredUpstreamCredential[]> {
    return subjectUpstreamCredentials(await this.#redis.hgetall(this.#keys.upstreamCredentials(subject)), subject);
  }

  async listUpstreamCredentials(): Promise<StoredUpstreamCredential[]> {
    const index = this.#keys.upstreamCredentialIndex();
    const out: StoredUpstreamCredential[] = [];
    for (const key of await this.#redis.smembers(index)) {
      const all = await this.#redis.hgetall(key);
      if (Object.keys(all).length === 0) {
        await this.#redis.srem(index, key);
        continue;
      }
      for (const value of Object.values(all)) {
        const record = upstreamCredentialFromValue(value);
        if (record !== 'corrupt' && this.#keys.upstreamCredentials(record.subject) === key) out.push(record);
      }
    }
    return out;
  }

  async subscribeRevocations(listener: RevocationListener): Promise<() => Promise<void>> {
    // A closed store subscribes to nothing (the subscriber connection would be a fresh copy).
    if (this.#redis.status === 'end') throw new StoreUnavailableError('store is closed');
    return subscribeNotices(this.#redis, this.#keys.revocationChannel(), listener, this.#connectTimeoutMs);
  }

  /**
   * Called after every revocation: forgets the approvals of the revoked grants, then tells every
   * sidecar (notice), and this one's lookup cache first.
   */
  async #publish(notice: RevocationNotice, grantIds: string[] = consentGrantIds(notice)): Promise<void> {
    // A revoked grant takes the consent approval it was issued under with it (ConsentStorage).
    const consents = this.#keys.consents('');
    await Promise.all(grantIds.map((id) => this.#scripts.mcpForgetConsent(this.#keys.consentGrant(id), consents)));
    // The revocation's invalidations applied before it is reported done: this sidecar's next request
    // sees it, as in the strict mode (other sidecars see it when their invalidation arrives).
    await this.#lookupCache?.settled();
    await publishNotice(this.#redis, this.#keys.revocationChannel(), notice);
  }

  async close(): Promise<void> {
    await this.#lookupCache?.close();
    await this.#lookups.close();
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
    if (!(await this.#replicas.hasReplicas())) return write(this.#scripts);
    return this.#transaction(async (tx) => {
      const result = await write(tx as unknown as ScriptedClient);
      await this.#replicas.waitForReplica(tx);
      return result;
    });
  }

  /** One record by key, parsed; null when absent (or expired) or unreadable. */
  async #getRecord<T>(key: string, parse: (fields: Fields) => T | 'corrupt'): Promise<StoredRead<T>> {
    const fields = orNull(await this.#redis.hgetall(key));
    return fields && parse(fields);
  }

  /** Every record named in an index set, sorted by id; ids whose record expired are dropped from the index. */
  async #listIndexed<T>(index: string, keyOf: (id: string) => string, parse: (fields: Fields) => T | 'corrupt'): Promise<T[]> {
    const ids = (await this.#redis.smembers(index)).sort();
    const all = await Promise.all(ids.map((id) => this.#redis.hgetall(keyOf(id))));
    const out: T[] = [];
    const expired: string[] = [];
    all.forEach((found, i) => {
      const fields = orNull(found);
      if (!fields) expired.push(ids[i]!);
      const record = fields && parse(fields);
      if (record && record !== 'corrupt') out.push(record);
    });
    // Registrations that expired unused leave their id behind in the index; drop it here.
    if (expired.length > 0) await this.#redis.srem(index, ...expired);
    return out;
  }

  /** Runs `fn` alone on the dedicated transaction connection (created on first use). */
  #transaction<T>(fn: (tx: RedisClient) => Promise<T>): Promise<T> {
    const run = async (): Promise<T> => {
      // The main connection knows whether Redis is reachable: answer at once (503) rather than wait
      // for a new transaction connection to time out.
      if (this.#redis.status !== 'ready') throw new StoreUnavailableError(`Redis connection is ${this.#redis.status}`);
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
 * The choke point: every operation of the store hands its failure to asStoreFailure, so a Redis
 * failure leaves the store as StoreUnavailableError (cause kept for the log) and a bug in this code
 * as itself. The decorator delegates each operation of TokenStore by name (an operation added later
 * does not compile until it is delegated). lookupToken is handed straight through: the Redis
 * operations classify its failures inline, to keep a wrapper's extra promise per call (about
 * 0.2 µs) off the hot path.
 */
export class RedisTokenStore extends StoreDecorator<RedisOperations> {
  constructor(redis: RedisClient, options: { keyPrefix?: string; connectTimeoutMs?: number } = {}) {
    super(new RedisOperations(redis, options));
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
    const inner = this.inner;
    const outer = this;
    return {
      ready: () => inner.ready,
      replication: () => inner.replicationStats,
      get lookupCache() {
        return inner.lookupCache;
      },
      get lookupCacheFallback() {
        return outer.lookupCacheFallback;
      },
    };
  }

  /** Copies of the counters of WAITs issued after revocations. */
  get replicationStats(): ReplicationStats {
    return this.inner.replicationStats;
  }

  get keys(): KeyLayout {
    return this.inner.keys;
  }

  /** The main connection (for readiness events and operational checks). */
  get client(): RedisClient {
    return this.inner.client;
  }

  /** The token lookups' connection, once the first lookup has opened it. */
  get lookupClient(): RedisClient | undefined {
    return this.inner.lookupClient;
  }

  /** The lookup cache, when on (its state and counters). */
  get lookupCache(): TrackedLookupCache | undefined {
    return this.inner.lookupCache;
  }

  /**
   * Turns the token-lookup cache on (redis.lookupCache: tracking): its two connections are up and
   * tracking confirmed before this resolves. Standalone and Sentinel only: tracking is per node.
   */
  trackLookups(options: LookupCacheOptions): Promise<TrackedLookupCache> {
    return storeFailures(() => this.inner.trackLookups(options));
  }
}

async function storeFailures<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw asStoreFailure(err);
  }
}

function assertExec(result: Array<[Error | null, unknown]> | null): void {
  if (result === null) throw new StoreUnavailableError('transaction aborted');
  for (const [err] of result) if (err) throw err;
}
