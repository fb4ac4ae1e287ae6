// Device authorizations (RFC 8628): created by the client, decided by the user, polled by the client.

import type { SignedInUser, StoredRead } from '../shared.ts';

/**
 * A device authorization (RFC 8628 §3.2), stored under the SHA-256 of its device code; its user code
 * (normalised) is found through an index under the SHA-256 of that code while it waits for the user.
 * `interval`: the seconds the client must leave between polls, grown by 5 at each `slow_down`.
 */
export interface DeviceAuthorizationRecord {
  deviceCodeHash: string;
  userCodeHash: string;
  clientId: string;
  scope?: string;
  createdAt: number;
  expiresAt: number;
  interval: number;
}

/**
 * A device authorization as stored: `pending` until the user decides, then `approved` (with the user
 * who approved) or `denied`; `redeemed` once a poll took the approval (tokens are issued once).
 */
export interface StoredDeviceAuthorization extends DeviceAuthorizationRecord {
  status: 'pending' | 'approved' | 'denied' | 'redeemed';
  user?: SignedInUser;
  lastPolledAt?: number;
}

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

/**
 * One poll of the token endpoint (RFC 8628 §3.5): `invalid` (unknown, another client's, or already
 * redeemed), `expired`, `slow_down` (polled sooner than the interval; the interval is now `interval`),
 * `pending`, `denied`, or `approved`: the authorization, now redeemed, whose tokens the caller issues.
 */
export type DevicePollOutcome =
  | { outcome: 'invalid' | 'expired' | 'pending' | 'denied' }
  | { outcome: 'slow_down'; interval: number }
  | { outcome: 'approved'; authorization: StoredDeviceAuthorization & { user: SignedInUser } };

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
