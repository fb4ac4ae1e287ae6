// Device authorizations (RFC 8628) in memory: the lookup by user code and the decision on the store's
// maps; the rest is the part both engines share (./part.ts).

import type { MemoryCore } from '../memory-core.ts';
import { deviceAuthorizationFromFields, deviceDecisionUpdate, readRecord } from '../records.ts';
import type { SignedInUser, StoredDeviceAuthorization, StoredRead } from '../../model/records.ts';
import { KeyspaceDevices } from './part.ts';
import type { DeviceAuthorizationStorage } from './types.ts';

export class MemoryDevices extends KeyspaceDevices<MemoryCore> implements DeviceAuthorizationStorage {
  async findDeviceAuthorization(userCodeHash: string): Promise<StoredRead<StoredDeviceAuthorization>> {
    this.core.check();
    const index = this.core.get(this.core.keys.deviceUserCode(userCodeHash));
    if (!index?.deviceCodeHash) return null;
    return readRecord(this.core.get(this.core.keys.deviceAuthorization(index.deviceCodeHash)), deviceAuthorizationFromFields);
  }

  /** The decision, by the model (decideDevice) as the Redis store takes it. */
  async decideDeviceAuthorization(deviceCodeHash: string, now: number, user: SignedInUser | undefined): Promise<boolean> {
    this.core.check();
    const userCodeHash = this.core.updateHash(this.core.keys.deviceAuthorization(deviceCodeHash), deviceDecisionUpdate(now, user));
    if (userCodeHash === undefined) return false;
    this.core.hashes.delete(this.core.keys.deviceUserCode(userCodeHash));
    return true;
  }
}
