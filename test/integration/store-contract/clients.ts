// The store contract's slice for clients: OAuth clients, deleteClient, profiles.

import { beforeEach, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../../src/model/clock.ts';
import { hashToken } from '../../../src/model/credentials.ts';
import { DuplicateRecordError, type TokenStore } from '../../../src/store/types.ts';
import type { ClientRecord, ProfileRecord } from '../../../src/model/records.ts';
import { type Contract, contractHelpers, INTEGER_MS, type StoreHarness } from './context.ts';

export function clientsContract(contract: Contract): void {
  let clock: ManualClock;
  let h: StoreHarness;
  let store: TokenStore;
  beforeEach(() => {
    ({ clock, h, store } = contract);
  });
  const { clientRead, refreshOf, client, accessToken, refreshToken, reasonOf } = contractHelpers(contract);

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

    it('8 concurrent registrations of one id: exactly one creates the client, the others are refused and change nothing', async () => {
      const attempts = Array.from({ length: 8 }, (_, i) => client('c-race', { clientName: `attempt ${i}` }).record);
      const settled = await Promise.allSettled(attempts.map((record) => store.createClient(record)));
      const winners = settled.flatMap((s, i) => (s.status === 'fulfilled' ? [i] : []));
      expect(winners).toHaveLength(1);
      for (const s of settled) if (s.status === 'rejected') expect(s.reason).toBeInstanceOf(DuplicateRecordError);
      expect(clientRead(await store.getClient('c-race'))?.clientName).toBe(`attempt ${winners[0]}`);
      expect((await store.listClients()).map((c) => c.clientId)).toEqual(['c-race']);
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

    it('8 replicas seeding at once: each profile is created once, and listed', async () => {
      const ps = [profile('alpha'), profile('beta')];
      const created = await Promise.all(Array.from({ length: 8 }, () => store.seedProfiles(ps)));
      expect(created.flat().sort()).toEqual(['alpha', 'beta']);
      expect((await store.listProfiles()).map((p) => p.name)).toEqual(['alpha', 'beta']);
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
}
