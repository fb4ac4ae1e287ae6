// Rate counters, quotas and one-time values on Redis: a plan, single-key commands and one script.

import type { RedisCore } from '../redis-core.ts';
import { hitOf, hitPlan } from './hits.ts';
import type { QuotaOutcome } from '../types.ts';
import type { CounterStorage, OneTimeValueStorage, QuotaStorage } from './types.ts';

export class RedisCounters implements CounterStorage, QuotaStorage, OneTimeValueStorage {
  readonly #core: RedisCore;

  constructor(core: RedisCore) {
    this.#core = core;
  }

  async hitCounter(name: string, windowMs: number): Promise<{ count: number; resetMs: number }> {
    return hitOf((await this.#core.keyspace.apply(hitPlan(this.#core.keys.rateCounter(name), windowMs)))!);
  }

  async takeQuota(name: string, cost: number, limit: number, windowMs: number, now: number): Promise<QuotaOutcome> {
    const [allowed, used, resetAt] = await this.#core.scripts.mcpTakeQuota(
      this.#core.keys.quotaCounter(name),
      String(cost),
      String(limit),
      String(windowMs),
      String(Math.trunc(now)),
    );
    return { allowed: allowed === 1, used, resetAt: Number(resetAt) };
  }

  async useOnce(name: string, expiresAt: number): Promise<boolean> {
    // SET NX is the check and the write in one command; PXAT ends it when the value would be refused
    // anyway. With replicas it is acknowledged by one before answering, as revocations are: a failover
    // must not forget a value and let it be used a second time.
    const set = await this.#core.revocation((scripts) =>
      scripts.set(this.#core.keys.oneTimeValue(name), '1', 'PXAT', Math.trunc(expiresAt), 'NX'),
    );
    return set === 'OK';
  }
}
