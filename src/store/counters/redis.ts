// Rate counters, quotas and one-time values on Redis: plans, and one SET for a one-time value.

import type { RedisCore } from '../redis-core.ts';
import { hitOf, hitPlan } from './hits.ts';
import { takeQuotaOn } from './quotas.ts';
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
    return takeQuotaOn(this.#core.keyspace, this.#core.keys.quotaCounter(name), cost, limit, windowMs, now);
  }

  async useOnce(name: string, expiresAt: number): Promise<boolean> {
    // SET NX is the check and the write in one command; PXAT ends it when the value would be refused
    // anyway. With replicas it is acknowledged by one before answering, as revocations are: a failover
    // must not forget a value and let it be used a second time.
    const set = await this.#core.revocation((redis) =>
      redis.set(this.#core.keys.oneTimeValue(name), '1', 'PXAT', Math.trunc(expiresAt), 'NX'),
    );
    return set === 'OK';
  }
}
