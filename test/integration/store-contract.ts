// The TokenStore contract (src/store/types.ts, docs/storage.md): one suite that every store
// (MemoryTokenStore, RedisTokenStore) must pass, one slice per aggregate of the store
// (test/integration/store-contract/<aggregate>.ts). Stores only persist and fetch; whether a token still
// authorizes is decided by decideToken (src/model/credentials.ts), so the suite asks it about what the store
// returns, exactly as the proxy does. Time moves through an injected ManualClock, never by sleeping.

import { afterEach, beforeEach, describe } from 'vitest';
import { ManualClock } from '../../src/model/clock.ts';
import type { Contract, StoreHarness } from './store-contract/context.ts';
import { tokensContract } from './store-contract/tokens.ts';
import { clientsContract } from './store-contract/clients.ts';
import { refreshTokensContract } from './store-contract/refresh-tokens.ts';
import { signInContract } from './store-contract/sign-in.ts';
import { devicesContract } from './store-contract/devices.ts';
import { handlesContract } from './store-contract/handles.ts';
import { subjectsContract } from './store-contract/subjects.ts';
import { upstreamCredentialsContract } from './store-contract/upstream-credentials.ts';
import { countersContract } from './store-contract/counters.ts';
import { directoryContract } from './store-contract/directory.ts';
import { infrastructureContract } from './store-contract/infrastructure.ts';
import { lifecycleContract } from './store-contract/lifecycle.ts';
import { approvalsContract } from './store-contract/approvals.ts';

export { cachedRawAccess, redisRawAccess, type StoreHarness } from './store-contract/context.ts';

export function runStoreContract(name: string, makeStore: (clock: ManualClock) => Promise<StoreHarness>): void {
  describe(name, () => {
    // Filled in before each test, before any slice's own hooks run (they copy it).
    const contract = {} as Contract;

    beforeEach(async () => {
      // Real time: Redis PEXPIREAT works on the server's clock, so the fake clock never starts in the past.
      contract.clock = new ManualClock(Date.now());
      contract.h = await makeStore(contract.clock);
      contract.store = contract.h.store;
    });
    afterEach(async () => {
      await contract.h.cleanup();
    });

    tokensContract(contract);
    clientsContract(contract);
    refreshTokensContract(contract);
    signInContract(contract);
    devicesContract(contract);
    handlesContract(contract);
    subjectsContract(contract);
    upstreamCredentialsContract(contract);
    countersContract(contract);
    directoryContract(contract);
    infrastructureContract(contract);
    approvalsContract(contract);
    lifecycleContract(contract);
  });
}
