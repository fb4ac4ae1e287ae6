// A device authorization (RFC 8628) stored on the keyspace port (src/store/keyspace.ts), the one
// transition both stores run: bounded per client address and in total (src/store/pending-holders.ts),
// and refused when a waiting authorization already has its user code. Reached by unauthenticated
// device authorization requests: it runs on the main connection.

import { boundHeld } from '../../model/pending-bounds.ts';
import { fieldArgs, transition, type Keyspace } from '../keyspace.ts';
import { droppingExpired, heldFrom, holding, holdingGuards, holdingReads, type Holder } from '../pending-holders.ts';
import { deviceAuthorizationFields } from './records.ts';
import { pendingSignInMember, type KeyLayout } from '../records.ts';
import type { DeviceAuthorizationRecord } from '../../model/records.ts';
import type { DeviceAuthorizationBounds, DeviceAuthorizationOutcome } from './types.ts';

/**
 * Stores the authorization (kept `retainMs` past its expiry, for a late poll) and its user code's
 * index (until its expiry) only while its client address and the server each hold fewer than their
 * bound (0: none) not expired at `bounds.now`, and no waiting authorization has its user code; refused,
 * nothing is written. Stored: each holder's expired ones are dropped and this one listed by both.
 * Atomic because the plan is guarded by what the decision needed: each bounded holder's count still
 * below its bound (holdingGuards) and the user code's index still absent.
 */
export function putDeviceAuthorization(
  keyspace: Keyspace,
  keys: KeyLayout,
  record: DeviceAuthorizationRecord,
  retainMs: number,
  bounds: DeviceAuthorizationBounds,
): Promise<DeviceAuthorizationOutcome> {
  const { now } = bounds;
  const expiresAt = Math.trunc(record.expiresAt);
  const stored = keys.deviceAuthorization(record.deviceCodeHash);
  const userCode = keys.deviceUserCode(record.userCodeHash);
  const holders: Array<Holder<'address' | 'total'>> = [
    { holder: 'address', key: keys.pendingDevicesByAddress(bounds.address), bound: bounds.perAddress },
    { holder: 'total', key: keys.pendingDevicesAll(), bound: bounds.total },
  ];
  return transition<DeviceAuthorizationOutcome>(keyspace, 'putDeviceAuthorization', async (ks) => {
    const reads = holdingReads(holders, now);
    const replies = await ks.read([...reads, ['EXISTS', userCode]]);
    const held = heldFrom(holders, replies);
    const full = boundHeld(held, now);
    if (full !== undefined) return { result: { stored: false, ...full } };
    if (replies[reads.length] !== 0) return { result: { stored: false, holder: 'user_code' } };
    return {
      result: { stored: true },
      plan: {
        guards: [...holdingGuards(held, now), { command: ['EXISTS', userCode], equals: 0 }],
        steps: [
          ...droppingExpired(holders, now),
          ['HSET', stored, ...fieldArgs(deviceAuthorizationFields(record))],
          ['PEXPIREAT', stored, Math.trunc(record.expiresAt + retainMs)],
          ['HSET', userCode, 'deviceCodeHash', record.deviceCodeHash],
          ['PEXPIREAT', userCode, expiresAt],
          ...holding(holders, pendingSignInMember(record.deviceCodeHash), expiresAt),
        ],
      },
    };
  });
}
