// Guessing the user codes of device sign-in (RFC 8628 §5.1): from real distinct loopback addresses,
// each address is held to its entries a minute, and the wrong entries of every address together to
// a server-wide bound, after which even a right code waits for the next minute.

import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DEVICE_ENTRIES_PER_MINUTE_PER_ADDRESS, DEVICE_FAILED_ENTRIES_PER_MINUTE } from '../../src/oauth/authorize.ts';
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

  it(`wrong entries from many addresses stop at ${DEVICE_FAILED_ENTRIES_PER_MINUTE} a minute server-wide: then every entry waits, the right code too`, async () => {
    const d = await startDevice(s.base, clientId);
    const perAddress = DEVICE_ENTRIES_PER_MINUTE_PER_ADDRESS;
    let sent = 0;
    let firstRefusal: number | undefined;
    // Each address stays under its own limit; only the server-wide one can stop them.
    for (
      let address = 0;
      firstRefusal === undefined && address < Math.ceil(DEVICE_FAILED_ENTRIES_PER_MINUTE / (perAddress - 1)) + 2;
      address++
    ) {
      for (let i = 0; i < perAddress - 1 && firstRefusal === undefined; i++) {
        const answer = await enter(`127.0.1.${address + 1}`, wrongCode(1000 + sent));
        sent++;
        if (answer.status === 429) firstRefusal = sent;
        else expect(answer.status).toBe(400);
      }
    }
    // The entry after the bound's last wrong one is refused before it is looked up.
    expect(firstRefusal).toBe(DEVICE_FAILED_ENTRIES_PER_MINUTE + 2);
    const right = await enter('127.0.2.1', d.user_code);
    expect(right.status).toBe(429);
    expect(right.text).toMatch(/too many wrong device codes/i);
    s.stack.clock.advance(60_000);
    expect((await enter('127.0.2.1', d.user_code)).text).toContain('Approve');
  });
});
