// Rate counters, quotas and one-time values in memory.

import { takeQuota } from '../../model/counters.ts';
import { hitOf, hitPlan } from './hits.ts';
import type { MemoryCore } from '../memory-core.ts';
import type { QuotaOutcome } from '../types.ts';
import type { CounterStorage, OneTimeValueStorage, QuotaStorage } from './types.ts';

export class MemoryCounters implements CounterStorage, QuotaStorage, OneTimeValueStorage {
  readonly #core: MemoryCore;

  constructor(core: MemoryCore) {
    this.#core = core;
  }

  readonly #quotas = new Map<string, { window: number; used: number; keptUntil: number }>();

  /** The hit plan, as on Redis. */
  async hitCounter(name: string, windowMs: number): Promise<{ count: number; resetMs: number }> {
    return hitOf(this.#core.keyspace.applyNow(hitPlan(this.#core.keys.rateCounter(name), windowMs))!);
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
