// The counting rule of quotas, as a pure step on a counter as read. Both engines run it through the
// keyspace port (src/store/counters/quotas.ts), which writes what it decides in one guarded step.

/** A quota counter as read: the window number it counts in and the units used there (undefined: unreadable). */
export interface QuotaCounter {
  window: number | undefined;
  used: number | undefined;
}

/**
 * A take's answer, and what it writes: the counter and how long it is kept (ms from now). `countsOn`:
 * the units are added to the count as read, in the window as read (any writer adding under the limit
 * meanwhile leaves the decision right); otherwise the counter is written anew (a new window, or a
 * count that did not read).
 */
export interface QuotaTake {
  allowed: boolean;
  used: number;
  resetAt: number;
  write?: { window: number; used: number; keepMs: number; countsOn: boolean };
}

/**
 * Taking `cost` units of a quota of `limit` per window of `windowMs` at `now` (the caller's clock):
 * a counter already in a later window keeps it, and the units are counted only when all fit. The
 * counter is kept until its window ends and one window more.
 */
export function takeQuota(stored: QuotaCounter | null, cost: number, limit: number, windowMs: number, now: number): QuotaTake {
  let window = quotaWindow(now, windowMs);
  let used = 0;
  let countsOn = false;
  if (stored?.window !== undefined && stored.window >= window) {
    window = stored.window;
    used = stored.used ?? 0;
    countsOn = stored.used !== undefined;
  }
  const resetAt = (window + 1) * windowMs;
  const allowed = used + cost <= limit;
  if (!allowed || cost <= 0) return { allowed, used, resetAt };
  used += cost;
  // Kept until its window ends and one window more.
  return { allowed, used, resetAt, write: { window, used, keepMs: resetAt - now + windowMs, countsOn } };
}

/** The number of the window `now` falls in: windows are `windowMs` long and aligned to the epoch. */
export function quotaWindow(now: number, windowMs: number): number {
  return Math.floor(now / windowMs);
}
