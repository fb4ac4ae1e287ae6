// The counting rule of quotas (src/model/counters.ts): a pure step. (A rate counter's hit is a plan
// both engines run: test/integration/counter-parity.test.ts.)

import { describe, expect, it } from 'vitest';
import { takeQuota } from '../../src/model/counters.ts';

describe('takeQuota', () => {
  it('counts the units only when all fit, in the window of now', () => {
    expect(takeQuota(null, 3, 5, 100, 250)).toEqual({ allowed: true, used: 3, resetAt: 300, write: { window: 2, used: 3, keepMs: 150 } });
    expect(takeQuota({ window: 2, used: 3 }, 3, 5, 100, 260)).toEqual({ allowed: false, used: 3, resetAt: 300 });
    expect(takeQuota({ window: 1, used: 5 }, 3, 5, 100, 260)).toMatchObject({ allowed: true, used: 3 });
  });

  it('a counter already in a later window keeps it; a cost of 0 writes nothing', () => {
    expect(takeQuota({ window: 3, used: 1 }, 1, 5, 100, 250)).toEqual({
      allowed: true,
      used: 2,
      resetAt: 400,
      write: { window: 3, used: 2, keepMs: 250 },
    });
    expect(takeQuota({ window: 2, used: 1 }, 0, 5, 100, 250)).toEqual({ allowed: true, used: 1, resetAt: 300 });
  });

  it('a used count that does not read counts as none', () => {
    expect(takeQuota({ window: 2, used: undefined }, 1, 5, 100, 250)).toMatchObject({ allowed: true, used: 1 });
  });
});
