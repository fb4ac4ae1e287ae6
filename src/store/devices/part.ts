// Device authorizations (RFC 8628), the part both engines share: an authorization put under its bounds
// (a transition on the core's keyspace: ./transitions.ts) and a poll (the model's rule, pollDevice,
// in a compare-and-set on the record). The lookup by user code and the decision are each engine's own
// (memory.ts, redis.ts).

import type { KeyspaceCore } from '../keyspace-core.ts';
import { devicePollUpdate } from '../records.ts';
import type { DeviceAuthorizationBounds, DeviceAuthorizationOutcome } from '../types.ts';
import type { DeviceAuthorizationRecord, DevicePollOutcome } from '../../model/records.ts';
import { putDeviceAuthorization } from './transitions.ts';
import type { DeviceAuthorizationStorage } from './types.ts';

export class KeyspaceDevices<Core extends KeyspaceCore = KeyspaceCore> implements Pick<
  DeviceAuthorizationStorage,
  'putDeviceAuthorization' | 'pollDeviceAuthorization'
> {
  /** The engine's core (its own part reads what only that engine has from it). */
  protected readonly core: Core;

  constructor(core: Core) {
    this.core = core;
  }

  putDeviceAuthorization(
    record: DeviceAuthorizationRecord,
    retainMs: number,
    bounds: DeviceAuthorizationBounds,
  ): Promise<DeviceAuthorizationOutcome> {
    return putDeviceAuthorization(this.core.keyspace, this.core.keys, record, retainMs, bounds);
  }

  /** One poll, decided by the model (pollDevice) inside a compare-and-set on the record. */
  async pollDeviceAuthorization(deviceCodeHash: string, clientId: string, now: number): Promise<DevicePollOutcome> {
    return this.core.updateHash(this.core.keys.deviceAuthorization(deviceCodeHash), devicePollUpdate(clientId, now));
  }
}
