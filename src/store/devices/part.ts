// Device authorizations (RFC 8628), written once for both engines on the core's keyspace: an
// authorization put under its bounds (./transitions.ts), found by its user code, decided (the model's
// rule, decideDevice, in a compare-and-set on the record that drops the user code's index in the same
// step) and polled (pollDevice, in a compare-and-set on the record).

import type { KeyspaceCore } from '../keyspace-core.ts';
import { fieldsOf, readOne, updateHash } from '../keyspace.ts';
import { deviceAuthorizationFromFields, deviceDecisionUpdate, devicePollUpdate, readRecord } from '../records.ts';
import type { DeviceAuthorizationBounds, DeviceAuthorizationOutcome } from '../types.ts';
import type {
  DeviceAuthorizationRecord,
  DevicePollOutcome,
  SignedInUser,
  StoredDeviceAuthorization,
  StoredRead,
} from '../../model/records.ts';
import { putDeviceAuthorization } from './transitions.ts';
import type { DeviceAuthorizationStorage } from './types.ts';

export class KeyspaceDevices implements DeviceAuthorizationStorage {
  readonly #core: KeyspaceCore;

  constructor(core: KeyspaceCore) {
    this.#core = core;
  }

  putDeviceAuthorization(
    record: DeviceAuthorizationRecord,
    retainMs: number,
    bounds: DeviceAuthorizationBounds,
  ): Promise<DeviceAuthorizationOutcome> {
    return putDeviceAuthorization(this.#core.keyspace, this.#core.keys, record, retainMs, bounds);
  }

  /** One poll, decided by the model (pollDevice) inside a compare-and-set on the record. */
  async pollDeviceAuthorization(deviceCodeHash: string, clientId: string, now: number): Promise<DevicePollOutcome> {
    return this.#core.updateHash(this.#core.keys.deviceAuthorization(deviceCodeHash), devicePollUpdate(clientId, now));
  }

  async findDeviceAuthorization(userCodeHash: string): Promise<StoredRead<StoredDeviceAuthorization>> {
    const { keys, keyspace } = this.#core;
    const deviceCodeHash = await readOne(keyspace, ['HGET', keys.deviceUserCode(userCodeHash), 'deviceCodeHash']);
    if (typeof deviceCodeHash !== 'string') return null;
    return readRecord(
      fieldsOf(await readOne(keyspace, ['HGETALL', keys.deviceAuthorization(deviceCodeHash)])),
      deviceAuthorizationFromFields,
    );
  }

  /**
   * The decision, by the model (decideDevice) inside a compare-and-set on the record, its user code's
   * index gone in the same step (both under {oauth}: one slot).
   */
  async decideDeviceAuthorization(deviceCodeHash: string, now: number, user: SignedInUser | undefined): Promise<boolean> {
    const { keys, keyspace } = this.#core;
    const userCodeHash = await updateHash(keyspace, keys.deviceAuthorization(deviceCodeHash), deviceDecisionUpdate(now, user), (decided) =>
      decided === undefined ? [] : [['DEL', keys.deviceUserCode(decided)]],
    );
    return userCodeHash !== undefined;
  }
}
