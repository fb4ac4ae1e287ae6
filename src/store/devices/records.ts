// Device authorizations as hash fields, and the model's poll and decision rules as hash updates.

import { parseEpochMs } from '../../model/credentials.ts';
import { decideDevice, pollDevice } from '../../model/device-authorizations.ts';
import { type Fields, type HashUpdate, userFields, userFromFields } from '../codec.ts';
import type { DeviceAuthorizationRecord, DevicePollOutcome, SignedInUser, StoredDeviceAuthorization } from '../../model/records.ts';

/** A device authorization as hash fields; it starts pending (the stores' scripts change its status). */
export function deviceAuthorizationFields(r: DeviceAuthorizationRecord): Fields {
  const f: Fields = {
    deviceCodeHash: r.deviceCodeHash,
    userCodeHash: r.userCodeHash,
    clientId: r.clientId,
    status: 'pending',
    interval: String(r.interval),
    createdAt: String(r.createdAt),
    expiresAt: String(r.expiresAt),
  };
  if (r.scope !== undefined) f.scope = r.scope;
  return f;
}

const DEVICE_STATUSES: ReadonlySet<string> = new Set(['pending', 'approved', 'denied', 'redeemed']);

/** A stored device authorization, or `'corrupt'` without its client, a known status, its times, or (approved) its user. */
export function deviceAuthorizationFromFields(f: Fields): StoredDeviceAuthorization | 'corrupt' {
  const status = f.status ?? '';
  const interval = Number(f.interval);
  const createdAt = parseEpochMs(f.createdAt);
  const expiresAt = parseEpochMs(f.expiresAt);
  if (!f.deviceCodeHash || !f.userCodeHash || !f.clientId || !DEVICE_STATUSES.has(status)) return 'corrupt';
  if (!Number.isSafeInteger(interval) || interval < 1 || createdAt === undefined || expiresAt === undefined) return 'corrupt';
  const user = userFromFields(f);
  if (status === 'approved' && !user) return 'corrupt';
  const r: StoredDeviceAuthorization = {
    deviceCodeHash: f.deviceCodeHash,
    userCodeHash: f.userCodeHash,
    clientId: f.clientId,
    status: status as StoredDeviceAuthorization['status'],
    interval,
    createdAt,
    expiresAt,
  };
  if (f.scope !== undefined) r.scope = f.scope;
  if (user) r.user = user;
  const polled = parseEpochMs(f.lastPolledAt);
  if (polled !== undefined) r.lastPolledAt = polled;
  return r;
}

/**
 * One poll by `clientId` at `now` of the device authorization whose fields are `current`, as an
 * update: the rule is the model's (pollDevice), the fields it changes are written here.
 */
export function devicePollUpdate(clientId: string, now: number): (current: Fields | null) => HashUpdate<DevicePollOutcome> {
  return (current) => {
    const { outcome, change } = pollDevice(current && deviceAuthorizationFromFields(current), clientId, now);
    if (change === undefined) return { result: outcome };
    const set: Fields = {};
    if (change.status !== undefined) set.status = change.status;
    if (change.interval !== undefined) set.interval = String(change.interval);
    if (change.lastPolledAt !== undefined) set.lastPolledAt = String(change.lastPolledAt);
    return { result: outcome, set };
  };
}

/**
 * The user's decision at `now` on the device authorization whose fields are `current`, as an update:
 * the rule is the model's (decideDevice). Its result is the user code whose index the decision
 * forgets (undefined: refused, nothing changed).
 */
export function deviceDecisionUpdate(
  now: number,
  user: SignedInUser | undefined,
): (current: Fields | null) => HashUpdate<string | undefined> {
  return (current) => {
    const stored = current && deviceAuthorizationFromFields(current);
    const change = decideDevice(stored, now, user);
    if (change === undefined || stored === null || stored === 'corrupt') return { result: undefined };
    return {
      result: stored.userCodeHash,
      set: { ...(change.status === 'approved' ? userFields(change.user) : {}), status: change.status },
    };
  };
}
