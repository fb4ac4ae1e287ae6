// In-memory TokenStore for the demo and for single-process use: the same keys and fields as Redis,
// with TTLs honoured against the injected clock. JavaScript runs each method to completion between
// awaits, which gives the same atomicity the Redis store gets from MULTI/EXEC and Lua.

import type { Clock } from '../model/clock.ts';
import { rotatedWithinGrace } from '../model/credentials.ts';
import { StoreUnavailableError } from '../http/errors.ts';
import {
  ACCESS_MEMBER,
  CONSENT_MEMBER,
  USER_MEMBER,
  consentMember,
  parseConsentMember,
  accountSessionFields,
  accountSessionFromFields,
  subjectTokenFromFields,
  reuseNotice,
  REFRESH_MEMBER,
  accessTokenFields,
  authorizationCodeFields,
  authorizationCodeFromFields,
  authorizationRequestFields,
  authorizationRequestFromFields,
  DEVICE_SLOW_DOWN_SECONDS,
  deviceAuthorizationFields,
  deviceAuthorizationFromFields,
  userFields,
  auditFields,
  auditFromFields,
  newestAuditFirst,
  pendingSignInMember,
  clientFields,
  clientFromFields,
  consentEviction,
  consentFromValue,
  consentGrantIds,
  consentKey,
  consentValue,
  keyLayout,
  handleFields,
  handleMember,
  handleRenewalDue,
  subjectDigest,
  cutoffFromFields,
  EVERY_ISSUER,
  profileFields,
  profileFromFields,
  tokenLookupFromFields,
  refreshTokenFields,
  refreshTokenFromFields,
  readRecord,
  listedSigningKeys,
  signingKeyFromValue,
  signingKeyValue,
  userTokenFields,
  upstreamCredentialField,
  upstreamCredentialFromValue,
  upstreamCredentialValue,
  sameUpstreamIdentity,
  subjectUpstreamCredentials,
  type Fields,
  type KeyLayout,
} from './records.ts';
import {
  DuplicateRecordError,
  type AccessTokenRecord,
  type AuthorizationCodeRecord,
  type AuthorizationRequestRecord,
  type DeviceAuthorizationBounds,
  type DeviceAuthorizationOutcome,
  type DeviceAuthorizationRecord,
  type DevicePollOutcome,
  type SignedInUser,
  type StoredDeviceAuthorization,
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
  type RedeemOutcome,
  type StoredAuthorizationCode,
  type StoredRead,
  type TokenLookup,
  type StoredRefreshToken,
  type StoredUpstreamCredential,
  type RefreshTokenRecord,
  type RevocationListener,
  type RevocationNotice,
  type RotateOutcome,
  type QuotaOutcome,
  type StoredAuditEvent,
  type AccountSession,
  type SubjectConsent,
  type SubjectIndexRebuild,
  type SubjectRevocation,
  type SubjectToken,
  type TokenStore,
  type UserTokenRecord,
} from './types.ts';

/** The fewest writes between two sweeps of expired records. */
const SWEEP_AFTER_WRITES = 1024;

interface Entry {
  fields: Fields;
  expiresAt: number | undefined;
}

export class MemoryTokenStore implements TokenStore {
  readonly #hashes = new Map<string, Entry>();
  readonly #sets = new Map<string, Set<string>>();
  /** Handle indexes (sorted sets in Redis): member -> expiry. */
  readonly #handleIndexes = new Map<string, Map<string, number>>();
  /** Subject indexes (sorted sets in Redis): member -> the record's expiresAt. */
  readonly #subjectIndexes = new Map<string, Map<string, number>>();
  readonly #keys: KeyLayout;
  readonly #clock: Clock;
  /** In-process notices: every sidecar sharing this store object hears every revocation. */
  readonly #listeners = new Set<RevocationListener>();
  #closed = false;
  #writesSinceSweep = 0;

  constructor(options: { clock: Clock; keyPrefix?: string }) {
    this.#clock = options.clock;
    this.#keys = keyLayout(options.keyPrefix ?? 'mcpauth:');
  }

  #check(): void {
    if (this.#closed) throw new StoreUnavailableError('store is closed');
  }

