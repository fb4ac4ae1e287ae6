// The counting rule of quotas (src/model/counters.ts): a pure step; and the take both engines run on it
// (src/store/counters/quotas.ts), here on the memory keyspace with its reads and plans counted. (The
// engines against the rule on random counters, and a rate counter's hit: test/integration/counter-parity.test.ts.)

import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/model/clock.ts';
import { takeQuota } from '../../src/model/counters.ts';
import { takeQuotaOn } from '../../src/store/counters/quotas.ts';
import type { Keyspace } from '../../src/store/keyspace.ts';
import { MemoryCore } from '../../src/store/memory-core.ts';

describe('takeQuota', () => {
  it('counts the units only when all fit, in the window of now', () => {
    expect(takeQuota(null, 3, 5, 100, 250)).toEqual({
      allowed: true,
      used: 3,
      resetAt: 300,
      write: { window: 2, used: 3, keepMs: 150, countsOn: false },
    });
    expect(takeQuota({ window: 2, used: 3 }, 3, 5, 100, 260)).toEqual({ allowed: false, used: 3, resetAt: 300 });
    expect(takeQuota({ window: 1, used: 5 }, 3, 5, 100, 260)).toMatchObject({ allowed: true, used: 3 });
  });

  it('a counter already in a later window keeps it; a cost of 0 writes nothing', () => {
    expect(takeQuota({ window: 3, used: 1 }, 1, 5, 100, 250)).toEqual({
      allowed: true,
      used: 2,
      resetAt: 400,
      write: { window: 3, used: 2, keepMs: 250, countsOn: true },
    });
    expect(takeQuota({ window: 2, used: 1 }, 0, 5, 100, 250)).toEqual({ allowed: true, used: 1, resetAt: 300 });
  });

  it('a used count that does not read counts as none, and the counter is written anew', () => {
    expect(takeQuota({ window: 2, used: undefined }, 1, 5, 100, 250)).toMatchObject({ allowed: true, used: 1, write: { countsOn: false } });
  });
});

describe('takeQuotaOn', () => {
  /** The memory keyspace with its reads and applied plans counted. */
  function counted() {
    const core = new MemoryCore({ clock: new ManualClock(1_000_000) });
    const calls = { reads: 0, applies: 0, refused: 0 };
    const keyspace: Keyspace = {
      read: (commands) => (calls.reads++, core.keyspace.read(commands)),
      apply: async (plan) => {
        calls.applies++;
        const replies = await core.keyspace.apply(plan);
        if (replies === null) calls.refused++;
        return replies;
      },
    };
    return { core, calls, keyspace };
  }

  it('counts on in one step, without a read, while the counter is in the window of now and has room', async () => {
    const { calls, keyspace } = counted();
    expect(await takeQuotaOn(keyspace, 'q', 2, 5, 100, 250)).toEqual({ allowed: true, used: 2, resetAt: 300 });
    expect(calls).toEqual({ reads: 1, applies: 2, refused: 1 }); // no counter yet: read, then written anew
    expect(await takeQuotaOn(keyspace, 'q', 2, 5, 100, 260)).toEqual({ allowed: true, used: 4, resetAt: 300 });
    expect(calls).toEqual({ reads: 1, applies: 3, refused: 1 });
  });

  it('reads and decides by the rule when the blind step does not hold: no room, a later window, a count that does not read', async () => {
    const { core, calls, keyspace } = counted();
    await takeQuotaOn(keyspace, 'q', 4, 5, 100, 250);
    expect(await takeQuotaOn(keyspace, 'q', 2, 5, 100, 260)).toEqual({ allowed: false, used: 4, resetAt: 300 });
    expect(core.get('q')).toEqual({ window: '2', used: '4' });
    // A replica whose clock is behind counts in the later window the counter is in.
    Object.assign(core.get('q')!, { window: '3', used: '1' });
    expect(await takeQuotaOn(keyspace, 'q', 1, 5, 100, 260)).toEqual({ allowed: true, used: 2, resetAt: 400 });
    Object.assign(core.get('q')!, { window: '2', used: 'many' });
    const before = { ...calls };
    expect(await takeQuotaOn(keyspace, 'q', 1, 5, 100, 270)).toEqual({ allowed: true, used: 1, resetAt: 300 });
    expect(core.get('q')).toEqual({ window: '2', used: '1' });
    expect(calls.reads - before.reads).toBe(1);
  });
});
