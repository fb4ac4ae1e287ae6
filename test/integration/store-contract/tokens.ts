// The store contract's slice for tokens: user-grade tokens, OAuth access tokens.

import { beforeEach, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../../src/model/clock.ts';
import { decideToken, generateToken, hashToken } from '../../../src/model/credentials.ts';
import type { TokenStore } from '../../../src/store/types.ts';
import { type Contract, contractHelpers, HOUR, INTEGER_MS, type StoreHarness } from './context.ts';

export function tokensContract(contract: Contract): void {
  let clock: ManualClock;
  let h: StoreHarness;
  let store: TokenStore;
  beforeEach(() => {
    ({ clock, h, store } = contract);
  });
  const { clientRead, userRecord, client, accessToken, reasonOf } = contractHelpers(contract);

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
        principal: {
          kind: 'user',
          subject: 'user-123',
          issuer: 'https://idp.example.com/',
          tokenHash: record.tokenHash,
          expiresAt: record.expiresAt,
        },
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

    it('8 concurrent revocations of one user-grade token: each answers true, the flag is set, nothing else changes', async () => {
      const { record } = userRecord();
      await store.putUserToken(record);
      const key = h.keys.userToken(record.tokenHash);
      const before = await h.rawHash(key);
      expect(await Promise.all(Array.from({ length: 8 }, () => store.revokeUserToken(record.tokenHash)))).toEqual(Array(8).fill(true));
      expect(await h.rawHash(key)).toEqual({ ...before, revoked: 'true' });
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

    it('8 concurrent revocations of one access token: each answers true, one revokedAt is kept, the rest of the record untouched', async () => {
      await store.createClient(client('c-race').record);
      const t = accessToken('c-race');
      expect(await store.createAccessToken(t.record)).toBe('ok');
      const key = h.keys.accessToken(t.record.tokenHash);
      const before = await h.rawHash(key);
      const times = Array.from({ length: 8 }, (_, i) => clock.now() + i);
      expect(await Promise.all(times.map((at) => store.revokeAccessToken(t.record.tokenHash, at)))).toEqual(times.map(() => true));
      const after = await h.rawHash(key);
      expect(times.map(String)).toContain(after?.revokedAt);
      expect(after).toEqual({ ...before, revokedAt: after?.revokedAt });
      expect(await store.revokeAccessToken(t.record.tokenHash, clock.now() + 100)).toBe(true);
      expect((await h.rawHash(key))?.revokedAt).toBe(after?.revokedAt);
    });
  });
}
