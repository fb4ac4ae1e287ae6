// The store contract's slice for sign in: browser sign-in: pending requests and authorization codes, remembered consent approvals.

import { beforeEach, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../../src/model/clock.ts';
import { generateToken, generateTokenFor, hashToken } from '../../../src/model/credentials.ts';
import { clientBucket } from '../../../src/store/records.ts';
import { consentKey } from '../../../src/store/records.ts';
import type {
  AuthorizationCodeRecord,
  AuthorizationRequestRecord,
  ConsentRecord,
  RevocationNotice,
  TokenStore,
} from '../../../src/store/types.ts';
import { type Contract, contractHelpers, HOUR, type StoreHarness } from './context.ts';

export function signInContract(contract: Contract): void {
  let clock: ManualClock;
  let h: StoreHarness;
  let store: TokenStore;
  beforeEach(() => {
    ({ clock, h, store } = contract);
  });
  const { pendingRequest, refreshOf, client, accessToken, refreshToken, decide, reasonOf } = contractHelpers(contract);

  describe('browser sign-in: pending requests and authorization codes', () => {
    const user = { subject: 'idp-user-1', issuer: 'https://idp.example.com/', email: 'ada@example.com', groups: ['mcp-users', 'eng'] };

    function code(clientId: string, overrides: Partial<AuthorizationCodeRecord> = {}): { raw: string; record: AuthorizationCodeRecord } {
      const raw = generateTokenFor(clientId);
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
      // In the client's bucket: the tag its record and token set carry (redemption is one script).
      expect(key).toContain(`{oauth:${clientBucket('c-code')}}`);
      expect(h.keys.client('c-code')).toContain(`{oauth:${clientBucket('c-code')}}`);
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
        await store.redeemAuthorizationCode(c.record.codeHash, 'c-twice', clock.now(), 600_000, first.access.record, first.refresh.record),
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

    it('8 concurrent approvals on one browser: at most maxPerBrowser kept, the longest-lived among them', async () => {
      const now = clock.now();
      const given = Array.from({ length: 8 }, (_, i) => approval({ clientId: `c-${i + 1}`, expiresAt: now + (i + 1) * HOUR }));
      await Promise.all(given.map((c) => store.putConsent(browser, c, now, 3)));
      const kept = (await store.listConsents(browser, now)).map((c) => c.clientId);
      expect(Object.keys((await h.rawHash(h.keys.consents(browser)))!)).toHaveLength(3);
      // Whatever the order, each write evicts the soonest to expire of the others: the two
      // longest-lived are never that one.
      expect(kept).toHaveLength(3);
      expect(kept).toEqual(expect.arrayContaining(['c-7', 'c-8']));
    });

    it('an entry that reads as JSON with an expiry but is no whole approval is never listed, and the next write drops it', async () => {
      await store.putConsent(browser, approval(), clock.now(), 20);
      await h.setRawField(h.keys.consents(browser), 'partial', JSON.stringify({ expiresAt: clock.now() + 48 * HOUR }));
      expect(await store.listConsents(browser, clock.now())).toHaveLength(1);
      await store.putConsent(browser, approval({ clientId: 'c-next' }), clock.now(), 20);
      expect(Object.keys((await h.rawHash(h.keys.consents(browser)))!)).not.toContain('partial');
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

    it('8 concurrent revocations of one linked grant forget its approval and the link, and nothing else', async () => {
      const mine = approval({ clientId: 'c-race' });
      const other = approval({ clientId: 'c-race-other' });
      const { refresh } = await linked('fam-race', mine);
      await linked('fam-race-other', other);
      const outcomes = await Promise.all(
        Array.from({ length: 8 }, () => store.revokeRefreshFamily(refresh!.record.tokenHash, clock.now())),
      );
      expect(outcomes).toEqual(Array(8).fill(true));
      expect(await store.listConsents(browser, clock.now())).toEqual([other]);
      expect(await h.rawHash(h.keys.consentGrant('fam-race'))).toBeNull();
      expect(await h.rawHash(h.keys.consentGrant('fam-race-other'))).not.toBeNull();
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
        await store.rotateRefreshToken(refresh!.record.tokenHash, 'c-reuse', clock.now() + 1000, again.access.record, again.refresh.record),
      ).toBe('reused');
      expect(await store.listConsents(browser, clock.now())).toEqual([]);
    });

    it('a replayed authorization code forgets the approval its first redemption was linked to', async () => {
      const c = approval({ clientId: 'c-code' });
      await store.createClient(client('c-code').record);
      await store.putConsent(browser, c, clock.now(), 20);
      const raw = generateTokenFor('c-code');
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
}
