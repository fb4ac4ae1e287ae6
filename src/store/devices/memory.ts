// Device authorizations (RFC 8628) in memory.

import type { MemoryCore } from '../memory-core.ts';
import { putDeviceAuthorization } from './transitions.ts';
import { deviceAuthorizationFromFields, deviceDecisionUpdate, devicePollUpdate, readRecord } from '../records.ts';
import type { DeviceAuthorizationBounds, DeviceAuthorizationOutcome } from '../types.ts';
import type {
  DeviceAuthorizationRecord,
  DevicePollOutcome,
  SignedInUser,
  StoredDeviceAuthorization,
  StoredRead,
} from '../../model/records.ts';
import type { DeviceAuthorizationStorage } from './types.ts';

export class MemoryDevices implements DeviceAuthorizationStorage {
  readonly #core: MemoryCore;

  constructor(core: MemoryCore) {
    this.#core = core;
  }

  async putDeviceAuthorization(
    record: DeviceAuthorizationRecord,
    retainMs: number,
    bounds: DeviceAuthorizationBounds,
  ): Promise<DeviceAuthorizationOutcome> {
    return putDeviceAuthorization(this.#core.keyspace, this.#core.keys, record, retainMs, bounds);
  }

  async findDeviceAuthorization(userCodeHash: string): Promise<StoredRead<StoredDeviceAuthorization>> {
    this.#core.check();
    const index = this.#core.get(this.#core.keys.deviceUserCode(userCodeHash));
    if (!index?.deviceCodeHash) return null;
    return readRecord(this.#core.get(this.#core.keys.deviceAuthorization(index.deviceCodeHash)), deviceAuthorizationFromFields);
  }

  /** The decision, by the model (decideDevice) as the Redis store takes it. */
  async decideDeviceAuthorization(deviceCodeHash: string, now: number, user: SignedInUser | undefined): Promise<boolean> {
    this.#core.check();
    const userCodeHash = this.#core.updateHash(this.#core.keys.deviceAuthorization(deviceCodeHash), deviceDecisionUpdate(now, user));
    if (userCodeHash === undefined) return false;
    this.#core.hashes.delete(this.#core.keys.deviceUserCode(userCodeHash));
    return true;
  }

  /** One poll, decided by the model (pollDevice) as the Redis store decides it. */
  async pollDeviceAuthorization(deviceCodeHash: string, clientId: string, now: number): Promise<DevicePollOutcome> {
    this.#core.check();
    return this.#core.updateHash(this.#core.keys.deviceAuthorization(deviceCodeHash), devicePollUpdate(clientId, now));
  }
}
