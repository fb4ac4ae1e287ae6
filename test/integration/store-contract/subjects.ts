// The store contract's slice for subjects: subject index, offboarding's cut-offs.

import { beforeEach, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../../src/model/clock.ts';
import { generateToken, generateTokenFor, hashToken } from '../../../src/model/credentials.ts';
import { subjectDigest } from '../../../src/store/records.ts';
import type { ConsentRecord, RevocationNotice, TokenStore } from '../../../src/store/types.ts';
import { type Contract, contractHelpers, HOUR, type StoreHarness } from './context.ts';

export function subjectsContract(contract: Contract): void {
  let clock: ManualClock;
  let h: StoreHarness;
  let store: TokenStore;
  beforeEach(() => {
    ({ clock, h, store } = contract);
  });
  const { refreshOf, userRecord, client, accessToken, refreshToken, reasonOf } = contractHelpers(contract);

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
      const codeHash = hashToken(generateTokenFor('c-ex'));
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
      for (const hash of [...users.map((u) => u.record.tokenHash), jag.record.tokenHash, ...grants.map((g) => g.access.record.tokenHash)]) {
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

    it('8 concurrent revocations of one subject: each user-grade token is revoked once, counted once, and announced once', async () => {
      const tokens = [userRecord({ subject: 'alice' }), userRecord({ subject: 'alice' }), userRecord({ subject: 'alice' })];
      for (const t of tokens) await store.putUserToken(t.record);
      // Every notice is heard; a probe revoked after them, heard last, says none is still on its way. On
      // Cluster a notice may travel from another node than the probe's, so its order is not the
      // sending order: the check also waits until each token was heard of at least once.
      const probe = userRecord({ subject: 'probe' });
      await store.putUserToken(probe.record);
      const announced: string[] = [];
      let probed!: () => void;
      const heardProbe = new Promise<void>((r) => (probed = r));
      let heardAll!: () => void;
      const everyTokenHeard = new Promise<void>((r) => (heardAll = r));
      const unsubscribe = await store.subscribeRevocations({
        revoked: (notice: RevocationNotice) => {
          for (const hash of notice.tokenHashes ?? []) {
            if (hash === probe.record.tokenHash) probed();
            else announced.push(hash);
          }
          if (tokens.every((t) => announced.includes(t.record.tokenHash))) heardAll();
        },
        missed: () => undefined,
      });
      const results = await Promise.all(Array.from({ length: 8 }, () => store.revokeSubject('alice', ISS, clock.now(), 2)));
      expect(results.reduce((sum, r) => sum + r.userTokensRevoked, 0)).toBe(3);
      for (const t of tokens) {
        expect(await reasonOf(t.record.tokenHash)).toBe('revoked');
        expect((await h.rawHash(h.keys.userToken(t.record.tokenHash)))?.revoked).toBe('true');
      }
      expect(await store.revokeUserToken(probe.record.tokenHash)).toBe(true);
      await Promise.all([heardProbe, everyTokenHeard]);
      await unsubscribe();
      expect(announced.sort()).toEqual(hashesOf(tokens.map((t) => t.record)));
    });

    it("a user-grade token whose flag is neither live nor revoked (a hand edit) is left as it is by its subject's revocation", async () => {
      const odd = userRecord({ subject: 'alice' });
      await store.putUserToken(odd.record);
      await h.setRawField(h.keys.userToken(odd.record.tokenHash), 'revoked', 'maybe');
      expect(await store.revokeSubject('alice', undefined, clock.now(), 10)).toMatchObject({ userTokensRevoked: 0 });
      expect((await h.rawHash(h.keys.userToken(odd.record.tokenHash)))?.revoked).toBe('maybe');
      expect(await store.listSubjectTokens('alice', clock.now())).toEqual([]);
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

    it('rebuildSubjectIndex indexes access and refresh tokens (each in its bucket) and remembered approvals no index lists', async () => {
      await store.createClient(client('c-rb').record);
      const grant = await signInGrant('c-rb', alice, 'fam-rb');
      const browser = hashToken('browser rb');
      await store.putConsent(browser, approval('alice', 'c-rb'), clock.now(), 20);
      // Copies of those records under names no index lists (as a version before the index wrote them).
      const copy = async (from: string, to: string, tokenHash?: string) => {
        for (const [field, value] of Object.entries((await h.rawHash(from))!))
          await h.setRawField(to, field, field === 'tokenHash' && tokenHash !== undefined ? tokenHash : value);
      };
      const access = hashToken(generateTokenFor('c-rb'));
      const refresh = hashToken(generateTokenFor('c-rb'));
      const otherBrowser = hashToken('browser rb, before the index');
      await copy(h.keys.accessToken(grant.access.record.tokenHash), h.keys.accessToken(access), access);
      await copy(h.keys.refreshToken(grant.refresh.record.tokenHash), h.keys.refreshToken(refresh), refresh);
      await copy(h.keys.consents(browser), h.keys.consents(otherBrowser));
      const indexed = [grant.access.record.tokenHash, grant.refresh.record.tokenHash];
      expect(hashesOf(await store.listSubjectTokens('alice', clock.now()))).toEqual(indexed.sort());
      expect((await store.listSubjectConsents('alice', clock.now())).map((c) => c.browserHash)).toEqual([browser]);
      // Batches of 2: every kind's keys come in several.
      const rebuilt = await store.rebuildSubjectIndex(clock.now(), 2);
      expect(rebuilt.indexed).toBeGreaterThanOrEqual(6);
      expect(hashesOf(await store.listSubjectTokens('alice', clock.now()))).toEqual([...indexed, access, refresh].sort());
      expect((await store.listSubjectConsents('alice', clock.now())).map((c) => c.browserHash).sort()).toEqual(
        [browser, otherBrowser].sort(),
      );
      // Listed in the index its revocation goes through: the copies are revoked with the rest.
      expect(await store.revokeSubject('alice', undefined, clock.now(), 10)).toMatchObject({
        accessTokensRevoked: 2,
        refreshTokensRevoked: 2,
        consentsForgotten: 2,
      });
      expect(await store.listSubjectTokens('alice', clock.now())).toEqual([]);
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

    it("8 concurrent forgets of one approval: exactly one forgets it, the browser's other approvals stay", async () => {
      const browser = hashToken('browser race');
      await store.putConsent(browser, approval('alice', 'c-1'), clock.now(), 20);
      await store.putConsent(browser, approval('alice', 'c-2'), clock.now(), 20);
      const [first] = await store.listSubjectConsents('alice', clock.now());
      const outcomes = await Promise.all(Array.from({ length: 8 }, () => store.forgetConsent(browser, first!.key, 'alice')));
      expect(outcomes.filter(Boolean)).toHaveLength(1);
      expect((await store.listSubjectConsents('alice', clock.now())).map((c) => c.clientId)).toEqual([
        first!.clientId === 'c-1' ? 'c-2' : 'c-1',
      ]);
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

    it('8 concurrent last-use stamps of one token leave the latest, and touch nothing else of the record', async () => {
      const user = userRecord({ subject: 'alice' });
      await store.putUserToken(user.record);
      const key = h.keys.userToken(user.record.tokenHash);
      const before = await h.rawHash(key);
      const times = [5, 3, 8, 1, 7, 2, 6, 4].map((i) => clock.now() + i);
      await Promise.all(times.map((at) => store.recordLastUse([{ tokenHash: user.record.tokenHash, kind: 'user', at }])));
      expect(await h.rawHash(key)).toEqual({ ...before, lastUsedAt: String(clock.now() + 8) });
    });

    it('a last use that does not read as a time (a hand edit) is replaced by the next stamp', async () => {
      const user = userRecord({ subject: 'alice' });
      await store.putUserToken(user.record);
      const key = h.keys.userToken(user.record.tokenHash);
      await h.setRawField(key, 'lastUsedAt', 'yesterday');
      await store.recordLastUse([{ tokenHash: user.record.tokenHash, kind: 'user', at: 1000 }]);
      expect((await h.rawHash(key))?.lastUsedAt).toBe('1000');
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
}
