// The store contract's slice for devices: device authorizations (RFC 8628).

import { beforeEach, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../../src/model/clock.ts';
import { generateToken, hashToken } from '../../../src/model/credentials.ts';
import type { TokenStore } from '../../../src/store/types.ts';
import type { DeviceAuthorizationRecord } from '../../../src/model/records.ts';
import type { Contract, StoreHarness } from './context.ts';

export function devicesContract(contract: Contract): void {
  let clock: ManualClock;
  let h: StoreHarness;
  let store: TokenStore;
  beforeEach(() => {
    ({ clock, h, store } = contract);
  });

  describe('device authorizations (RFC 8628)', () => {
    const user = { subject: 'idp-user-1', issuer: 'https://idp.example.com/', email: 'ada@example.com', groups: ['eng'] };
    const RETAIN = 600_000;

    function device(clientId = 'c-dev', overrides: Partial<DeviceAuthorizationRecord> = {}): DeviceAuthorizationRecord {
      const now = clock.now();
      return {
        deviceCodeHash: hashToken(generateToken()),
        userCodeHash: hashToken(generateToken()),
        clientId,
        scope: 'mcp:read',
        interval: 5,
        createdAt: now,
        expiresAt: now + 600_000,
        ...overrides,
      };
    }
    const bounds = (address = '198.51.100.7', perAddress = 10, total = 100) => ({ address, perAddress, total, now: clock.now() });

    it('a stored authorization is found by its user code while pending; approving it records the user and forgets the user code', async () => {
      const r = device();
      expect(await store.putDeviceAuthorization(r, RETAIN, bounds())).toEqual({ stored: true });
      expect(h.keys.deviceAuthorization(r.deviceCodeHash)).toContain('{oauth}');
      expect(h.keys.deviceUserCode(r.userCodeHash)).toContain('{oauth}');
      expect(await store.findDeviceAuthorization(r.userCodeHash)).toEqual({ ...r, status: 'pending' });
      expect(await store.findDeviceAuthorization(hashToken('another code'))).toBeNull();
      expect(await store.decideDeviceAuthorization(r.deviceCodeHash, clock.now(), user)).toBe(true);
      // Decided once: the code finds nothing, and a second decision changes nothing.
      expect(await store.findDeviceAuthorization(r.userCodeHash)).toBeNull();
      expect(await store.decideDeviceAuthorization(r.deviceCodeHash, clock.now(), undefined)).toBe(false);
      expect(await h.rawHash(h.keys.deviceAuthorization(r.deviceCodeHash))).toMatchObject({
        status: 'approved',
        subject: user.subject,
        issuer: user.issuer,
      });
    });

    it('polls: pending, then slow_down when sooner than the interval (which grows by 5 s), then the approval is taken once', async () => {
      const r = device();
      await store.putDeviceAuthorization(r, RETAIN, bounds());
      expect(await store.pollDeviceAuthorization(r.deviceCodeHash, 'c-dev', clock.now())).toEqual({ outcome: 'pending' });
      clock.advance(4_999);
      expect(await store.pollDeviceAuthorization(r.deviceCodeHash, 'c-dev', clock.now())).toEqual({ outcome: 'slow_down', interval: 10 });
      clock.advance(9_999);
      expect(await store.pollDeviceAuthorization(r.deviceCodeHash, 'c-dev', clock.now())).toEqual({ outcome: 'slow_down', interval: 15 });
      clock.advance(15_000);
      expect(await store.pollDeviceAuthorization(r.deviceCodeHash, 'c-dev', clock.now())).toEqual({ outcome: 'pending' });
      // Another client's poll is invalid and does not count as a poll.
      expect(await store.pollDeviceAuthorization(r.deviceCodeHash, 'c-other', clock.now())).toEqual({ outcome: 'invalid' });
      await store.decideDeviceAuthorization(r.deviceCodeHash, clock.now(), user);
      clock.advance(15_000);
      const approved = await store.pollDeviceAuthorization(r.deviceCodeHash, 'c-dev', clock.now());
      expect(approved).toMatchObject({
        outcome: 'approved',
        authorization: { clientId: 'c-dev', scope: 'mcp:read', user, status: 'redeemed' },
      });
      clock.advance(15_000);
      expect(await store.pollDeviceAuthorization(r.deviceCodeHash, 'c-dev', clock.now())).toEqual({ outcome: 'invalid' });
    });

    it('concurrent polls of an approved authorization: exactly one takes it (the others find it redeemed)', async () => {
      const r = device();
      await store.putDeviceAuthorization(r, RETAIN, bounds());
      await store.decideDeviceAuthorization(r.deviceCodeHash, clock.now(), user);
      const polls = await Promise.all(
        Array.from({ length: 8 }, () => store.pollDeviceAuthorization(r.deviceCodeHash, 'c-dev', clock.now())),
      );
      expect(polls.filter((p) => p.outcome === 'approved')).toHaveLength(1);
      expect(polls.filter((p) => p.outcome === 'invalid')).toHaveLength(7);
    });

    it('concurrent decisions on one pending authorization (two tabs, approve and deny): exactly one is taken, and it is what is stored', async () => {
      const r = device();
      await store.putDeviceAuthorization(r, RETAIN, bounds());
      const decided = await Promise.all([
        ...Array.from({ length: 4 }, () => store.decideDeviceAuthorization(r.deviceCodeHash, clock.now(), user)),
        ...Array.from({ length: 4 }, () => store.decideDeviceAuthorization(r.deviceCodeHash, clock.now(), undefined)),
      ]);
      expect(decided.filter((d) => d)).toHaveLength(1);
      const stored = await h.rawHash(h.keys.deviceAuthorization(r.deviceCodeHash));
      expect(stored?.status).toBe(decided.indexOf(true) < 4 ? 'approved' : 'denied');
      expect(await store.findDeviceAuthorization(r.userCodeHash)).toBeNull();
    });

    it('a denied authorization polls as denied; an expired one as expired, and cannot be decided', async () => {
      const denied = device();
      await store.putDeviceAuthorization(denied, RETAIN, bounds());
      expect(await store.decideDeviceAuthorization(denied.deviceCodeHash, clock.now(), undefined)).toBe(true);
      expect(await store.pollDeviceAuthorization(denied.deviceCodeHash, 'c-dev', clock.now())).toEqual({ outcome: 'denied' });
      const late = device('c-dev', { expiresAt: clock.now() + 1_000 });
      await store.putDeviceAuthorization(late, RETAIN, bounds());
      clock.advance(1_000);
      expect(await store.decideDeviceAuthorization(late.deviceCodeHash, clock.now(), user)).toBe(false);
      expect(await store.pollDeviceAuthorization(late.deviceCodeHash, 'c-dev', clock.now())).toEqual({ outcome: 'expired' });
      expect(await store.pollDeviceAuthorization(hashToken('unknown'), 'c-dev', clock.now())).toEqual({ outcome: 'invalid' });
    });

    it('bounded per address and in total, and a user code held by a waiting authorization is refused; nothing is stored when refused', async () => {
      const first = device();
      expect(await store.putDeviceAuthorization(first, RETAIN, bounds('198.51.100.8', 2, 3))).toEqual({ stored: true });
      expect(await store.putDeviceAuthorization(device(), RETAIN, bounds('198.51.100.8', 2, 3))).toEqual({ stored: true });
      const refused = device();
      expect(await store.putDeviceAuthorization(refused, RETAIN, bounds('198.51.100.8', 2, 3))).toEqual({
        stored: false,
        holder: 'address',
        retryAt: first.expiresAt,
      });
      expect(await h.rawHash(h.keys.deviceAuthorization(refused.deviceCodeHash))).toBeNull();
      expect(await store.putDeviceAuthorization(device(), RETAIN, bounds('198.51.100.9', 2, 3))).toEqual({ stored: true });
      expect(await store.putDeviceAuthorization(device(), RETAIN, bounds('198.51.100.10', 2, 3))).toEqual({
        stored: false,
        holder: 'total',
        retryAt: first.expiresAt,
      });
      const sameCode = device('c-dev', { userCodeHash: first.userCodeHash });
      expect(await store.putDeviceAuthorization(sameCode, RETAIN, bounds('198.51.100.11', 0, 0))).toEqual({
        stored: false,
        holder: 'user_code',
      });
      expect(await h.rawHash(h.keys.deviceAuthorization(sameCode.deviceCodeHash))).toBeNull();
    });

    it('a hand-edited status reads as corrupt', async () => {
      const r = device();
      await store.putDeviceAuthorization(r, RETAIN, bounds());
      await h.setRawField(h.keys.deviceAuthorization(r.deviceCodeHash), 'status', 'maybe');
      expect(await store.findDeviceAuthorization(r.userCodeHash)).toBe('corrupt');
    });
  });
}
