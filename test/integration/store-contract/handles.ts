// The store contract's slice for handles: session and task handles.

import { beforeEach, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../../src/model/clock.ts';
import { handleDigest, handleOwner } from '../../../src/proxy/handles.ts';
import type { TokenStore } from '../../../src/store/types.ts';
import { type Contract, contractHelpers, type StoreHarness } from './context.ts';

export function handlesContract(contract: Contract): void {
  let clock: ManualClock;
  let h: StoreHarness;
  let store: TokenStore;
  beforeEach(() => {
    ({ clock, h, store } = contract);
  });
  const { client } = contractHelpers(contract);

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

    it('8 concurrent forgets of one handle: exactly one ends it; another handle of the owner stays', async () => {
      const session = handleDigest('raced');
      const kept = handleDigest('kept');
      await store.bindHandle('session', session, alice, clock.now(), TTL, MAX);
      await store.bindHandle('session', kept, alice, clock.now(), TTL, MAX);
      const outcomes = await Promise.all(Array.from({ length: 8 }, () => store.forgetHandle('session', session)));
      expect(outcomes.filter(Boolean)).toHaveLength(1);
      expect(await h.rawHash(h.keys.handle('session', session))).toBeNull();
      expect(await store.useHandle('session', kept, alice, clock.now(), TTL, MAX)).toBe('owned');
      expect(await store.forgetSubjectHandles('alice')).toBe(1);
    });

    it("8 concurrent forgets of a person's handles while more are bound: each handle is forgotten once, none escapes its index", async () => {
      const before = Array.from({ length: 4 }, (_, i) => handleDigest(`before-${i}`));
      for (const hash of before) await store.bindHandle('session', hash, alice, clock.now(), TTL, MAX);
      const during = Array.from({ length: 8 }, (_, i) => handleDigest(`during-${i}`));
      const [forgotten] = await Promise.all([
        Promise.all(Array.from({ length: 8 }, () => store.forgetSubjectHandles('alice'))),
        Promise.all(during.map((hash) => store.bindHandle('session', hash, alice, clock.now(), TTL, MAX))),
      ]);
      // A handle bound meanwhile is either forgotten by one of them or still listed for the next one.
      const left = await store.forgetSubjectHandles('alice');
      expect(forgotten.reduce((sum, n) => sum + n, 0) + left).toBe(12);
      for (const hash of [...before, ...during])
        expect(await store.useHandle('session', hash, alice, clock.now(), TTL, MAX)).toBe('unknown');
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
}
