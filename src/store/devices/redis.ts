// Device authorizations (RFC 8628) on Redis.

import { deviceAuthorizationFromFields, deviceDecisionUpdate, devicePollUpdate, orNull, readRecord } from '../records.ts';
import type { RedisCore } from '../redis-core.ts';
import { putDeviceAuthorization } from './transitions.ts';
import type { DeviceAuthorizationBounds, DeviceAuthorizationOutcome } from '../types.ts';
import type {
  DeviceAuthorizationRecord,
  DevicePollOutcome,
  SignedInUser,
  StoredDeviceAuthorization,
  StoredRead,
} from '../../model/records.ts';
import type { DeviceAuthorizationStorage } from './types.ts';

export class RedisDevices implements DeviceAuthorizationStorage {
  readonly #core: RedisCore;

  constructor(core: RedisCore) {
    this.#core = core;
  }

  putDeviceAuthorization(
    record: DeviceAuthorizationRecord,
    retainMs: number,
    bounds: DeviceAuthorizationBounds,
  ): Promise<DeviceAuthorizationOutcome> {
    return putDeviceAuthorization(this.#core.keyspace, this.#core.keys, record, retainMs, bounds);
  }

  async findDeviceAuthorization(userCodeHash: string): Promise<StoredRead<StoredDeviceAuthorization>> {
    const deviceCodeHash = await this.#core.redis.hget(this.#core.keys.deviceUserCode(userCodeHash), 'deviceCodeHash');
    if (deviceCodeHash === null) return null;
    return readRecord(
      orNull(await this.#core.redis.hgetall(this.#core.keys.deviceAuthorization(deviceCodeHash))),
      deviceAuthorizationFromFields,
    );
  }

  /**
   * The decision, by the model (decideDevice) inside a compare-and-set on the record; then its user
   * code's index goes (a second command: an index left behind names an authorization no longer
   * pending, which the device page refuses, and expires with it).
   */
  async decideDeviceAuthorization(deviceCodeHash: string, now: number, user: SignedInUser | undefined): Promise<boolean> {
    const userCodeHash = await this.#core.updateHash(this.#core.keys.deviceAuthorization(deviceCodeHash), deviceDecisionUpdate(now, user));
    if (userCodeHash === undefined) return false;
    await this.#core.redis.del(this.#core.keys.deviceUserCode(userCodeHash));
    return true;
  }

  /** One poll, decided by the model (pollDevice) inside a compare-and-set on the record. */
  async pollDeviceAuthorization(deviceCodeHash: string, clientId: string, now: number): Promise<DevicePollOutcome> {
    return this.#core.updateHash(this.#core.keys.deviceAuthorization(deviceCodeHash), devicePollUpdate(clientId, now));
  }
}
