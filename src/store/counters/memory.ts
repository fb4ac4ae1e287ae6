// Rate counters and quotas in memory are the shared part's (./part.ts); a one-time value on the store's maps.

import type { MemoryCore } from '../memory-core.ts';
import { KeyspaceCounters } from './part.ts';

export class MemoryCounters extends KeyspaceCounters<MemoryCore> {
  /** As SET NX PXAT does on Redis: the value kept until it expires, a second use while it lives refused. */
  async useOnce(name: string, expiresAt: number): Promise<boolean> {
    this.core.check();
    const key = this.core.keys.oneTimeValue(name);
    if (this.core.liveString(key) !== undefined) return false;
    if (expiresAt > this.core.clock.now()) this.core.putString(key, '1', Math.trunc(expiresAt));
    return true;
  }
}
