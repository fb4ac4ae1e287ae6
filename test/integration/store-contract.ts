// The TokenStore contract (src/store/types.ts, docs/storage.md): one suite that every store
// (MemoryTokenStore, RedisTokenStore) must pass. Stores only persist and fetch; whether a token still
// authorizes is decided by decideToken (src/model/credentials.ts), so the suite asks it about what the store
// returns, exactly as the proxy does. Time moves through an injected ManualClock, never by sleeping.

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/model/clock.ts';
import { decideToken, generateToken, hashToken, type DenialReason } from '../../src/model/credentials.ts';
import type { Cluster, Redis } from 'ioredis';
import { consentKey, orNull, subjectDigest, type KeyLayout } from '../../src/store/records.ts';
import { StoreUnavailableError } from '../../src/http/errors.ts';
import type { StoreOperation } from '../../src/store/decorator.ts';
import { handleDigest, handleOwner } from '../../src/proxy/handles.ts';
import {
  DuplicateRecordError,
  type AccessTokenRecord,
  type AuthorizationCodeRecord,
  type DeviceAuthorizationRecord,
  type AuthorizationRequestRecord,
  type ClientRecord,
  type ConsentRecord,
  type ProfileRecord,
  type RefreshTokenRecord,
  type RevocationNotice,
  type StoredUpstreamCredential,
  type TokenStore,
  type UserTokenRecord,
} from '../../src/store/types.ts';

export interface StoreHarness {
  store: TokenStore;
  /** Raw fields under a key, as `redis-cli HGETALL` shows them; null when the key does not exist. */
  rawHash(key: string): Promise<Record<string, string> | null>;
  /** An admin's hand edit, as `redis-cli HSET key field value`. */
  setRawField(key: string, field: string, value: string): Promise<void>;
  keys: KeyLayout;
  cleanup(): Promise<void>;
}

/** The harness's raw access over a redis-cli-like connection (standalone or Cluster). */
export function redisRawAccess(raw: Redis | Cluster): Pick<StoreHarness, 'rawHash' | 'setRawField'> {
  return {
    rawHash: async (key) => orNull(await raw.hgetall(key)),
    setRawField: async (key, field, value) => {
      await raw.hset(key, field, value);
    },
  };
}

const HOUR = 3_600_000;
const INTEGER_MS = /^[0-9]+$/;

