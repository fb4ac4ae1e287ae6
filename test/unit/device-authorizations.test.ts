// The device flow's decision and poll as rules on one stored authorization (src/model/device-authorizations.ts),
// without a store: what a decision and each poll answer and what it changes. The stores run this rule inside their
// compare-and-set; the store contract (test/integration/store-contract/devices.ts) holds them to it.

import { describe, expect, it } from 'vitest';
import { DEVICE_SLOW_DOWN_SECONDS, decideDevice, pollDevice } from '../../src/model/device-authorizations.ts';
import type { StoredDeviceAuthorization } from '../../src/model/records.ts';

const NOW = 1_700_000_000_000;
const user = { subject: 'idp-user-1', issuer: 'https://idp.example.com/' };

function stored(overrides: Partial<StoredDeviceAuthorization> = {}): StoredDeviceAuthorization {
  return {
    deviceCodeHash: 'd'.repeat(64),
    userCodeHash: 'u'.repeat(64),
    clientId: 'c-dev',
    status: 'pending',
    interval: 5,
    createdAt: NOW - 1_000,
    expiresAt: NOW + 600_000,
    ...overrides,
  };
}

describe('pollDevice', () => {
  it('unknown, unreadable, another client, or redeemed: invalid, and nothing changes (not counted as a poll)', () => {
    expect(pollDevice(null, 'c-dev', NOW)).toEqual({ outcome: { outcome: 'invalid' } });
    expect(pollDevice('corrupt', 'c-dev', NOW)).toEqual({ outcome: { outcome: 'invalid' } });
    expect(pollDevice(stored(), 'c-other', NOW)).toEqual({ outcome: { outcome: 'invalid' } });
    expect(pollDevice(stored({ status: 'redeemed', user }), 'c-dev', NOW)).toEqual({ outcome: { outcome: 'invalid' } });
  });

  it('at or past its expiry: expired, nothing changes', () => {
    expect(pollDevice(stored({ expiresAt: NOW }), 'c-dev', NOW)).toEqual({ outcome: { outcome: 'expired' } });
  });

  it('pending and denied answer as they are, recording the poll', () => {
    expect(pollDevice(stored(), 'c-dev', NOW)).toEqual({ outcome: { outcome: 'pending' }, change: { lastPolledAt: NOW } });
    expect(pollDevice(stored({ status: 'denied' }), 'c-dev', NOW)).toEqual({
      outcome: { outcome: 'denied' },
      change: { lastPolledAt: NOW },
    });
  });

  it('sooner than the interval after the last poll: slow_down, the interval grows by 5 s (RFC 8628 §3.5); at the interval: an answer', () => {
    expect(DEVICE_SLOW_DOWN_SECONDS).toBe(5);
    const polled = stored({ lastPolledAt: NOW - 4_999 });
    expect(pollDevice(polled, 'c-dev', NOW)).toEqual({
      outcome: { outcome: 'slow_down', interval: 10 },
      change: { lastPolledAt: NOW, interval: 10 },
    });
    expect(pollDevice(stored({ lastPolledAt: NOW - 5_000 }), 'c-dev', NOW)).toEqual({
      outcome: { outcome: 'pending' },
      change: { lastPolledAt: NOW },
    });
    // Even an approval waits for the interval: slow_down, not taken.
    expect(pollDevice(stored({ status: 'approved', user, lastPolledAt: NOW - 1 }), 'c-dev', NOW).outcome).toEqual({
      outcome: 'slow_down',
      interval: 10,
    });
  });

  it('approved: taken once, redeemed by this poll, with the user who approved', () => {
    const step = pollDevice(stored({ status: 'approved', user, scope: 'mcp:read' }), 'c-dev', NOW);
    expect(step.change).toEqual({ lastPolledAt: NOW, status: 'redeemed' });
    expect(step.outcome).toEqual({
      outcome: 'approved',
      authorization: { ...stored({ scope: 'mcp:read' }), status: 'redeemed', lastPolledAt: NOW, user },
    });
  });

  it('an approval without its user is taken and refused (fail closed)', () => {
    expect(pollDevice(stored({ status: 'approved' }), 'c-dev', NOW)).toEqual({
      outcome: { outcome: 'invalid' },
      change: { lastPolledAt: NOW, status: 'redeemed' },
    });
  });
});

describe('decideDevice', () => {
  it('a pending, unexpired authorization takes the decision: approved with the user, or denied', () => {
    expect(decideDevice(stored(), NOW, user)).toEqual({ status: 'approved', user });
    expect(decideDevice(stored(), NOW, undefined)).toEqual({ status: 'denied' });
  });

  it('unknown, unreadable, already decided or redeemed, or expired: refused, nothing changes', () => {
    expect(decideDevice(null, NOW, user)).toBeUndefined();
    expect(decideDevice('corrupt', NOW, user)).toBeUndefined();
    expect(decideDevice(stored({ status: 'approved', user }), NOW, undefined)).toBeUndefined();
    expect(decideDevice(stored({ status: 'denied' }), NOW, user)).toBeUndefined();
    expect(decideDevice(stored({ status: 'redeemed', user }), NOW, user)).toBeUndefined();
    expect(decideDevice(stored({ expiresAt: NOW }), NOW, user)).toBeUndefined();
  });
});