  #get(key: string): Fields | null {
    const entry = this.#hashes.get(key);
    if (!entry) return null;
    if (entry.expiresAt !== undefined && entry.expiresAt <= this.#clock.now()) {
      this.#hashes.delete(key);
      return null;
    }
    return entry.fields;
  }

  #put(key: string, fields: Fields, expiresAt?: number): void {
    this.#hashes.set(key, { fields: { ...fields }, expiresAt });
    // Records issued and never read again would otherwise stay until the process ends: every so many
    // writes (at least half the records held, so a sweep costs O(1) a write over time) the expired
    // ones are dropped, as Redis drops them.
    if (++this.#writesSinceSweep >= Math.max(SWEEP_AFTER_WRITES, this.#hashes.size >> 1)) this.#sweep();
  }

  #sweep(): void {
    this.#writesSinceSweep = 0;
    const now = this.#clock.now();
    for (const [key, entry] of this.#hashes) if (entry.expiresAt !== undefined && entry.expiresAt <= now) this.#hashes.delete(key);
  }

  /** Records held now, expired ones not yet swept included (for tests of the sweep). */
  get recordCount(): number {
    return this.#hashes.size;
  }

  #set(key: string): Set<string> {
    let set = this.#sets.get(key);
    if (!set) {
      set = new Set();
      this.#sets.set(key, set);
    }
    return set;
  }

  async lookupToken(tokenHash: string): Promise<TokenLookup> {
    this.#check();
    // Parsed into new objects: mutating a result cannot change the stored record.
    return tokenLookupFromFields(tokenHash, this.#get(this.#keys.userToken(tokenHash)), this.#get(this.#keys.accessToken(tokenHash)));
  }

  async ping(): Promise<void> {
    this.#check();
  }

  async putUserToken(record: UserTokenRecord): Promise<void> {
    this.#check();
    this.#indexSubject(record.subject, USER_MEMBER + record.tokenHash, record.expiresAt);
    this.#put(this.#keys.userToken(record.tokenHash), userTokenFields(record), record.expiresAt);
  }

  /** Lists a member in its subject's index, scored by its record's expiry. */
  #indexSubject(subject: string, member: string, expiresAt: number): void {
    const key = this.#keys.subjectGrants(subjectDigest(subject));
    let index = this.#subjectIndexes.get(key);
    if (!index) this.#subjectIndexes.set(key, (index = new Map()));
    index.set(member, expiresAt);
  }

  /** A subject's index with the members expired by `now` dropped (the whole index once empty). */
  #subjectIndex(subject: string, now: number): Map<string, number> {
    const key = this.#keys.subjectGrants(subjectDigest(subject));
    const index = this.#subjectIndexes.get(key) ?? new Map<string, number>();
    for (const [member, expiresAt] of index) if (expiresAt <= now) index.delete(member);
    if (index.size === 0) this.#subjectIndexes.delete(key);
    return index;
  }

  /** The record a token member of a subject index names, as a SubjectToken; null for any other member. */
  #subjectToken(member: string, now: number, subject?: string): SubjectToken | null {
    const hash = member.slice(2);
    const kind = member.startsWith(USER_MEMBER)
      ? 'user'
      : member.startsWith(ACCESS_MEMBER)
        ? 'access'
        : member.startsWith(REFRESH_MEMBER)
          ? 'refresh'
          : undefined;
    if (kind === undefined) return null;
    const key =
      kind === 'user' ? this.#keys.userToken(hash) : kind === 'access' ? this.#keys.accessToken(hash) : this.#keys.refreshToken(hash);
    return subjectTokenFromFields(kind, hash, this.#get(key), now, subject);
  }

  async listSubjectTokens(subject: string, now: number, issuer?: string): Promise<SubjectToken[]> {
    this.#check();
    const index = this.#subjectIndex(subject, now);
    const out: SubjectToken[] = [];
    for (const member of [...index.keys()]) {
      if (member.startsWith(CONSENT_MEMBER)) continue;
      const token = this.#subjectToken(member, now, subject);
      if (token === null) index.delete(member);
      else if (issuer === undefined || token.issuer === issuer) out.push(token);
    }
    return out;
  }

  async listClientTokens(clientId: string, now: number): Promise<SubjectToken[]> {
    this.#check();
    const out: SubjectToken[] = [];
    for (const member of this.#set(this.#keys.clientTokens(clientId))) {
      const token = this.#subjectToken(member, now);
      if (token !== null) out.push(token);
    }
    return out;
  }

  /** The approval a consent member names, when it is still kept, unexpired, for `subject`. */
  #subjectConsent(member: string, now: number, subject: string): SubjectConsent | null {
    const where = parseConsentMember(member);
    const value = where && this.#get(this.#keys.consents(where.browserHash))?.[where.key];
    const consent = value === undefined || value === null ? null : consentFromValue(value, now);
    return consent && consent.subject === subject ? { ...consent, browserHash: where!.browserHash, key: where!.key } : null;
  }

  async listSubjectConsents(subject: string, now: number): Promise<SubjectConsent[]> {
    this.#check();
    const index = this.#subjectIndex(subject, now);
    const out: SubjectConsent[] = [];
    for (const member of [...index.keys()]) {
      if (!member.startsWith(CONSENT_MEMBER)) continue;
      const consent = this.#subjectConsent(member, now, subject);
      if (consent === null) index.delete(member);
      else out.push(consent);
    }
    return out;
  }

  async revokeSubject(subject: string, issuer: string | undefined, now: number, batchSize: number): Promise<SubjectRevocation> {
    this.#check();
    const result: SubjectRevocation = { accessTokensRevoked: 0, refreshTokensRevoked: 0, userTokensRevoked: 0, consentsForgotten: 0 };
    const index = this.#subjectIndex(subject, now);
    const members = [...index.keys()];
    for (let i = 0; i < members.length; i += Math.max(1, batchSize)) {
      const notice: RevocationNotice = { tokenHashes: [], familyIds: [] };
      for (const member of members.slice(i, i + Math.max(1, batchSize))) {
        if (member.startsWith(CONSENT_MEMBER)) {
          const consent = this.#subjectConsent(member, now, subject);
          if (consent !== null && issuer !== undefined && consent.issuer !== issuer) continue;
          if (consent !== null) {
            const approvals = this.#get(this.#keys.consents(consent.browserHash));
            if (approvals) delete approvals[consent.key];
            result.consentsForgotten++;
          }
          index.delete(member);
          continue;
        }
        const token = this.#subjectToken(member, now, subject);
        if (token !== null && issuer !== undefined && token.issuer !== issuer) continue;
        index.delete(member);
        if (token === null) continue;
        if (token.kind === 'user') {
          this.#get(this.#keys.userToken(token.tokenHash))!.revoked = 'true';
          result.userTokensRevoked++;
          notice.tokenHashes!.push(token.tokenHash);
        } else if (token.kind === 'access') {
          this.#get(this.#keys.accessToken(token.tokenHash))!.revokedAt = String(now);
          result.accessTokensRevoked++;
          notice.tokenHashes!.push(token.tokenHash);
        } else {
          this.#get(this.#keys.refreshToken(token.tokenHash))!.revokedAt = String(now);
          result.refreshTokensRevoked++;
          if (token.familyId !== undefined) notice.familyIds!.push(token.familyId);
        }
      }
      if (notice.tokenHashes!.length + notice.familyIds!.length > 0) this.#notify(notice);
    }
    return result;
  }

  async rebuildSubjectIndex(now: number, _batchSize: number): Promise<SubjectIndexRebuild> {
    this.#check();
    let scanned = 0;
    let indexed = 0;
    const kinds = [
      [this.#keys.userToken(''), USER_MEMBER],
      [this.#keys.accessToken(''), ACCESS_MEMBER],
      [this.#keys.refreshToken(''), REFRESH_MEMBER],
    ] as const;
    for (const key of [...this.#hashes.keys()]) {
      const fields = this.#get(key);
      if (!fields) continue;
      const kind = kinds.find(([prefix]) => key.startsWith(prefix));
      if (kind !== undefined) {
        scanned++;
        const expiresAt = Number(fields.expiresAt);
        if (!fields.subject || !Number.isSafeInteger(expiresAt) || expiresAt <= now) continue;
        this.#indexSubject(fields.subject, kind[1] + key.slice(kind[0].length), expiresAt);
        indexed++;
      } else if (key.startsWith(this.#keys.consents(''))) {
        const browserHash = key.slice(this.#keys.consents('').length);
        for (const [field, value] of Object.entries(fields)) {
          scanned++;
          const consent = consentFromValue(value, now);
          if (!consent) continue;
          this.#indexSubject(consent.subject, consentMember(browserHash, field), consent.expiresAt);
          indexed++;
        }
      }
    }
    return { scanned, indexed };
  }

  async recordLastUse(uses: ReadonlyArray<{ tokenHash: string; kind: 'user' | 'oauth'; at: number }>): Promise<void> {
    this.#check();
    for (const use of uses) {
      const fields = this.#get(use.kind === 'user' ? this.#keys.userToken(use.tokenHash) : this.#keys.accessToken(use.tokenHash));
      if (fields && !(Number(fields.lastUsedAt) >= use.at)) fields.lastUsedAt = String(use.at);
    }
  }

  async revokeUserToken(tokenHash: string): Promise<boolean> {
    this.#check();
    const fields = this.#get(this.#keys.userToken(tokenHash));
    if (!fields) return false;
    fields.revoked = 'true';
    this.#notify({ tokenHashes: [tokenHash] });
    return true;
  }

  /** Creates a record and adds its id to the index, only when absent; false when it exists. */
  #createIndexed(key: string, index: string, id: string, fields: Fields): boolean {
    if (this.#get(key)) return false;
    this.#put(key, fields);
    this.#set(index).add(id);
    return true;
  }

  #getRecord<T>(key: string, parse: (fields: Fields) => T | 'corrupt'): StoredRead<T> {
    const fields = this.#get(key);
    return fields && parse(fields);
  }

  /** Every record named in an index set, sorted by id; ids whose record expired are dropped from the index. */
  #listIndexed<T>(index: string, keyOf: (id: string) => string, parse: (fields: Fields) => T | 'corrupt'): T[] {
    const ids = this.#set(index);
    const out: T[] = [];
    for (const id of [...ids].sort()) {
      const fields = this.#get(keyOf(id));
      if (!fields) ids.delete(id);
      const record = fields && parse(fields);
      if (record && record !== 'corrupt') out.push(record);
    }
    return out;
  }

  async createClient(client: ClientRecord): Promise<void> {
    this.#check();
    if (!this.#createIndexed(this.#keys.client(client.clientId), this.#keys.clientIndex(), client.clientId, clientFields(client))) {
      throw new DuplicateRecordError(`client ${client.clientId} already exists`);
    }
  }

  async getClient(clientId: string): Promise<StoredRead<ClientRecord>> {
    this.#check();
    return this.#getRecord(this.#keys.client(clientId), clientFromFields);
  }

  async listClients(): Promise<ClientRecord[]> {
    this.#check();
    return this.#listIndexed(this.#keys.clientIndex(), this.#keys.client, clientFromFields);
  }

  async deleteClient(clientId: string, now: number): Promise<DeleteClientResult | null> {
    this.#check();
    const client = this.#get(this.#keys.client(clientId));
    if (!client) return null;
    const revokedAt = client.revokedAt !== undefined ? Number(client.revokedAt) : now;
    client.revokedAt = String(revokedAt);
    let accessTokensRevoked = 0;
    let refreshTokensRevoked = 0;
    const members = this.#set(this.#keys.clientTokens(clientId));
    for (const member of members) {
      const hash = member.slice(2);
      const isAccess = member.startsWith(ACCESS_MEMBER);
      const fields = this.#get(isAccess ? this.#keys.accessToken(hash) : this.#keys.refreshToken(hash));
      if (fields && fields.revokedAt === undefined) {
        fields.revokedAt = String(revokedAt);
        if (isAccess) accessTokensRevoked++;
        else if (member.startsWith(REFRESH_MEMBER)) refreshTokensRevoked++;
      }
    }
    members.clear();
    this.#forgetIndexed(this.#keys.handlesByClient(clientId), 'clientId', clientId);
    this.#notify({ clientIds: [clientId] });
    return { clientId, revokedAt, accessTokensRevoked, refreshTokensRevoked };
  }

  async createAccessToken(record: AccessTokenRecord): Promise<CreateTokenOutcome> {
    this.#check();
    return this.issueTokens(record);
  }

  async readHandle(kind: HandleKind, handleHash: string): Promise<StoredHandle | null> {
    this.#check();
    const fields = this.#get(this.#keys.handle(kind, handleHash));
    if (!fields?.owner) return null;
    const stored: StoredHandle = { owner: fields.owner };
    if (fields.renewedAt !== undefined) stored.renewedAt = fields.renewedAt;
    if (fields.urlElicitation === '1') stored.urlElicitation = true;
    return stored;
  }

  async useHandle(
    kind: HandleKind,
    handleHash: string,
    owner: HandleOwner,
    now: number,
    ttlMs: number,
    maxPerOwner: number,
  ): Promise<HandleUse> {
    this.#check();
    return this.#claimHandle(false, kind, handleHash, owner, now, ttlMs, maxPerOwner) as HandleUse;
  }

  async bindHandle(
    kind: HandleKind,
    handleHash: string,
    owner: HandleOwner,
    now: number,
    ttlMs: number,
    maxPerOwner: number,
    marks?: { urlElicitation?: boolean },
  ): Promise<HandleBinding> {
    this.#check();
    return this.#claimHandle(true, kind, handleHash, owner, now, ttlMs, maxPerOwner, marks?.urlElicitation === true) as HandleBinding;
  }

  /** The Redis script's steps (CLAIM_HANDLE in redis-scripts.ts), in the same order. */
  #claimHandle(
    bind: boolean,
    kind: HandleKind,
    handleHash: string,
    owner: HandleOwner,
    now: number,
    ttlMs: number,
    maxPerOwner: number,
    urlElicitation = false,
  ): HandleUse | HandleBinding {
    const key = this.#keys.handle(kind, handleHash);
    const stored = this.#get(key);
    let outcome: HandleUse | HandleBinding = 'owned';
    let fields: Fields;
    if (stored) {
      if (stored.owner !== owner.id) return 'foreign';
      fields = stored;
    } else if (bind) {
      outcome = 'bound';
      fields = handleFields(owner);
      if (urlElicitation) fields.urlElicitation = '1';
    } else {
      return 'unknown';
    }
    const ttl = Math.max(1, Math.trunc(ttlMs));
    const max = Math.max(1, Math.trunc(maxPerOwner));
    if (outcome === 'owned' && !handleRenewalDue(fields.renewedAt, now, ttl)) return outcome;
    this.#put(key, { ...fields, renewedAt: String(now) }, now + ttl);
    const member = handleMember(kind, handleHash);
    if (owner.clientId !== undefined)
      this.#listHandle(this.#keys.handlesByClient(owner.clientId), member, 'clientId', owner.clientId, now, ttl, max);
    if (owner.subjectHash !== undefined)
      this.#listHandle(this.#keys.handlesBySubject(owner.subjectHash), member, 'subjectHash', owner.subjectHash, now, ttl, max);
    return outcome;
  }

  /** An owner's index of handles: member -> expiry; expired ones dropped, past `max` the least recently used forgotten. */
  #listHandle(index: string, member: string, field: string, value: string, now: number, ttl: number, max: number): void {
    let listed = this.#handleIndexes.get(index);
    if (!listed) this.#handleIndexes.set(index, (listed = new Map()));
    for (const [m, expiresAt] of listed) if (expiresAt <= now) listed.delete(m);
    if (!listed.has(member)) {
      const oldest = [...listed].sort((a, b) => a[1] - b[1] || (a[0] < b[0] ? -1 : 1));
      for (const [m] of oldest.slice(0, Math.max(0, listed.size - max + 1))) {
        listed.delete(m);
        const key = this.#keys.handlePrefix() + m;
        if (this.#get(key)?.[field] === value) this.#hashes.delete(key);
      }
    }
    listed.set(member, now + ttl);
  }

  async forgetHandle(kind: HandleKind, handleHash: string): Promise<boolean> {
    this.#check();
    const key = this.#keys.handle(kind, handleHash);
    const fields = this.#get(key);
    if (!fields) return false;
    const member = handleMember(kind, handleHash);
    if (fields.clientId !== undefined) this.#handleIndexes.get(this.#keys.handlesByClient(fields.clientId))?.delete(member);
    if (fields.subjectHash !== undefined) this.#handleIndexes.get(this.#keys.handlesBySubject(fields.subjectHash))?.delete(member);
    this.#hashes.delete(key);
    return true;
  }

  async forgetSubjectHandles(subject: string): Promise<number> {
    this.#check();
    const subjectHash = subjectDigest(subject);
    return this.#forgetIndexed(this.#keys.handlesBySubject(subjectHash), 'subjectHash', subjectHash);
  }

  /** Forgets every handle the index lists that is still its owner's, then the index. */
  #forgetIndexed(index: string, field: string, value: string): number {
    let forgotten = 0;
    for (const member of this.#handleIndexes.get(index)?.keys() ?? []) {
      const key = this.#keys.handlePrefix() + member;
      if (this.#get(key)?.[field] !== value) continue;
      this.#hashes.delete(key);
      forgotten++;
    }
    this.#handleIndexes.delete(index);
    return forgotten;
  }

  async revokeAccessToken(tokenHash: string, now: number): Promise<boolean> {
    this.#check();
    const fields = this.#get(this.#keys.accessToken(tokenHash));
    if (!fields) return false;
    fields.revokedAt ??= String(now);
    this.#notify({ tokenHashes: [tokenHash] });
    return true;
  }

  #clientState(clientId: string): CreateTokenOutcome {
    const client = this.#get(this.#keys.client(clientId));
    if (!client) return 'client_not_found';
    return client.revokedAt !== undefined ? 'client_revoked' : 'ok';
  }

  #storeAccess(record: AccessTokenRecord): void {
    if (record.user !== undefined) this.#indexSubject(record.user.subject, ACCESS_MEMBER + record.tokenHash, record.expiresAt);
    this.#put(this.#keys.accessToken(record.tokenHash), accessTokenFields(record), record.expiresAt);
    this.#set(this.#keys.clientTokens(record.clientId)).add(ACCESS_MEMBER + record.tokenHash);
    if (record.familyId !== undefined) this.#set(this.#keys.refreshFamily(record.familyId)).add(ACCESS_MEMBER + record.tokenHash);
  }

  #storeRefresh(record: RefreshTokenRecord): void {
    if (record.user !== undefined) this.#indexSubject(record.user.subject, REFRESH_MEMBER + record.tokenHash, record.expiresAt);
    this.#put(this.#keys.refreshToken(record.tokenHash), refreshTokenFields(record), record.expiresAt);
    this.#set(this.#keys.clientTokens(record.clientId)).add(REFRESH_MEMBER + record.tokenHash);
    this.#set(this.#keys.refreshFamily(record.familyId)).add(REFRESH_MEMBER + record.tokenHash);
  }

  async issueTokens(access: AccessTokenRecord, refresh?: RefreshTokenRecord): Promise<CreateTokenOutcome> {
    this.#check();
    const state = this.#clientState(access.clientId);
    if (state !== 'ok') return state;
    this.#storeAccess(access);
    if (refresh) this.#storeRefresh(refresh);
    return 'ok';
  }

  async getRefreshToken(tokenHash: string): Promise<StoredRead<StoredRefreshToken>> {
    this.#check();
    return readRecord(this.#get(this.#keys.refreshToken(tokenHash)), refreshTokenFromFields);
  }

  #revokeFamily(familyId: string, now: number, notify = true): void {
    for (const member of this.#set(this.#keys.refreshFamily(familyId))) {
      const hash = member.slice(2);
      const key = member.startsWith(ACCESS_MEMBER) ? this.#keys.accessToken(hash) : this.#keys.refreshToken(hash);
      const fields = this.#get(key);
      if (fields) fields.revokedAt ??= String(now);
    }
    if (notify) this.#notify({ familyIds: [familyId] });
  }

  #notify(notice: RevocationNotice): void {
    this.#forgetConsents(notice);
    // After the method returns, as a notice over Redis arrives: the revoking caller never runs a listener.
    for (const listener of this.#listeners) queueMicrotask(() => listener.revoked(notice));
  }

  async subscribeRevocations(listener: RevocationListener): Promise<() => Promise<void>> {
    this.#check();
    this.#listeners.add(listener);
    return async () => {
      this.#listeners.delete(listener);
    };
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
    this.#check();
    const old = this.#get(this.#keys.refreshToken(oldHash));
    if (!old || old.clientId !== clientId || old.revokedAt !== undefined || !old.familyId) return 'invalid';
    const rotated = old.rotatedAt !== undefined;
    if (rotated && !rotatedWithinGrace(old.rotatedAt!, now, graceMs)) {
      this.#revokeFamily(old.familyId, now);
      return 'reused';
    }
    const state = this.#clientState(clientId);
    if (state === 'client_not_found') return 'invalid';
    if (state === 'client_revoked') return 'client_revoked';
    // Within the window: nothing new; the caller answers with the successor the rotation sealed.
    if (rotated) return 'grace';
    old.rotatedAt = String(now);
    if (successor !== undefined) old.successor = successor;
    this.#storeAccess(access);
    this.#storeRefresh(refresh);
    return 'ok';
  }

  async revokeRefreshFamily(tokenHash: string, now: number): Promise<boolean> {
    this.#check();
    const fields = this.#get(this.#keys.refreshToken(tokenHash));
    if (!fields) return false;
    fields.revokedAt ??= String(now);
    if (fields.familyId) this.#revokeFamily(fields.familyId, now);
    return true;
  }

  async putAuthorizationRequest(requestHash: string, record: AuthorizationRequestRecord, expiresAt: number): Promise<void> {
    this.#check();
    this.#put(this.#keys.authorizationRequest(requestHash), authorizationRequestFields(record), expiresAt);
  }

  /** Pending sign-ins by holder key: member -> expiry (the Redis store's sorted sets). */
  readonly #pendingSignIns = new Map<string, Map<string, number>>();

  async putPendingSignIn(
    requestHash: string,
    record: AuthorizationRequestRecord,
    expiresAt: number,
    bounds: PendingSignInBounds,
  ): Promise<PendingSignInOutcome> {
    this.#check();
    const held = (['address', 'client'] as const).map((holder) => {
      const key =
        holder === 'address' ? this.#keys.pendingSignInsByAddress(bounds.address) : this.#keys.pendingSignInsByClient(bounds.clientId);
      const members = this.#pendingSignIns.get(key) ?? new Map<string, number>();
      for (const [member, until] of members) if (until <= bounds.now) members.delete(member);
      this.#pendingSignIns.set(key, members);
      return { holder, members, bound: holder === 'address' ? bounds.perAddress : bounds.perClient };
    });
    for (const { holder, members, bound } of held) {
      if (bound > 0 && members.size >= bound) return { stored: false, holder, retryAt: Math.min(...members.values()) };
    }
    this.#put(this.#keys.authorizationRequest(requestHash), authorizationRequestFields(record), expiresAt);
    for (const { members } of held) members.set(pendingSignInMember(requestHash), expiresAt);
    return { stored: true };
  }

  async takeAuthorizationRequest(requestHash: string): Promise<StoredRead<AuthorizationRequestRecord>> {
    this.#check();
    const key = this.#keys.authorizationRequest(requestHash);
    const fields = this.#get(key);
    this.#hashes.delete(key);
    return readRecord(fields, authorizationRequestFromFields);
  }

  async putAuthorizationCode(record: AuthorizationCodeRecord): Promise<void> {
    this.#check();
    this.#put(this.#keys.authorizationCode(record.codeHash), authorizationCodeFields(record), record.expiresAt);
  }

  async getAuthorizationCode(codeHash: string): Promise<StoredRead<StoredAuthorizationCode>> {
    this.#check();
    return readRecord(this.#get(this.#keys.authorizationCode(codeHash)), authorizationCodeFromFields);
  }

  async redeemAuthorizationCode(
    codeHash: string,
    clientId: string,
    now: number,
    retainMs: number,
    access: AccessTokenRecord,
    refresh?: RefreshTokenRecord,
  ): Promise<RedeemOutcome> {
    this.#check();
    const key = this.#keys.authorizationCode(codeHash);
    const code = this.#get(key);
    if (!code || code.clientId !== clientId) return 'invalid';
    if (code.redeemedAt !== undefined) {
      if (code.accessTokenHash !== undefined) {
        const issued = this.#get(this.#keys.accessToken(code.accessTokenHash));
        if (issued) issued.revokedAt ??= String(now);
      }
      if (code.familyId !== undefined) this.#revokeFamily(code.familyId, now, false);
      this.#notify(reuseNotice(code));
      return 'reused';
    }
    if (!(Number(code.expiresAt) > now)) return 'invalid';
    const state = this.#clientState(clientId);
    if (state === 'client_not_found') return 'invalid';
    if (state === 'client_revoked') return 'client_revoked';
    code.redeemedAt = String(now);
    code.accessTokenHash = access.tokenHash;
    if (refresh) code.familyId = refresh.familyId;
    this.#hashes.get(key)!.expiresAt = now + retainMs;
    this.#storeAccess(access);
    if (refresh) this.#storeRefresh(refresh);
    return 'ok';
  }

  /** Device authorizations held by a client address and by the server: member -> expiry (the Redis store's sorted sets). */
  readonly #pendingDevices = new Map<string, Map<string, number>>();

  async putDeviceAuthorization(
    record: DeviceAuthorizationRecord,
    retainMs: number,
    bounds: DeviceAuthorizationBounds,
  ): Promise<DeviceAuthorizationOutcome> {
    this.#check();
    const held = (['address', 'total'] as const).map((holder) => {
      const key = holder === 'address' ? this.#keys.pendingDevicesByAddress(bounds.address) : this.#keys.pendingDevicesAll();
      const members = this.#pendingDevices.get(key) ?? new Map<string, number>();
      for (const [member, until] of members) if (until <= bounds.now) members.delete(member);
      this.#pendingDevices.set(key, members);
      return { holder, members, bound: holder === 'address' ? bounds.perAddress : bounds.total };
    });
    for (const { holder, members, bound } of held) {
      if (bound > 0 && members.size >= bound) return { stored: false, holder, retryAt: Math.min(...members.values()) };
    }
    const index = this.#keys.deviceUserCode(record.userCodeHash);
    if (this.#get(index)) return { stored: false, holder: 'user_code' };
    this.#put(this.#keys.deviceAuthorization(record.deviceCodeHash), deviceAuthorizationFields(record), record.expiresAt + retainMs);
    this.#put(index, { deviceCodeHash: record.deviceCodeHash }, record.expiresAt);
    for (const { members } of held) members.set(pendingSignInMember(record.deviceCodeHash), record.expiresAt);
    return { stored: true };
  }

  async findDeviceAuthorization(userCodeHash: string): Promise<StoredRead<StoredDeviceAuthorization>> {
    this.#check();
    const index = this.#get(this.#keys.deviceUserCode(userCodeHash));
    if (!index?.deviceCodeHash) return null;
    return readRecord(this.#get(this.#keys.deviceAuthorization(index.deviceCodeHash)), deviceAuthorizationFromFields);
  }

  async decideDeviceAuthorization(deviceCodeHash: string, now: number, user: SignedInUser | undefined): Promise<boolean> {
    this.#check();
    const fields = this.#get(this.#keys.deviceAuthorization(deviceCodeHash));
    if (!fields || fields.status !== 'pending' || !(Number(fields.expiresAt) > now)) return false;
    if (user) Object.assign(fields, userFields(user));
    fields.status = user ? 'approved' : 'denied';
    if (fields.userCodeHash) this.#hashes.delete(this.#keys.deviceUserCode(fields.userCodeHash));
    return true;
  }

  async pollDeviceAuthorization(deviceCodeHash: string, clientId: string, now: number): Promise<DevicePollOutcome> {
    this.#check();
    const fields = this.#get(this.#keys.deviceAuthorization(deviceCodeHash));
    if (!fields || fields.clientId !== clientId || fields.status === 'redeemed') return { outcome: 'invalid' };
    if (!(Number(fields.expiresAt) > now)) return { outcome: 'expired' };
    const interval = Number(fields.interval);
    const last = fields.lastPolledAt === undefined ? undefined : Number(fields.lastPolledAt);
    fields.lastPolledAt = String(now);
    if (last !== undefined && now - last < interval * 1000) {
      fields.interval = String(interval + DEVICE_SLOW_DOWN_SECONDS);
      return { outcome: 'slow_down', interval: interval + DEVICE_SLOW_DOWN_SECONDS };
    }
    if (fields.status === 'pending') return { outcome: 'pending' };
    if (fields.status === 'denied') return { outcome: 'denied' };
    if (fields.status !== 'approved') return { outcome: 'invalid' };
    fields.status = 'redeemed';
    const authorization = deviceAuthorizationFromFields(fields);
    if (authorization === 'corrupt' || authorization.user === undefined) return { outcome: 'invalid' };
    return { outcome: 'approved', authorization: { ...authorization, user: authorization.user } };
  }

  async putConsent(browserHash: string, consent: ConsentRecord, now: number, maxPerBrowser: number): Promise<void> {
    this.#check();
    const key = this.#keys.consents(browserHash);
    const field = consentKey(consent);
    const fields = { ...this.#get(key), [field]: consentValue(consent) };
    const { drop, latest } = consentEviction(fields, field, now, maxPerBrowser);
    for (const field of drop) delete fields[field];
    if (latest > 0) this.#put(key, fields, latest);
    else this.#hashes.delete(key);
    if (!drop.includes(field)) this.#indexSubject(consent.subject, consentMember(browserHash, field), consent.expiresAt);
  }

  async listConsents(browserHash: string, now: number): Promise<ConsentRecord[]> {
    this.#check();
    const fields = this.#get(this.#keys.consents(browserHash)) ?? {};
    return Object.values(fields).flatMap((value) => consentFromValue(value, now) ?? []);
  }

  async linkConsentGrant(grantId: string, browserHash: string, key: string, expiresAt: number): Promise<void> {
    this.#check();
    this.#put(this.#keys.consentGrant(grantId), { browser: browserHash, consent: key }, expiresAt);
  }

  async forgetConsent(browserHash: string, key: string, subject: string): Promise<boolean> {
    this.#check();
    const approvals = this.#get(this.#keys.consents(browserHash));
    const value = approvals?.[key];
    if (value === undefined) return false;
    const consent = consentFromValue(value, this.#clock.now());
    if (consent === null || consent.subject !== subject) return false;
    delete approvals![key];
    this.#subjectIndexes.get(this.#keys.subjectGrants(subjectDigest(subject)))?.delete(consentMember(browserHash, key));
    return true;
  }

  async markSubjectRevoked(subject: string, issuer: string | undefined, at: number, keepUntil: number): Promise<void> {
    this.#check();
    const key = this.#keys.subjectCutoff(subjectDigest(subject));
    this.#put(key, { ...this.#get(key), [issuer ?? EVERY_ISSUER]: String(at) }, keepUntil);
  }

  async subjectRevokedAt(subject: string, issuer: string): Promise<number | undefined> {
    this.#check();
    return cutoffFromFields(this.#get(this.#keys.subjectCutoff(subjectDigest(subject))), issuer);
  }

  async putAccountSession(sessionHash: string, session: AccountSession): Promise<void> {
    this.#check();
    this.#put(this.#keys.accountSession(sessionHash), accountSessionFields(session), session.expiresAt);
  }

  async getAccountSession(sessionHash: string, now: number): Promise<AccountSession | null> {
    this.#check();
    return accountSessionFromFields(this.#get(this.#keys.accountSession(sessionHash)), now);
  }

  async deleteAccountSession(sessionHash: string): Promise<boolean> {
    this.#check();
    const key = this.#keys.accountSession(sessionHash);
    const found = this.#get(key) !== null;
    this.#hashes.delete(key);
    return found;
  }

  /** Every revocation of a grant linked to an approval forgets the approval (and the link). */
  #forgetConsents(notice: RevocationNotice): void {
    for (const grantId of consentGrantIds(notice)) {
      const link = this.#get(this.#keys.consentGrant(grantId));
      if (!link) continue;
      this.#hashes.delete(this.#keys.consentGrant(grantId));
      const approvals = link.browser !== undefined && link.consent !== undefined ? this.#get(this.#keys.consents(link.browser)) : null;
      if (approvals) delete approvals[link.consent!];
    }
  }

  async touchClient(clientId: string, ttlMs: number): Promise<void> {
    this.#check();
    const entry = this.#hashes.get(this.#keys.client(clientId));
    if (entry && this.#get(this.#keys.client(clientId))) entry.expiresAt = this.#clock.now() + ttlMs;
  }

  readonly #counters = new Map<string, { count: number; endsAt: number }>();
  readonly #quotas = new Map<string, { window: number; used: number; resetAt: number }>();

  async hitCounter(name: string, windowMs: number): Promise<{ count: number; resetMs: number }> {
    this.#check();
    const now = this.#clock.now();
    const key = this.#keys.rateCounter(name);
    let counter = this.#counters.get(key);
    if (!counter || counter.endsAt <= now) {
      counter = { count: 0, endsAt: now + windowMs };
      this.#counters.set(key, counter);
      // Bounded like Redis would be by expiry: drop ended windows when the map grows.
      if (this.#counters.size > 10_000) for (const [k, c] of this.#counters) if (c.endsAt <= now) this.#counters.delete(k);
    }
    counter.count++;
    return { count: counter.count, resetMs: counter.endsAt - now };
  }

  async takeQuota(name: string, cost: number, limit: number, windowMs: number, now: number): Promise<QuotaOutcome> {
    this.#check();
    const key = this.#keys.quotaCounter(name);
    let window = Math.floor(now / windowMs);
    const stored = this.#quotas.get(key);
    let used = 0;
    if (stored !== undefined && stored.window >= window) {
      window = stored.window;
      used = stored.used;
    }
    const resetAt = (window + 1) * windowMs;
    const allowed = used + cost <= limit;
    if (allowed && cost > 0) {
      used += cost;
      this.#quotas.set(key, { window, used, resetAt });
      // Bounded like Redis would be by expiry: drop ended windows when the map grows.
      if (this.#quotas.size > 10_000) for (const [k, q] of this.#quotas) if (q.resetAt <= now) this.#quotas.delete(k);
    }
    return { allowed, used, resetAt };
  }

  async useOnce(name: string, expiresAt: number): Promise<boolean> {
    this.#check();
    const key = this.#keys.oneTimeValue(name);
    if (this.#get(key) !== null) return false;
    if (expiresAt > this.#clock.now()) this.#put(key, {}, expiresAt);
    return true;
  }

  async seedProfiles(profiles: readonly ProfileRecord[]): Promise<string[]> {
    this.#check();
    const created: string[] = [];
    for (const profile of profiles) {
      if (this.#createIndexed(this.#keys.profile(profile.name), this.#keys.profileIndex(), profile.name, profileFields(profile)))
        created.push(profile.name);
    }
    return created;
  }

  async getProfile(name: string): Promise<StoredRead<ProfileRecord>> {
    this.#check();
    return this.#getRecord(this.#keys.profile(name), profileFromFields);
  }

  async getProfileFields(name: string): Promise<Fields | null> {
    this.#check();
    const fields = this.#get(this.#keys.profile(name));
    return fields && { ...fields };
  }

  async listProfiles(): Promise<ProfileRecord[]> {
    this.#check();
    return this.#listIndexed(this.#keys.profileIndex(), this.#keys.profile, profileFromFields);
  }

  /** The audit streams, one per trail: ids `<ms>-<seq>` increasing like Redis stream ids, each capped exactly at maxLen. */
  readonly #audit: Record<AuditTrail, Array<{ id: string; fields: Fields }>> = { admin: [], requests: [] };
  #lastAuditId: [number, number] = [0, 0];

  async appendAudit(event: AuditEvent, maxLen: number, trail: AuditTrail = 'requests'): Promise<string> {
    this.#check();
    const ms = Math.max(this.#clock.now(), this.#lastAuditId[0]);
    const seq = ms === this.#lastAuditId[0] ? this.#lastAuditId[1] + 1 : 0;
    this.#lastAuditId = [ms, seq];
    const id = `${ms}-${seq}`;
    const stream = this.#audit[trail];
    stream.push({ id, fields: auditFields(event) });
    if (stream.length > maxLen) stream.splice(0, stream.length - maxLen);
    return id;
  }

  async listAuditEvents(count: number): Promise<StoredAuditEvent[]> {
    this.#check();
    if (count <= 0) return [];
    return [...this.#audit.admin.slice(-count), ...this.#audit.requests.slice(-count)]
      .map((e) => auditFromFields(e.id, e.fields))
      .sort(newestAuditFirst)
      .slice(0, count);
  }

  async publishSigningKey(key: PublishedSigningKey, now: number): Promise<void> {
    this.#check();
    const name = this.#keys.signingKeys();
    const fields = { ...this.#get(name) };
    const current = fields[key.kid];
    const listed = current === undefined ? null : signingKeyFromValue(key.kid, current, now);
    if (listed === null || listed.expiresAt < key.expiresAt) fields[key.kid] = signingKeyValue(key);
    const kept: Fields = {};
    let latest = 0;
    for (const kid of Object.keys(fields)) {
      const entry = signingKeyFromValue(kid, fields[kid]!, now);
      if (entry === null) continue;
      kept[kid] = fields[kid]!;
      latest = Math.max(latest, entry.expiresAt);
    }
    if (latest > 0) this.#put(name, kept, latest);
    else this.#hashes.delete(name);
  }

  async listSigningKeys(now: number): Promise<PublishedSigningKey[]> {
    this.#check();
    return listedSigningKeys(this.#get(this.#keys.signingKeys()) ?? {}, now);
  }

  async putUpstreamCredential(record: StoredUpstreamCredential): Promise<void> {
    this.#check();
    const key = this.#keys.upstreamCredentials(record.subject);
    this.#put(key, { ...this.#get(key), [upstreamCredentialField(record.issuer, record.provider)]: upstreamCredentialValue(record) });
  }

  async getUpstreamCredential(subject: string, issuer: string, provider: string): Promise<StoredRead<StoredUpstreamCredential>> {
    this.#check();
    const value = this.#get(this.#keys.upstreamCredentials(subject))?.[upstreamCredentialField(issuer, provider)];
    return value === undefined ? null : sameUpstreamIdentity(upstreamCredentialFromValue(value), subject, issuer, provider);
  }

  async replaceUpstreamCredential(record: StoredUpstreamCredential, expectedSealed: string): Promise<boolean> {
    this.#check();
    const key = this.#keys.upstreamCredentials(record.subject);
    const fields = this.#get(key);
    const field = upstreamCredentialField(record.issuer, record.provider);
    const current = fields?.[field] === undefined ? 'corrupt' : upstreamCredentialFromValue(fields[field]);
    if (current === 'corrupt' || current.sealed !== expectedSealed) return false;
    this.#put(key, { ...fields, [field]: upstreamCredentialValue(record) });
    return true;
  }

  async deleteUpstreamCredentials(subject: string, issuer?: string): Promise<number> {
    this.#check();
    const key = this.#keys.upstreamCredentials(subject);
    const fields = this.#get(key);
    if (fields === null) return 0;
    const kept: Fields = {};
    let deleted = 0;
    for (const [field, value] of Object.entries(fields)) {
      let fieldIssuer: unknown;
      try {
        fieldIssuer = (JSON.parse(field) as unknown[])[0];
      } catch {
        fieldIssuer = undefined;
      }
      if (issuer === undefined || fieldIssuer === issuer) deleted++;
      else kept[field] = value;
    }
    if (Object.keys(kept).length > 0) this.#put(key, kept);
    else this.#hashes.delete(key);
    return deleted;
  }

  async deleteUpstreamCredential(subject: string, issuer: string, provider: string): Promise<boolean> {
    this.#check();
    const key = this.#keys.upstreamCredentials(subject);
    const field = upstreamCredentialField(issuer, provider);
    const fields = this.#get(key);
    if (fields?.[field] === undefined) return false;
    const kept: Fields = { ...fields };
    delete kept[field];
    if (Object.keys(kept).length > 0) this.#put(key, kept);
    else this.#hashes.delete(key);
    return true;
  }

  async listSubjectUpstreamCredentials(subject: string): Promise<StoredUpstreamCredential[]> {
    this.#check();
    return subjectUpstreamCredentials(this.#get(this.#keys.upstreamCredentials(subject)) ?? {}, subject);
  }

  async listUpstreamCredentials(): Promise<StoredUpstreamCredential[]> {
    this.#check();
    const prefix = this.#keys.upstreamCredentials('');
    const stem = prefix.slice(0, prefix.lastIndexOf(':') + 1);
    const out: StoredUpstreamCredential[] = [];
    for (const key of [...this.#hashes.keys()]) {
      if (!key.startsWith(stem)) continue;
      for (const value of Object.values(this.#get(key) ?? {})) {
        const record = upstreamCredentialFromValue(value);
        if (record !== 'corrupt' && this.#keys.upstreamCredentials(record.subject) === key) out.push(record);
      }
    }
    return out;
  }

  async close(): Promise<void> {
    this.#closed = true;
  }

  /** Test and demo hook: the raw fields under a key, as `redis-cli HGETALL` would show them. */
  rawHash(key: string): Fields | null {
    const fields = this.#get(key);
    return fields && { ...fields };
  }

  /** Test hook: edit a raw field, as an admin would with `redis-cli HSET` (which creates a missing hash). */
  setRawField(key: string, field: string, value: string): void {
    const fields = this.#get(key);
    if (fields) fields[field] = value;
    else this.#put(key, { [field]: value });
  }
}
