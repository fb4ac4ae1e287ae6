// In-memory TokenStore for the demo and for single-process use: the same keys and fields as Redis,
// with TTLs honoured against the injected clock (memory-core.ts). One part per aggregate
// (src/store/<aggregate>/memory.ts), composed into one store as the Redis parts are.

import type { Clock } from '../model/clock.ts';
import { KeyspaceApprovals } from './approvals/part.ts';
import { MemoryClients } from './clients/memory.ts';
import { MemoryCounters } from './counters/memory.ts';
import { KeyspaceDevices } from './devices/part.ts';
import { KeyspaceDirectory } from './directory/part.ts';
import { MemoryHandles } from './handles/memory.ts';
import { MemoryInfrastructure } from './infrastructure/memory.ts';
import { MemoryCore } from './memory-core.ts';
import { composeParts, type StoreOperations } from './operations.ts';
import type { Fields } from './records.ts';
import { KeyspaceRefreshTokens } from './refresh-tokens/part.ts';
import { KeyspaceSignIn } from './sign-in/part.ts';
import { KeyspaceSubjects } from './subjects/part.ts';
import { MemoryTokens } from './tokens/memory.ts';
import type { TokenStore } from './types.ts';
import { KeyspaceUpstreamCredentials } from './upstream-credentials/part.ts';

// The class's instances carry every operation (each part's, assigned in the constructor): the
// interface says so to the type checker.
export interface MemoryTokenStore extends StoreOperations {}

export class MemoryTokenStore implements TokenStore {
  readonly #core: MemoryCore;

  constructor(options: { clock: Clock; keyPrefix?: string }) {
    const core = new MemoryCore(options);
    this.#core = core;
    Object.assign(
      this,
      composeParts({
        tokens: new MemoryTokens(core),
        clients: new MemoryClients(core),
        refreshTokens: new KeyspaceRefreshTokens(core),
        signIn: new KeyspaceSignIn(core),
        devices: new KeyspaceDevices(core),
        handles: new MemoryHandles(core),
        subjects: new KeyspaceSubjects(core),
        upstreamCredentials: new KeyspaceUpstreamCredentials(core),
        directory: new KeyspaceDirectory(core),
        counters: new MemoryCounters(core),
        infrastructure: new MemoryInfrastructure(core),
        approvals: new KeyspaceApprovals(core),
      }),
    );
  }

  /** Records held now, expired ones not yet swept included (for tests of the sweep). */
  get recordCount(): number {
    return this.#core.recordCount;
  }

  async close(): Promise<void> {
    this.#core.close();
  }

  /** Test and demo hook: the raw fields under a key, as `redis-cli HGETALL` would show them. */
  rawHash(key: string): Fields | null {
    const fields = this.#core.get(key);
    return fields && { ...fields };
  }

  /** Test hook: edit a raw field, as an admin would with `redis-cli HSET` (which creates a missing hash). */
  setRawField(key: string, field: string, value: string): void {
    const fields = this.#core.get(key);
    if (fields) fields[field] = value;
    else this.#core.put(key, { [field]: value });
  }
}
