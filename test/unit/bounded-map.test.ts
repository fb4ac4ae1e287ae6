// The one bounded map of the in-process caches and refusal lists (src/model/bounded-map.ts): never more
// than `max` entries, the oldest set dropped first; `get` leaves the order alone, `touch` renews.

import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { BoundedMap } from '../../src/model/bounded-map.ts';

describe('BoundedMap', () => {
  it('drops the oldest entry once past its bound', () => {
    const map = new BoundedMap<string, number>(2);
    map.set('a', 1).set('b', 2).set('c', 3);
    expect(map.size).toBe(2);
    expect(map.has('a')).toBe(false);
    expect([...map.keys()]).toEqual(['b', 'c']);
  });

  it('setting a key again makes it the newest and takes no second place', () => {
    const map = new BoundedMap<string, number>(2);
    map.set('a', 1).set('b', 2).set('a', 10).set('c', 3);
    expect([...map.keys()]).toEqual(['a', 'c']);
    expect(map.get('a')).toBe(10);
  });

  it('get leaves the order alone (first in, first out); touch makes a hit the newest (least recently used out)', () => {
    const fifo = new BoundedMap<string, number>(2);
    fifo.set('a', 1).set('b', 2);
    expect(fifo.get('a')).toBe(1);
    fifo.set('c', 3);
    expect([...fifo.keys()]).toEqual(['b', 'c']);

    const lru = new BoundedMap<string, number>(2);
    lru.set('a', 1).set('b', 2);
    expect(lru.touch('a')).toBe(1);
    expect(lru.touch('missing')).toBeUndefined();
    lru.set('c', 3);
    expect([...lru.keys()]).toEqual(['a', 'c']);
  });

  it('delete and clear', () => {
    const map = new BoundedMap<string, number>(3);
    map.set('a', 1).set('b', 2);
    expect(map.delete('a')).toBe(true);
    expect(map.delete('a')).toBe(false);
    expect(map.size).toBe(1);
    map.clear();
    expect(map.size).toBe(0);
  });

  it('refuses a bound below one', () => {
    expect(() => new BoundedMap(0)).toThrow(RangeError);
    expect(() => new BoundedMap(1.5)).toThrow(RangeError);
  });

  it('behaves as a Map of the last `max` keys set, whatever the sequence of operations', () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('set' as const), key: fc.integer({ min: 0, max: 9 }), value: fc.integer() }),
      fc.record({ kind: fc.constant('delete' as const), key: fc.integer({ min: 0, max: 9 }) }),
      fc.record({ kind: fc.constant('touch' as const), key: fc.integer({ min: 0, max: 9 }) }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.array(op, { maxLength: 60 }), (max, ops) => {
        const map = new BoundedMap<number, number>(max);
        // The model: an array of [key, value], oldest first.
        let model: Array<[number, number]> = [];
        for (const o of ops) {
          const at = model.findIndex(([k]) => k === o.key);
          if (o.kind === 'set') {
            map.set(o.key, o.value);
            model = [...model.filter(([k]) => k !== o.key), [o.key, o.value] as [number, number]].slice(-max);
          } else if (o.kind === 'delete') {
            expect(map.delete(o.key)).toBe(at !== -1);
            model = model.filter(([k]) => k !== o.key);
          } else {
            expect(map.touch(o.key)).toBe(at === -1 ? undefined : model[at]![1]);
            if (at !== -1) model = [...model.filter(([k]) => k !== o.key), model[at]!];
          }
          expect(map.size).toBeLessThanOrEqual(max);
          expect([...map.keys()]).toEqual(model.map(([k]) => k));
        }
      }),
    );
  });
});
