// Offboarding what a person has pending, in a real browser: Debian's chromium (playwright-core) signs a
// person in to the account page and approves a device on /device, both at a real OpenID provider
// (oidc-provider, in this process). After revokeSubject the page's session is over (the browser goes
// back through the IdP) and the approved device's next poll gives nothing.

import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_USER } from '../../demo/idp.ts';
import { poll, registerDeviceClient, startDevice } from '../support/device.ts';
import { startSignInStack, type SignInStack } from '../support/sign-in.ts';

const CHROMIUM = '/usr/bin/chromium';
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

let browser: Browser;
let s: SignInStack;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install chromium (.ci/run does)`);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, timeout: 60_000 });
  s = await startSignInStack();
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await s?.close();
});

describe('revokeSubject in a real browser', () => {
  it("ends the person's account-page session and voids the device they approved but which has not polled yet", async () => {
    const clientId = await registerDeviceClient(s.base);
    const device = await startDevice(s.base, clientId);
    const context = await browser.newContext({ javaScriptEnabled: false });
    try {
      const page = await context.newPage();
      /** Navigations of this page that reached the IdP. */
      const atIdp: string[] = [];
      page.on('request', (r) => {
        if (r.isNavigationRequest() && r.url().startsWith(s.idp.issuer)) atIdp.push(r.url());
      });

      await page.goto(`${s.base}/account`);
      await page.getByRole('heading', { name: 'Your MCP access' }).waitFor();
      expect(atIdp.length).toBeGreaterThan(0);
      // Signed in: a reload stays on the page without the IdP.
      atIdp.length = 0;
      await page.reload();
      await page.getByRole('heading', { name: 'Your MCP access' }).waitFor();
      expect(atIdp).toEqual([]);

      // The person types the device's code and approves it; the device has not polled yet.
      await page.goto(`${s.base}/device`);
      await page.getByLabel('Code').fill(device.user_code);
      await Promise.all([page.waitForNavigation(), page.getByRole('button', { name: 'Continue' }).click()]);
      await Promise.all([
        page.waitForURL((u) => u.href.startsWith(s.base) && !u.pathname.startsWith('/authorize')),
        page.getByRole('button', { name: 'Approve' }).click(),
      ]);
      await page.waitForLoadState();

      const revoked = await s.stack.admin('revokeSubject', { subject: DEMO_USER.sub });
      expect(revoked.status).toBe(200);
      s.stack.clock.advance(1);

      const late = await poll(s.base, clientId, device.device_code);
      expect(late.status).toBe(400);
      expect(late.body.error).toBe('invalid_grant');
      expect(late.body.access_token).toBeUndefined();

      // The session is over: the page sends the browser through the IdP again.
      atIdp.length = 0;
      await page.goto(`${s.base}/account`);
      await page.getByRole('heading', { name: 'Your MCP access' }).waitFor();
      expect(atIdp.length).toBeGreaterThan(0);
    } finally {
      await context.close();
    }
  }, 120_000);
});
