// The counting rules of rate limits and quotas (src/model/counters.ts): pure steps.

import { describe, expect, it } from 'vitest';
import { hitCounter, takeQuota } from '../../src/model/counters.ts';

describe('hitCounter', () => {
  it('the first hit starts the window; later ones count within it', () => {
    expect(hitCounter(null, 1000)).toEqual({ count: 1, resetMs: 1000, startsWindow: true });
    expect(hitCounter({ count: 4, ttlMs: 300 }, 1000)).toEqual({ count: 5, resetMs: 300, startsWindow: false });
  });

  it('a counter without an expiry is given a whole window, and keeps its count', () => {
    expect(hitCounter({ count: 4, ttlMs: undefined }, 1000)).toEqual({ count: 5, resetMs: 1000, startsWindow: true });
  });
});

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
