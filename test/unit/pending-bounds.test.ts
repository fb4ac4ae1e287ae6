// The bound on pending requests per holder (src/model/pending-bounds.ts), as both stores' transitions apply it.

import { describe, expect, it } from 'vitest';
import { boundHeld } from '../../src/model/pending-bounds.ts';

describe('boundHeld', () => {
  const held = (holder: 'address' | 'client', bound: number, count: number, oldest?: number) => ({ holder, bound, count, oldest });

  it('the first holder at or over its bound refuses, until its oldest expires', () => {
    expect(boundHeld([held('address', 3, 3, 100), held('client', 2, 5, 50)], 0)).toEqual({ holder: 'address', retryAt: 100 });
    expect(boundHeld([held('address', 3, 2, 100), held('client', 2, 2, 50)], 0)).toEqual({ holder: 'client', retryAt: 50 });
  });

  it('room under every bound, or a bound of 0 (none), refuses nothing', () => {
    expect(boundHeld([held('address', 3, 2, 100), held('client', 0, 99, 50)], 0)).toBeUndefined();
    expect(boundHeld([], 0)).toBeUndefined();
  });

  it('a full holder whose oldest was not read (dropped meanwhile) may be retried at once', () => {
    expect(boundHeld([held('address', 1, 1)], 42)).toEqual({ holder: 'address', retryAt: 42 });
  });
});
