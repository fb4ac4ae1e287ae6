// Rate counters and quotas on Redis are the shared part's (./part.ts); a one-time value is one SET NX.

import type { RedisCore } from '../redis-core.ts';
import { KeyspaceCounters } from './part.ts';

export class RedisCounters extends KeyspaceCounters<RedisCore> {
  async useOnce(name: string, expiresAt: number): Promise<boolean> {
    // SET NX is the check and the write in one command; PXAT ends it when the value would be refused
    // anyway. With replicas it is acknowledged by one before answering, as revocations are: a failover
    // must not forget a value and let it be used a second time.
    const set = await this.core.revocation((redis) =>
      redis.set(this.core.keys.oneTimeValue(name), '1', 'PXAT', Math.trunc(expiresAt), 'NX'),
    );
    return set === 'OK';
  }
}
