// The store contract's slice for the directory: SCIM users, their indexes, tombstones and the
// identities linked to an email, each change planned by src/model/directory.ts in both stores.

import { randomUUID } from 'node:crypto';
import { beforeEach, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../../src/model/clock.ts';
import type { DirectoryUser, TokenStore } from '../../../src/store/types.ts';
import type { Contract, StoreHarness } from './context.ts';

export function directoryContract(contract: Contract): void {
  let clock: ManualClock;
  let h: StoreHarness;
  let store: TokenStore;
  beforeEach(() => {
    ({ clock, h, store } = contract);
  });

  function user(userName: string, overrides: Partial<DirectoryUser> = {}): DirectoryUser {
    const now = clock.now();
    return {
      id: randomUUID(),
      provider: 'default',
      userName,
      externalId: `ext-${userName}`,
      active: true,
      attributes: { displayName: userName, emails: [{ value: userName, primary: true }] },
      createdAt: now,
      updatedAt: now,
      version: 1,
      ...overrides,
    };
  }

  describe('directory (SCIM users)', () => {
    it('a created user is found by id, by userName ignoring case and by externalId exactly; keys share the {directory} slot', async () => {
      const u = user('Ada@Example.com');
      const created = await store.createDirectoryUser(u);
      expect(created.outcome).toBe('written');
      expect(await store.getDirectoryUser(u.id)).toEqual(u);
      expect(await store.findDirectoryUser('default', 'userName', 'ada@EXAMPLE.com')).toEqual(u);
      expect(await store.findDirectoryUser('default', 'externalId', 'ext-Ada@Example.com')).toEqual(u);
      expect(await store.findDirectoryUser('default', 'externalId', 'EXT-ADA@EXAMPLE.COM')).toBeNull();
      expect(await store.findDirectoryUser('other', 'userName', 'ada@example.com')).toBeNull();
      expect(h.keys.directoryUser(u.id)).toContain('{directory}');
      expect(h.keys.directoryIndex('x')).toContain('{directory}');
    });

    it('a second live user with the same userName (any case) is a conflict; nothing of it is stored', async () => {
      await store.createDirectoryUser(user('grace@example.com'));
      const second = user('GRACE@example.com');
      expect((await store.createDirectoryUser(second)).outcome).toBe('conflict');
      expect(await store.getDirectoryUser(second.id)).toBeNull();
      // Another provider's directory is its own namespace.
      expect((await store.createDirectoryUser(user('grace@example.com', { provider: 'contractors' }))).outcome).toBe('written');
    });

    it('racing creates of one userName: exactly one is written', async () => {
      const outcomes = await Promise.all(Array.from({ length: 6 }, () => store.createDirectoryUser(user('race@example.com'))));
      expect(outcomes.filter((o) => o.outcome === 'written')).toHaveLength(1);
      expect(outcomes.filter((o) => o.outcome === 'conflict')).toHaveLength(5);
    });

    it('an update writes the new user with its version and time; an update that changes nothing writes nothing', async () => {
      const u = user('linus@example.com');
      await store.createDirectoryUser(u);
      clock.advance(1000);
      const change = await store.updateDirectoryUser(u.id, (c) => ({ ...c, active: false }), clock.now());
      expect(change).toMatchObject({
        outcome: 'written',
        before: { active: true },
        after: { active: false, version: 2, updatedAt: clock.now() },
      });
      clock.advance(1000);
      const again = await store.updateDirectoryUser(u.id, (c) => ({ ...c, active: false }), clock.now());
      expect(again).toMatchObject({ outcome: 'written', after: { version: 2 } });
      expect(await store.getDirectoryUser(u.id)).toMatchObject({ active: false, version: 2 });
    });

    it('a rename moves the userName index; a rename onto a live user is a conflict and changes nothing', async () => {
      const a = user('a@example.com');
      const b = user('b@example.com');
      await store.createDirectoryUser(a);
      await store.createDirectoryUser(b);
      expect((await store.updateDirectoryUser(a.id, (c) => ({ ...c, userName: 'B@example.com' }), clock.now())).outcome).toBe('conflict');
      expect(await store.getDirectoryUser(a.id)).toEqual(a);
      const renamed = await store.updateDirectoryUser(a.id, (c) => ({ ...c, userName: 'c@example.com', externalId: 'ext-c' }), clock.now());
      expect(renamed.outcome).toBe('written');
      expect(await store.findDirectoryUser('default', 'userName', 'a@example.com')).toBeNull();
      expect(await store.findDirectoryUser('default', 'externalId', 'ext-a@example.com')).toBeNull();
      expect(await store.findDirectoryUser('default', 'userName', 'c@example.com')).toMatchObject({ id: a.id });
      expect(await store.findDirectoryUser('default', 'externalId', 'ext-c')).toMatchObject({ id: a.id });
    });

    it('a refusal thrown by the change is thrown by the store, nothing written, and the store keeps working', async () => {
      const u = user('refused@example.com');
      await store.createDirectoryUser(u);
      await expect(
        store.updateDirectoryUser(
          u.id,
          () => {
            throw new RangeError('refused');
          },
          clock.now(),
        ),
      ).rejects.toThrow(RangeError);
      expect(await store.getDirectoryUser(u.id)).toEqual(u);
      expect((await store.updateDirectoryUser(u.id, (c) => ({ ...c, active: false }), clock.now())).outcome).toBe('written');
    });

    it('delete leaves an inactive tombstone under the userName (not the externalId); a second delete finds it deleted; a create takes the name back', async () => {
      const u = user('leaver@example.com');
      await store.createDirectoryUser(u);
      clock.advance(1000);
      expect(await store.deleteDirectoryUser(u.id, clock.now())).toMatchObject({
        outcome: 'written',
        after: { active: false, deletedAt: clock.now() },
      });
      expect(await store.deleteDirectoryUser(u.id, clock.now())).toMatchObject({ outcome: 'deleted_before' });
      expect(await store.findDirectoryUser('default', 'userName', 'leaver@example.com')).toMatchObject({
        id: u.id,
        deletedAt: clock.now(),
      });
      expect(await store.findDirectoryUser('default', 'externalId', 'ext-leaver@example.com')).toBeNull();
      expect((await store.updateDirectoryUser(u.id, (c) => ({ ...c, active: true }), clock.now())).outcome).toBe('deleted_before');
      expect(await store.deleteDirectoryUser(randomUUID(), clock.now())).toEqual({ outcome: 'not_found' });
      const back = user('Leaver@example.com');
      expect((await store.createDirectoryUser(back)).outcome).toBe('written');
      expect(await store.getDirectoryUser(u.id)).toBeNull();
      expect(await store.findDirectoryUser('default', 'userName', 'leaver@example.com')).toMatchObject({ id: back.id, active: true });
    });

    it('a provider lists its live users oldest first, a page at a time, deleted ones left out', async () => {
      const users: DirectoryUser[] = [];
      for (const name of ['l1@example.com', 'l2@example.com', 'l3@example.com']) {
        users.push(user(name));
        await store.createDirectoryUser(users.at(-1)!);
        clock.advance(10);
      }
      await store.createDirectoryUser(user('l1@example.com', { provider: 'other' }));
      expect(await store.listDirectoryUsers('default', 0, 2)).toEqual({ total: 3, users: users.slice(0, 2) });
      expect(await store.listDirectoryUsers('default', 2, 2)).toEqual({ total: 3, users: users.slice(2) });
      expect(await store.listDirectoryUsers('default', 0, 0)).toEqual({ total: 3, users: [] });
      await store.deleteDirectoryUser(users[1]!.id, clock.now());
      expect(await store.listDirectoryUsers('default', 0, 10)).toEqual({ total: 2, users: [users[0], users[2]] });
      const back = user('L2@example.com');
      await store.createDirectoryUser(back);
      expect((await store.listDirectoryUsers('default', 0, 10)).users.map((u) => u.id)).toEqual([users[0]!.id, users[2]!.id, back.id]);
    });

    it('identities linked to an email are listed once each', async () => {
      const who = { subject: 'sub-1', issuer: 'https://idp.example.com' };
      await store.linkDirectoryIdentity('default', 'ada@example.com', who, clock.now());
      await store.linkDirectoryIdentity('default', 'ada@example.com', who, clock.now());
      await store.linkDirectoryIdentity('default', 'ada@example.com', { subject: 'sub-2', issuer: who.issuer }, clock.now());
      const linked = await store.linkedDirectoryIdentities('default', 'ada@example.com');
      expect(linked.sort((x, y) => x.subject.localeCompare(y.subject))).toEqual([who, { subject: 'sub-2', issuer: who.issuer }]);
      expect(await store.linkedDirectoryIdentities('other', 'ada@example.com')).toEqual([]);
    });

    it('one email keeps at most 32 identities, however many link at once; one already kept links again', async () => {
      const issuer = 'https://idp.example.com';
      const who = (n: number) => ({ subject: `sub-${n}`, issuer });
      await Promise.all(
        Array.from({ length: 40 }, (_, n) => store.linkDirectoryIdentity('default', 'many@example.com', who(n), clock.now())),
      );
      const kept = await store.linkedDirectoryIdentities('default', 'many@example.com');
      expect(kept).toHaveLength(32);
      await store.linkDirectoryIdentity('default', 'many@example.com', kept[0]!, clock.now());
      expect(await store.linkedDirectoryIdentities('default', 'many@example.com')).toHaveLength(32);
    });
  });
}
