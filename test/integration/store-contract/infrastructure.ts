// The store contract's slice for infrastructure: audit stream, revocation notices, assertion signing keys.

import { beforeEach, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../../src/model/clock.ts';
import { generateToken, hashToken } from '../../../src/model/credentials.ts';
import type { RevocationNotice, TokenStore } from '../../../src/store/types.ts';
import { type Contract, contractHelpers, HOUR, type StoreHarness } from './context.ts';

export function infrastructureContract(contract: Contract): void {
  let clock: ManualClock;
  let h: StoreHarness;
  let store: TokenStore;
  beforeEach(() => {
    ({ clock, h, store } = contract);
  });
  const { userRecord, client, accessToken, refreshToken } = contractHelpers(contract);

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

    it('8 replicas publishing at once: every key is listed; 8 publishes of one key keep its longest listing', async () => {
      const now = clock.now();
      const kids = Array.from({ length: 8 }, (_, i) => `r${i}`);
      await Promise.all(kids.map((kid, i) => store.publishSigningKey({ kid, jwk: jwk(kid), expiresAt: now + 1000 + i }, now)));
      expect((await store.listSigningKeys(now)).map((k) => k.kid)).toEqual(kids);
      const ends = [3, 7, 1, 8, 2, 6, 4, 5].map((i) => now + HOUR + i);
      await Promise.all(ends.map((expiresAt) => store.publishSigningKey({ kid: 'k', jwk: jwk('k'), expiresAt }, now)));
      expect((await store.listSigningKeys(now)).find((k) => k.kid === 'k')?.expiresAt).toBe(now + HOUR + 8);
    });

    it('a publish forgets entries that do not read, and the hash goes once nothing it lists is live', async () => {
      const now = clock.now();
      await store.publishSigningKey({ kid: 'a', jwk: jwk('a'), expiresAt: now + 1000 }, now);
      await h.setRawField(h.keys.signingKeys(), 'broken', '{"expiresAt":');
      await store.publishSigningKey({ kid: 'b', jwk: jwk('b'), expiresAt: now + 2000 }, now);
      expect(Object.keys((await h.rawHash(h.keys.signingKeys()))!).sort()).toEqual(['a', 'b']);
      await store.publishSigningKey({ kid: 'c', jwk: jwk('c'), expiresAt: now + 2000 }, now + 2000);
      expect(await h.rawHash(h.keys.signingKeys())).toBeNull();
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
}
