// The store's changes decided over what was read and written only while it still holds, raced from 8
// sidecars on one real Redis: transitions on the keyspace port (guards checked by the plan's script on
// each sidecar's main connection) and plans under WATCH (MULTI/EXEC on each sidecar's transaction
// connection). Their reads and writes interleave; a change that lost a race decides again.

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { generateToken, hashToken } from '../../src/model/credentials.ts';
import { handleDigest, handleOwner } from '../../src/proxy/handles.ts';
import { consentMember, subjectDigest } from '../../src/store/records.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import type { DeviceAuthorizationRecord } from '../../src/model/records.ts';
import type { AuthorizationRequestRecord, ConsentRecord } from '../../src/store/types.ts';
import { closeRacingStores, openRacingStores } from '../support/redis.ts';

const SIDECARS = 8;
const HOUR = 3_600_000;
const TTL = 60_000;
const MAX = 100;

let prefix: string;
let raw: Redis;
let sidecars: RedisTokenStore[];

beforeEach(async () => ({ prefix, raw, sidecars } = await openRacingStores('plans-races', SIDECARS)));
afterEach(() => closeRacingStores({ prefix, raw, sidecars }));

describe('handles of a person forgotten from 8 sidecars at once', () => {
  it('while more are bound: each handle is forgotten once, none is left unlisted', async () => {
    const alice = handleOwner({ kind: 'oauth', subject: 'alice', clientId: 'c-a' });
    const now = Date.now();
    const before = Array.from({ length: 8 }, (_, i) => handleDigest(`before-${i}`));
    for (const hash of before) await sidecars[0]!.bindHandle('session', hash, alice, now, TTL, MAX);
    const during = Array.from({ length: 16 }, (_, i) => handleDigest(`during-${i}`));
    const [forgotten] = await Promise.all([
      Promise.all(sidecars.map((s) => s.forgetSubjectHandles('alice'))),
      Promise.all(during.map((hash, i) => sidecars[i % SIDECARS]!.bindHandle('session', hash, alice, now, TTL, MAX))),
    ]);
    const left = await sidecars[0]!.forgetSubjectHandles('alice');
    expect(forgotten.reduce((sum, n) => sum + n, 0) + left).toBe(before.length + during.length);
    for (const hash of [...before, ...during]) expect(await raw.exists(`${prefix}{oauth}:mcpHandles:session:${hash}`)).toBe(0);
  });
});

