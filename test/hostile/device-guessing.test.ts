// Guessing the user codes of device sign-in (RFC 8628 §5.1): from real distinct loopback addresses,
// each address is held to its entries a minute and each waiting code to its own; the wrong entries of
// every address together are bounded server-wide, past which every address is held to a few entries a
// minute. No flood of wrong codes closes the form to a person who holds a right one.

import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  DEVICE_ENTRIES_PER_MINUTE_PER_ADDRESS,
  DEVICE_ENTRIES_PER_MINUTE_PER_CODE,
  DEVICE_ENTRIES_PER_MINUTE_UNDER_GUESSING,
  DEVICE_FAILED_ENTRIES_PER_MINUTE,
} from '../../src/oauth/authorize.ts';
import { USER_CODE_ALPHABET } from '../../src/oauth/device.ts';
import { registerDeviceClient, startDevice } from '../support/device.ts';
import { startSignInStack, type SignInStack } from '../support/sign-in.ts';
import { formFrom } from './from-address.ts';

let s: SignInStack;
let clientId: string;

beforeAll(async () => {
  s = await startSignInStack();
  clientId = await registerDeviceClient(s.base);
});
afterAll(async () => {
  await s?.close();
});
beforeEach(() => {
  s.stack.clock.advance(60_000);
});

/** The n-th wrong code (distinct codes: a guesser never repeats one). */
function wrongCode(n: number): string {
  const a = USER_CODE_ALPHABET;
  let code = '';
  for (let i = 0, x = n; i < 8; i++, x = Math.floor(x / a.length)) code += a[x % a.length];
  return code;
}

const enter = (from: string, code: string) => formFrom(from, `${s.base}/device`, { user_code: code });

describe('user-code guessing', () => {
  it('one address is held to its entries a minute; another address is not affected', async () => {
    const d = await startDevice(s.base, clientId);
    for (let i = 0; i < DEVICE_ENTRIES_PER_MINUTE_PER_ADDRESS; i++) expect((await enter('127.0.0.21', wrongCode(i))).status).toBe(400);
    const refused = await enter('127.0.0.21', d.user_code);
    expect(refused.status).toBe(429);
    expect(refused.text).not.toContain('Approve');
    expect((await enter('127.0.0.22', d.user_code)).text).toContain('Approve');
  });

  /**
   * `perAddress` distinct wrong codes from each of `addresses` addresses `${prefix}.1`, `${prefix}.2`,
   * ..., the addresses at once (each one's entries in turn): the statuses answered, counted.
   */
  async function flood(prefix: string, addresses: number, perAddress: number, first: number): Promise<Map<number, number>> {
    const statuses = new Map<number, number>();
    await Promise.all(
      Array.from({ length: addresses }, async (_, a) => {
        for (let i = 0; i < perAddress; i++) {
          const { status } = await enter(`${prefix}.${a + 1}`, wrongCode(first + a * perAddress + i));
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
        }
      }),
    );
    return statuses;
  }

  it('31 addresses entering their whole allowance of wrong codes at once do not close /device: a person with a right code gets through', async () => {
    const d = await startDevice(s.base, clientId);
    const statuses = await flood('127.0.1', 31, DEVICE_ENTRIES_PER_MINUTE_PER_ADDRESS, 1000);
    expect(Object.fromEntries(statuses)).toEqual({ 400: 31 * DEVICE_ENTRIES_PER_MINUTE_PER_ADDRESS });
    const right = await enter('127.0.2.1', d.user_code);
    expect(right.status).toBe(200);
    expect(right.text).toContain('Approve');
  });

  it(`past ${DEVICE_FAILED_ENTRIES_PER_MINUTE} wrong entries a minute server-wide, every address is held to ${DEVICE_ENTRIES_PER_MINUTE_UNDER_GUESSING} entries; a right code from a fresh address still gets through`, async () => {
    const d = await startDevice(s.base, clientId);
    const perAddress = DEVICE_ENTRIES_PER_MINUTE_PER_ADDRESS;
    const addresses = DEVICE_FAILED_ENTRIES_PER_MINUTE / perAddress;
    // Exactly the server-wide bound, each address within its own: nothing is refused yet.
    expect(Object.fromEntries(await flood('127.0.3', addresses, perAddress, 5000))).toEqual({ 400: DEVICE_FAILED_ENTRIES_PER_MINUTE });
    // One wrong entry more passes the bound (it is still answered as wrong).
    expect((await enter('127.0.4.1', wrongCode(20_000))).status).toBe(400);
    // A guessing address now gets a few entries, then 429, even for the right code.
    for (let i = 0; i < DEVICE_ENTRIES_PER_MINUTE_UNDER_GUESSING; i++)
      expect((await enter('127.0.4.2', wrongCode(20_001 + i))).status).toBe(400);
    const held = await enter('127.0.4.2', d.user_code);
    expect(held.status).toBe(429);
    expect(held.text).toMatch(/too many wrong device codes/i);
    expect(held.text).not.toContain('Approve');
    // A person with the right code, from an address that has not been guessing: the consent page.
    expect((await enter('127.0.4.3', d.user_code)).text).toContain('Approve');
    // The next minute, the held address has its usual allowance again.
    s.stack.clock.advance(60_000);
    expect((await enter('127.0.4.2', d.user_code)).text).toContain('Approve');
  });

  it(`a waiting code is taken ${DEVICE_ENTRIES_PER_MINUTE_PER_CODE} times a minute, from every address together; then 429 until the minute ends`, async () => {
    const d = await startDevice(s.base, clientId);
    for (let i = 0; i < DEVICE_ENTRIES_PER_MINUTE_PER_CODE; i++)
      expect((await enter(`127.0.5.${i + 1}`, d.user_code)).text).toContain('Approve');
    const refused = await enter('127.0.5.100', d.user_code);
    expect(refused.status).toBe(429);
    expect(refused.text).toMatch(/entered too many times/i);
    // Another code is not affected.
    const other = await startDevice(s.base, clientId);
    expect((await enter('127.0.5.100', other.user_code)).text).toContain('Approve');
    s.stack.clock.advance(60_000);
    expect((await enter('127.0.5.101', d.user_code)).text).toContain('Approve');
  });
});
