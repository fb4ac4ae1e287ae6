// The counting rule of quotas, as a pure step on a counter as read. On Redis it runs as one script
// (TAKE_QUOTA in src/store/redis-scripts.ts): a quota counter is taken from by concurrent requests,
// and a guarded read-then-write would be retried, then refused, under that contention. The memory
// store runs this function, and a parity test runs it against the script on a real Redis on random
// inputs (test/integration/counter-parity.test.ts), so the two cannot drift apart. (A rate counter's
// hit needs no decision: it is one plan both engines run, src/store/counters/hits.ts.)

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