describe('approvals remembered on one browser from 8 sidecars at once', () => {
  const browser = hashToken(generateToken());
  function approval(clientId: string, expiresAt: number): ConsentRecord {
    return {
      clientId,
      clientCreatedAt: expiresAt - 48 * HOUR,
      redirectUri: 'http://127.0.0.1:9999/cb',
      issuer: 'https://idp.example.com/',
      subject: 'idp-user-1',
      approvedAt: expiresAt - 24 * HOUR,
      expiresAt,
    };
  }
  const pexpiretime = async (key: string) => Number(await raw.call('PEXPIRETIME', key));

  it('at most maxPerBrowser kept, the longest-lived among them; the hash and the index expire with their latest', async () => {
    const now = Date.now();
    const given = sidecars.map((_, i) => approval(`c-${i + 1}`, now + (i + 1) * HOUR));
    await Promise.all(sidecars.map((s, i) => s.putConsent(browser, given[i]!, now, 3)));
    const kept = (await sidecars[0]!.listConsents(browser, now)).map((c) => c.clientId);
    expect(kept).toHaveLength(3);
    expect(kept).toEqual(expect.arrayContaining(['c-7', 'c-8']));
    const key = sidecars[0]!.keys.consents(browser);
    expect(await raw.hlen(key)).toBe(3);
    expect(await pexpiretime(key)).toBe(now + 8 * HOUR);
    // Each approval was listed when given (one evicted since names nothing: dropped when the index is read).
    const index = sidecars[0]!.keys.subjectGrants(subjectDigest('idp-user-1'));
    expect(await raw.zcard(index)).toBe(8);
    expect(await pexpiretime(index)).toBe(now + 8 * HOUR);
  });

  it("one person's approvals remembered on 32 browsers at once: the index lists each and expires with the longest-lived", async () => {
    const now = Date.now();
    const browsers = Array.from({ length: 32 }, () => hashToken(generateToken()));
    // The longest-lived first: the others race to set the index's expiry after it, each from what it read.
    await Promise.all(
      browsers.map((browser, i) =>
        sidecars[i % SIDECARS]!.putConsent(browser, approval('c-1', now + (browsers.length - i) * HOUR), now, 3),
      ),
    );
    const index = sidecars[0]!.keys.subjectGrants(subjectDigest('idp-user-1'));
    expect(await raw.zcard(index)).toBe(browsers.length);
    expect(await pexpiretime(index)).toBe(now + browsers.length * HOUR);
  });

  it('forgotten on some sidecars while given again on others: an approval kept is always listed in its person index', async () => {
    const now = Date.now();
    const given = approval('c-again', now + HOUR);
    const index = sidecars[0]!.keys.subjectGrants(subjectDigest('idp-user-1'));
    const approvals = sidecars[0]!.keys.consents(browser);
    for (let round = 0; round < 20; round++) {
      await sidecars[0]!.putConsent(browser, given, now, 20);
      const [listed] = await sidecars[0]!.listSubjectConsents('idp-user-1', now);
      await Promise.all(
        sidecars.map((s, i) => (i % 2 === 0 ? s.forgetConsent(browser, listed!.key, 'idp-user-1') : s.putConsent(browser, given, now, 20))),
      );
      // Whichever came last, the approval and its index member are there together or gone together.
      const kept = (await raw.hexists(approvals, listed!.key)) === 1;
      const member = await raw.zscore(index, consentMember(browser, listed!.key));
      expect({ round, kept, listed: member !== null }).toEqual({ round, kept, listed: kept });
    }
  });

  it("the person's index expires with its longest-lived member, the approval given again counted at its new expiry", async () => {
    const store = sidecars[0]!;
    const now = Date.now();
    const index = store.keys.subjectGrants(subjectDigest('idp-user-1'));
    await store.putConsent(browser, approval('c-x', now + 3 * HOUR), now, 20);
    await store.putConsent(browser, approval('c-y', now + HOUR), now, 20);
    expect(await pexpiretime(index)).toBe(now + 3 * HOUR);
    await store.putConsent(browser, approval('c-x', now + 2 * HOUR), now, 20);
    expect(await pexpiretime(index)).toBe(now + 2 * HOUR);
    expect(await pexpiretime(store.keys.consents(browser))).toBe(now + 2 * HOUR);
  });
});

