// The store decorators on the hot path: the metrics' InstrumentedStore times lookupToken with one
// `.then` and no promise beyond it, and every operation of TokenStore is delegated by name.

import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/model/clock.ts';
import { hashToken } from '../../src/model/credentials.ts';
import { InstrumentedStore, Metrics } from '../../src/observability/metrics.ts';
import { MemoryTokenStore } from '../../src/store/memory.ts';
import type { TokenStore } from '../../src/store/types.ts';
import { promisesOf } from '../support/promises.ts';

describe('InstrumentedStore', () => {
  it('adds exactly one promise to a lookupToken (its timing .then), none more', async () => {
    const memory = new MemoryTokenStore({ clock: new ManualClock() });
    const timed = new InstrumentedStore(memory, new Metrics({ defaultMetrics: false }));
    const tokenHash = hashToken('a'.repeat(64));
    // Warm both paths first (labels bound, code compiled), then compare one call of each.
    await memory.lookupToken(tokenHash);
    await timed.lookupToken(tokenHash);
    const bare = await promisesOf(() => memory.lookupToken(tokenHash));
    const wrapped = await promisesOf(() => timed.lookupToken(tokenHash));
    expect(wrapped - bare).toBe(1);
  });

  it("delegates every operation to the store it wraps, and the store's watch as it is", async () => {
    const memory = new MemoryTokenStore({ clock: new ManualClock() });
    const timed: TokenStore = new InstrumentedStore(memory, new Metrics({ defaultMetrics: false }));
    await timed.createClient({
      clientId: 'c-1',
      redirectUris: [],
      grantTypes: ['client_credentials'],
      profile: 'default',
      tokenEndpointAuthMethod: 'client_secret_basic',
      source: 'admin',
      createdAt: 1,
    });
    expect(await memory.getClient('c-1')).toMatchObject({ clientId: 'c-1' });
    expect(timed.watch).toBeUndefined();
  });
});
