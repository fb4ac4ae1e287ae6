// The counting rules of rate limits and quotas, as pure steps on a counter as read. On Redis they run
// as one script each (HIT_COUNTER, TAKE_QUOTA in src/store/redis-scripts.ts): a counter is hit by
// concurrent requests, and a compare-and-set would be retried, then refused, under that contention.
// The memory store runs these functions, and a parity test runs them against the scripts on a real
// Redis on random inputs (test/integration/counter-parity.test.ts), so the two cannot drift apart.

/** A rate counter as read: its hits so far and the ms left in its window (undefined: it has no expiry). */
export interface HitWindow {
  count: number;
  ttlMs: number | undefined;
}

/** One hit: the count now, the ms left in the window, and whether the window starts (its expiry is set) now. */
export interface Hit {
  count: number;
  resetMs: number;
  startsWindow: boolean;
}

/**
 * A hit on a fixed window that starts with its first hit (`stored` null: none running): counted, and
 * a window without an expiry (a hand edit) is given a whole one.
 */
export function hitCounter(stored: HitWindow | null, windowMs: number): Hit {
  const count = (stored?.count ?? 0) + 1;
  if (count === 1 || stored?.ttlMs === undefined) return { count, resetMs: windowMs, startsWindow: true };
  return { count, resetMs: stored.ttlMs, startsWindow: false };
}

/** A quota counter as read: the window number it counts in and the units used there (undefined: unreadable). */
export interface QuotaCounter {
  window: number | undefined;
  used: number | undefined;
}

/** A take's answer, and what it writes: the counter and how long it is kept (ms from now). */
export interface QuotaTake {
  allowed: boolean;
  used: number;
  resetAt: number;
  write?: { window: number; used: number; keepMs: number };
}

/**
 * Taking `cost` units of a quota of `limit` per window of `windowMs` at `now` (the caller's clock):
 * a counter already in a later window keeps it, and the units are counted only when all fit. The
 * counter is kept until its window ends and one window more.
 */
export function takeQuota(stored: QuotaCounter | null, cost: number, limit: number, windowMs: number, now: number): QuotaTake {
  let window = Math.floor(now / windowMs);
  let used = 0;
  if (stored?.window !== undefined && stored.window >= window) {
    window = stored.window;
    used = stored.used ?? 0;
  }
  const resetAt = (window + 1) * windowMs;
  const allowed = used + cost <= limit;
  if (!allowed || cost <= 0) return { allowed, used, resetAt };
  used += cost;
  return { allowed, used, resetAt, write: { window, used, keepMs: resetAt - now + windowMs } };
}
