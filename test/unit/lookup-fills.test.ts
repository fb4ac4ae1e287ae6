// The parts both token-lookup caches share: a fill overtaken by an invalidation of its token (or by the
// cache being emptied) is marked and so never cached; an invalidation message's keys name the tokens
// to forget; a copy lives no longer than the shortest TTL of the keys it was found under.

import { describe, expect, it } from 'vitest';
import { heldUntil, invalidateKeys, PendingFills } from '../../src/store/lookup-fills.ts';
import type { TokenLookup } from '../../src/model/records.ts';

const names = { userPrefix: 'p:user:', accessHashOf: (key: string) => (key.startsWith('p:at:') ? key.slice(5) : undefined) };

describe('fills in flight', () => {
  it('marks the fills of an invalidated token, and only those; a fill begun after it is unmarked', () => {
    const fills = new PendingFills();
    const a1 = fills.begin('a');
    const a2 = fills.begin('a');
    const b = fills.begin('b');
    fills.invalidate('a');
    expect([a1.mark.invalidated, a2.mark.invalidated, b.mark.invalidated]).toEqual([true, true, false]);
    const a3 = fills.begin('a');
    a1.end();
    fills.invalidate('b');
    expect([a3.mark.invalidated, b.mark.invalidated]).toEqual([false, true]);
  });

  it('an ended fill is forgotten: a later invalidation marks only what is still in flight', () => {
    const fills = new PendingFills();
    const first = fills.begin('a');
    first.end();
    const second = fills.begin('a');
    // The first fill's end, called again after a second began, must not drop the second's mark.
    first.end();
    fills.invalidate('a');
    expect(second.mark.invalidated).toBe(true);
  });

  it('marks every fill when the cache is emptied', () => {
    const fills = new PendingFills();
    const marks = ['a', 'b', 'c'].map((h) => fills.begin(h).mark);
    fills.invalidateAll();
    expect(marks.map((m) => m.invalidated)).toEqual([true, true, true]);
  });
});

describe('an invalidation message', () => {
  it('forgets the tokens its user-grade and access-token keys name, counts the copies it hit, and ignores other keys', () => {
    const held = new Set(['u1', 'a1']);
    const fills = new PendingFills();
    const filling = fills.begin('a2');
    const hit = invalidateKeys(
      ['p:user:u1', 'p:at:a1', 'p:at:a2', 'p:client:c1', Buffer.from('p:user:u9')],
      names,
      (h) => held.delete(h),
      fills,
    );
    expect(hit).toBe(2);
    expect([...held]).toEqual([]);
    expect(filling.mark.invalidated).toBe(true);
  });
});

describe('how long a copy lives', () => {
  const found = (user: boolean, oauth: boolean) => ({ user: user ? {} : null, oauth: oauth ? {} : null }) as unknown as TokenLookup;
  it('the shortest TTL of the keys it was found under, from when the reads were sent; no TTL is no bound; a key gone is none', () => {
    expect(heldUntil(found(true, true), 1000, 500, 200)).toBe(1200);
    expect(heldUntil(found(true, false), 1000, -1, 200)).toBe(Infinity);
    expect(heldUntil(found(false, true), 1000, 50, -2)).toBe(1000);
  });
});
