// The account page in a real browser: Debian's chromium (playwright-core, JavaScript off, to prove the
// page needs none) signs in at a real OpenID provider (oidc-provider, in this process), sees the two
// MCP clients holding a grant, revokes one with the keyboard (its token fails at once, the other's
// works), and a form on another site posting to the page is refused. With WRITE_DOC_SCREENSHOTS=1 it
// also writes docs/account-page.png.

import { fileURLToPath } from 'node:url';
import type { Browser } from 'playwright-core';
import { launchChromium, startLoopbackSite, type LoopbackSite } from '../support/chromium.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  authorizeUrl,
  CLIENT_REDIRECT,
  clientReceived,
  pkce,
  registerPublicClient,
  standardParams,
  startSignInStack,
  tokenRequest,
  type SignInStack,
} from '../support/sign-in.ts';
import { initializeStatus } from '../support/http.ts';
import { consentRequestId, UserAgent } from '../support/user-agent.ts';

const SCREENSHOT = fileURLToPath(new URL('../../docs/account-page.png', import.meta.url));

let browser: Browser;
let s: SignInStack;
/** Another site (127.0.0.1, the sidecar being localhost) serving a form that posts to the account page. */
let attacker: LoopbackSite;
let attackerUrl: string;

beforeAll(async () => {
  browser = await launchChromium();
  s = await startSignInStack();
  attacker = await startLoopbackSite((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    res.setHeader('content-type', 'text/html');
    const action = `${s.base}/account/revoke`.replace(/"/g, '&quot;');
    const grant = (url.searchParams.get('grant') ?? '').replace(/[^0-9a-f]/g, '');
    const csrf = (url.searchParams.get('csrf') ?? '').replace(/[^0-9a-f]/g, '');
    res.end(
      `<form method="post" action="${action}"><input type="hidden" name="grant" value="${grant}"><input type="hidden" name="csrf" value="${csrf}"><button id="go">Win a prize</button></form>`,
    );
  });
  attackerUrl = `${attacker.origin}/`;
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await s?.close();
  await attacker?.close();
});

/** A sign-in through `clientId` as an MCP client runs it (consent approved), the code redeemed: its access token. */
async function signIn(clientId: string): Promise<string> {
  const agent = new UserAgent();
  const p = pkce();
  const pageHop = await agent.request(authorizeUrl(s.base, standardParams(s.base, clientId, p)));
  const hop = await agent.follow(
    await agent.request(`${s.base}/authorize/consent`, {
      form: { request: consentRequestId(pageHop.body), decision: 'approve', remember: 'yes' },
    }),
    CLIENT_REDIRECT,
  );
  const tokens = await tokenRequest(s.base, {
    grant_type: 'authorization_code',
    code: clientReceived(hop).get('code')!,
    redirect_uri: CLIENT_REDIRECT,
    client_id: clientId,
    code_verifier: p.verifier,
  });
  return tokens.body.access_token as string;
}

/** The status of an MCP initialize with `token` (what an MCP client sends first), through the sidecar. */
const mcpStatus = (token: string): Promise<number> => initializeStatus({ mcpUrl: `${s.base}/mcp` }, token);

describe('the account page in a real browser', () => {
  it('sign in, see two clients, revoke one with the keyboard: its token fails at once, the other works; a cross-site form post is refused', async () => {
    const alphaId = await registerPublicClient(s.base, { client_name: 'Alpha Editor' });
    const betaId = await registerPublicClient(s.base, { client_name: 'Beta Assistant' });
    const alpha = await signIn(alphaId);
    const beta = await signIn(betaId);

    const context = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 1100, height: 700 } });
    try {
      const page = await context.newPage();
      await page.goto(`${s.base}/account`);
      await page.getByRole('heading', { name: 'Your MCP access' }).waitFor();
      expect(page.url()).toBe(`${s.base}/account`);
      expect(await page.locator('tbody td:first-child', { hasText: 'Alpha Editor' }).count()).toBe(2);
      expect(await page.locator('tbody td:first-child', { hasText: 'Beta Assistant' }).count()).toBe(2);
      // docs/account-page.png is refreshed on request only (each run's ids and times differ).
      if (process.env.WRITE_DOC_SCREENSHOTS === '1') await page.screenshot({ path: SCREENSHOT, fullPage: true });

      // A page on another site, posting the person's own grant id and even a CSRF token lifted from the page.
      const csrf = await page.locator('input[name="csrf"]').first().getAttribute('value');
      const grant = await page
        .getByRole('button', { name: 'Revoke Alpha Editor' })
        .locator('xpath=..')
        .locator('input[name="grant"]')
        .getAttribute('value');
      const other = await context.newPage();
      await other.goto(`${attackerUrl}?grant=${grant}&csrf=${csrf}`);
      await Promise.all([other.waitForNavigation(), other.click('#go')]);
      expect(await other.textContent('h1')).toBe('Request refused');
      expect(await mcpStatus(alpha)).toBe(200);

      // Keyboard only: focus the button, press Enter.
      await page.getByRole('button', { name: 'Revoke Alpha Editor' }).focus();
      await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
      expect(await page.textContent('body')).toContain('Revoked: that application can no longer act for you.');
      expect(await mcpStatus(alpha)).toBe(401);
      expect(await mcpStatus(beta)).toBe(200);
      expect(await page.locator('tbody td:first-child', { hasText: 'Alpha Editor' }).count()).toBe(0);
    } finally {
      await context.close();
    }
  }, 120_000);
});
