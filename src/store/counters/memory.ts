// Rate counters, quotas and one-time values in memory.

import { hitCounter, takeQuota } from '../../model/counters.ts';
import type { MemoryCore } from '../memory-core.ts';
import type { QuotaOutcome } from '../types.ts';
import type { CounterStorage, OneTimeValueStorage, QuotaStorage } from './types.ts';

export class MemoryCounters implements CounterStorage, QuotaStorage, OneTimeValueStorage {
  readonly #core: MemoryCore;

  constructor(core: MemoryCore) {
    this.#core = core;
  }

  readonly #counters = new Map<string, { count: number; endsAt: number }>();

  readonly #quotas = new Map<string, { window: number; used: number; keptUntil: number }>();

  /** The model's hitCounter, as HIT_COUNTER runs it on Redis. */
  async hitCounter(name: string, windowMs: number): Promise<{ count: number; resetMs: number }> {
    this.#core.check();
    const now = this.#core.clock.now();
    const key = this.#core.keys.rateCounter(name);
    const stored = this.#counters.get(key);
    const hit = hitCounter(
      stored !== undefined && stored.endsAt > now ? { count: stored.count, ttlMs: stored.endsAt - now } : null,
      windowMs,
    );
    this.#counters.set(key, { count: hit.count, endsAt: now + hit.resetMs });
    // Bounded like Redis would be by expiry: drop ended windows when the map grows.
    if (this.#counters.size > 10_000) for (const [k, c] of this.#counters) if (c.endsAt <= now) this.#counters.delete(k);
    return { count: hit.count, resetMs: hit.resetMs };
  }

  /** The model's takeQuota, as TAKE_QUOTA runs it on Redis. */
  async takeQuota(name: string, cost: number, limit: number, windowMs: number, now: number): Promise<QuotaOutcome> {
    this.#core.check();
    const key = this.#core.keys.quotaCounter(name);
    const take = takeQuota(this.#quotas.get(key) ?? null, cost, limit, windowMs, now);
    if (take.write !== undefined) {
      const { window, used, keepMs } = take.write;
      this.#quotas.set(key, { window, used, keptUntil: now + keepMs });
      // Bounded like Redis would be by expiry: drop counters past their keeping when the map grows.
      if (this.#quotas.size > 10_000) for (const [k, q] of this.#quotas) if (q.keptUntil <= now) this.#quotas.delete(k);
    }
    return { allowed: take.allowed, used: take.used, resetAt: take.resetAt };
  }

  async useOnce(name: string, expiresAt: number): Promise<boolean> {
    this.#core.check();
    const key = this.#core.keys.oneTimeValue(name);
    if (this.#core.get(key) !== null) return false;
    if (expiresAt > this.#core.clock.now()) this.#core.put(key, {}, expiresAt);
    return true;
  }
}