describe('pending sign-ins put from 8 sidecars at once', () => {
  const request = (clientId: string): AuthorizationRequestRecord => ({
    stage: 'consent',
    browserHash: hashToken('browser cookie'),
    request: {
      clientId,
      redirectUri: 'http://127.0.0.1:9999/cb',
      codeChallenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
      state: undefined,
      scope: undefined,
    },
  });
  async function putMany(n: number, bound: { perAddress: number; perClient: number }, address: (i: number) => string) {
    const now = Date.now();
    const handles = Array.from({ length: n }, () => hashToken(generateToken()));
    const outcomes = await Promise.all(
      handles.map((handle, i) =>
        sidecars[i % SIDECARS]!.putPendingSignIn(handle, request('c-race'), now + TTL + i, {
          address: address(i),
          clientId: 'c-race',
          ...bound,
          now,
        }),
      ),
    );
    return { handles, outcomes, now };
  }

  it('20 from one address with a bound of 5: exactly 5 stored and listed, the others refused until the oldest expires', async () => {
    const { handles, outcomes, now } = await putMany(20, { perAddress: 5, perClient: 0 }, () => '198.51.100.9');
    const stored = handles.filter((_, i) => outcomes[i]!.stored);
    expect(stored).toHaveLength(5);
    const keys = sidecars[0]!.keys;
    expect(await raw.zcard(keys.pendingSignInsByAddress('198.51.100.9'))).toBe(5);
    for (const [i, handle] of handles.entries())
      expect(await raw.exists(keys.authorizationRequest(handle))).toBe(outcomes[i]!.stored ? 1 : 0);
    const oldest = Math.min(...handles.flatMap((_, i) => (outcomes[i]!.stored ? [now + TTL + i] : [])));
    for (const outcome of outcomes.filter((o) => !o.stored)) expect(outcome).toEqual({ stored: false, holder: 'address', retryAt: oldest });
  });

  it('16 from as many addresses for one client with a bound of 6: exactly 6 stored', async () => {
    const { outcomes } = await putMany(16, { perAddress: 1, perClient: 6 }, (i) => `198.51.100.${i + 20}`);
    expect(outcomes.filter((o) => o.stored)).toHaveLength(6);
    expect(outcomes.filter((o) => !o.stored).map((o) => (o.stored ? undefined : o.holder))).toEqual(Array(10).fill('client'));
    expect(await raw.zcard(sidecars[0]!.keys.pendingSignInsByClient('c-race'))).toBe(6);
  });

  it('200 for one client with room under its bound: every one stored, none gives up on contention', async () => {
    const { outcomes } = await putMany(200, { perAddress: 100, perClient: 10_000 }, (i) => `198.51.100.${i}`);
    expect(outcomes.filter((o) => o.stored)).toHaveLength(200);
    expect(await raw.zcard(sidecars[0]!.keys.pendingSignInsByClient('c-race'))).toBe(200);
  });
});

describe('device authorizations put from 8 sidecars at once', () => {
  function device(userCodeHash = hashToken(generateToken())): DeviceAuthorizationRecord {
    const now = Date.now();
    return {
      deviceCodeHash: hashToken(generateToken()),
      userCodeHash,
      clientId: 'c-dev',
      interval: 5,
      createdAt: now,
      expiresAt: now + TTL,
    };
  }
  const bounds = (address: string, perAddress: number, total: number) => ({ address, perAddress, total, now: Date.now() });

  it('with one user code: exactly one stored, and the code names it', async () => {
    const userCode = hashToken(generateToken());
    const devices = Array.from({ length: 16 }, () => device(userCode));
    const outcomes = await Promise.all(
      devices.map((d, i) => sidecars[i % SIDECARS]!.putDeviceAuthorization(d, TTL, bounds(`198.51.100.${i}`, 0, 0))),
    );
    const stored = devices.filter((_, i) => outcomes[i]!.stored);
    expect(stored).toHaveLength(1);
    expect(outcomes.filter((o) => !o.stored)).toEqual(Array(15).fill({ stored: false, holder: 'user_code' }));
    const keys = sidecars[0]!.keys;
    expect(await raw.hget(keys.deviceUserCode(userCode), 'deviceCodeHash')).toBe(stored[0]!.deviceCodeHash);
    for (const [i, d] of devices.entries())
      expect(await raw.exists(keys.deviceAuthorization(d.deviceCodeHash))).toBe(outcomes[i]!.stored ? 1 : 0);
  });

  it('20 with a total bound of 5: exactly 5 stored and listed', async () => {
    const devices = Array.from({ length: 20 }, () => device());
    const outcomes = await Promise.all(
      devices.map((d, i) => sidecars[i % SIDECARS]!.putDeviceAuthorization(d, TTL, bounds(`198.51.100.${i}`, 0, 5))),
    );
    expect(outcomes.filter((o) => o.stored)).toHaveLength(5);
    expect(await raw.zcard(sidecars[0]!.keys.pendingDevicesAll())).toBe(5);
  });
});
