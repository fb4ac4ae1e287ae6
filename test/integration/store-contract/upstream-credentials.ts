// The store contract's slice for upstream credentials: kept upstream credentials.

import { beforeEach, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../../src/model/clock.ts';
import type { TokenStore } from '../../../src/store/types.ts';
import { type Contract, contractHelpers, HOUR, type StoreHarness } from './context.ts';

export function upstreamCredentialsContract(contract: Contract): void {
  let clock: ManualClock;
  let h: StoreHarness;
  let store: TokenStore;
  beforeEach(() => {
    ({ clock, h, store } = contract);
  });
  const { upstreamCredential } = contractHelpers(contract);

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

    it('8 concurrent re-encryptions of one credential from the same ciphertext: exactly one is written', async () => {
      const first = upstreamCredential({ sealed: 'first' });
      await store.putUpstreamCredential(first);
      await store.putUpstreamCredential(upstreamCredential({ provider: 'oauth:github', sealed: 'github' }));
      const outcomes = await Promise.all(
        Array.from({ length: 8 }, (_, i) => store.replaceUpstreamCredential({ ...first, sealed: `rewrapped-${i}` }, 'first')),
      );
      expect(outcomes.filter(Boolean)).toHaveLength(1);
      expect(await store.getUpstreamCredential('alice', 'https://idp.example/', 'idp')).toMatchObject({
        sealed: `rewrapped-${outcomes.indexOf(true)}`,
      });
      expect(await store.getUpstreamCredential('alice', 'https://idp.example/', 'oauth:github')).toMatchObject({ sealed: 'github' });
    });

    it('a value that does not read as a credential is never replaced, whatever ciphertext it holds', async () => {
      const field = JSON.stringify(['https://idp.example/', 'idp']);
      await h.setRawField(h.keys.upstreamCredentials('alice'), field, '{"sealed":"first"}');
      expect(await store.replaceUpstreamCredential(upstreamCredential({ sealed: 'rewrapped' }), 'first')).toBe(false);
      expect((await h.rawHash(h.keys.upstreamCredentials('alice')))?.[field]).toBe('{"sealed":"first"}');
    });

    it("8 concurrent deletions of a user's credentials: each is counted once, the hash is gone", async () => {
      await store.putUpstreamCredential(upstreamCredential());
      await store.putUpstreamCredential(upstreamCredential({ provider: 'oauth:github' }));
      await store.putUpstreamCredential(upstreamCredential({ issuer: 'https://other-idp.example/' }));
      await h.setRawField(h.keys.upstreamCredentials('alice'), 'not a field', 'x');
      expect(await store.deleteUpstreamCredentials('alice', 'https://idp.example/')).toBe(2);
      const counts = await Promise.all(Array.from({ length: 8 }, () => store.deleteUpstreamCredentials('alice')));
      expect(counts.reduce((a, b) => a + b, 0)).toBe(2);
      expect(await h.rawHash(h.keys.upstreamCredentials('alice'))).toBeNull();
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
}
