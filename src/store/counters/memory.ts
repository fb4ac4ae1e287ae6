// Rate counters, quotas and one-time values in memory.

import { hitOf, hitPlan } from './hits.ts';
import { takeQuotaOn } from './quotas.ts';
import type { MemoryCore } from '../memory-core.ts';
import type { QuotaOutcome } from '../types.ts';
import type { CounterStorage, OneTimeValueStorage, QuotaStorage } from './types.ts';

export class MemoryCounters implements CounterStorage, QuotaStorage, OneTimeValueStorage {
  readonly #core: MemoryCore;

  constructor(core: MemoryCore) {
    this.#core = core;
  }

  /** The hit plan, as on Redis. */
  async hitCounter(name: string, windowMs: number): Promise<{ count: number; resetMs: number }> {
    return hitOf(this.#core.keyspace.applyNow(hitPlan(this.#core.keys.rateCounter(name), windowMs))!);
  }

  /** The quota take, as on Redis. */
  async takeQuota(name: string, cost: number, limit: number, windowMs: number, now: number): Promise<QuotaOutcome> {
    return takeQuotaOn(this.#core.keyspace, this.#core.keys.quotaCounter(name), cost, limit, windowMs, now);
  }

  async useOnce(name: string, expiresAt: number): Promise<boolean> {
    this.#core.check();
    const key = this.#core.keys.oneTimeValue(name);
    if (this.#core.get(key) !== null) return false;
    if (expiresAt > this.#core.clock.now()) this.#core.put(key, {}, expiresAt);
    return true;
  }
}
