// Device authorizations (RFC 8628): created by the client, decided by the user, polled by the client.

import type {
  DeviceAuthorizationRecord,
  DevicePollOutcome,
  SignedInUser,
  StoredDeviceAuthorization,
  StoredRead,
} from '../../model/records.ts';

/** How many device authorizations one client address, and the whole server, may hold at once (0: no bound). */
export interface DeviceAuthorizationBounds {
  address: string;
  perAddress: number;
  total: number;
  now: number;
}

/**
 * Stored; or refused, nothing stored: `holder` holds its bound until `retryAt` (epoch ms, its oldest
 * expires), or `user_code`: the user code is one a waiting authorization already has (draw another).
 */
export type DeviceAuthorizationOutcome =
  { stored: true } | { stored: false; holder: 'address' | 'total'; retryAt: number } | { stored: false; holder: 'user_code' };

/** Device authorizations (RFC 8628): created by the client, decided by the user, polled by the client. */
export interface DeviceAuthorizationStorage {
  /**
   * Stores a pending authorization (and its user code's index, until `expiresAt`; the record itself is
   * kept `retainMs` longer so that a late poll is told it expired), only while its client address and
   * the server hold fewer than their bound (counted until each expires) and no waiting authorization
   * has the same user code: the checks and the writes are one atomic step.
   */
  putDeviceAuthorization(
    record: DeviceAuthorizationRecord,
    retainMs: number,
    bounds: DeviceAuthorizationBounds,
  ): Promise<DeviceAuthorizationOutcome>;
  /** The authorization a user code names while it waits for the user's decision; null otherwise. */
  findDeviceAuthorization(userCodeHash: string): Promise<StoredRead<StoredDeviceAuthorization>>;
  /**
   * Atomically: if the authorization is pending and unexpired at `now`, records the decision (`user`
   * approved, or undefined: denied) and forgets its user code; false (nothing changed) otherwise.
   */
  decideDeviceAuthorization(deviceCodeHash: string, now: number, user: SignedInUser | undefined): Promise<boolean>;
  /** Atomically: one poll by `clientId` at `now`, as DevicePollOutcome says; an approval is taken once. */
  pollDeviceAuthorization(deviceCodeHash: string, clientId: string, now: number): Promise<DevicePollOutcome>;
}