export function runStoreContract(name: string, makeStore: (clock: ManualClock) => Promise<StoreHarness>): void {
  describe(name, () => {
    let clock: ManualClock;
    let h: StoreHarness;
    let store: TokenStore;

    beforeEach(async () => {
      // Real time: Redis PEXPIREAT works on the server's clock, so the fake clock never starts in the past.
      clock = new ManualClock(Date.now());
      h = await makeStore(clock);
      store = h.store;
    });
    afterEach(async () => {
      await h.cleanup();
    });

    /** A sign-in in progress at its consent step, of `clientId`. */
    function pendingRequest(clientId = 'c-1', state?: string, scope?: string): Extract<AuthorizationRequestRecord, { stage: 'consent' }> {
      const request = {
        clientId,
        redirectUri: 'http://127.0.0.1:9999/cb',
        codeChallenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
        state,
        scope,
      };
      return { stage: 'consent', browserHash: hashToken('browser cookie'), request };
    }

    /** A client that must read as a record: null when none is stored. */
    function clientRead(found: ClientRecord | 'corrupt' | null): ClientRecord | null {
      if (found === 'corrupt') throw new Error('client read as corrupt');
      return found;
    }

    /** A refresh token that must read as a record: null when none is stored. */
    async function refreshOf(tokenHash: string) {
      const found = await store.getRefreshToken(tokenHash);
      if (found === 'corrupt') throw new Error('refresh token read as corrupt');
      return found;
    }

    function userRecord(overrides: Partial<UserTokenRecord> = {}): { raw: string; record: UserTokenRecord } {
      const raw = generateToken();
      const now = clock.now();
      return {
        raw,
        record: {
          tokenHash: hashToken(raw),
          subject: 'user-123',
          issuer: 'https://idp.example.com/',
          createdAt: now,
          expiresAt: now + HOUR,
          ...overrides,
        },
      };
    }

    function client(clientId: string, overrides: Partial<ClientRecord> = {}): { secret: string; record: ClientRecord } {
      const secret = generateToken();
      return {
        secret,
        record: {
          clientId,
          clientSecretHash: hashToken(secret),
          clientName: `name of ${clientId}`,
          redirectUris: ['https://app.example.com/callback', 'http://127.0.0.1:9999/cb'],
          grantTypes: ['client_credentials', 'refresh_token'],
          scope: 'mcp:read mcp:write',
          profile: 'default',
          tokenEndpointAuthMethod: 'client_secret_basic',
          source: 'admin',
          createdAt: clock.now(),
          ...overrides,
        },
      };
    }

    function accessToken(clientId: string, overrides: Partial<AccessTokenRecord> = {}): { raw: string; record: AccessTokenRecord } {
      const raw = generateToken();
      return { raw, record: { tokenHash: hashToken(raw), clientId, createdAt: clock.now(), expiresAt: clock.now() + HOUR, ...overrides } };
    }

    function refreshToken(clientId: string, familyId: string): { raw: string; record: RefreshTokenRecord } {
      const raw = generateToken();
      return { raw, record: { tokenHash: hashToken(raw), clientId, familyId, createdAt: clock.now(), expiresAt: clock.now() + 24 * HOUR } };
    }

    function upstreamCredential(overrides: Partial<StoredUpstreamCredential> = {}): StoredUpstreamCredential {
      return {
        subject: 'alice',
        issuer: 'https://idp.example/',
        provider: 'idp',
        keyId: '0123456789abcdef',
        sealed: 'c2VhbGVk',
        createdAt: clock.now(),
        ...overrides,
      };
    }

    async function decide(tokenHash: string) {
      return decideToken(tokenHash, await store.lookupToken(tokenHash), clock.now());
    }

    async function reasonOf(tokenHash: string): Promise<DenialReason | 'ok'> {
      const d = await decide(tokenHash);
      return d.ok ? 'ok' : d.reason;
    }

    describe('user-grade tokens', () => {
      it('lookupToken on an unknown hash finds nothing in either collection', async () => {
        const hash = hashToken(generateToken());
        expect(await store.lookupToken(hash)).toEqual({ user: null, oauth: null });
        expect(await reasonOf(hash)).toBe('unknown');
      });

      it('putUserToken stores exactly the contract fields and the token validates', async () => {
        const { record } = userRecord();
        await store.putUserToken(record);
        const found = await store.lookupToken(record.tokenHash);
        expect(found.oauth).toBeNull();
        // Parsed at the store boundary: numbers as numbers, booleans as booleans, frozen.
        expect(found.user).toEqual({
          subject: 'user-123',
          issuer: 'https://idp.example.com/',
          revoked: false,
          expiresAt: record.expiresAt,
        });
        expect(Object.isFrozen(found.user)).toBe(true);
        const raw = await h.rawHash(h.keys.userToken(record.tokenHash));
        expect(raw).toEqual({
          tokenHash: record.tokenHash,
          subject: 'user-123',
          issuer: 'https://idp.example.com/',
          revoked: 'false',
          createdAt: String(record.createdAt),
          expiresAt: String(record.expiresAt),
        });
        expect(raw!.createdAt).toMatch(INTEGER_MS);
        expect(raw!.expiresAt).toMatch(INTEGER_MS);
        const decision = decideToken(record.tokenHash, found, clock.now());
        expect(decision).toEqual({
          ok: true,
          principal: { kind: 'user', subject: 'user-123', tokenHash: record.tokenHash, expiresAt: record.expiresAt },
        });
      });

      it("an admin's manual HSET revoked true rejects the token on the next lookup", async () => {
        const { record } = userRecord();
        await store.putUserToken(record);
        expect(await reasonOf(record.tokenHash)).toBe('ok');
        await h.setRawField(h.keys.userToken(record.tokenHash), 'revoked', 'true');
        expect(await reasonOf(record.tokenHash)).toBe('revoked');
      });

      it.each([
        ['revoked', 'TRUE'],
        ['revoked', '1'],
        ['revoked', ''],
        ['revoked', 'False'],
        ['revoked', ' false'],
        ['revoked', 'no'],
        ['expiresAt', ''],
        ['expiresAt', 'abc'],
        ['expiresAt', '1.5'],
        ['expiresAt', '-1'],
        ['expiresAt', '1e20'],
        ['expiresAt', ' 123'],
        ['expiresAt', 'Infinity'],
        ['subject', ''],
        ['dpopJkt', 'not-a-thumbprint'],
        ['groups', '["eng",1]'],
        ['groups', 'eng'],
      ])('a record whose %s is %j reads as corrupt and is rejected (fail closed)', async (field, value) => {
        const { record } = userRecord();
        await store.putUserToken(record);
        expect(await reasonOf(record.tokenHash)).toBe('ok');
        await h.setRawField(h.keys.userToken(record.tokenHash), field, value);
        expect((await h.rawHash(h.keys.userToken(record.tokenHash)))?.[field]).toBe(value);
        expect(await store.lookupToken(record.tokenHash)).toEqual({ user: 'corrupt', oauth: null });
        expect(await reasonOf(record.tokenHash)).toBe('corrupt');
      });

      it('a user-grade record with its binding and identity claims reads as typed fields', async () => {
        const jkt = 'NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs';
        const { record } = userRecord({ email: 'ann@example.com', groups: ['eng', 'ops'], dpopJkt: jkt });
        await store.putUserToken(record);
        const found = await store.lookupToken(record.tokenHash);
        expect(found).toEqual({
          user: {
            subject: 'user-123',
            issuer: 'https://idp.example.com/',
            revoked: false,
            expiresAt: record.expiresAt,
            email: 'ann@example.com',
            groups: ['eng', 'ops'],
            dpopJkt: jkt,
          },
          oauth: null,
        });
        await store.revokeUserToken(record.tokenHash);
        expect((await store.lookupToken(record.tokenHash)).user).toMatchObject({ revoked: true });
      });

      it('a record stored under one hash but naming another tokenHash is corrupt', async () => {
        const { record } = userRecord();
        await store.putUserToken(record);
        await h.setRawField(h.keys.userToken(record.tokenHash), 'tokenHash', hashToken(generateToken()));
        expect(await reasonOf(record.tokenHash)).toBe('corrupt');
      });

      it('expires with the injected clock, without sleeping', async () => {
        const { record } = userRecord({ expiresAt: clock.now() + 10 * 60_000 });
        await store.putUserToken(record);
        clock.set(record.expiresAt - 1);
        expect(await reasonOf(record.tokenHash)).toBe('ok');
        clock.set(record.expiresAt);
        const found = await store.lookupToken(record.tokenHash);
        const decision = decideToken(record.tokenHash, found, clock.now());
        expect(decision.ok).toBe(false);
        // A store may drop the record itself at expiresAt (memory follows the injected clock, Redis
        // follows real time); while it still returns the record, the reason is "expired".
        if (found.user) expect(decision).toEqual({ ok: false, reason: 'expired' });
        else expect(decision).toEqual({ ok: false, reason: 'unknown' });
        clock.advance(HOUR);
        expect(['expired', 'unknown']).toContain(await reasonOf(record.tokenHash));
      });

      it('revokeUserToken: false for an unknown hash (and creates nothing), true for a known one, which is then rejected', async () => {
        const unknown = hashToken(generateToken());
        expect(await store.revokeUserToken(unknown)).toBe(false);
        expect(await h.rawHash(h.keys.userToken(unknown))).toBeNull();
        expect(await store.lookupToken(unknown)).toEqual({ user: null, oauth: null });

        const { record } = userRecord();
        await store.putUserToken(record);
        expect(await store.revokeUserToken(record.tokenHash)).toBe(true);
        expect((await h.rawHash(h.keys.userToken(record.tokenHash)))?.revoked).toBe('true');
        expect(await reasonOf(record.tokenHash)).toBe('revoked');
        expect(await store.revokeUserToken(record.tokenHash)).toBe(true);
        expect(await reasonOf(record.tokenHash)).toBe('revoked');
      });

      it('user-grade and OAuth records of different tokens do not see each other', async () => {
        const { record } = userRecord();
        await store.putUserToken(record);
        const c = client('c-sep');
        await store.createClient(c.record);
        const t = accessToken('c-sep');
        expect(await store.createAccessToken(t.record)).toBe('ok');
        expect((await store.lookupToken(record.tokenHash)).oauth).toBeNull();
        expect((await store.lookupToken(t.record.tokenHash)).user).toBeNull();
      });
    });

    describe('OAuth clients', () => {
      it('createClient / getClient round-trip every field; the raw secret appears nowhere, only its hash', async () => {
        const { secret, record } = client('c-roundtrip');
        await store.createClient(record);
        const got = await store.getClient('c-roundtrip');
        expect(got).toEqual(record);
        expect(JSON.stringify(got)).not.toContain(secret);
        const raw = await h.rawHash(h.keys.client('c-roundtrip'));
        expect(raw).not.toBeNull();
        expect(raw!.clientSecretHash).toBe(hashToken(secret));
        expect(JSON.stringify(raw)).not.toContain(secret);
        expect(raw!.createdAt).toMatch(INTEGER_MS);
        expect(raw!.revokedAt).toBeUndefined();
        const listed = await store.listClients();
        expect(JSON.stringify(listed)).not.toContain(secret);
      });

      it('a public client (no secret, optional fields absent) round-trips without inventing fields', async () => {
        const record: ClientRecord = {
          clientId: 'c-public',
          redirectUris: [],
          grantTypes: ['urn:ietf:params:oauth:grant-type:token-exchange'],
          profile: 'dynamic',
          tokenEndpointAuthMethod: 'none',
          source: 'dcr',
          createdAt: clock.now(),
        };
        await store.createClient(record);
        expect(await store.getClient('c-public')).toEqual(record);
      });

      it.each([
        ['clientId', ''],
        ['source', 'operator'],
        ['source', ''],
        ['grantTypes', 'client_credentials'],
        ['grantTypes', '["client_credentials",1]'],
        ['redirectUris', '{}'],
        ['tokenEndpointAuthMethod', 'basic'],
        ['tokenEndpointAuthMethod', ''],
        ['profile', ''],
        ['createdAt', 'yesterday'],
        ['revokedAt', 'soon'],
        ['clientSecretHash', 'not-a-hash'],
      ])('a client whose %s is %j reads as corrupt, never filled in with a default; listClients skips it', async (field, value) => {
        await store.createClient(client('c-a').record);
        await store.createClient(client('c-b').record);
        await h.setRawField(h.keys.client('c-a'), field, value);
        expect(await store.getClient('c-a')).toBe('corrupt');
        expect((await store.listClients()).map((c) => c.clientId)).toEqual(['c-b']);
      });

      it('getClient of an unknown id is null; listClients of an empty store is empty', async () => {
        expect(await store.getClient('nope')).toBeNull();
        expect(await store.listClients()).toEqual([]);
      });

      it('listClients returns every client sorted by id', async () => {
        for (const id of ['c-m', 'c-a', 'c-z', 'c-b']) await store.createClient(client(id).record);
        const listed = await store.listClients();
        expect(listed.map((c) => c.clientId)).toEqual(['c-a', 'c-b', 'c-m', 'c-z']);
        for (const c of listed) expect(c.clientName).toBe(`name of ${c.clientId}`);
      });

      it('createClient with an existing id throws and keeps the first client', async () => {
        const first = client('c-dup');
        await store.createClient(first.record);
        const second = client('c-dup', { clientName: 'impostor' });
        await expect(store.createClient(second.record)).rejects.toThrow();
        const got = await store.getClient('c-dup');
        expect(got).not.toBe('corrupt');
        expect(got !== 'corrupt' && got?.clientName).toBe('name of c-dup');
        expect(got !== 'corrupt' && got?.clientSecretHash).toBe(hashToken(first.secret));
        expect((await store.listClients()).map((c) => c.clientId)).toEqual(['c-dup']);
      });
    });

    describe('OAuth access tokens', () => {
      it('createAccessToken: ok stores a validating token; client_not_found stores nothing', async () => {
        await store.createClient(client('c-ok').record);
        const t = accessToken('c-ok', { scope: 'mcp:read' });
        expect(await store.createAccessToken(t.record)).toBe('ok');
        const found = await store.lookupToken(t.record.tokenHash);
        expect(found.user).toBeNull();
        expect(found.oauth).toEqual({ clientId: 'c-ok', scope: 'mcp:read', revoked: false, expiresAt: t.record.expiresAt });
        expect(Object.isFrozen(found.oauth)).toBe(true);
        expect(await h.rawHash(h.keys.accessToken(t.record.tokenHash))).toEqual({
          tokenHash: t.record.tokenHash,
          clientId: 'c-ok',
          scope: 'mcp:read',
          createdAt: String(t.record.createdAt),
          expiresAt: String(t.record.expiresAt),
        });
        expect(decideToken(t.record.tokenHash, found, clock.now())).toEqual({
          ok: true,
          principal: {
            kind: 'oauth',
            subject: 'c-ok',
            clientId: 'c-ok',
            tokenHash: t.record.tokenHash,
            expiresAt: t.record.expiresAt,
            scope: 'mcp:read',
          },
        });

        const orphan = accessToken('c-missing');
        expect(await store.createAccessToken(orphan.record)).toBe('client_not_found');
        expect(await store.lookupToken(orphan.record.tokenHash)).toEqual({ user: null, oauth: null });
        expect(await h.rawHash(h.keys.accessToken(orphan.record.tokenHash))).toBeNull();
      });

      it('an access token acting for a signed-in user, bound to a key, reads as typed fields; revokedAt reads as revoked', async () => {
        await store.createClient(client('c-user').record);
        const jkt = 'NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs';
        const user = { subject: 'idp-sub', issuer: 'https://idp.example.com/', email: 'ann@example.com', groups: ['eng'] };
        const t = accessToken('c-user', { scope: 'mcp:read', familyId: 'fam-1', dpopJkt: jkt, user });
        expect(await store.createAccessToken(t.record)).toBe('ok');
        expect((await store.lookupToken(t.record.tokenHash)).oauth).toEqual({
          clientId: 'c-user',
          subject: 'idp-sub',
          issuer: 'https://idp.example.com/',
          email: 'ann@example.com',
          groups: ['eng'],
          scope: 'mcp:read',
          familyId: 'fam-1',
          dpopJkt: jkt,
          revoked: false,
          expiresAt: t.record.expiresAt,
        });
        expect(await store.revokeAccessToken(t.record.tokenHash, clock.now())).toBe(true);
        expect((await store.lookupToken(t.record.tokenHash)).oauth).toMatchObject({ revoked: true });
      });

      it.each([
        ['expiresAt', 'later'],
        ['expiresAt', ''],
        ['clientId', ''],
        ['dpopJkt', 'short'],
        ['groups', '{"0":"eng"}'],
        ['tokenHash', 'f'.repeat(64)],
      ])('an access token whose %s is %j reads as corrupt and is rejected', async (field, value) => {
        await store.createClient(client('c-bad').record);
        const t = accessToken('c-bad');
        expect(await store.createAccessToken(t.record)).toBe('ok');
        await h.setRawField(h.keys.accessToken(t.record.tokenHash), field, value);
        expect(await store.lookupToken(t.record.tokenHash)).toEqual({ user: null, oauth: 'corrupt' });
        expect(await reasonOf(t.record.tokenHash)).toBe('corrupt');
      });

      it('createAccessToken for a deleted client answers client_revoked and stores nothing', async () => {
        await store.createClient(client('c-gone').record);
        expect(await store.deleteClient('c-gone', clock.now())).not.toBeNull();
        const t = accessToken('c-gone');
        expect(await store.createAccessToken(t.record)).toBe('client_revoked');
        expect(await store.lookupToken(t.record.tokenHash)).toEqual({ user: null, oauth: null });
      });

      it('an OAuth token expires with the injected clock', async () => {
        await store.createClient(client('c-exp').record);
        const t = accessToken('c-exp', { expiresAt: clock.now() + 120_000 });
        expect(await store.createAccessToken(t.record)).toBe('ok');
        clock.set(t.record.expiresAt - 1);
        expect(await reasonOf(t.record.tokenHash)).toBe('ok');
        clock.set(t.record.expiresAt);
        const found = await store.lookupToken(t.record.tokenHash);
        const expected = found.oauth ? 'expired' : 'unknown';
        expect(await reasonOf(t.record.tokenHash)).toBe(expected);
      });

      it('revokeAccessToken: false when unknown; true when known, sets revokedAt once, token rejected', async () => {
        expect(await store.revokeAccessToken(hashToken(generateToken()), clock.now())).toBe(false);
        await store.createClient(client('c-rev').record);
        const t = accessToken('c-rev');
        const other = accessToken('c-rev');
        expect(await store.createAccessToken(t.record)).toBe('ok');
        expect(await store.createAccessToken(other.record)).toBe('ok');
        const first = clock.now();
        expect(await store.revokeAccessToken(t.record.tokenHash, first)).toBe(true);
        expect(await reasonOf(t.record.tokenHash)).toBe('revoked');
        expect((await h.rawHash(h.keys.accessToken(t.record.tokenHash)))?.revokedAt).toBe(String(first));
        clock.advance(5000);
        expect(await store.revokeAccessToken(t.record.tokenHash, clock.now())).toBe(true);
        expect((await h.rawHash(h.keys.accessToken(t.record.tokenHash)))?.revokedAt).toBe(String(first));
        expect(await reasonOf(other.record.tokenHash)).toBe('ok');
        expect(clientRead(await store.getClient('c-rev'))?.revokedAt).toBeUndefined();
      });
    });

    describe('deleteClient', () => {
      it('returns null for an unknown client and creates nothing', async () => {
        expect(await store.deleteClient('c-unknown', clock.now())).toBeNull();
        expect(await store.getClient('c-unknown')).toBeNull();
        expect(await h.rawHash(h.keys.client('c-unknown'))).toBeNull();
      });

      it('revokes the client and all its tokens with exact counts, idempotently, leaving other clients alone', async () => {
        await store.createClient(client('c-del').record);
        await store.createClient(client('c-keep').record);
        const mine = [accessToken('c-del'), accessToken('c-del'), accessToken('c-del')];
        for (const t of mine) expect(await store.createAccessToken(t.record)).toBe('ok');
        // One access + refresh pair of a family, and one access token revoked before the delete.
        const familyAccess = accessToken('c-del', { familyId: 'fam-1' });
        const refresh = refreshToken('c-del', 'fam-1');
        expect(await store.issueTokens(familyAccess.record, refresh.record)).toBe('ok');
        const preRevoked = accessToken('c-del');
        expect(await store.createAccessToken(preRevoked.record)).toBe('ok');
        const preRevokedAt = clock.now() - 1000;
        expect(await store.revokeAccessToken(preRevoked.record.tokenHash, preRevokedAt)).toBe(true);
        const theirs = [accessToken('c-keep'), accessToken('c-keep')];
        for (const t of theirs) expect(await store.createAccessToken(t.record)).toBe('ok');
        const theirRefresh = refreshToken('c-keep', 'fam-2');
        const theirFamilyAccess = accessToken('c-keep', { familyId: 'fam-2' });
        expect(await store.issueTokens(theirFamilyAccess.record, theirRefresh.record)).toBe('ok');
        for (const t of [...mine, familyAccess]) expect(await reasonOf(t.record.tokenHash)).toBe('ok');

        clock.advance(1000);
        const now = clock.now();
        const result = await store.deleteClient('c-del', now);
        expect(result).toEqual({ clientId: 'c-del', revokedAt: now, accessTokensRevoked: 4, refreshTokensRevoked: 1 });

        expect(clientRead(await store.getClient('c-del'))?.revokedAt).toBe(now);
        expect((await h.rawHash(h.keys.client('c-del')))?.revokedAt).toBe(String(now));
        for (const t of [...mine, familyAccess]) {
          expect(await reasonOf(t.record.tokenHash)).toBe('revoked');
          expect((await h.rawHash(h.keys.accessToken(t.record.tokenHash)))?.revokedAt).toBe(String(now));
        }
        expect((await refreshOf(refresh.record.tokenHash))?.revokedAt).toBe(now);
        // An already revoked token keeps its own revokedAt and is not counted again.
        expect((await h.rawHash(h.keys.accessToken(preRevoked.record.tokenHash)))?.revokedAt).toBe(String(preRevokedAt));
        expect(await reasonOf(preRevoked.record.tokenHash)).toBe('revoked');

        // The other client and its tokens are untouched.
        expect(clientRead(await store.getClient('c-keep'))?.revokedAt).toBeUndefined();
        for (const t of [...theirs, theirFamilyAccess]) {
          expect(await reasonOf(t.record.tokenHash)).toBe('ok');
          expect((await h.rawHash(h.keys.accessToken(t.record.tokenHash)))?.revokedAt).toBeUndefined();
        }
        expect((await refreshOf(theirRefresh.record.tokenHash))?.revokedAt).toBeUndefined();
        const fresh = accessToken('c-keep');
        expect(await store.createAccessToken(fresh.record)).toBe('ok');

        // Idempotent: same revokedAt, nothing new revoked.
        clock.advance(60_000);
        expect(await store.deleteClient('c-del', clock.now())).toEqual({
          clientId: 'c-del',
          revokedAt: now,
          accessTokensRevoked: 0,
          refreshTokensRevoked: 0,
        });
        expect(clientRead(await store.getClient('c-del'))?.revokedAt).toBe(now);
        for (const t of [...mine, familyAccess]) expect(await reasonOf(t.record.tokenHash)).toBe('revoked');

        expect(await store.createAccessToken(accessToken('c-del').record)).toBe('client_revoked');
        expect(await store.issueTokens(accessToken('c-del').record, refreshToken('c-del', 'fam-3').record)).toBe('client_revoked');
        // The deleted client is still listed (with its revokedAt) so operators can see it.
        const listed = await store.listClients();
        expect(listed.map((c) => [c.clientId, c.revokedAt])).toEqual([
          ['c-del', now],
          ['c-keep', undefined],
        ]);
      });

      it('a client without tokens is deleted with zero counts', async () => {
        await store.createClient(client('c-empty').record);
        const now = clock.now();
        expect(await store.deleteClient('c-empty', now)).toEqual({
          clientId: 'c-empty',
          revokedAt: now,
          accessTokensRevoked: 0,
          refreshTokensRevoked: 0,
        });
      });

      it('race: deleteClient concurrent with 50 createAccessToken calls leaves no working token (5 rounds)', async () => {
        for (let round = 0; round < 5; round++) {
          const clientId = `c-race-${round}`;
          await store.createClient(client(clientId).record);
          // Some tokens exist before the race starts.
          const before = [accessToken(clientId), accessToken(clientId)];
          for (const t of before) expect(await store.createAccessToken(t.record)).toBe('ok');

          const tokens = Array.from({ length: 50 }, () => accessToken(clientId));
          // Opens whatever a store needs for a delete (Redis: its transaction connection), so the
          // race below is between the operations themselves, not against a connection set-up.
          expect(await store.deleteClient(`c-warm-up-${round}`, clock.now())).toBeNull();

          const outcomes: string[] = new Array<string>(50);
          const deleteAt = [0, 7, 15, 25, 40][round]!;
          let fired = 0;
          let deletion: Promise<Awaited<ReturnType<TokenStore['deleteClient']>>> | undefined;
          const fire = async (i: number) => {
            if (fired++ === deleteAt) deletion = store.deleteClient(clientId, clock.now());
            outcomes[i] = await store.createAccessToken(tokens[i]!.record);
          };
          let pending: Array<Promise<void>>;
          if (round % 2 === 0) {
            // Ten workers, five sequential creates each: creates keep arriving while a multi-step
            // delete (WATCH, reads, MULTI/EXEC, retries) is in progress.
            pending = Array.from({ length: 10 }, async (_, w) => {
              for (let j = 0; j < 5; j++) await fire(w * 5 + j);
            });
          } else {
            // All fired at once, the delete in the middle of the burst.
            pending = tokens.map((_, i) => fire(i));
          }
          deletion ??= store.deleteClient(clientId, clock.now());
          const [result] = await Promise.all([deletion, ...pending]);
          for (const o of outcomes) expect(['ok', 'client_revoked']).toContain(o);
          expect(result).not.toBeNull();

          const okTokens = tokens.filter((_, i) => outcomes[i] === 'ok');
          const refused = tokens.filter((_, i) => outcomes[i] !== 'ok');
          // The key property: zero tokens of the deleted client validate.
          for (const t of [...before, ...tokens]) {
            const reason = await reasonOf(t.record.tokenHash);
            expect(reason).not.toBe('ok');
          }
          for (const t of [...before, ...okTokens]) expect(await reasonOf(t.record.tokenHash)).toBe('revoked');
          for (const t of refused) expect(await store.lookupToken(t.record.tokenHash)).toEqual({ user: null, oauth: null });
          // Every token that was stored is one the delete revoked: none slipped in after it.
          expect(result!.accessTokensRevoked).toBe(before.length + okTokens.length);
          expect(await store.createAccessToken(accessToken(clientId).record)).toBe('client_revoked');
        }
      });
      it('deleteClient completes while tokens keep being requested for the client (no starvation)', async () => {
        const clientId = 'c-stream';
        await store.createClient(client(clientId).record);
        expect(await store.deleteClient('c-warm-up', clock.now())).toBeNull();
        const issued: Array<{ tokenHash: string; outcome: string }> = [];
        let settled = false;
        // Ten callers requesting tokens back to back, as a client hammering the token endpoint would.
        const workers = Array.from({ length: 10 }, async () => {
          while (!settled && issued.length < 3000) {
            const t = accessToken(clientId);
            issued.push({ tokenHash: t.record.tokenHash, outcome: await store.createAccessToken(t.record) });
          }
        });
        const now = clock.now();
        const deletion = store.deleteClient(clientId, now).finally(() => {
          settled = true;
        });
        const [result] = await Promise.all([deletion, ...workers]);
        const ok = issued.filter((i) => i.outcome === 'ok');
        expect(result).toMatchObject({ clientId, revokedAt: now, accessTokensRevoked: ok.length });
        for (const i of issued) {
          expect(['ok', 'client_revoked']).toContain(i.outcome);
          expect(await reasonOf(i.tokenHash)).toBe(i.outcome === 'ok' ? 'revoked' : 'unknown');
        }
        expect(await store.createAccessToken(accessToken(clientId).record)).toBe('client_revoked');
      });
    });

    describe('refresh tokens', () => {
      async function family(clientId: string, familyId: string) {
        const access = accessToken(clientId, { familyId });
        const refresh = refreshToken(clientId, familyId);
        expect(await store.issueTokens(access.record, refresh.record)).toBe('ok');
        return { access, refresh };
      }

      it('issueTokens stores both; getRefreshToken returns the record; unknown is null', async () => {
        await store.createClient(client('c-rt').record);
        const { access, refresh } = await family('c-rt', 'fam-a');
        expect(await reasonOf(access.record.tokenHash)).toBe('ok');
        expect(await store.getRefreshToken(refresh.record.tokenHash)).toEqual(refresh.record);
        expect(await store.getRefreshToken(hashToken(generateToken()))).toBeNull();
        // A hand edit that leaves no family (or no well-formed expiry) reads as corrupt, never as a token.
        await h.setRawField(h.keys.refreshToken(refresh.record.tokenHash), 'familyId', '');
        expect(await store.getRefreshToken(refresh.record.tokenHash)).toBe('corrupt');
        // A refresh token is not an access token: it never validates at /mcp.
        expect(await reasonOf(refresh.record.tokenHash)).toBe('unknown');
        expect(await store.issueTokens(accessToken('nobody').record, refreshToken('nobody', 'fam-x').record)).toBe('client_not_found');
      });

      it('rotation: the old token is marked rotated, the new pair works in the same family', async () => {
        await store.createClient(client('c-rot').record);
        const first = await family('c-rot', 'fam-b');
        const next = { access: accessToken('c-rot', { familyId: 'fam-b' }), refresh: refreshToken('c-rot', 'fam-b') };
        clock.advance(1000);
        expect(
          await store.rotateRefreshToken(first.refresh.record.tokenHash, 'c-rot', clock.now(), next.access.record, next.refresh.record),
        ).toBe('ok');
        expect((await refreshOf(first.refresh.record.tokenHash))?.rotatedAt).toBe(clock.now());
        expect(await reasonOf(next.access.record.tokenHash)).toBe('ok');
        expect((await refreshOf(next.refresh.record.tokenHash))?.familyId).toBe('fam-b');
        // Rotation does not revoke the access token issued with the old refresh token.
        expect(await reasonOf(first.access.record.tokenHash)).toBe('ok');
      });

      it('reuse of a rotated token revokes the whole family and answers reused', async () => {
        await store.createClient(client('c-reuse').record);
        const first = await family('c-reuse', 'fam-c');
        const second = { access: accessToken('c-reuse', { familyId: 'fam-c' }), refresh: refreshToken('c-reuse', 'fam-c') };
        expect(
          await store.rotateRefreshToken(
            first.refresh.record.tokenHash,
            'c-reuse',
            clock.now(),
            second.access.record,
            second.refresh.record,
          ),
        ).toBe('ok');
        const other = await family('c-reuse', 'fam-other');
        clock.advance(1000);
        const attempt = { access: accessToken('c-reuse', { familyId: 'fam-c' }), refresh: refreshToken('c-reuse', 'fam-c') };
        expect(
          await store.rotateRefreshToken(
            first.refresh.record.tokenHash,
            'c-reuse',
            clock.now(),
            attempt.access.record,
            attempt.refresh.record,
          ),
        ).toBe('reused');
        for (const hash of [first.access.record.tokenHash, second.access.record.tokenHash]) expect(await reasonOf(hash)).toBe('revoked');
        expect((await refreshOf(second.refresh.record.tokenHash))?.revokedAt).toBe(clock.now());
        // Nothing of the attempt was stored, and another family of the same client is untouched.
        expect(await reasonOf(attempt.access.record.tokenHash)).toBe('unknown');
        expect(await store.getRefreshToken(attempt.refresh.record.tokenHash)).toBeNull();
        expect(await reasonOf(other.access.record.tokenHash)).toBe('ok');
        // The revoked current token cannot be rotated either.
        const after = { access: accessToken('c-reuse', { familyId: 'fam-c' }), refresh: refreshToken('c-reuse', 'fam-c') };
        expect(
          await store.rotateRefreshToken(
            second.refresh.record.tokenHash,
            'c-reuse',
            clock.now(),
            after.access.record,
            after.refresh.record,
          ),
        ).toBe('invalid');
      });

      it('two concurrent rotations of one token: exactly one ok, and the family ends revoked', async () => {
        await store.createClient(client('c-conc').record);
        const first = await family('c-conc', 'fam-d');
        const attempts = Array.from({ length: 8 }, () => ({
          access: accessToken('c-conc', { familyId: 'fam-d' }),
          refresh: refreshToken('c-conc', 'fam-d'),
        }));
        const outcomes = await Promise.all(
          attempts.map((a) =>
            store.rotateRefreshToken(first.refresh.record.tokenHash, 'c-conc', clock.now(), a.access.record, a.refresh.record),
          ),
        );
        expect(outcomes.filter((o) => o === 'ok')).toHaveLength(1);
        // The first loser finds the token rotated and revokes the family; later losers find it revoked.
        expect(outcomes.filter((o) => o === 'reused')).toHaveLength(1);
        expect(outcomes.filter((o) => o === 'invalid')).toHaveLength(6);
        for (const a of attempts) expect(await reasonOf(a.access.record.tokenHash)).not.toBe('ok');
      });

      describe('grace window: the client racing itself gets working tokens, a late replay still revokes', () => {
        const GRACE = 5_000;
        const pairOf = (clientId: string, familyId: string) => ({
          access: accessToken(clientId, { familyId }),
          refresh: refreshToken(clientId, familyId),
        });
        const rotate = (oldHash: string, clientId: string, p: ReturnType<typeof pairOf>, now = clock.now(), graceMs = GRACE) =>
          store.rotateRefreshToken(oldHash, clientId, now, p.access.record, p.refresh.record, graceMs);

        it('the rotation keeps the sealed successor; a presentation within the window answers grace and stores nothing, however often; the window runs from the first rotation, a late replay revokes everything', async () => {
          await store.createClient(client('c-grace').record);
          const first = await family('c-grace', 'fam-g');
          const oldHash = first.refresh.record.tokenHash;
          const rotatedAt = clock.now();
          const second = pairOf('c-grace', 'fam-g');
          expect(
            await store.rotateRefreshToken(
              oldHash,
              'c-grace',
              clock.now(),
              second.access.record,
              second.refresh.record,
              GRACE,
              'sealed-successor',
            ),
          ).toBe('ok');
          expect(await store.getRefreshToken(oldHash)).toMatchObject({ rotatedAt, successor: 'sealed-successor' });
          clock.advance(GRACE - 1);
          // Presented again and again within the window: `grace` each time, no new token stored.
          for (let i = 0; i < 3; i++) {
            const racing = pairOf('c-grace', 'fam-g');
            expect(await rotate(oldHash, 'c-grace', racing)).toBe('grace');
            expect(await reasonOf(racing.access.record.tokenHash)).toBe('unknown');
            expect(await store.getRefreshToken(racing.refresh.record.tokenHash)).toBeNull();
          }
          // The successor works and is unrotated; the grace answers did not move the window.
          expect(await reasonOf(second.access.record.tokenHash)).toBe('ok');
          expect((await refreshOf(second.refresh.record.tokenHash))?.rotatedAt).toBeUndefined();
          expect(await store.getRefreshToken(oldHash)).toMatchObject({ rotatedAt, successor: 'sealed-successor' });

          clock.advance(1);
          const late = pairOf('c-grace', 'fam-g');
          expect(await rotate(oldHash, 'c-grace', late)).toBe('reused');
          for (const p of [first, second]) expect(await reasonOf(p.access.record.tokenHash)).toBe('revoked');
          expect((await refreshOf(second.refresh.record.tokenHash))?.revokedAt).toBe(clock.now());
          expect(await reasonOf(late.access.record.tokenHash)).toBe('unknown');
          expect(await store.getRefreshToken(late.refresh.record.tokenHash)).toBeNull();
          // Now revoked, the old token gets nothing, even with a window again.
          expect(await rotate(oldHash, 'c-grace', pairOf('c-grace', 'fam-g'), clock.now(), 3_600_000)).toBe('invalid');
        });

        it('truly concurrent rotations of one token: one ok (its pair stored), every other one grace with nothing stored, the family alive', async () => {
          await store.createClient(client('c-gconc').record);
          const first = await family('c-gconc', 'fam-gc');
          const attempts = Array.from({ length: 8 }, () => pairOf('c-gconc', 'fam-gc'));
          const outcomes = await Promise.all(attempts.map((a) => rotate(first.refresh.record.tokenHash, 'c-gconc', a)));
          expect(outcomes.filter((o) => o === 'ok')).toHaveLength(1);
          expect(outcomes.filter((o) => o === 'grace')).toHaveLength(7);
          for (const [i, a] of attempts.entries()) {
            if (outcomes[i] === 'grace') {
              expect(await reasonOf(a.access.record.tokenHash)).toBe('unknown');
              expect(await store.getRefreshToken(a.refresh.record.tokenHash)).toBeNull();
            } else {
              expect(await reasonOf(a.access.record.tokenHash)).toBe('ok');
              expect(await store.getRefreshToken(a.refresh.record.tokenHash)).toMatchObject({ familyId: 'fam-gc', clientId: 'c-gconc' });
            }
          }
          expect(await reasonOf(first.access.record.tokenHash)).toBe('ok');
          // After the window the replay is theft, as before: the family goes.
          clock.advance(GRACE);
          expect(await rotate(first.refresh.record.tokenHash, 'c-gconc', pairOf('c-gconc', 'fam-gc'))).toBe('reused');
          expect(await reasonOf(first.access.record.tokenHash)).toBe('revoked');
        });

        it('graceMs 0 turns the window off: the second presentation, even at the same instant, revokes the family', async () => {
          await store.createClient(client('c-g0').record);
          const first = await family('c-g0', 'fam-g0');
          const second = pairOf('c-g0', 'fam-g0');
          expect(await rotate(first.refresh.record.tokenHash, 'c-g0', second, clock.now(), 0)).toBe('ok');
          expect(await rotate(first.refresh.record.tokenHash, 'c-g0', pairOf('c-g0', 'fam-g0'), clock.now(), 0)).toBe('reused');
          expect(await reasonOf(second.access.record.tokenHash)).toBe('revoked');
        });

        it('no grace for a revoked client, a deleted client or a revoked family: nothing is stored', async () => {
          await store.createClient(client('c-grev').record);
          const first = await family('c-grev', 'fam-gr');
          expect(await rotate(first.refresh.record.tokenHash, 'c-grev', pairOf('c-grev', 'fam-gr'))).toBe('ok');
          // The client revoked while its tokens are not (the store must check the client itself).
          await h.setRawField(h.keys.client('c-grev'), 'revokedAt', String(clock.now()));
          const refused = pairOf('c-grev', 'fam-gr');
          expect(await rotate(first.refresh.record.tokenHash, 'c-grev', refused)).toBe('client_revoked');
          expect(await reasonOf(refused.access.record.tokenHash)).toBe('unknown');
          expect(await store.getRefreshToken(refused.refresh.record.tokenHash)).toBeNull();

          await store.createClient(client('c-gdel').record);
          const other = await family('c-gdel', 'fam-gd');
          expect(await rotate(other.refresh.record.tokenHash, 'c-gdel', pairOf('c-gdel', 'fam-gd'))).toBe('ok');
          await store.deleteClient('c-gdel', clock.now());
          const afterDelete = pairOf('c-gdel', 'fam-gd');
          expect(await rotate(other.refresh.record.tokenHash, 'c-gdel', afterDelete)).toBe('invalid');
          expect(await reasonOf(afterDelete.access.record.tokenHash)).toBe('unknown');

          await store.createClient(client('c-gfam').record);
          const third = await family('c-gfam', 'fam-gf');
          const next = pairOf('c-gfam', 'fam-gf');
          expect(await rotate(third.refresh.record.tokenHash, 'c-gfam', next)).toBe('ok');
          expect(await store.revokeRefreshFamily(next.refresh.record.tokenHash, clock.now())).toBe(true);
          const afterRevoke = pairOf('c-gfam', 'fam-gf');
          expect(await rotate(third.refresh.record.tokenHash, 'c-gfam', afterRevoke)).toBe('invalid');
          expect(await reasonOf(afterRevoke.access.record.tokenHash)).toBe('unknown');
        });

        it('a clock behind the rotating one cannot widen the window, and an unreadable rotatedAt is outside it', async () => {
          await store.createClient(client('c-gskew').record);
          const first = await family('c-gskew', 'fam-gs');
          const t = clock.now();
          expect(await rotate(first.refresh.record.tokenHash, 'c-gskew', pairOf('c-gskew', 'fam-gs'), t)).toBe('ok');
          expect(await rotate(first.refresh.record.tokenHash, 'c-gskew', pairOf('c-gskew', 'fam-gs'), t - (GRACE - 1))).toBe('grace');
          expect(await rotate(first.refresh.record.tokenHash, 'c-gskew', pairOf('c-gskew', 'fam-gs'), t - GRACE)).toBe('reused');

          const other = await family('c-gskew', 'fam-gs2');
          expect(await rotate(other.refresh.record.tokenHash, 'c-gskew', pairOf('c-gskew', 'fam-gs2'))).toBe('ok');
          await h.setRawField(h.keys.refreshToken(other.refresh.record.tokenHash), 'rotatedAt', 'soon');
          expect(await rotate(other.refresh.record.tokenHash, 'c-gskew', pairOf('c-gskew', 'fam-gs2'))).toBe('reused');
          expect(await reasonOf(other.access.record.tokenHash)).toBe('revoked');
        });
      });

      it('rotation is refused for another client, an unknown token, and a deleted client', async () => {
        await store.createClient(client('c-own').record);
        await store.createClient(client('c-thief').record);
        const first = await family('c-own', 'fam-e');
        const next = () => ({ access: accessToken('c-own', { familyId: 'fam-e' }), refresh: refreshToken('c-own', 'fam-e') });
        let n = next();
        expect(
          await store.rotateRefreshToken(first.refresh.record.tokenHash, 'c-thief', clock.now(), n.access.record, n.refresh.record),
        ).toBe('invalid');
        n = next();
        expect(await store.rotateRefreshToken(hashToken(generateToken()), 'c-own', clock.now(), n.access.record, n.refresh.record)).toBe(
          'invalid',
        );
        await store.deleteClient('c-own', clock.now());
        n = next();
        expect(
          await store.rotateRefreshToken(first.refresh.record.tokenHash, 'c-own', clock.now(), n.access.record, n.refresh.record),
        ).toBe('invalid');
        expect(await reasonOf(n.access.record.tokenHash)).toBe('unknown');
      });

      it('revokeRefreshFamily revokes the token and every token of its family; false when unknown', async () => {
        await store.createClient(client('c-rev').record);
        const first = await family('c-rev', 'fam-f');
        const second = { access: accessToken('c-rev', { familyId: 'fam-f' }), refresh: refreshToken('c-rev', 'fam-f') };
        expect(
          await store.rotateRefreshToken(first.refresh.record.tokenHash, 'c-rev', clock.now(), second.access.record, second.refresh.record),
        ).toBe('ok');
        expect(await store.revokeRefreshFamily(hashToken(generateToken()), clock.now())).toBe(false);
        expect(await store.revokeRefreshFamily(second.refresh.record.tokenHash, clock.now())).toBe(true);
        for (const hash of [first.access.record.tokenHash, second.access.record.tokenHash]) expect(await reasonOf(hash)).toBe('revoked');
        expect((await refreshOf(second.refresh.record.tokenHash))?.revokedAt).toBe(clock.now());
      });

      it('touchClient gives a client a lifetime: it disappears when not touched again', async () => {
        await store.createClient(client('c-ttl', { source: 'dcr' }).record);
        await store.touchClient('c-ttl', 60_000);
        expect(await store.getClient('c-ttl')).not.toBeNull();
        await store.touchClient('c-missing', 60_000);
        expect(await store.getClient('c-missing')).toBeNull();
      });
    });

    describe('device authorizations (RFC 8628)', () => {
      const user = { subject: 'idp-user-1', issuer: 'https://idp.example.com/', email: 'ada@example.com', groups: ['eng'] };
      const RETAIN = 600_000;

      function device(clientId = 'c-dev', overrides: Partial<DeviceAuthorizationRecord> = {}): DeviceAuthorizationRecord {
        const now = clock.now();
        return {
          deviceCodeHash: hashToken(generateToken()),
          userCodeHash: hashToken(generateToken()),
          clientId,
          scope: 'mcp:read',
          interval: 5,
          createdAt: now,
          expiresAt: now + 600_000,
          ...overrides,
        };
      }
      const bounds = (address = '198.51.100.7', perAddress = 10, total = 100) => ({ address, perAddress, total, now: clock.now() });

      it('a stored authorization is found by its user code while pending; approving it records the user and forgets the user code', async () => {
        const r = device();
        expect(await store.putDeviceAuthorization(r, RETAIN, bounds())).toEqual({ stored: true });
        expect(h.keys.deviceAuthorization(r.deviceCodeHash)).toContain('{oauth}');
        expect(h.keys.deviceUserCode(r.userCodeHash)).toContain('{oauth}');
        expect(await store.findDeviceAuthorization(r.userCodeHash)).toEqual({ ...r, status: 'pending' });
        expect(await store.findDeviceAuthorization(hashToken('another code'))).toBeNull();
        expect(await store.decideDeviceAuthorization(r.deviceCodeHash, clock.now(), user)).toBe(true);
        // Decided once: the code finds nothing, and a second decision changes nothing.
        expect(await store.findDeviceAuthorization(r.userCodeHash)).toBeNull();
        expect(await store.decideDeviceAuthorization(r.deviceCodeHash, clock.now(), undefined)).toBe(false);
        expect(await h.rawHash(h.keys.deviceAuthorization(r.deviceCodeHash))).toMatchObject({
          status: 'approved',
          subject: user.subject,
          issuer: user.issuer,
        });
      });

      it('polls: pending, then slow_down when sooner than the interval (which grows by 5 s), then the approval is taken once', async () => {
        const r = device();
        await store.putDeviceAuthorization(r, RETAIN, bounds());
        expect(await store.pollDeviceAuthorization(r.deviceCodeHash, 'c-dev', clock.now())).toEqual({ outcome: 'pending' });
        clock.advance(4_999);
        expect(await store.pollDeviceAuthorization(r.deviceCodeHash, 'c-dev', clock.now())).toEqual({ outcome: 'slow_down', interval: 10 });
        clock.advance(9_999);
        expect(await store.pollDeviceAuthorization(r.deviceCodeHash, 'c-dev', clock.now())).toEqual({ outcome: 'slow_down', interval: 15 });
        clock.advance(15_000);
        expect(await store.pollDeviceAuthorization(r.deviceCodeHash, 'c-dev', clock.now())).toEqual({ outcome: 'pending' });
        // Another client's poll is invalid and does not count as a poll.
        expect(await store.pollDeviceAuthorization(r.deviceCodeHash, 'c-other', clock.now())).toEqual({ outcome: 'invalid' });
        await store.decideDeviceAuthorization(r.deviceCodeHash, clock.now(), user);
        clock.advance(15_000);
        const approved = await store.pollDeviceAuthorization(r.deviceCodeHash, 'c-dev', clock.now());
        expect(approved).toMatchObject({
          outcome: 'approved',
          authorization: { clientId: 'c-dev', scope: 'mcp:read', user, status: 'redeemed' },
        });
        clock.advance(15_000);
        expect(await store.pollDeviceAuthorization(r.deviceCodeHash, 'c-dev', clock.now())).toEqual({ outcome: 'invalid' });
      });

      it('concurrent polls of an approved authorization: exactly one takes it (the others find it redeemed)', async () => {
        const r = device();
        await store.putDeviceAuthorization(r, RETAIN, bounds());
        await store.decideDeviceAuthorization(r.deviceCodeHash, clock.now(), user);
        const polls = await Promise.all(
          Array.from({ length: 8 }, () => store.pollDeviceAuthorization(r.deviceCodeHash, 'c-dev', clock.now())),
        );
        expect(polls.filter((p) => p.outcome === 'approved')).toHaveLength(1);
        expect(polls.filter((p) => p.outcome === 'invalid')).toHaveLength(7);
      });

      it('a denied authorization polls as denied; an expired one as expired, and cannot be decided', async () => {
        const denied = device();
        await store.putDeviceAuthorization(denied, RETAIN, bounds());
        expect(await store.decideDeviceAuthorization(denied.deviceCodeHash, clock.now(), undefined)).toBe(true);
        expect(await store.pollDeviceAuthorization(denied.deviceCodeHash, 'c-dev', clock.now())).toEqual({ outcome: 'denied' });
        const late = device('c-dev', { expiresAt: clock.now() + 1_000 });
        await store.putDeviceAuthorization(late, RETAIN, bounds());
        clock.advance(1_000);
        expect(await store.decideDeviceAuthorization(late.deviceCodeHash, clock.now(), user)).toBe(false);
        expect(await store.pollDeviceAuthorization(late.deviceCodeHash, 'c-dev', clock.now())).toEqual({ outcome: 'expired' });
        expect(await store.pollDeviceAuthorization(hashToken('unknown'), 'c-dev', clock.now())).toEqual({ outcome: 'invalid' });
      });

      it('bounded per address and in total, and a user code held by a waiting authorization is refused; nothing is stored when refused', async () => {
        const first = device();
        expect(await store.putDeviceAuthorization(first, RETAIN, bounds('198.51.100.8', 2, 3))).toEqual({ stored: true });
        expect(await store.putDeviceAuthorization(device(), RETAIN, bounds('198.51.100.8', 2, 3))).toEqual({ stored: true });
        const refused = device();
        expect(await store.putDeviceAuthorization(refused, RETAIN, bounds('198.51.100.8', 2, 3))).toEqual({
          stored: false,
          holder: 'address',
          retryAt: first.expiresAt,
        });
        expect(await h.rawHash(h.keys.deviceAuthorization(refused.deviceCodeHash))).toBeNull();
        expect(await store.putDeviceAuthorization(device(), RETAIN, bounds('198.51.100.9', 2, 3))).toEqual({ stored: true });
        expect(await store.putDeviceAuthorization(device(), RETAIN, bounds('198.51.100.10', 2, 3))).toEqual({
          stored: false,
          holder: 'total',
          retryAt: first.expiresAt,
        });
        const sameCode = device('c-dev', { userCodeHash: first.userCodeHash });
        expect(await store.putDeviceAuthorization(sameCode, RETAIN, bounds('198.51.100.11', 0, 0))).toEqual({
          stored: false,
          holder: 'user_code',
        });
        expect(await h.rawHash(h.keys.deviceAuthorization(sameCode.deviceCodeHash))).toBeNull();
      });

      it('a hand-edited status reads as corrupt', async () => {
        const r = device();
        await store.putDeviceAuthorization(r, RETAIN, bounds());
        await h.setRawField(h.keys.deviceAuthorization(r.deviceCodeHash), 'status', 'maybe');
        expect(await store.findDeviceAuthorization(r.userCodeHash)).toBe('corrupt');
      });
    });

    describe('browser sign-in: pending requests and authorization codes', () => {
      const user = { subject: 'idp-user-1', issuer: 'https://idp.example.com/', email: 'ada@example.com', groups: ['mcp-users', 'eng'] };

      function code(clientId: string, overrides: Partial<AuthorizationCodeRecord> = {}): { raw: string; record: AuthorizationCodeRecord } {
        const raw = generateToken();
        const now = clock.now();
        return {
          raw,
          record: {
            codeHash: hashToken(raw),
            clientId,
            redirectUri: 'http://127.0.0.1:9999/cb',
            codeChallenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
            resource: 'https://mcp.example.com/mcp',
            scope: 'mcp:read',
            user,
            createdAt: now,
            expiresAt: now + 60_000,
            ...overrides,
          },
        };
      }

      function pairFor(clientId: string, familyId: string) {
        const refresh = refreshToken(clientId, familyId);
        refresh.record.user = user;
        return { access: accessToken(clientId, { familyId, user }), refresh };
      }

      it('a pending request is taken once: the second take finds nothing; an expired one is gone', async () => {
        const handle = hashToken(generateToken());
        await store.putAuthorizationRequest(handle, pendingRequest('c-1', 'xyz'), clock.now() + 600_000);
        expect(h.keys.authorizationRequest(handle)).toContain('{oauth}');
        expect(await store.takeAuthorizationRequest(handle)).toEqual(pendingRequest('c-1', 'xyz'));
        expect(await store.takeAuthorizationRequest(handle)).toBeNull();
        expect(await h.rawHash(h.keys.authorizationRequest(handle))).toBeNull();
        const stale = hashToken(generateToken());
        await store.putAuthorizationRequest(stale, pendingRequest(), clock.now() - 1);
        expect(await store.takeAuthorizationRequest(stale)).toBeNull();
      });

      it('each stage of a pending request comes back as it was put; a hand edit to an unknown stage reads as corrupt, and is taken all the same', async () => {
        const user = { subject: 'idp-user-1', issuer: 'https://idp.example.com/', email: 'ada@example.com', groups: ['eng'] };
        const base = pendingRequest('c-1', 'xyz', 'mcp:read');
        const stages: AuthorizationRequestRecord[] = [
          base,
          { ...base, stage: 'idp', nonce: 'n-1', codeVerifier: 'v-1', consent: 'remembered', remember: false },
          { ...base, stage: 'idp', nonce: 'n-2', codeVerifier: 'v-2', consent: 'given', remember: true },
          { ...base, stage: 'user-consent', user },
          { stage: 'account', browserHash: base.browserHash, nonce: 'n-3', codeVerifier: 'v-3' },
        ];
        for (const record of stages) {
          const handle = hashToken(generateToken());
          await store.putAuthorizationRequest(handle, record, clock.now() + 600_000);
          expect(await store.takeAuthorizationRequest(handle)).toEqual(record);
        }
        const handle = hashToken(generateToken());
        await store.putAuthorizationRequest(handle, base, clock.now() + 600_000);
        await h.setRawField(h.keys.authorizationRequest(handle), 'stage', 'done');
        expect(await store.takeAuthorizationRequest(handle)).toBe('corrupt');
        expect(await store.takeAuthorizationRequest(handle)).toBeNull();
      });

      it('pending sign-ins are bounded per client address and per client: over a bound nothing is stored, and a slot frees when its request expires', async () => {
        const put = (address: string, clientId: string, bounds = { perAddress: 3, perClient: 4 }) => {
          const handle = hashToken(generateToken());
          return store
            .putPendingSignIn(handle, pendingRequest(clientId), clock.now() + 600_000, { address, clientId, ...bounds, now: clock.now() })
            .then((outcome) => ({ handle, outcome }));
        };
        const firstAt = clock.now() + 600_000;
        const held = [];
        for (let i = 0; i < 3; i++) held.push(await put('198.51.100.1', 'c-a'));
        expect(held.map((h) => h.outcome)).toEqual(Array(3).fill({ stored: true }));
        expect(h.keys.pendingSignInsByAddress('198.51.100.1')).toContain('{oauth}');
        expect(h.keys.pendingSignInsByClient('c-a')).toContain('{oauth}');
        // The address holds its 3: refused, and nothing stored.
        const refused = await put('198.51.100.1', 'c-a');
        expect(refused.outcome).toEqual({ stored: false, holder: 'address', retryAt: firstAt });
        expect(await store.takeAuthorizationRequest(refused.handle)).toBeNull();
        // Another address may go on for the client, until the client holds its 4.
        expect((await put('198.51.100.2', 'c-a')).outcome).toEqual({ stored: true });
        const full = await put('198.51.100.3', 'c-a');
        expect(full.outcome).toMatchObject({ stored: false, holder: 'client' });
        expect(await store.takeAuthorizationRequest(full.handle)).toBeNull();
        expect((await put('198.51.100.3', 'c-b')).outcome).toEqual({ stored: true });
        // A bound of 0 is no bound.
        expect((await put('198.51.100.1', 'c-c', { perAddress: 0, perClient: 0 })).outcome).toEqual({ stored: true });
        // The held requests are still there to be taken; once they expire, the slots are free again.
        expect(await store.takeAuthorizationRequest(held[0]!.handle)).toEqual(pendingRequest('c-a'));
        clock.advance(600_000);
        expect((await put('198.51.100.1', 'c-a')).outcome).toEqual({ stored: true });
      });

      it('concurrent pending sign-ins from one address: never more stored than the bound', async () => {
        const bounds = { address: '198.51.100.9', clientId: 'c-race', perAddress: 5, perClient: 0, now: clock.now() };
        const outcomes = await Promise.all(
          Array.from({ length: 20 }, () =>
            store.putPendingSignIn(hashToken(generateToken()), pendingRequest('c-race'), clock.now() + 600_000, bounds),
          ),
        );
        expect(outcomes.filter((o) => o.stored)).toHaveLength(5);
      });

      it('two concurrent takes of one pending request: exactly one gets it', async () => {
        const handle = hashToken(generateToken());
        await store.putAuthorizationRequest(handle, pendingRequest(), clock.now() + 600_000);
        const taken = await Promise.all(Array.from({ length: 8 }, () => store.takeAuthorizationRequest(handle)));
        expect(taken.filter((t) => t !== null)).toHaveLength(1);
      });

      it('a code is stored only as its hash with its bindings and user; redeeming issues tokens acting for the user', async () => {
        await store.createClient(client('c-code').record);
        const c = code('c-code');
        await store.putAuthorizationCode(c.record);
        const key = h.keys.authorizationCode(c.record.codeHash);
        expect(key).toContain('{oauth}');
        expect(key).not.toContain(c.raw);
        const raw = await h.rawHash(key);
        expect(raw).toMatchObject({
          clientId: 'c-code',
          redirectUri: 'http://127.0.0.1:9999/cb',
          subject: 'idp-user-1',
          email: 'ada@example.com',
          groups: '["mcp-users","eng"]',
        });
        expect(JSON.stringify(raw)).not.toContain(c.raw);
        expect(await store.getAuthorizationCode(c.record.codeHash)).toEqual(c.record);
        const pair = pairFor('c-code', 'fam-code');
        expect(
          await store.redeemAuthorizationCode(c.record.codeHash, 'c-code', clock.now(), 600_000, pair.access.record, pair.refresh.record),
        ).toBe('ok');
        const d = await decide(pair.access.record.tokenHash);
        expect(d.ok && d.principal).toMatchObject({ kind: 'oauth', subject: 'idp-user-1', clientId: 'c-code' });
        expect(await store.getRefreshToken(pair.refresh.record.tokenHash)).toMatchObject({
          user: { subject: 'idp-user-1' },
          familyId: 'fam-code',
        });
        expect(await store.getAuthorizationCode(c.record.codeHash)).toMatchObject({
          redeemedAt: clock.now(),
          accessTokenHash: pair.access.record.tokenHash,
          familyId: 'fam-code',
        });
        // A hand edit that takes away a binding the redemption checks reads as corrupt, never as a code.
        await h.setRawField(key, 'clientId', '');
        expect(await store.getAuthorizationCode(c.record.codeHash)).toBe('corrupt');
      });

      it('a second redemption answers reused, stores nothing, and revokes what the first issued', async () => {
        await store.createClient(client('c-twice').record);
        const c = code('c-twice');
        await store.putAuthorizationCode(c.record);
        const first = pairFor('c-twice', 'fam-1');
        expect(
          await store.redeemAuthorizationCode(
            c.record.codeHash,
            'c-twice',
            clock.now(),
            600_000,
            first.access.record,
            first.refresh.record,
          ),
        ).toBe('ok');
        // The first family rotated once: the rotated-to tokens are revoked too.
        const rotated = pairFor('c-twice', 'fam-1');
        expect(
          await store.rotateRefreshToken(
            first.refresh.record.tokenHash,
            'c-twice',
            clock.now(),
            rotated.access.record,
            rotated.refresh.record,
          ),
        ).toBe('ok');
        const other = pairFor('c-twice', 'fam-other');
        expect(await store.issueTokens(other.access.record, other.refresh.record)).toBe('ok');
        clock.advance(1000);
        const second = pairFor('c-twice', 'fam-2');
        expect(
          await store.redeemAuthorizationCode(
            c.record.codeHash,
            'c-twice',
            clock.now(),
            600_000,
            second.access.record,
            second.refresh.record,
          ),
        ).toBe('reused');
        for (const hash of [first.access.record.tokenHash, rotated.access.record.tokenHash]) expect(await reasonOf(hash)).toBe('revoked');
        expect((await refreshOf(rotated.refresh.record.tokenHash))?.revokedAt).toBe(clock.now());
        expect(await reasonOf(second.access.record.tokenHash)).toBe('unknown');
        expect(await store.getRefreshToken(second.refresh.record.tokenHash)).toBeNull();
        expect(await reasonOf(other.access.record.tokenHash)).toBe('ok');
      });

      it('a reused code announces what it revoked (its open streams end)', async () => {
        await store.createClient(client('c-announce').record);
        const c = code('c-announce');
        await store.putAuthorizationCode(c.record);
        const first = pairFor('c-announce', 'fam-announce');
        expect(
          await store.redeemAuthorizationCode(
            c.record.codeHash,
            'c-announce',
            clock.now(),
            600_000,
            first.access.record,
            first.refresh.record,
          ),
        ).toBe('ok');
        const heard: RevocationNotice[] = [];
        let wake: (() => void) | undefined;
        const unsubscribe = await store.subscribeRevocations({
          revoked: (notice) => {
            heard.push(notice);
            wake?.();
          },
          missed: () => undefined,
        });
        const again = pairFor('c-announce', 'fam-again');
        expect(
          await store.redeemAuthorizationCode(
            c.record.codeHash,
            'c-announce',
            clock.now(),
            600_000,
            again.access.record,
            again.refresh.record,
          ),
        ).toBe('reused');
        while (heard.length === 0) await new Promise<void>((r) => (wake = r));
        await unsubscribe();
        expect(heard[0]).toEqual({ tokenHashes: [first.access.record.tokenHash], familyIds: ['fam-announce'] });
      });

      it('a code without a refresh token: its access token is revoked on reuse', async () => {
        await store.createClient(client('c-norefresh').record);
        const c = code('c-norefresh');
        await store.putAuthorizationCode(c.record);
        const access = accessToken('c-norefresh', { user });
        expect(await store.redeemAuthorizationCode(c.record.codeHash, 'c-norefresh', clock.now(), 600_000, access.record)).toBe('ok');
        expect(
          await store.redeemAuthorizationCode(
            c.record.codeHash,
            'c-norefresh',
            clock.now(),
            600_000,
            accessToken('c-norefresh', { user }).record,
          ),
        ).toBe('reused');
        expect(await reasonOf(access.record.tokenHash)).toBe('revoked');
      });

      it('redemption is refused for another client, an unknown or expired code, and a deleted client', async () => {
        await store.createClient(client('c-owner').record);
        await store.createClient(client('c-other').record);
        const c = code('c-owner');
        await store.putAuthorizationCode(c.record);
        let pair = pairFor('c-other', 'fam-x');
        expect(
          await store.redeemAuthorizationCode(c.record.codeHash, 'c-other', clock.now(), 600_000, pair.access.record, pair.refresh.record),
        ).toBe('invalid');
        expect(await reasonOf(pair.access.record.tokenHash)).toBe('unknown');
        pair = pairFor('c-owner', 'fam-y');
        expect(
          await store.redeemAuthorizationCode(
            hashToken(generateToken()),
            'c-owner',
            clock.now(),
            600_000,
            pair.access.record,
            pair.refresh.record,
          ),
        ).toBe('invalid');
        clock.advance(60_000);
        expect(
          await store.redeemAuthorizationCode(c.record.codeHash, 'c-owner', clock.now(), 600_000, pair.access.record, pair.refresh.record),
        ).toBe('invalid');
        expect(await reasonOf(pair.access.record.tokenHash)).toBe('unknown');
        const fresh = code('c-owner');
        await store.putAuthorizationCode(fresh.record);
        await store.deleteClient('c-owner', clock.now());
        expect(
          await store.redeemAuthorizationCode(
            fresh.record.codeHash,
            'c-owner',
            clock.now(),
            600_000,
            pair.access.record,
            pair.refresh.record,
          ),
        ).toBe('client_revoked');
        expect(await reasonOf(pair.access.record.tokenHash)).toBe('unknown');
      });

      it('concurrent redemptions of one code: exactly one ok, and nothing issued survives', async () => {
        await store.createClient(client('c-race').record);
        const c = code('c-race');
        await store.putAuthorizationCode(c.record);
        const attempts = Array.from({ length: 8 }, (_, i) => pairFor('c-race', `fam-race-${i}`));
        const outcomes = await Promise.all(
          attempts.map((a) =>
            store.redeemAuthorizationCode(c.record.codeHash, 'c-race', clock.now(), 600_000, a.access.record, a.refresh.record),
          ),
        );
        expect(outcomes.filter((o) => o === 'ok')).toHaveLength(1);
        expect(outcomes.filter((o) => o === 'reused')).toHaveLength(7);
        for (const a of attempts) expect(await reasonOf(a.access.record.tokenHash)).not.toBe('ok');
      });

      it("deleteClient revokes the tokens a code issued, with the client's other tokens", async () => {
        await store.createClient(client('c-del').record);
        const c = code('c-del');
        await store.putAuthorizationCode(c.record);
        const pair = pairFor('c-del', 'fam-del');
        expect(
          await store.redeemAuthorizationCode(c.record.codeHash, 'c-del', clock.now(), 600_000, pair.access.record, pair.refresh.record),
        ).toBe('ok');
        expect(await store.deleteClient('c-del', clock.now())).toMatchObject({ accessTokensRevoked: 1, refreshTokensRevoked: 1 });
        expect(await reasonOf(pair.access.record.tokenHash)).toBe('revoked');
        expect((await refreshOf(pair.refresh.record.tokenHash))?.revokedAt).toBe(clock.now());
      });
    });

    describe('remembered consent approvals', () => {
      const browser = hashToken(generateToken());

      function approval(overrides: Partial<ConsentRecord> = {}): ConsentRecord {
        const now = clock.now();
        return {
          clientId: 'c-consent',
          clientCreatedAt: now - 1000,
          redirectUri: 'http://127.0.0.1:9999/cb',
          issuer: 'https://idp.example.com/',
          subject: 'idp-user-1',
          scope: 'mcp:read',
          approvedAt: now,
          expiresAt: now + 24 * HOUR,
          ...overrides,
        };
      }

      it('putConsent keeps one approval per user, client and redirect URI; listConsents returns the live ones', async () => {
        const first = approval();
        await store.putConsent(browser, first, clock.now(), 20);
        expect(h.keys.consents(browser)).toContain('{oauth}');
        expect(await store.listConsents(browser, clock.now())).toEqual([first]);
        const wider = approval({ scope: 'mcp:read mcp:write', approvedAt: clock.now() + 1 });
        await store.putConsent(browser, wider, clock.now(), 20);
        const otherRedirect = approval({ redirectUri: 'https://app.example.com/callback' });
        const otherUser = approval({ subject: 'idp-user-2' });
        const { scope: _, ...noScope } = approval({ clientId: 'c-other' });
        await store.putConsent(browser, otherRedirect, clock.now(), 20);
        await store.putConsent(browser, otherUser, clock.now(), 20);
        await store.putConsent(browser, noScope, clock.now(), 20);
        const listed = await store.listConsents(browser, clock.now());
        expect(listed).toHaveLength(4);
        expect(listed).toEqual(expect.arrayContaining([wider, otherRedirect, otherUser, noScope]));
        expect(Object.keys((await h.rawHash(h.keys.consents(browser)))!).sort()).toEqual(
          [wider, otherRedirect, otherUser, noScope].map(consentKey).sort(),
        );
        // Another browser sees none of them.
        expect(await store.listConsents(hashToken(generateToken()), clock.now())).toEqual([]);
        // Past its expiry an approval is not listed, whatever storage still holds.
        expect(await store.listConsents(browser, wider.expiresAt)).toEqual([]);
      });

      it('one browser holds at most maxPerBrowser approvals: expired ones go first, then the soonest to expire', async () => {
        const now = clock.now();
        const expired = approval({ clientId: 'c-expired', expiresAt: now + 10 });
        await store.putConsent(browser, expired, now, 3);
        const kept = [1, 2, 3, 4].map((i) => approval({ clientId: `c-${i}`, expiresAt: now + i * HOUR }));
        for (const c of kept) await store.putConsent(browser, c, now + 20, 3);
        const listed = await store.listConsents(browser, now);
        expect(listed.map((c) => c.clientId).sort()).toEqual(['c-2', 'c-3', 'c-4']);
        expect(Object.keys((await h.rawHash(h.keys.consents(browser)))!)).toHaveLength(3);
        // A new approval is never the one evicted, even when it expires before the others.
        const short = approval({ clientId: 'c-short', expiresAt: now + HOUR / 2 });
        await store.putConsent(browser, short, now, 3);
        expect((await store.listConsents(browser, now)).map((c) => c.clientId)).toContain('c-short');
      });

      it('an unreadable entry (a hand edit) is never listed, and the next write drops it', async () => {
        await store.putConsent(browser, approval(), clock.now(), 20);
        await h.setRawField(h.keys.consents(browser), 'broken', '{"clientId":');
        expect(await store.listConsents(browser, clock.now())).toHaveLength(1);
        await store.putConsent(browser, approval({ clientId: 'c-next' }), clock.now(), 20);
        expect(Object.keys((await h.rawHash(h.keys.consents(browser)))!)).not.toContain('broken');
      });

      async function linked(familyId: string | undefined, c: ConsentRecord) {
        await store.createClient(client(c.clientId).record);
        await store.putConsent(browser, c, clock.now(), 20);
        const access = accessToken(c.clientId, familyId !== undefined ? { familyId } : {});
        const refresh = familyId !== undefined ? refreshToken(c.clientId, familyId) : undefined;
        expect(await store.issueTokens(access.record, refresh?.record)).toBe('ok');
        await store.linkConsentGrant(familyId ?? access.record.tokenHash, browser, consentKey(c), c.expiresAt);
        return { access, refresh };
      }

      it('revoking a refresh family forgets the approval it was issued under, and only that one', async () => {
        const mine = approval({ clientId: 'c-fam' });
        const other = approval({ clientId: 'c-fam-other' });
        const { refresh } = await linked('fam-consent', mine);
        await linked('fam-other', other);
        expect(await store.revokeRefreshFamily(refresh!.record.tokenHash, clock.now())).toBe(true);
        expect(await store.listConsents(browser, clock.now())).toEqual([other]);
        expect(await h.rawHash(h.keys.consentGrant('fam-consent'))).toBeNull();
      });

      it('revoking the access token of a grant without refresh token forgets its approval; an access token of a family does not', async () => {
        const alone = approval({ clientId: 'c-alone' });
        const withFamily = approval({ clientId: 'c-family' });
        const single = await linked(undefined, alone);
        const pair = await linked('fam-kept', withFamily);
        expect(await store.revokeAccessToken(pair.access.record.tokenHash, clock.now())).toBe(true);
        expect(await store.listConsents(browser, clock.now())).toHaveLength(2);
        expect(await store.revokeAccessToken(single.access.record.tokenHash, clock.now())).toBe(true);
        expect(await store.listConsents(browser, clock.now())).toEqual([withFamily]);
      });

      it('reuse detection (a rotated refresh token replayed) forgets the approval with the family', async () => {
        const c = approval({ clientId: 'c-reuse' });
        const { refresh } = await linked('fam-reuse', c);
        const next = { access: accessToken('c-reuse', { familyId: 'fam-reuse' }), refresh: refreshToken('c-reuse', 'fam-reuse') };
        expect(
          await store.rotateRefreshToken(refresh!.record.tokenHash, 'c-reuse', clock.now(), next.access.record, next.refresh.record),
        ).toBe('ok');
        const again = { access: accessToken('c-reuse', { familyId: 'fam-reuse' }), refresh: refreshToken('c-reuse', 'fam-reuse') };
        expect(
          await store.rotateRefreshToken(
            refresh!.record.tokenHash,
            'c-reuse',
            clock.now() + 1000,
            again.access.record,
            again.refresh.record,
          ),
        ).toBe('reused');
        expect(await store.listConsents(browser, clock.now())).toEqual([]);
      });

      it('a replayed authorization code forgets the approval its first redemption was linked to', async () => {
        const c = approval({ clientId: 'c-code' });
        await store.createClient(client('c-code').record);
        await store.putConsent(browser, c, clock.now(), 20);
        const raw = generateToken();
        const link = { browserHash: browser, key: consentKey(c), expiresAt: c.expiresAt };
        await store.putAuthorizationCode({
          codeHash: hashToken(raw),
          clientId: 'c-code',
          redirectUri: c.redirectUri,
          codeChallenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
          resource: 'https://mcp.example.com/mcp',
          user: { subject: c.subject, issuer: c.issuer },
          consent: link,
          createdAt: clock.now(),
          expiresAt: clock.now() + 60_000,
        });
        const stored = await store.getAuthorizationCode(hashToken(raw));
        expect(stored !== 'corrupt' && stored?.consent).toEqual(link);
        const first = { access: accessToken('c-code', { familyId: 'fam-code' }), refresh: refreshToken('c-code', 'fam-code') };
        await store.linkConsentGrant('fam-code', browser, link.key, link.expiresAt);
        expect(
          await store.redeemAuthorizationCode(hashToken(raw), 'c-code', clock.now(), HOUR, first.access.record, first.refresh.record),
        ).toBe('ok');
        expect(await store.listConsents(browser, clock.now())).toEqual([c]);
        const second = { access: accessToken('c-code', { familyId: 'fam-code-2' }), refresh: refreshToken('c-code', 'fam-code-2') };
        expect(
          await store.redeemAuthorizationCode(hashToken(raw), 'c-code', clock.now(), HOUR, second.access.record, second.refresh.record),
        ).toBe('reused');
        expect(await store.listConsents(browser, clock.now())).toEqual([]);
      });
    });

    describe('rate counters', () => {
      it('hitCounter counts per name within one window and reports the time left', async () => {
        const name = `ip:${generateToken().slice(0, 8)}`;
        const first = await store.hitCounter(name, 60_000);
        expect(first.count).toBe(1);
        expect(first.resetMs).toBeGreaterThan(0);
        expect(first.resetMs).toBeLessThanOrEqual(60_000);
        const results = await Promise.all(Array.from({ length: 9 }, () => store.hitCounter(name, 60_000)));
        expect(results.map((r) => r.count).sort((a, b) => a - b)).toEqual([2, 3, 4, 5, 6, 7, 8, 9, 10]);
        for (const r of results) expect(r.resetMs).toBeLessThanOrEqual(first.resetMs);
        expect((await store.hitCounter(`${name}-other`, 60_000)).count).toBe(1);
      });
    });

    describe('quota counters', () => {
      const MINUTE = 60_000;
      /** The start of the next whole minute after the clock's now: windows are aligned to the epoch. */
      const nextWindow = () => (Math.floor(clock.now() / MINUTE) + 1) * MINUTE;

      it('takeQuota counts within the limit, refuses past it without counting, and reports the window end', async () => {
        const name = `q-${generateToken().slice(0, 8)}`;
        const start = nextWindow();
        expect(await store.takeQuota(name, 1, 3, MINUTE, start)).toEqual({ allowed: true, used: 1, resetAt: start + MINUTE });
        expect(await store.takeQuota(name, 2, 3, MINUTE, start + 10)).toEqual({ allowed: true, used: 3, resetAt: start + MINUTE });
        expect(await store.takeQuota(name, 1, 3, MINUTE, start + 20)).toEqual({ allowed: false, used: 3, resetAt: start + MINUTE });
        // cost 0 reads: nothing counted, the answer says whether one more would fit.
        expect(await store.takeQuota(name, 0, 3, MINUTE, start + 30)).toEqual({ allowed: true, used: 3, resetAt: start + MINUTE });
        expect(await store.takeQuota(`${name}-other`, 1, 3, MINUTE, start)).toMatchObject({ allowed: true, used: 1 });
      });

      it('all or nothing: a take larger than what is left counts nothing', async () => {
        const name = `q-${generateToken().slice(0, 8)}`;
        const start = nextWindow();
        expect((await store.takeQuota(name, 2, 3, MINUTE, start)).used).toBe(2);
        expect(await store.takeQuota(name, 2, 3, MINUTE, start)).toMatchObject({ allowed: false, used: 2 });
        expect(await store.takeQuota(name, 1, 3, MINUTE, start)).toMatchObject({ allowed: true, used: 3 });
      });

      it('exact at the window edge: the last ms of a window counts in it, the next ms starts a new one', async () => {
        const name = `q-${generateToken().slice(0, 8)}`;
        const start = nextWindow();
        expect((await store.takeQuota(name, 1, 2, MINUTE, start)).allowed).toBe(true);
        expect((await store.takeQuota(name, 1, 2, MINUTE, start + MINUTE - 1)).allowed).toBe(true);
        expect(await store.takeQuota(name, 1, 2, MINUTE, start + MINUTE - 1)).toEqual({ allowed: false, used: 2, resetAt: start + MINUTE });
        expect(await store.takeQuota(name, 1, 2, MINUTE, start + MINUTE)).toEqual({ allowed: true, used: 1, resetAt: start + 2 * MINUTE });
      });

      it('a counter already in a later window (a replica whose clock is ahead) keeps it', async () => {
        const name = `q-${generateToken().slice(0, 8)}`;
        const start = nextWindow();
        expect(await store.takeQuota(name, 1, 2, MINUTE, start + MINUTE)).toMatchObject({ used: 1, resetAt: start + 2 * MINUTE });
        expect(await store.takeQuota(name, 1, 2, MINUTE, start + MINUTE - 5)).toEqual({
          allowed: true,
          used: 2,
          resetAt: start + 2 * MINUTE,
        });
        expect((await store.takeQuota(name, 1, 2, MINUTE, start)).allowed).toBe(false);
      });

      it('concurrent takes (replicas racing): exactly the limit is allowed', async () => {
        const name = `q-${generateToken().slice(0, 8)}`;
        const start = nextWindow();
        const results = await Promise.all(Array.from({ length: 40 }, () => store.takeQuota(name, 1, 7, MINUTE, start)));
        expect(results.filter((r) => r.allowed)).toHaveLength(7);
        expect(
          results
            .filter((r) => r.allowed)
            .map((r) => r.used)
            .sort((a, b) => a - b),
        ).toEqual([1, 2, 3, 4, 5, 6, 7]);
        // Kept under a fixed-length hashed key, whatever the caller's identity.
        expect(h.keys.quotaCounter(`r:60:subject:user:${'x'.repeat(5000)}`)).toMatch(/quotas:[0-9a-f]{64}$/);
      });
    });

    describe('one-time values', () => {
      it('useOnce: true the first time, false while the record lives, per name', async () => {
        const name = `client_assertion:mcp_x:jti-${generateToken().slice(0, 8)}`;
        const expiresAt = clock.now() + HOUR;
        expect(await store.useOnce(name, expiresAt)).toBe(true);
        expect(await store.useOnce(name, expiresAt)).toBe(false);
        // A later expiry does not buy a second use.
        expect(await store.useOnce(name, expiresAt + HOUR)).toBe(false);
        expect(await store.useOnce(`${name}-other`, expiresAt)).toBe(true);
        // Kept under a fixed-length key carrying the {oauth} hash tag, whatever the name's length.
        expect(h.keys.oneTimeValue('x'.repeat(5000))).toMatch(/\{oauth\}:usedOnce:[0-9a-f]{64}$/);
      });

      it('a name already past its expiry is not kept', async () => {
        const name = `past-${generateToken().slice(0, 8)}`;
        expect(await store.useOnce(name, clock.now() - 1)).toBe(true);
        expect(await store.useOnce(name, clock.now() + HOUR)).toBe(true);
        expect(await store.useOnce(name, clock.now() + HOUR)).toBe(false);
      });

      it('concurrent uses of one name (replicas racing one replayed assertion): exactly one is first', async () => {
        const name = `race-${generateToken().slice(0, 8)}`;
        const results = await Promise.all(Array.from({ length: 20 }, () => store.useOnce(name, clock.now() + HOUR)));
        expect(results.filter((r) => r)).toHaveLength(1);
      });
    });

    describe('profiles', () => {
      function profile(name: string, overrides: Partial<ProfileRecord> = {}): ProfileRecord {
        return {
          name,
          description: `the ${name} profile`,
          accessTokenLifetimeSeconds: 3600,
          refreshTokenLifetimeSeconds: 86400,
          grantTypes: ['client_credentials', 'refresh_token'],
          createdAt: clock.now(),
          ...overrides,
        };
      }

      it('seedProfiles creates only missing profiles and never overwrites an edited one', async () => {
        const a = profile('service', { refreshTokenLifetimeSeconds: 0, grantTypes: ['client_credentials'] });
        const b = profile('default');
        expect((await store.seedProfiles([a, b])).sort()).toEqual(['default', 'service']);
        expect(await store.seedProfiles([a, b])).toEqual([]);

        await h.setRawField(h.keys.profile('default'), 'accessTokenLifetimeSeconds', '60');
        await h.setRawField(h.keys.profile('default'), 'description', 'edited by an admin');
        clock.advance(1000);
        const c = profile('dynamic', { grantTypes: ['urn:ietf:params:oauth:grant-type:token-exchange'] });
        expect(await store.seedProfiles([profile('service'), profile('default', { accessTokenLifetimeSeconds: 7200 }), c])).toEqual([
          'dynamic',
        ]);

        const edited = await store.getProfile('default');
        expect(edited).toEqual({ ...b, accessTokenLifetimeSeconds: 60, description: 'edited by an admin' });
        expect((await h.rawHash(h.keys.profile('default')))?.accessTokenLifetimeSeconds).toBe('60');
        expect(await store.getProfile('service')).toEqual(a);
      });

      it('getProfile round-trips a profile and is null for an unknown name; listProfiles is sorted by name', async () => {
        expect(await store.listProfiles()).toEqual([]);
        expect(await store.getProfile('nope')).toBeNull();
        const ps = [profile('zeta'), profile('alpha', { grantTypes: [] }), profile('mid', { accessTokenLifetimeSeconds: 1 })];
        expect(await store.seedProfiles(ps)).toEqual(['zeta', 'alpha', 'mid']);
        expect(await store.getProfile('alpha')).toEqual(ps[1]);
        expect((await h.rawHash(h.keys.profile('alpha')))?.createdAt).toMatch(INTEGER_MS);
        expect((await store.listProfiles()).map((p) => p.name)).toEqual(['alpha', 'mid', 'zeta']);
        expect(await store.listProfiles()).toEqual([ps[1], ps[2], ps[0]]);
      });

      it('getProfileFields gives the stored fields as they are: a seeded profile, a hash written by hand that is no profile, nothing', async () => {
        expect(await store.getProfileFields('interactive')).toBeNull();
        const p = profile('interactive');
        await store.seedProfiles([p]);
        expect(await store.getProfileFields('interactive')).toMatchObject({
          name: 'interactive',
          accessTokenLifetimeSeconds: String(p.accessTokenLifetimeSeconds),
        });
        // HSET on a profile that was never seeded: a hash without a name, which reads as no profile at all.
        await h.setRawField(h.keys.profile('service'), 'accessTokenLifetimeSeconds', '600');
        expect(await store.getProfile('service')).toBe('corrupt');
        expect(await store.getProfileFields('service')).toEqual({ accessTokenLifetimeSeconds: '600' });
      });

      it.each([
        ['name', ''],
        ['accessTokenLifetimeSeconds', '1h'],
        ['accessTokenLifetimeSeconds', '-60'],
        ['refreshTokenLifetimeSeconds', ''],
        ['refreshTokenLifetimeSeconds', '1.5'],
        ['grantTypes', 'client_credentials'],
        ['grantTypes', '[1]'],
        ['createdAt', 'now'],
      ])('a profile whose %s is %j reads as corrupt, never filled in with a default; listProfiles skips it', async (field, value) => {
        await store.seedProfiles([profile('alpha'), profile('beta')]);
        await h.setRawField(h.keys.profile('alpha'), field, value);
        expect(await store.getProfile('alpha')).toBe('corrupt');
        expect((await store.listProfiles()).map((p) => p.name)).toEqual(['beta']);
      });
    });

    describe('audit stream', () => {
      it('is empty at first; appendAudit returns increasing ids; listAuditEvents gives the newest first, fields intact', async () => {
        expect(await store.listAuditEvents(10)).toEqual([]);
        const first = { at: clock.now(), who: 'master', action: 'createClient', result: 'ok', clientId: 'mcp_abc' };
        const second = {
          at: clock.now() + 1,
          who: 'client:mcp_abc',
          action: 'token.client_credentials',
          result: 'ok',
          clientId: 'mcp_abc',
          tokenHashPrefix: 'deadbeef',
          detail: { refresh: true, status: 200, grant: 'client_credentials' },
        };
        const third = {
          at: clock.now() + 2,
          who: 'user',
          action: 'token.token_exchange',
          result: 'ok',
          subject: 'alice@example.com',
          tokenHashPrefix: '0123abcd',
        };
        const ids = [await store.appendAudit(first, 1000), await store.appendAudit(second, 1000), await store.appendAudit(third, 1000)];
        for (const id of ids) expect(id).toMatch(/^\d+-\d+$/);
        const order = (id: string) => id.split('-').map(Number) as [number, number];
        for (let i = 1; i < ids.length; i++) {
          const [ms, seq] = order(ids[i]!);
          const [prevMs, prevSeq] = order(ids[i - 1]!);
          expect(ms > prevMs || (ms === prevMs && seq > prevSeq)).toBe(true);
        }
        expect(await store.listAuditEvents(10)).toEqual([
          { id: ids[2], ...third },
          { id: ids[1], ...second },
          { id: ids[0], ...first },
        ]);
        expect((await store.listAuditEvents(2)).map((e) => e.id)).toEqual([ids[2], ids[1]]);
        expect(await store.listAuditEvents(0)).toEqual([]);
      });

      it('is capped near maxLen (MAXLEN ~): the newest events are kept, the oldest dropped', async () => {
        const appended: string[] = [];
        for (let i = 0; i < 300; i++)
          appended.push(await store.appendAudit({ at: clock.now(), who: 'master', action: `op-${i}`, result: 'ok' }, 100));
        const kept = await store.listAuditEvents(1000);
        // Redis trims whole stream nodes (`~`), so it may keep somewhat more than maxLen, never fewer.
        expect(kept.length).toBeGreaterThanOrEqual(100);
        expect(kept.length).toBeLessThan(300);
        expect(kept.map((e) => e.id)).toEqual(appended.slice(-kept.length).reverse());
        expect(kept[0]!.action).toBe('op-299');
      });

      it('the admin trail is capped on its own: a flood of request events leaves admin events in place; both read back merged by time', async () => {
        const admin1 = await store.appendAudit({ at: clock.now(), who: 'master', action: 'createClient', result: 'ok' }, 100, 'admin');
        const flood: string[] = [];
        for (let i = 0; i < 300; i++)
          flood.push(
            await store.appendAudit(
              { at: clock.now(), who: 'client:mcp_x', action: 'policy.deny', result: 'insufficient_scope' },
              100,
              'requests',
            ),
          );
        const admin2 = await store.appendAudit({ at: clock.now(), who: 'master', action: 'deleteClient', result: 'ok' }, 100, 'admin');
        const all = await store.listAuditEvents(1000);
        expect(all.filter((e) => e.who === 'master').map((e) => e.id)).toEqual([admin2, admin1]);
        expect(all.filter((e) => e.who !== 'master').length).toBeLessThan(300);
        // Each stream in its order, the two interleaved by time (ids of two streams written in the same
        // millisecond have sequences of their own, so the millisecond is what orders them).
        const requests = all.filter((e) => e.who !== 'master').map((e) => e.id);
        expect(requests).toEqual(flood.slice(-requests.length).reverse());
        const ms = all.map((e) => Number(e.id.split('-')[0]));
        expect(ms).toEqual([...ms].sort((a, b) => b - a));
        const two = await store.listAuditEvents(2);
        expect(two.length).toBe(2);
        expect(two.map((e) => e.id)).toEqual(all.slice(0, 2).map((e) => e.id));
      });
    });

    describe('revocation notices', () => {
      it('every revocation is announced to every subscriber, by token hash, client id or family id; nothing is announced for an unknown token', async () => {
        const heard: Array<{ who: number; notice: RevocationNotice }> = [];
        let wake: (() => void) | undefined;
        const subscriber = (who: number) =>
          store.subscribeRevocations({
            revoked: (notice) => {
              heard.push({ who, notice });
              wake?.();
            },
            missed: () => undefined,
          });
        const unsubscribe = [await subscriber(1), await subscriber(2)];
        /** Waits (on delivery, never on a timer) until both subscribers heard `n` notices in all. */
        const until = async (n: number) => {
          while (heard.length < n * 2) await new Promise<void>((r) => (wake = r));
        };

        const user = userRecord();
        await store.putUserToken(user.record);
        expect(await store.revokeUserToken(hashToken(generateToken()))).toBe(false);
        expect(await store.revokeUserToken(user.record.tokenHash)).toBe(true);
        await until(1);
        await store.createClient(client('c-note').record);
        const access = accessToken('c-note');
        expect(await store.createAccessToken(access.record)).toBe('ok');
        expect(await store.revokeAccessToken(hashToken(generateToken()), clock.now())).toBe(false);
        expect(await store.revokeAccessToken(access.record.tokenHash, clock.now())).toBe(true);
        await until(2);
        const famAccess = accessToken('c-note', { familyId: 'fam-note' });
        const famRefresh = refreshToken('c-note', 'fam-note');
        expect(await store.issueTokens(famAccess.record, famRefresh.record)).toBe('ok');
        expect(await store.revokeRefreshFamily(famRefresh.record.tokenHash, clock.now())).toBe(true);
        await until(3);
        const reusedFirst = { access: accessToken('c-note', { familyId: 'fam-reuse' }), refresh: refreshToken('c-note', 'fam-reuse') };
        expect(await store.issueTokens(reusedFirst.access.record, reusedFirst.refresh.record)).toBe('ok');
        const next = () => ({ access: accessToken('c-note', { familyId: 'fam-reuse' }), refresh: refreshToken('c-note', 'fam-reuse') });
        const second = next();
        expect(
          await store.rotateRefreshToken(
            reusedFirst.refresh.record.tokenHash,
            'c-note',
            clock.now(),
            second.access.record,
            second.refresh.record,
          ),
        ).toBe('ok');
        const third = next();
        expect(
          await store.rotateRefreshToken(
            reusedFirst.refresh.record.tokenHash,
            'c-note',
            clock.now(),
            third.access.record,
            third.refresh.record,
          ),
        ).toBe('reused');
        await until(4);
        expect(await store.deleteClient('c-unknown', clock.now())).toBeNull();
        expect(await store.deleteClient('c-note', clock.now())).not.toBeNull();
        await until(5);

        for (const who of [1, 2]) {
          expect(heard.filter((h) => h.who === who).map((h) => h.notice)).toEqual([
            { tokenHashes: [user.record.tokenHash] },
            { tokenHashes: [access.record.tokenHash] },
            { familyIds: ['fam-note'] },
            { familyIds: ['fam-reuse'] },
            { clientIds: ['c-note'] },
          ]);
        }
        // An unsubscribed listener hears nothing more.
        for (const u of unsubscribe) await u();
        const later = userRecord();
        await store.putUserToken(later.record);
        expect(await store.revokeUserToken(later.record.tokenHash)).toBe(true);
        // A notice sent after those, heard by a new subscriber: by then the old ones would have arrived.
        let probed!: () => void;
        const heardByProbe = new Promise<void>((r) => (probed = r));
        const probe = await store.subscribeRevocations({ revoked: () => probed(), missed: () => undefined });
        const another = userRecord();
        await store.putUserToken(another.record);
        await store.revokeUserToken(another.record.tokenHash);
        await heardByProbe;
        await probe();
        expect(heard).toHaveLength(10);
      });
    });

    describe('assertion signing keys', () => {
      const jwk = (kid: string, extra: Record<string, string> = {}) =>
        JSON.stringify({ kty: 'EC', crv: 'P-256', x: `x-${kid}`, y: `y-${kid}`, kid, ...extra });

      it('a published key is listed until its expiresAt (by the clock), sorted by kid, as published', async () => {
        const now = clock.now();
        await store.publishSigningKey({ kid: 'b', jwk: jwk('b'), expiresAt: now + 2000 }, now);
        await store.publishSigningKey({ kid: 'a', jwk: jwk('a'), expiresAt: now + 1000 }, now);
        expect(await store.listSigningKeys(now)).toEqual([
          { kid: 'a', jwk: jwk('a'), expiresAt: now + 1000 },
          { kid: 'b', jwk: jwk('b'), expiresAt: now + 2000 },
        ]);
        expect((await store.listSigningKeys(now + 1000)).map((k) => k.kid)).toEqual(['b']);
        expect(await store.listSigningKeys(now + 2000)).toEqual([]);
      });

      it('a later publish extends a listing and never shortens it (a replica that restarts with a pinned key)', async () => {
        const now = clock.now();
        await store.publishSigningKey({ kid: 'k', jwk: jwk('k'), expiresAt: now + 5000 }, now);
        await store.publishSigningKey({ kid: 'k', jwk: jwk('k'), expiresAt: now + 1000 }, now);
        expect((await store.listSigningKeys(now))[0]!.expiresAt).toBe(now + 5000);
        await store.publishSigningKey({ kid: 'k', jwk: jwk('k'), expiresAt: now + 9000 }, now);
        expect((await store.listSigningKeys(now))[0]!.expiresAt).toBe(now + 9000);
      });

      it('one key of storage for every replica; expired entries are dropped from it on the next publish', async () => {
        const now = clock.now();
        await store.publishSigningKey({ kid: 'old', jwk: jwk('old'), expiresAt: now + 1000 }, now);
        clock.advance(1500);
        await store.publishSigningKey({ kid: 'new', jwk: jwk('new'), expiresAt: clock.now() + HOUR }, clock.now());
        expect(Object.keys((await h.rawHash(h.keys.signingKeys()))!)).toEqual(['new']);
      });

      it('a hand-written entry with a private part, a kid that differs from its field, or unreadable JSON is never listed', async () => {
        const now = clock.now();
        await store.publishSigningKey({ kid: 'good', jwk: jwk('good'), expiresAt: now + HOUR }, now);
        const value = (j: string) => `{"expiresAt":${now + HOUR},"jwk":${j}}`;
        await h.setRawField(h.keys.signingKeys(), 'private', value(jwk('private', { d: 'secret' })));
        await h.setRawField(h.keys.signingKeys(), 'other', value(jwk('not-other')));
        await h.setRawField(h.keys.signingKeys(), 'broken', '{"expiresAt":');
        await h.setRawField(h.keys.signingKeys(), 'rsa', value(JSON.stringify({ kty: 'RSA', n: 'n', e: 'AQAB', kid: 'rsa' })));
        expect((await store.listSigningKeys(now)).map((k) => k.kid)).toEqual(['good']);
      });
    });

    describe('kept upstream credentials', () => {
      it('a record per (subject, issuer, provider): put, read back as written, overwritten by a later put', async () => {
        const idp = upstreamCredential({ expiresAt: clock.now() + HOUR });
        const github = upstreamCredential({ provider: 'oauth:github', sealed: 'sealed-github' });
        const otherIssuer = upstreamCredential({ issuer: 'https://other-idp.example/', sealed: 'sealed-other' });
        for (const r of [idp, github, otherIssuer]) await store.putUpstreamCredential(r);
        expect(await store.getUpstreamCredential('alice', 'https://idp.example/', 'idp')).toEqual(idp);
        expect(await store.getUpstreamCredential('alice', 'https://idp.example/', 'oauth:github')).toEqual(github);
        expect(await store.getUpstreamCredential('alice', 'https://other-idp.example/', 'idp')).toEqual(otherIssuer);
        expect(await store.getUpstreamCredential('bob', 'https://idp.example/', 'idp')).toBeNull();
        const later = { ...idp, sealed: 'sealed-later', keyId: 'k2' };
        await store.putUpstreamCredential(later);
        expect(await store.getUpstreamCredential('alice', 'https://idp.example/', 'idp')).toEqual(later);
      });

      it("a value copied under another user or provider reads as corrupt, never as that one's credential", async () => {
        await store.putUpstreamCredential(upstreamCredential());
        const alice = (await h.rawHash(h.keys.upstreamCredentials('alice')))!;
        const value = Object.values(alice)[0]!;
        await h.setRawField(h.keys.upstreamCredentials('bob'), JSON.stringify(['https://idp.example/', 'idp']), value);
        await h.setRawField(h.keys.upstreamCredentials('alice'), JSON.stringify(['https://idp.example/', 'oauth:github']), value);
        await h.setRawField(h.keys.upstreamCredentials('alice'), JSON.stringify(['https://idp.example/', 'exchange:api']), '{"subject":');
        expect(await store.getUpstreamCredential('bob', 'https://idp.example/', 'idp')).toBe('corrupt');
        expect(await store.getUpstreamCredential('alice', 'https://idp.example/', 'oauth:github')).toBe('corrupt');
        expect(await store.getUpstreamCredential('alice', 'https://idp.example/', 'exchange:api')).toBe('corrupt');
      });

      it('replace is compare-and-set on the ciphertext: a record changed meanwhile, or gone, is left alone', async () => {
        const first = upstreamCredential({ sealed: 'first' });
        await store.putUpstreamCredential(first);
        expect(await store.replaceUpstreamCredential({ ...first, sealed: 'rewrapped', keyId: 'k2' }, 'first')).toBe(true);
        expect(await store.getUpstreamCredential('alice', 'https://idp.example/', 'idp')).toMatchObject({
          sealed: 'rewrapped',
          keyId: 'k2',
        });
        // A refresh wrote 'refreshed' after the re-encryption read 'rewrapped': its stale write is refused.
        await store.putUpstreamCredential({ ...first, sealed: 'refreshed' });
        expect(await store.replaceUpstreamCredential({ ...first, sealed: 'stale' }, 'rewrapped')).toBe(false);
        expect(await store.getUpstreamCredential('alice', 'https://idp.example/', 'idp')).toMatchObject({ sealed: 'refreshed' });
        expect(await store.replaceUpstreamCredential(upstreamCredential({ subject: 'nobody' }), 'first')).toBe(false);
        expect(await store.getUpstreamCredential('nobody', 'https://idp.example/', 'idp')).toBeNull();
      });

      it('delete: every record of a subject, or those of one issuer; counted; other users untouched', async () => {
        await store.putUpstreamCredential(upstreamCredential());
        await store.putUpstreamCredential(upstreamCredential({ provider: 'oauth:github' }));
        await store.putUpstreamCredential(upstreamCredential({ issuer: 'https://other-idp.example/' }));
        await store.putUpstreamCredential(upstreamCredential({ subject: 'bob' }));
        expect(await store.deleteUpstreamCredentials('alice', 'https://other-idp.example/')).toBe(1);
        expect(await store.getUpstreamCredential('alice', 'https://idp.example/', 'idp')).not.toBeNull();
        expect(await store.deleteUpstreamCredentials('alice')).toBe(2);
        expect(await store.deleteUpstreamCredentials('alice')).toBe(0);
        expect(await h.rawHash(h.keys.upstreamCredentials('alice'))).toBeNull();
        expect(await store.getUpstreamCredential('bob', 'https://idp.example/', 'idp')).not.toBeNull();
      });

      it('list: every readable record of every user, deleted ones gone, unreadable ones skipped', async () => {
        await store.putUpstreamCredential(upstreamCredential());
        await store.putUpstreamCredential(upstreamCredential({ provider: 'oauth:github' }));
        await store.putUpstreamCredential(upstreamCredential({ subject: 'bob' }));
        await store.putUpstreamCredential(upstreamCredential({ subject: 'carol' }));
        await store.deleteUpstreamCredentials('carol');
        await h.setRawField(h.keys.upstreamCredentials('bob'), 'junk', 'not json');
        const listed = await store.listUpstreamCredentials();
        expect(listed.map((r) => `${r.subject}/${r.provider}`).sort()).toEqual(['alice/idp', 'alice/oauth:github', 'bob/idp']);
      });
      it('list of one subject: its readable records of every issuer, no other user, unreadable and misfiled ones skipped', async () => {
        await store.putUpstreamCredential(upstreamCredential());
        await store.putUpstreamCredential(upstreamCredential({ provider: 'oauth:github', createdAt: clock.now() + 1 }));
        await store.putUpstreamCredential(upstreamCredential({ issuer: 'https://other-idp.example/', createdAt: clock.now() + 2 }));
        await store.putUpstreamCredential(upstreamCredential({ subject: 'bob' }));
        await h.setRawField(h.keys.upstreamCredentials('alice'), 'junk', 'not json');
        // A readable value under another provider's field reads as corrupt there: not listed.
        await h.setRawField(
          h.keys.upstreamCredentials('alice'),
          JSON.stringify(['https://idp.example/', 'oauth:gitlab']),
          JSON.stringify({ ...upstreamCredential(), provider: 'idp' }),
        );
        const listed = await store.listSubjectUpstreamCredentials('alice');
        expect(listed.map((r) => `${r.issuer} ${r.provider}`)).toEqual([
          'https://idp.example/ idp',
          'https://idp.example/ oauth:github',
          'https://other-idp.example/ idp',
        ]);
        expect(listed[0]).toEqual(upstreamCredential());
        expect(await store.listSubjectUpstreamCredentials('nobody')).toEqual([]);
      });

      it('delete one: only that (subject, issuer, provider); false when absent; the last one takes the hash', async () => {
        await store.putUpstreamCredential(upstreamCredential());
        await store.putUpstreamCredential(upstreamCredential({ provider: 'oauth:github' }));
        await store.putUpstreamCredential(upstreamCredential({ issuer: 'https://other-idp.example/', provider: 'oauth:github' }));
        await store.putUpstreamCredential(upstreamCredential({ subject: 'bob', provider: 'oauth:github' }));
        expect(await store.deleteUpstreamCredential('alice', 'https://idp.example/', 'oauth:github')).toBe(true);
        expect(await store.getUpstreamCredential('alice', 'https://idp.example/', 'oauth:github')).toBeNull();
        expect(await store.getUpstreamCredential('alice', 'https://idp.example/', 'idp')).not.toBeNull();
        expect(await store.getUpstreamCredential('alice', 'https://other-idp.example/', 'oauth:github')).not.toBeNull();
        expect(await store.getUpstreamCredential('bob', 'https://idp.example/', 'oauth:github')).not.toBeNull();
        expect(await store.deleteUpstreamCredential('alice', 'https://idp.example/', 'oauth:github')).toBe(false);
        expect(await store.deleteUpstreamCredential('nobody', 'https://idp.example/', 'idp')).toBe(false);
        expect(await store.deleteUpstreamCredential('alice', 'https://idp.example/', 'idp')).toBe(true);
        expect(await store.deleteUpstreamCredential('alice', 'https://other-idp.example/', 'oauth:github')).toBe(true);
        expect(await h.rawHash(h.keys.upstreamCredentials('alice'))).toBeNull();
        expect((await store.listUpstreamCredentials()).map((r) => r.subject)).toEqual(['bob']);
      });
    });

    describe('session and task handles', () => {
      const TTL = 60_000;
      const MAX = 100;
      const alice = handleOwner({ kind: 'oauth', subject: 'alice', clientId: 'c-a' });
      const aliceOtherClient = handleOwner({ kind: 'oauth', subject: 'alice', clientId: 'c-b' });
      const bob = handleOwner({ kind: 'oauth', subject: 'bob', clientId: 'c-a' });
      const machine = handleOwner({ kind: 'oauth', subject: 'c-m', clientId: 'c-m' });

      it('bound to its first owner: that owner uses it, anyone else finds it foreign, an unrecorded one is unknown', async () => {
        const session = handleDigest('session-1');
        expect(await store.useHandle('session', session, alice, clock.now(), TTL, MAX)).toBe('unknown');
        expect(await store.readHandle('session', session)).toBeNull();
        expect(await store.bindHandle('session', session, alice, clock.now(), TTL, MAX)).toBe('bound');
        expect(await store.readHandle('session', session)).toEqual({ owner: alice.id, renewedAt: String(clock.now()) });
        expect(await store.bindHandle('session', session, alice, clock.now(), TTL, MAX)).toBe('owned');
        expect(await store.useHandle('session', session, alice, clock.now(), TTL, MAX)).toBe('owned');
        // Same subject through another client, another subject through the same client: not the owner.
        expect(await store.useHandle('session', session, aliceOtherClient, clock.now(), TTL, MAX)).toBe('foreign');
        expect(await store.bindHandle('session', session, bob, clock.now(), TTL, MAX)).toBe('foreign');
        expect(await store.useHandle('session', session, alice, clock.now(), TTL, MAX)).toBe('owned');
        // A task with the same text is another handle.
        expect(await store.useHandle('task', session, alice, clock.now(), TTL, MAX)).toBe('unknown');
      });

      it('a session bound with the URL-elicitation mark keeps it for every reader; a later bind or use neither adds nor drops it', async () => {
        const marked = handleDigest('declared-url-elicitation');
        const plain = handleDigest('declared-nothing');
        expect(await store.bindHandle('session', marked, alice, clock.now(), TTL, MAX, { urlElicitation: true })).toBe('bound');
        expect(await store.bindHandle('session', plain, alice, clock.now(), TTL, MAX, { urlElicitation: false })).toBe('bound');
        expect(await store.readHandle('session', marked)).toEqual({
          owner: alice.id,
          renewedAt: String(clock.now()),
          urlElicitation: true,
        });
        expect(await store.readHandle('session', plain)).toEqual({ owner: alice.id, renewedAt: String(clock.now()) });
        expect((await h.rawHash(h.keys.handle('session', marked)))!.urlElicitation).toBe('1');
        expect(await h.rawHash(h.keys.handle('session', plain))).not.toHaveProperty('urlElicitation');
        // The mark is the minting answer's: binding the same session again (marked or not) and renewing it change nothing.
        clock.advance(TTL / 2);
        expect(await store.bindHandle('session', plain, alice, clock.now(), TTL, MAX, { urlElicitation: true })).toBe('owned');
        expect(await store.bindHandle('session', marked, alice, clock.now(), TTL, MAX)).toBe('owned');
        expect(await store.useHandle('session', marked, alice, clock.now(), TTL, MAX)).toBe('owned');
        expect((await store.readHandle('session', marked))!.urlElicitation).toBe(true);
        expect(await store.readHandle('session', plain)).not.toHaveProperty('urlElicitation');
        // Another principal's bind is refused as before, and the mark stays the owner's record.
        expect(await store.bindHandle('session', marked, bob, clock.now(), TTL, MAX, { urlElicitation: false })).toBe('foreign');
        expect((await store.readHandle('session', marked))!.urlElicitation).toBe(true);
      });

      it('stores the handle only as its SHA-256 and the owner identity', async () => {
        const session = handleDigest('the-session-id');
        await store.bindHandle('session', session, alice, clock.now(), TTL, MAX);
        const stored = await h.rawHash(h.keys.handle('session', session));
        expect(stored).toEqual({ owner: alice.id, clientId: 'c-a', subjectHash: alice.subjectHash, renewedAt: String(clock.now()) });
        expect(JSON.stringify(stored)).not.toContain('the-session-id');
        expect(h.keys.handle('session', session)).toContain('{oauth}');
      });

      it('forgetHandle ends one handle (a session deleted), once', async () => {
        const session = handleDigest('ended');
        await store.bindHandle('session', session, alice, clock.now(), TTL, MAX);
        expect(await store.forgetHandle('session', session)).toBe(true);
        expect(await store.useHandle('session', session, alice, clock.now(), TTL, MAX)).toBe('unknown');
        expect(await store.forgetHandle('session', session)).toBe(false);
      });

      it('deleteClient forgets the handles of that client, and only those', async () => {
        await store.createClient(client('c-a').record);
        const mine = [handleDigest('s-a1'), handleDigest('s-a2')];
        for (const hash of mine) await store.bindHandle('session', hash, alice, clock.now(), TTL, MAX);
        await store.bindHandle('task', handleDigest('t-a'), bob, clock.now(), TTL, MAX);
        await store.bindHandle('session', handleDigest('s-b'), aliceOtherClient, clock.now(), TTL, MAX);
        expect(await store.deleteClient('c-a', clock.now())).not.toBeNull();
        for (const hash of mine) expect(await store.useHandle('session', hash, alice, clock.now(), TTL, MAX)).toBe('unknown');
        expect(await store.useHandle('task', handleDigest('t-a'), bob, clock.now(), TTL, MAX)).toBe('unknown');
        expect(await store.useHandle('session', handleDigest('s-b'), aliceOtherClient, clock.now(), TTL, MAX)).toBe('owned');
        expect(await h.rawHash(h.keys.handle('session', mine[0]!))).toBeNull();
      });

      it("forgetSubjectHandles forgets every handle of an IdP subject through any client, and no one else's", async () => {
        await store.bindHandle('session', handleDigest('x1'), alice, clock.now(), TTL, MAX);
        await store.bindHandle('task', handleDigest('x2'), aliceOtherClient, clock.now(), TTL, MAX);
        const aliceUser = handleOwner({ kind: 'user', subject: 'alice' });
        await store.bindHandle('session', handleDigest('x3'), aliceUser, clock.now(), TTL, MAX);
        await store.bindHandle('session', handleDigest('y1'), bob, clock.now(), TTL, MAX);
        // A machine client's subject is its client id, not a person: never indexed by subject.
        await store.bindHandle('session', handleDigest('m1'), machine, clock.now(), TTL, MAX);
        expect(await store.forgetSubjectHandles('alice')).toBe(3);
        expect(await store.useHandle('session', handleDigest('x1'), alice, clock.now(), TTL, MAX)).toBe('unknown');
        expect(await store.useHandle('task', handleDigest('x2'), aliceOtherClient, clock.now(), TTL, MAX)).toBe('unknown');
        expect(await store.useHandle('session', handleDigest('x3'), aliceUser, clock.now(), TTL, MAX)).toBe('unknown');
        expect(await store.useHandle('session', handleDigest('y1'), bob, clock.now(), TTL, MAX)).toBe('owned');
        expect(await store.forgetSubjectHandles('c-m')).toBe(0);
        expect(await store.useHandle('session', handleDigest('m1'), machine, clock.now(), TTL, MAX)).toBe('owned');
        expect(await store.forgetSubjectHandles('alice')).toBe(0);
      });

      it('a use within a sixteenth of the lifetime since the last renewal renews nothing; a later one does', async () => {
        const session = handleDigest('renewed');
        await store.bindHandle('session', session, alice, clock.now(), TTL, MAX);
        const boundAt = clock.now();
        clock.advance(TTL / 16 - 1);
        expect(await store.useHandle('session', session, alice, clock.now(), TTL, MAX)).toBe('owned');
        expect((await h.rawHash(h.keys.handle('session', session)))?.renewedAt).toBe(String(boundAt));
        clock.advance(2);
        expect(await store.useHandle('session', session, alice, clock.now(), TTL, MAX)).toBe('owned');
        expect((await h.rawHash(h.keys.handle('session', session)))?.renewedAt).toBe(String(clock.now()));
        // Another principal's presentation renews nothing.
        clock.advance(TTL / 8);
        expect(await store.useHandle('session', session, bob, clock.now(), TTL, MAX)).toBe('foreign');
        expect((await h.rawHash(h.keys.handle('session', session)))?.renewedAt).toBe(String(clock.now() - TTL / 8));
      });

      it("a forget does not reach a handle that has since become someone else's (a stale index member)", async () => {
        const session = handleDigest('moved');
        await store.bindHandle('session', session, alice, clock.now(), TTL, MAX);
        await store.forgetHandle('session', session);
        await store.bindHandle('session', session, bob, clock.now(), TTL, MAX);
        expect(await store.forgetSubjectHandles('alice')).toBe(0);
        expect(await store.useHandle('session', session, bob, clock.now(), TTL, MAX)).toBe('owned');
      });

      it('an owner holds at most maxPerOwner handles per index: past it, the least recently used is forgotten', async () => {
        const [one, two, three] = [handleDigest('h1'), handleDigest('h2'), handleDigest('h3')];
        // Renewals count past a sixteenth of the lifetime since the last one.
        const step = TTL / 16 + 1;
        await store.bindHandle('session', one, alice, clock.now(), TTL, 2);
        clock.advance(step);
        await store.bindHandle('session', two, alice, clock.now(), TTL, 2);
        clock.advance(step);
        // Used again: now the most recent; `two` is the least recently used.
        expect(await store.useHandle('session', one, alice, clock.now(), TTL, 2)).toBe('owned');
        clock.advance(step);
        expect(await store.bindHandle('session', three, alice, clock.now(), TTL, 2)).toBe('bound');
        expect(await store.useHandle('session', two, alice, clock.now(), TTL, 2)).toBe('unknown');
        expect(await store.useHandle('session', one, alice, clock.now(), TTL, 2)).toBe('owned');
        expect(await store.useHandle('session', three, alice, clock.now(), TTL, 2)).toBe('owned');
      });
    });

    describe('subject index', () => {
      const ISS = 'https://idp.example.com/';
      const alice = { subject: 'alice', issuer: ISS };
      const bob = { subject: 'bob', issuer: ISS };

      function approval(subject: string, clientId: string, overrides: Partial<ConsentRecord> = {}): ConsentRecord {
        return {
          clientId,
          clientCreatedAt: 1,
          redirectUri: 'http://127.0.0.1:9999/cb',
          issuer: ISS,
          subject,
          approvedAt: clock.now(),
          expiresAt: clock.now() + HOUR,
          ...overrides,
        };
      }

      /** A refresh-family grant for a signed-in user: the access and refresh tokens, as sign-in issues them. */
      async function signInGrant(clientId: string, user: { subject: string; issuer: string }, familyId: string) {
        const access = accessToken(clientId, { familyId, user, scope: 'mcp:read' });
        const refresh = refreshToken(clientId, familyId);
        refresh.record.user = user;
        expect(await store.issueTokens(access.record, refresh.record)).toBe('ok');
        return { access, refresh };
      }

      const hashesOf = (tokens: Array<{ tokenHash: string }>) => tokens.map((t) => t.tokenHash).sort();

      it('lists every live token a subject holds, of every kind and client, and nothing of another subject or a machine client', async () => {
        await store.createClient(client('c-one').record);
        await store.createClient(client('c-two').record);
        const user = userRecord({ subject: 'alice' });
        await store.putUserToken(user.record);
        const one = await signInGrant('c-one', alice, 'fam-one');
        const jag = accessToken('c-two', { user: alice });
        expect(await store.createAccessToken(jag.record)).toBe('ok');
        const bobs = await signInGrant('c-one', bob, 'fam-bob');
        const machine = accessToken('c-two');
        expect(await store.createAccessToken(machine.record)).toBe('ok');

        const listed = await store.listSubjectTokens('alice', clock.now());
        expect(hashesOf(listed)).toEqual(
          [user.record.tokenHash, one.access.record.tokenHash, one.refresh.record.tokenHash, jag.record.tokenHash].sort(),
        );
        expect(listed.find((t) => t.tokenHash === one.refresh.record.tokenHash)).toMatchObject({
          kind: 'refresh',
          subject: 'alice',
          issuer: ISS,
          clientId: 'c-one',
          familyId: 'fam-one',
        });
        expect(listed.find((t) => t.tokenHash === user.record.tokenHash)).toMatchObject({ kind: 'user', subject: 'alice' });
        expect(listed.find((t) => t.tokenHash === user.record.tokenHash)?.clientId).toBeUndefined();
        expect(listed.find((t) => t.tokenHash === one.access.record.tokenHash)).toMatchObject({ kind: 'access', scope: 'mcp:read' });
        expect(hashesOf(await store.listSubjectTokens('bob', clock.now()))).toEqual(
          [bobs.access.record.tokenHash, bobs.refresh.record.tokenHash].sort(),
        );
        expect(await store.listSubjectTokens('alice', clock.now(), 'https://other-idp.example.com/')).toEqual([]);
        expect(await store.listSubjectTokens('nobody', clock.now())).toEqual([]);
        // By client: its access and refresh tokens, whoever they act for.
        expect(hashesOf(await store.listClientTokens('c-two', clock.now()))).toEqual([jag.record.tokenHash]);
        expect(hashesOf(await store.listClientTokens('c-one', clock.now()))).toEqual(
          [one.access.record.tokenHash, one.refresh.record.tokenHash, bobs.access.record.tokenHash, bobs.refresh.record.tokenHash].sort(),
        );
      });

      it('stays exact under expiry, rotation, redemption, revocation and deleteClient', async () => {
        await store.createClient(client('c-ex').record);
        const short = userRecord({ subject: 'alice', expiresAt: clock.now() + 1000 });
        await store.putUserToken(short.record);
        const grant = await signInGrant('c-ex', alice, 'fam-ex');
        // Rotation: the new pair joins the index; the rotated refresh token stays until it expires (reuse detection).
        const next = { access: accessToken('c-ex', { familyId: 'fam-ex', user: alice }), refresh: refreshToken('c-ex', 'fam-ex') };
        next.refresh.record.user = alice;
        expect(
          await store.rotateRefreshToken(grant.refresh.record.tokenHash, 'c-ex', clock.now(), next.access.record, next.refresh.record),
        ).toBe('ok');
        // A code redemption indexes its tokens too.
        const codeHash = hashToken(generateToken());
        await store.putAuthorizationCode({
          codeHash,
          clientId: 'c-ex',
          redirectUri: 'http://127.0.0.1/cb',
          codeChallenge: 'c',
          resource: 'r',
          user: alice,
          createdAt: clock.now(),
          expiresAt: clock.now() + 60_000,
        });
        const redeemed = accessToken('c-ex', { user: alice });
        expect(await store.redeemAuthorizationCode(codeHash, 'c-ex', clock.now(), HOUR, redeemed.record)).toBe('ok');
        const all = [short.record, grant.access.record, grant.refresh.record, next.access.record, next.refresh.record, redeemed.record].map(
          (r) => r.tokenHash,
        );
        expect(hashesOf(await store.listSubjectTokens('alice', clock.now()))).toEqual([...all].sort());

        clock.advance(1000);
        expect(hashesOf(await store.listSubjectTokens('alice', clock.now()))).toEqual(all.slice(1).sort());
        expect(await store.revokeAccessToken(redeemed.record.tokenHash, clock.now())).toBe(true);
        expect(hashesOf(await store.listSubjectTokens('alice', clock.now()))).toEqual(all.slice(1, 5).sort());
        expect(await store.deleteClient('c-ex', clock.now())).not.toBeNull();
        expect(await store.listSubjectTokens('alice', clock.now())).toEqual([]);
        expect(await store.listClientTokens('c-ex', clock.now())).toEqual([]);
      });

      it("lists the subject's remembered approvals, across browsers, only while kept", async () => {
        const browserA = hashToken('browser a');
        const browserB = hashToken('browser b');
        await store.putConsent(browserA, approval('alice', 'c-1'), clock.now(), 20);
        await store.putConsent(browserB, approval('alice', 'c-2', { expiresAt: clock.now() + 1000 }), clock.now(), 20);
        await store.putConsent(browserA, approval('bob', 'c-1'), clock.now(), 20);
        const listed = await store.listSubjectConsents('alice', clock.now());
        expect(listed.map((c) => [c.clientId, c.browserHash]).sort()).toEqual([
          ['c-1', browserA],
          ['c-2', browserB],
        ]);
        clock.advance(1000);
        expect((await store.listSubjectConsents('alice', clock.now())).map((c) => c.clientId)).toEqual(['c-1']);
        // Evicted from its browser (the per-browser bound): no longer listed.
        await store.putConsent(browserA, approval('carol', 'c-9'), clock.now(), 1);
        expect(await store.listSubjectConsents('alice', clock.now())).toEqual([]);
        expect((await store.listSubjectConsents('bob', clock.now())).map((c) => c.clientId)).toEqual([]);
      });

      it('revokeSubject revokes everything the subject holds in batches, announces it, leaves others alone; a second call finds nothing', async () => {
        await store.createClient(client('c-r1').record);
        await store.createClient(client('c-r2').record);
        const users = [userRecord({ subject: 'alice' }), userRecord({ subject: 'alice' }), userRecord({ subject: 'alice' })];
        for (const u of users) await store.putUserToken(u.record);
        // One revoked by hand before: it stays revoked, and is not counted again.
        await h.setRawField(h.keys.userToken(users[2]!.record.tokenHash), 'revoked', 'true');
        const grants = [await signInGrant('c-r1', alice, 'fam-r1'), await signInGrant('c-r2', alice, 'fam-r2')];
        const jag = accessToken('c-r2', { user: alice });
        expect(await store.createAccessToken(jag.record)).toBe('ok');
        const browser = hashToken('browser r');
        await store.putConsent(browser, approval('alice', 'c-r1'), clock.now(), 20);
        await store.putConsent(browser, approval('bob', 'c-r1'), clock.now(), 20);
        const bobUser = userRecord({ subject: 'bob' });
        await store.putUserToken(bobUser.record);
        const bobGrant = await signInGrant('c-r1', bob, 'fam-bob');

        const heard: RevocationNotice[] = [];
        const unsubscribe = await store.subscribeRevocations({ revoked: (n) => heard.push(n), missed: () => undefined });
        const result = await store.revokeSubject('alice', undefined, clock.now(), 2);
        expect(result).toEqual({ accessTokensRevoked: 3, refreshTokensRevoked: 2, userTokensRevoked: 2, consentsForgotten: 1 });
        for (const hash of [
          ...users.map((u) => u.record.tokenHash),
          jag.record.tokenHash,
          ...grants.map((g) => g.access.record.tokenHash),
        ]) {
          expect(await reasonOf(hash)).toBe('revoked');
        }
        for (const g of grants) expect((await refreshOf(g.refresh.record.tokenHash))?.revokedAt).toBe(clock.now());
        for (const u of users) expect((await h.rawHash(h.keys.userToken(u.record.tokenHash)))?.revoked).toBe('true');
        expect((await store.listConsents(browser, clock.now())).map((c) => c.subject)).toEqual(['bob']);
        expect(await store.listSubjectTokens('alice', clock.now())).toEqual([]);
        // Bob's tokens work.
        expect(await reasonOf(bobUser.record.tokenHash)).toBe('ok');
        expect(await reasonOf(bobGrant.access.record.tokenHash)).toBe('ok');
        expect((await refreshOf(bobGrant.refresh.record.tokenHash))?.revokedAt).toBeUndefined();
        // Every sidecar hears which tokens and families ended (open streams end on them).
        const wanted = [
          users[0]!.record.tokenHash,
          users[1]!.record.tokenHash,
          jag.record.tokenHash,
          ...grants.map((g) => g.access.record.tokenHash),
        ];
        while (heard.flatMap((n) => n.tokenHashes ?? []).length < wanted.length || heard.flatMap((n) => n.familyIds ?? []).length < 2) {
          await new Promise((r) => setImmediate(r));
        }
        expect(heard.flatMap((n) => n.tokenHashes ?? []).sort()).toEqual(wanted.sort());
        expect(heard.flatMap((n) => n.familyIds ?? []).sort()).toEqual(['fam-r1', 'fam-r2']);
        await unsubscribe();

        expect(await store.revokeSubject('alice', undefined, clock.now(), 2)).toEqual({
          accessTokensRevoked: 0,
          refreshTokensRevoked: 0,
          userTokensRevoked: 0,
          consentsForgotten: 0,
        });
        expect(await store.revokeSubject('nobody', undefined, clock.now(), 2)).toEqual({
          accessTokensRevoked: 0,
          refreshTokensRevoked: 0,
          userTokensRevoked: 0,
          consentsForgotten: 0,
        });
        expect((await h.rawHash(h.keys.userToken(users[2]!.record.tokenHash)))?.revoked).toBe('true');
      });

      it("revokeSubject with an issuer revokes only what that issuer's subject holds", async () => {
        await store.createClient(client('c-iss').record);
        const here = userRecord({ subject: 'alice', issuer: ISS });
        const elsewhere = userRecord({ subject: 'alice', issuer: 'https://other-idp.example.com/' });
        await store.putUserToken(here.record);
        await store.putUserToken(elsewhere.record);
        const grant = await signInGrant('c-iss', { subject: 'alice', issuer: 'https://other-idp.example.com/' }, 'fam-iss');
        const result = await store.revokeSubject('alice', ISS, clock.now(), 10);
        expect(result).toEqual({ accessTokensRevoked: 0, refreshTokensRevoked: 0, userTokensRevoked: 1, consentsForgotten: 0 });
        expect(await reasonOf(here.record.tokenHash)).toBe('revoked');
        expect(await reasonOf(elsewhere.record.tokenHash)).toBe('ok');
        expect(await reasonOf(grant.access.record.tokenHash)).toBe('ok');
        expect(hashesOf(await store.listSubjectTokens('alice', clock.now()))).toEqual(
          [elsewhere.record.tokenHash, grant.access.record.tokenHash, grant.refresh.record.tokenHash].sort(),
        );
      });

      it('rebuildSubjectIndex indexes records written before the index existed', async () => {
        // A user-grade record as an older version wrote it: the hash alone, no index member.
        const old = userRecord({ subject: 'alice' });
        for (const [field, value] of Object.entries({
          tokenHash: old.record.tokenHash,
          subject: 'alice',
          issuer: ISS,
          revoked: 'false',
          createdAt: String(clock.now()),
          expiresAt: String(clock.now() + HOUR),
        })) {
          await h.setRawField(h.keys.userToken(old.record.tokenHash), field, value);
        }
        const gone = userRecord({ subject: 'alice' });
        for (const [field, value] of Object.entries({
          subject: 'alice',
          issuer: ISS,
          revoked: 'false',
          expiresAt: String(clock.now() - 1),
        })) {
          await h.setRawField(h.keys.userToken(gone.record.tokenHash), field, value);
        }
        expect(await store.listSubjectTokens('alice', clock.now())).toEqual([]);
        const rebuilt = await store.rebuildSubjectIndex(clock.now(), 1);
        expect(rebuilt.indexed).toBeGreaterThanOrEqual(1);
        expect(rebuilt.scanned).toBeGreaterThanOrEqual(2);
        expect(hashesOf(await store.listSubjectTokens('alice', clock.now()))).toEqual([old.record.tokenHash]);
        expect((await store.revokeSubject('alice', undefined, clock.now(), 10)).userTokensRevoked).toBe(1);
        expect(await reasonOf(old.record.tokenHash)).toBe('revoked');
      });

      it('forgetConsent forgets one approval of that subject only, and its index member', async () => {
        const browser = hashToken('browser f');
        await store.putConsent(browser, approval('alice', 'c-1'), clock.now(), 20);
        await store.putConsent(browser, approval('bob', 'c-1'), clock.now(), 20);
        const [mine] = await store.listSubjectConsents('alice', clock.now());
        expect(await store.forgetConsent(browser, mine!.key, 'bob')).toBe(false);
        expect(await store.forgetConsent(browser, mine!.key, 'alice')).toBe(true);
        expect(await store.forgetConsent(browser, mine!.key, 'alice')).toBe(false);
        expect(await store.listSubjectConsents('alice', clock.now())).toEqual([]);
        expect((await store.listConsents(browser, clock.now())).map((c) => c.subject)).toEqual(['bob']);
      });

      it('an account session is kept under its hash until it expires, and ends on delete', async () => {
        const session = hashToken(generateToken());
        const record = {
          user: { subject: 'alice', issuer: ISS, email: 'a@example.com' },
          createdAt: clock.now(),
          expiresAt: clock.now() + 1000,
        };
        await store.putAccountSession(session, record);
        expect(await store.getAccountSession(session, clock.now())).toEqual(record);
        expect(h.keys.accountSession(session)).toContain('{oauth}');
        expect(await store.getAccountSession(hashToken(generateToken()), clock.now())).toBeNull();
        expect(await store.getAccountSession(session, clock.now() + 1000)).toBeNull();
        expect(await store.deleteAccountSession(session)).toBe(true);
        expect(await store.getAccountSession(session, clock.now())).toBeNull();
        expect(await store.deleteAccountSession(session)).toBe(false);
      });

      it('recordLastUse sets lastUsedAt on a stored token, never moves it back, and creates nothing', async () => {
        await store.createClient(client('c-use').record);
        const user = userRecord({ subject: 'alice' });
        await store.putUserToken(user.record);
        const access = accessToken('c-use', { user: alice });
        expect(await store.createAccessToken(access.record)).toBe('ok');
        const unknown = hashToken(generateToken());
        await store.recordLastUse([
          { tokenHash: user.record.tokenHash, kind: 'user', at: 2000 },
          { tokenHash: access.record.tokenHash, kind: 'oauth', at: 3000 },
          { tokenHash: unknown, kind: 'user', at: 3000 },
        ]);
        await store.recordLastUse([{ tokenHash: user.record.tokenHash, kind: 'user', at: 1000 }]);
        const listed = await store.listSubjectTokens('alice', clock.now());
        expect(listed.find((t) => t.kind === 'user')?.lastUsedAt).toBe(2000);
        expect(listed.find((t) => t.kind === 'access')?.lastUsedAt).toBe(3000);
        expect(await h.rawHash(h.keys.userToken(unknown))).toBeNull();
        expect(await reasonOf(user.record.tokenHash)).toBe('ok');
      });
    });

    describe("offboarding's cut-offs", () => {
      const A = 'https://idp-a.example';
      const B = 'https://idp-b.example';

      it('none recorded: undefined at every issuer', async () => {
        await expect(store.subjectRevokedAt('alice', A)).resolves.toBeUndefined();
      });

      it("one issuer's cut-off applies at that issuer only, and to that subject only", async () => {
        const at = clock.now();
        await store.markSubjectRevoked('alice', A, at, at + HOUR);
        await expect(store.subjectRevokedAt('alice', A)).resolves.toBe(at);
        await expect(store.subjectRevokedAt('alice', B)).resolves.toBeUndefined();
        await expect(store.subjectRevokedAt('bob', A)).resolves.toBeUndefined();
      });

      it('an every-issuer cut-off applies at each issuer; the latest of the two that apply is answered', async () => {
        const at = clock.now();
        await store.markSubjectRevoked('alice', A, at + 5, at + HOUR);
        await store.markSubjectRevoked('alice', undefined, at, at + HOUR);
        await expect(store.subjectRevokedAt('alice', A)).resolves.toBe(at + 5);
        await expect(store.subjectRevokedAt('alice', B)).resolves.toBe(at);
        await store.markSubjectRevoked('alice', undefined, at + 9, at + HOUR);
        await expect(store.subjectRevokedAt('alice', A)).resolves.toBe(at + 9);
      });

      it('kept until keepUntil: one whose keepUntil has passed is gone', async () => {
        const at = clock.now();
        await store.markSubjectRevoked('alice', A, at, at - 1);
        await expect(store.subjectRevokedAt('alice', A)).resolves.toBeUndefined();
        expect(await h.rawHash(h.keys.subjectCutoff(subjectDigest('alice')))).toBeNull();
      });

      it('a hand-edited field that is not a time counts as no cut-off at that field', async () => {
        const at = clock.now();
        await store.markSubjectRevoked('alice', undefined, at, at + HOUR);
        const key = h.keys.subjectCutoff(subjectDigest('alice'));
        await h.setRawField(key, A, 'not a time');
        await expect(store.subjectRevokedAt('alice', A)).resolves.toBe(at);
      });
    });

    describe('lifecycle and failures', () => {
      // One call of every operation; a new operation must be added here (the type insists).
      const everyOperation = {
        lookupToken: (s) => s.lookupToken(hashToken('x')),
        putUserToken: (s) => s.putUserToken(userRecord().record),
        revokeUserToken: (s) => s.revokeUserToken(hashToken('x')),
        createAccessToken: (s) => s.createAccessToken(accessToken('mcp_gone').record),
        revokeAccessToken: (s) => s.revokeAccessToken(hashToken('x'), clock.now()),
        issueTokens: (s) => s.issueTokens(accessToken('mcp_gone').record, refreshToken('mcp_gone', 'fam').record),
        createClient: (s) => s.createClient(client('mcp_gone').record),
        getClient: (s) => s.getClient('mcp_gone'),
        listClients: (s) => s.listClients(),
        deleteClient: (s) => s.deleteClient('mcp_gone', clock.now()),
        touchClient: (s) => s.touchClient('mcp_gone', HOUR),
        getRefreshToken: (s) => s.getRefreshToken(hashToken('x')),
        rotateRefreshToken: (s) =>
          s.rotateRefreshToken(
            hashToken('x'),
            'mcp_gone',
            clock.now(),
            accessToken('mcp_gone').record,
            refreshToken('mcp_gone', 'fam').record,
          ),
        revokeRefreshFamily: (s) => s.revokeRefreshFamily(hashToken('x'), clock.now()),
        putAuthorizationRequest: (s) => s.putAuthorizationRequest(hashToken('x'), pendingRequest(), clock.now() + HOUR),
        takeAuthorizationRequest: (s) => s.takeAuthorizationRequest(hashToken('x')),
        putPendingSignIn: (s) =>
          s.putPendingSignIn(hashToken('x'), pendingRequest(), clock.now() + HOUR, {
            address: '192.0.2.1',
            clientId: 'c',
            perAddress: 1,
            perClient: 1,
            now: clock.now(),
          }),
        putAuthorizationCode: (s) =>
          s.putAuthorizationCode({
            codeHash: hashToken('x'),
            clientId: 'mcp_gone',
            redirectUri: 'http://127.0.0.1/cb',
            codeChallenge: 'c',
            resource: 'r',
            user: { subject: 's', issuer: 'i' },
            createdAt: clock.now(),
            expiresAt: clock.now() + 60_000,
          }),
        getAuthorizationCode: (s) => s.getAuthorizationCode(hashToken('x')),
        redeemAuthorizationCode: (s) =>
          s.redeemAuthorizationCode(hashToken('x'), 'mcp_gone', clock.now(), HOUR, accessToken('mcp_gone').record),
        putConsent: (s) =>
          s.putConsent(
            hashToken('x'),
            {
              clientId: 'c',
              clientCreatedAt: 1,
              redirectUri: 'r',
              issuer: 'i',
              subject: 's',
              approvedAt: 1,
              expiresAt: clock.now() + HOUR,
            },
            clock.now(),
            20,
          ),
        listConsents: (s) => s.listConsents(hashToken('x'), clock.now()),
        putDeviceAuthorization: (s) =>
          s.putDeviceAuthorization(
            {
              deviceCodeHash: hashToken('d'),
              userCodeHash: hashToken('u'),
              clientId: 'c',
              interval: 5,
              createdAt: clock.now(),
              expiresAt: clock.now() + 60_000,
            },
            60_000,
            { address: 'a', perAddress: 1, total: 1, now: clock.now() },
          ),
        findDeviceAuthorization: (s) => s.findDeviceAuthorization(hashToken('u')),
        decideDeviceAuthorization: (s) => s.decideDeviceAuthorization(hashToken('d'), clock.now(), undefined),
        pollDeviceAuthorization: (s) => s.pollDeviceAuthorization(hashToken('d'), 'c', clock.now()),
        linkConsentGrant: (s) => s.linkConsentGrant('fam', hashToken('x'), 'k', clock.now() + HOUR),
        hitCounter: (s) => s.hitCounter('gone', 60_000),
        useOnce: (s) => s.useOnce('gone', clock.now() + 60_000),
        takeQuota: (s) => s.takeQuota('gone', 1, 1, 60_000, clock.now()),
        seedProfiles: (s) =>
          s.seedProfiles([
            {
              name: 'gone',
              description: '',
              accessTokenLifetimeSeconds: 60,
              refreshTokenLifetimeSeconds: 0,
              grantTypes: [],
              createdAt: clock.now(),
            },
          ]),
        getProfile: (s) => s.getProfile('gone'),
        getProfileFields: (s) => s.getProfileFields('gone'),
        listProfiles: (s) => s.listProfiles(),
        appendAudit: (s) => s.appendAudit({ at: clock.now(), who: 'master', action: 'x', result: 'ok' }, 10),
        listAuditEvents: (s) => s.listAuditEvents(10),
        subscribeRevocations: (s) => s.subscribeRevocations({ revoked: () => undefined, missed: () => undefined }),
        publishSigningKey: (s) => s.publishSigningKey({ kid: 'k', jwk: '{}', expiresAt: clock.now() + HOUR }, clock.now()),
        listSigningKeys: (s) => s.listSigningKeys(clock.now()),
        putUpstreamCredential: (s) => s.putUpstreamCredential(upstreamCredential()),
        getUpstreamCredential: (s) => s.getUpstreamCredential('s', 'i', 'idp'),
        replaceUpstreamCredential: (s) => s.replaceUpstreamCredential(upstreamCredential(), 'x'),
        deleteUpstreamCredentials: (s) => s.deleteUpstreamCredentials('s'),
        listUpstreamCredentials: (s) => s.listUpstreamCredentials(),
        deleteUpstreamCredential: (s) => s.deleteUpstreamCredential('s', 'i', 'idp'),
        listSubjectUpstreamCredentials: (s) => s.listSubjectUpstreamCredentials('s'),
        ping: (s) => s.ping(),
        readHandle: (s) => s.readHandle('session', hashToken('x')),
        useHandle: (s) => s.useHandle('session', hashToken('x'), handleOwner({ kind: 'user', subject: 's' }), clock.now(), HOUR, 10),
        bindHandle: (s) => s.bindHandle('session', hashToken('x'), handleOwner({ kind: 'user', subject: 's' }), clock.now(), HOUR, 10),
        forgetHandle: (s) => s.forgetHandle('session', hashToken('x')),
        forgetSubjectHandles: (s) => s.forgetSubjectHandles('s'),
        listSubjectTokens: (s) => s.listSubjectTokens('s', clock.now()),
        listClientTokens: (s) => s.listClientTokens('c', clock.now()),
        listSubjectConsents: (s) => s.listSubjectConsents('s', clock.now()),
        revokeSubject: (s) => s.revokeSubject('s', undefined, clock.now(), 10),
        rebuildSubjectIndex: (s) => s.rebuildSubjectIndex(clock.now(), 10),
        recordLastUse: (s) => s.recordLastUse([{ tokenHash: hashToken('x'), kind: 'user', at: clock.now() }]),
        putAccountSession: (s) =>
          s.putAccountSession(hashToken('x'), {
            user: { subject: 's', issuer: 'i' },
            createdAt: clock.now(),
            expiresAt: clock.now() + HOUR,
          }),
        getAccountSession: (s) => s.getAccountSession(hashToken('x'), clock.now()),
        deleteAccountSession: (s) => s.deleteAccountSession(hashToken('x')),
        markSubjectRevoked: (s) => s.markSubjectRevoked('s', undefined, clock.now(), clock.now() + HOUR),
        subjectRevokedAt: (s) => s.subjectRevokedAt('s', 'i'),
        forgetConsent: (s) => s.forgetConsent(hashToken('x'), hashToken('k'), 's'),
      } satisfies Record<StoreOperation, (s: TokenStore) => Promise<unknown>>;

      it('ping answers while open; close resolves and later calls reject', async () => {
        await expect(store.ping()).resolves.toBeUndefined();
        await expect(store.close()).resolves.toBeUndefined();
        await expect(store.lookupToken(hashToken('x'))).rejects.toThrow();
        await expect(store.ping()).rejects.toThrow();
      });

      it('once the store cannot answer, every operation rejects with StoreUnavailableError (the outage, not a bug)', async () => {
        await store.close();
        for (const [name, call] of Object.entries(everyOperation)) {
          const err = await call(store).then(
            () => new Error(`${name} resolved on a closed store`),
            (e: unknown) => e,
          );
          expect(err, name).toBeInstanceOf(StoreUnavailableError);
        }
      });

      it('a bug under a store call (a TypeError) is not reported as the store being unavailable', async () => {
        const err = await store.createClient(undefined as unknown as ClientRecord).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(TypeError);
        expect(err).not.toBeInstanceOf(StoreUnavailableError);
      });

      it('creating a client whose id exists is DuplicateRecordError, not an outage, and leaves the first one', async () => {
        const first = client('mcp_twice');
        await store.createClient(first.record);
        await expect(store.createClient(client('mcp_twice', { clientName: 'second' }).record)).rejects.toBeInstanceOf(DuplicateRecordError);
        expect(await store.getClient('mcp_twice')).toEqual(first.record);
      });
    });
  });
}
