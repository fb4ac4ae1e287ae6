// The device flow (RFC 8628) as rules on one stored authorization: the user's decision, and each poll
// (§3.4-3.5): what it answers and what it changes. Both stores run it, inside their compare-and-set on the record
// (src/store/devices/), so the rule is written once and the store only makes it atomic.

import type { DevicePollOutcome, SignedInUser, StoredDeviceAuthorization, StoredRead } from './records.ts';

/** RFC 8628 §3.5: each `slow_down` adds five seconds to the interval of every later poll. */
export const DEVICE_SLOW_DOWN_SECONDS = 5;

/** The fields of an authorization a poll may change. */
export type DevicePollChange = Partial<Pick<StoredDeviceAuthorization, 'status' | 'interval' | 'lastPolledAt'>>;

/** One poll's outcome, and what it changes on the authorization (nothing when absent). */
export interface DevicePollStep {
  outcome: DevicePollOutcome;
  change?: DevicePollChange;
}

/**
 * One poll by `clientId` at `now`: unknown, unreadable, another client's or already redeemed is
 * `invalid` (nothing changes: another client's poll does not count as a poll); past its expiry,
 * `expired`. Otherwise the poll is recorded, and one sooner than the interval after the last is
 * `slow_down` (the interval grows); else the user's decision: `pending`, `denied`, or `approved`,
 * which redeems it: the next poll finds it `invalid`, so its tokens are issued once.
 */
export function pollDevice(stored: StoredRead<StoredDeviceAuthorization>, clientId: string, now: number): DevicePollStep {
  if (stored === null || stored === 'corrupt' || stored.clientId !== clientId || stored.status === 'redeemed') {
    return { outcome: { outcome: 'invalid' } };
  }
  if (!(stored.expiresAt > now)) return { outcome: { outcome: 'expired' } };
  if (stored.lastPolledAt !== undefined && now - stored.lastPolledAt < stored.interval * 1000) {
    const interval = stored.interval + DEVICE_SLOW_DOWN_SECONDS;
    return { outcome: { outcome: 'slow_down', interval }, change: { lastPolledAt: now, interval } };
  }
  const polled = { lastPolledAt: now };
  switch (stored.status) {
    case 'pending':
    case 'denied':
      return { outcome: { outcome: stored.status }, change: polled };
    case 'approved': {
      const change: DevicePollChange = { ...polled, status: 'redeemed' };
      // A readable approval always names its user; without one it is taken and refused (fail closed).
      if (stored.user === undefined) return { outcome: { outcome: 'invalid' }, change };
      return { outcome: { outcome: 'approved', authorization: { ...stored, ...change, user: stored.user } }, change };
    }
  }
}

/** What the user's decision changes on the authorization: approved with the user, or denied. */
export type DeviceDecisionChange = { status: 'approved'; user: SignedInUser } | { status: 'denied' };

/**
 * The user's decision at `now` (`user` approved, undefined: denied): taken only while the
 * authorization is pending and unexpired, else refused (undefined: nothing changes). A decision is
 * taken once: the next one finds it no longer pending.
 */
export function decideDevice(
  stored: StoredRead<StoredDeviceAuthorization>,
  now: number,
  user: SignedInUser | undefined,
): DeviceDecisionChange | undefined {
  if (stored === null || stored === 'corrupt' || stored.status !== 'pending' || !(stored.expiresAt > now)) return undefined;
  return user === undefined ? { status: 'denied' } : { status: 'approved', user };
}
