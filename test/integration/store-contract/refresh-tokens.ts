// The store contract's slice for refresh tokens: refresh tokens.

import { beforeEach, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../../src/model/clock.ts';
import { generateToken, hashToken } from '../../../src/model/credentials.ts';
import type { TokenStore } from '../../../src/store/types.ts';
import { type Contract, contractHelpers, type StoreHarness } from './context.ts';

export function refreshTokensContract(contract: Contract): void {
  let clock: ManualClock;
  let h: StoreHarness;
  let store: TokenStore;
  beforeEach(() => {
    ({ clock, h, store } = contract);
  });
  const { refreshOf, client, accessToken, refreshToken, reasonOf } = contractHelpers(contract);

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
        await store.rotateRefreshToken(first.refresh.record.tokenHash, 'c-reuse', clock.now(), second.access.record, second.refresh.record),
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
        await store.rotateRefreshToken(second.refresh.record.tokenHash, 'c-reuse', clock.now(), after.access.record, after.refresh.record),
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
      expect(await store.rotateRefreshToken(first.refresh.record.tokenHash, 'c-own', clock.now(), n.access.record, n.refresh.record)).toBe(
        'invalid',
      );
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
}
