// Rate counters, quotas and one-time values in memory.

import type { MemoryCore } from '../memory-core.ts';
import type { QuotaOutcome } from '../types.ts';
import type { CounterStorage, OneTimeValueStorage, QuotaStorage } from './types.ts';

export class MemoryCounters implements CounterStorage, QuotaStorage, OneTimeValueStorage {
  readonly #core: MemoryCore;

  constructor(core: MemoryCore) {
    this.#core = core;
  }

  readonly #counters = new Map<string, { count: number; endsAt: number }>();

  readonly #quotas = new Map<string, { window: number; used: number; resetAt: number }>();

  async hitCounter(name: string, windowMs: number): Promise<{ count: number; resetMs: number }> {
    this.#core.check();
    const now = this.#core.clock.now();
    const key = this.#core.keys.rateCounter(name);
    let counter = this.#counters.get(key);
    if (!counter || counter.endsAt <= now) {
      counter = { count: 0, endsAt: now + windowMs };
      this.#counters.set(key, counter);
      // Bounded like Redis would be by expiry: drop ended windows when the map grows.
      if (this.#counters.size > 10_000) for (const [k, c] of this.#counters) if (c.endsAt <= now) this.#counters.delete(k);
    }
    counter.count++;
    return { count: counter.count, resetMs: counter.endsAt - now };
  }

  async takeQuota(name: string, cost: number, limit: number, windowMs: number, now: number): Promise<QuotaOutcome> {
    this.#core.check();
    const key = this.#core.keys.quotaCounter(name);
    let window = Math.floor(now / windowMs);
    const stored = this.#quotas.get(key);
    let used = 0;
    if (stored !== undefined && stored.window >= window) {
      window = stored.window;
      used = stored.used;
    }
    const resetAt = (window + 1) * windowMs;
    const allowed = used + cost <= limit;
    if (allowed && cost > 0) {
      used += cost;
      this.#quotas.set(key, { window, used, resetAt });
      // Bounded like Redis would be by expiry: drop ended windows when the map grows.
      if (this.#quotas.size > 10_000) for (const [k, q] of this.#quotas) if (q.resetAt <= now) this.#quotas.delete(k);
    }
    return { allowed, used, resetAt };
  }

  async useOnce(name: string, expiresAt: number): Promise<boolean> {
    this.#core.check();
    const key = this.#core.keys.oneTimeValue(name);
    if (this.#core.get(key) !== null) return false;
    if (expiresAt > this.#core.clock.now()) this.#core.put(key, {}, expiresAt);
    return true;
  }
}
