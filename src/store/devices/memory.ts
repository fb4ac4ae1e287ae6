// Device authorizations (RFC 8628) in memory.

import type { MemoryCore } from '../memory-core.ts';
import {
  deviceAuthorizationFields,
  deviceAuthorizationFromFields,
  deviceDecisionUpdate,
  devicePollUpdate,
  pendingSignInMember,
  readRecord,
} from '../records.ts';
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

  /** Device authorizations held by a client address and by the server: member -> expiry (the Redis store's sorted sets). */
  readonly #pendingDevices = new Map<string, Map<string, number>>();

  async putDeviceAuthorization(
    record: DeviceAuthorizationRecord,
    retainMs: number,
    bounds: DeviceAuthorizationBounds,
  ): Promise<DeviceAuthorizationOutcome> {
    this.#core.check();
    const held = (['address', 'total'] as const).map((holder) => {
      const key = holder === 'address' ? this.#core.keys.pendingDevicesByAddress(bounds.address) : this.#core.keys.pendingDevicesAll();
      const members = this.#pendingDevices.get(key) ?? new Map<string, number>();
      for (const [member, until] of members) if (until <= bounds.now) members.delete(member);
      this.#pendingDevices.set(key, members);
      return { holder, members, bound: holder === 'address' ? bounds.perAddress : bounds.total };
    });
    for (const { holder, members, bound } of held) {
      if (bound > 0 && members.size >= bound) return { stored: false, holder, retryAt: Math.min(...members.values()) };
    }
    const index = this.#core.keys.deviceUserCode(record.userCodeHash);
    if (this.#core.get(index)) return { stored: false, holder: 'user_code' };
    this.#core.put(
      this.#core.keys.deviceAuthorization(record.deviceCodeHash),
      deviceAuthorizationFields(record),
      record.expiresAt + retainMs,
    );
    this.#core.put(index, { deviceCodeHash: record.deviceCodeHash }, record.expiresAt);
    for (const { members } of held) members.set(pendingSignInMember(record.deviceCodeHash), record.expiresAt);
    return { stored: true };
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
