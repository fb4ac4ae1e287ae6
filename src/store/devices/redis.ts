// Device authorizations (RFC 8628) on Redis: the lookup by user code and the decision with plain
// commands; the rest is the part both engines share (./part.ts).

import { deviceAuthorizationFromFields, deviceDecisionUpdate, orNull, readRecord } from '../records.ts';
import type { RedisCore } from '../redis-core.ts';
import type { SignedInUser, StoredDeviceAuthorization, StoredRead } from '../../model/records.ts';
import { KeyspaceDevices } from './part.ts';
import type { DeviceAuthorizationStorage } from './types.ts';

export class RedisDevices extends KeyspaceDevices<RedisCore> implements DeviceAuthorizationStorage {
  async findDeviceAuthorization(userCodeHash: string): Promise<StoredRead<StoredDeviceAuthorization>> {
    const deviceCodeHash = await this.core.redis.hget(this.core.keys.deviceUserCode(userCodeHash), 'deviceCodeHash');
    if (deviceCodeHash === null) return null;
    return readRecord(
      orNull(await this.core.redis.hgetall(this.core.keys.deviceAuthorization(deviceCodeHash))),
      deviceAuthorizationFromFields,
    );
  }

  /**
   * The decision, by the model (decideDevice) inside a compare-and-set on the record; then its user
   * code's index goes (a second command: an index left behind names an authorization no longer
   * pending, which the device page refuses, and expires with it).
   */
  async decideDeviceAuthorization(deviceCodeHash: string, now: number, user: SignedInUser | undefined): Promise<boolean> {
    const userCodeHash = await this.core.updateHash(this.core.keys.deviceAuthorization(deviceCodeHash), deviceDecisionUpdate(now, user));
    if (userCodeHash === undefined) return false;
    await this.core.redis.del(this.core.keys.deviceUserCode(userCodeHash));
    return true;
  }
}
