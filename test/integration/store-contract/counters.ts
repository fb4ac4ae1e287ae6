// The store contract's slice for counters: rate counters, quota counters, one-time values.

import { beforeEach, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../../src/model/clock.ts';
import { generateToken } from '../../../src/model/credentials.ts';
import type { TokenStore } from '../../../src/store/types.ts';
import { type Contract, HOUR, type StoreHarness } from './context.ts';

export function countersContract(contract: Contract): void {
  let clock: ManualClock;
  let h: StoreHarness;
  let store: TokenStore;
  beforeEach(() => {
    ({ clock, h, store } = contract);
  });

  describe('rate counters', () => {
    it('hitCounter counts per name within one window and reports the time left', async () => {
      const name = `ip:${generateToken().slice(0, 8)}`;
      const first = await store.hitCounter(name, 60_000);
      expect(first.count).toBe(1);
      expect(first.resetMs).toBeGreaterThan(0);
      expect(first.resetMs).toBeLessThanOrEqual(60_000);
      const results = await Promise.all(Array.from({ length: 9 }, () => store.hitCounter(name, 60_000)));
      expect(results.map((r) => r.count).sort((a, b) => a - b)).toEqual([2, 3, 4, 5, 6, 7, 8, 9, 10]);
      for (const r of results) expect(r.resetMs).toBeLessThanOrEqual(first.resetMs);
      expect((await store.hitCounter(`${name}-other`, 60_000)).count).toBe(1);
    });
  });

  describe('quota counters', () => {
    const MINUTE = 60_000;
    /** The start of the next whole minute after the clock's now: windows are aligned to the epoch. */
    const nextWindow = () => (Math.floor(clock.now() / MINUTE) + 1) * MINUTE;

    it('takeQuota counts within the limit, refuses past it without counting, and reports the window end', async () => {
      const name = `q-${generateToken().slice(0, 8)}`;
      const start = nextWindow();
      expect(await store.takeQuota(name, 1, 3, MINUTE, start)).toEqual({ allowed: true, used: 1, resetAt: start + MINUTE });
      expect(await store.takeQuota(name, 2, 3, MINUTE, start + 10)).toEqual({ allowed: true, used: 3, resetAt: start + MINUTE });
      expect(await store.takeQuota(name, 1, 3, MINUTE, start + 20)).toEqual({ allowed: false, used: 3, resetAt: start + MINUTE });
      // cost 0 reads: nothing counted, the answer says whether one more would fit.
      expect(await store.takeQuota(name, 0, 3, MINUTE, start + 30)).toEqual({ allowed: true, used: 3, resetAt: start + MINUTE });
      expect(await store.takeQuota(`${name}-other`, 1, 3, MINUTE, start)).toMatchObject({ allowed: true, used: 1 });
    });

    it('all or nothing: a take larger than what is left counts nothing', async () => {
      const name = `q-${generateToken().slice(0, 8)}`;
      const start = nextWindow();
      expect((await store.takeQuota(name, 2, 3, MINUTE, start)).used).toBe(2);
      expect(await store.takeQuota(name, 2, 3, MINUTE, start)).toMatchObject({ allowed: false, used: 2 });
      expect(await store.takeQuota(name, 1, 3, MINUTE, start)).toMatchObject({ allowed: true, used: 3 });
    });

    it('exact at the window edge: the last ms of a window counts in it, the next ms starts a new one', async () => {
      const name = `q-${generateToken().slice(0, 8)}`;
      const start = nextWindow();
      expect((await store.takeQuota(name, 1, 2, MINUTE, start)).allowed).toBe(true);
      expect((await store.takeQuota(name, 1, 2, MINUTE, start + MINUTE - 1)).allowed).toBe(true);
      expect(await store.takeQuota(name, 1, 2, MINUTE, start + MINUTE - 1)).toEqual({ allowed: false, used: 2, resetAt: start + MINUTE });
      expect(await store.takeQuota(name, 1, 2, MINUTE, start + MINUTE)).toEqual({ allowed: true, used: 1, resetAt: start + 2 * MINUTE });
    });

    it('a counter already in a later window (a replica whose clock is ahead) keeps it', async () => {
      const name = `q-${generateToken().slice(0, 8)}`;
      const start = nextWindow();
      expect(await store.takeQuota(name, 1, 2, MINUTE, start + MINUTE)).toMatchObject({ used: 1, resetAt: start + 2 * MINUTE });
      expect(await store.takeQuota(name, 1, 2, MINUTE, start + MINUTE - 5)).toEqual({
        allowed: true,
        used: 2,
        resetAt: start + 2 * MINUTE,
      });
      expect((await store.takeQuota(name, 1, 2, MINUTE, start)).allowed).toBe(false);
    });

    it('concurrent takes of a hot counter under its limit: every one counted, none refused for contention', async () => {
      const name = `q-${generateToken().slice(0, 8)}`;
      const start = nextWindow();
      const results = await Promise.all(Array.from({ length: 64 }, () => store.takeQuota(name, 1, 1000, MINUTE, start)));
      expect(results.filter((r) => r.allowed)).toHaveLength(64);
      expect(results.map((r) => r.used).sort((a, b) => a - b)).toEqual(Array.from({ length: 64 }, (_, i) => i + 1));
      expect(await store.takeQuota(name, 0, 1000, MINUTE, start)).toEqual({ allowed: true, used: 64, resetAt: start + MINUTE });
    });

    it('concurrent takes (replicas racing): exactly the limit is allowed', async () => {
      const name = `q-${generateToken().slice(0, 8)}`;
      const start = nextWindow();
      const results = await Promise.all(Array.from({ length: 40 }, () => store.takeQuota(name, 1, 7, MINUTE, start)));
      expect(results.filter((r) => r.allowed)).toHaveLength(7);
      expect(
        results
          .filter((r) => r.allowed)
          .map((r) => r.used)
          .sort((a, b) => a - b),
      ).toEqual([1, 2, 3, 4, 5, 6, 7]);
      // Kept under a fixed-length hashed key, whatever the caller's identity.
      expect(h.keys.quotaCounter(`r:60:subject:user:${'x'.repeat(5000)}`)).toMatch(/quotas:[0-9a-f]{64}$/);
    });
  });

  describe('one-time values', () => {
    it('useOnce: true the first time, false while the record lives, per name', async () => {
      const name = `client_assertion:mcp_x:jti-${generateToken().slice(0, 8)}`;
      const expiresAt = clock.now() + HOUR;
      expect(await store.useOnce(name, expiresAt)).toBe(true);
      expect(await store.useOnce(name, expiresAt)).toBe(false);
      // A later expiry does not buy a second use.
      expect(await store.useOnce(name, expiresAt + HOUR)).toBe(false);
      expect(await store.useOnce(`${name}-other`, expiresAt)).toBe(true);
      // Kept under a fixed-length key carrying the {oauth} hash tag, whatever the name's length.
      expect(h.keys.oneTimeValue('x'.repeat(5000))).toMatch(/\{oauth\}:usedOnce:[0-9a-f]{64}$/);
    });

    it('a name already past its expiry is not kept', async () => {
      const name = `past-${generateToken().slice(0, 8)}`;
      expect(await store.useOnce(name, clock.now() - 1)).toBe(true);
      expect(await store.useOnce(name, clock.now() + HOUR)).toBe(true);
      expect(await store.useOnce(name, clock.now() + HOUR)).toBe(false);
    });

    it('concurrent uses of one name (replicas racing one replayed assertion): exactly one is first', async () => {
      const name = `race-${generateToken().slice(0, 8)}`;
      const results = await Promise.all(Array.from({ length: 20 }, () => store.useOnce(name, clock.now() + HOUR)));
      expect(results.filter((r) => r)).toHaveLength(1);
    });
  });
}
