// Rate counters and quotas, the part both engines share: a hit and a quota take are plans on the
// core's keyspace (./hits.ts, ./quotas.ts). How a one-time value is recorded is each engine's own
// (redis.ts: one SET NX, acknowledged by a replica first; memory.ts).

import type { KeyspaceCore } from '../keyspace-core.ts';
import type { QuotaOutcome } from '../types.ts';
import { hitOf, hitPlan } from './hits.ts';
import { takeQuotaOn } from './quotas.ts';
import type { CounterStorage, OneTimeValueStorage, QuotaStorage } from './types.ts';

export abstract class KeyspaceCounters<Core extends KeyspaceCore = KeyspaceCore>
  implements CounterStorage, QuotaStorage, OneTimeValueStorage
{
  /** The engine's core (its own part reads what only that engine has from it). */
  protected readonly core: Core;

  constructor(core: Core) {
    this.core = core;
  }

  async hitCounter(name: string, windowMs: number): Promise<{ count: number; resetMs: number }> {
    return hitOf((await this.core.keyspace.apply(hitPlan(this.core.keys.rateCounter(name), windowMs)))!);
  }

  takeQuota(name: string, cost: number, limit: number, windowMs: number, now: number): Promise<QuotaOutcome> {
    return takeQuotaOn(this.core.keyspace, this.core.keys.quotaCounter(name), cost, limit, windowMs, now);
  }

  abstract useOnce(name: string, expiresAt: number): Promise<boolean>;
}
