// A real browser signs in: Debian's chromium (driven by playwright-core, JavaScript off, to prove the
// pages need none) follows the MCP SDK's authorization URL to the sidecar's consent page, clicks
// Approve, signs in at a real OpenID provider (oidc-provider, in this process), and lands on the
// client's loopback redirect URI with a code; the SDK then lists tools through the sidecar.
// One browser for the file; each test gets a fresh context (no cookies shared).

import { decodeJwt, importPKCS8, SignJWT } from 'jose';
import type { Browser } from 'playwright-core';
import { launchChromium, startLoopbackSite, type LoopbackSite } from '../support/chromium.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { DEMO_USER } from '../../demo/idp.ts';
import { startSignInStack, type SignInStack } from '../support/sign-in.ts';
import { connectedClient, firstConnection, RecordingProvider } from '../support/sdk-oauth.ts';
import { poll, registerDeviceClient, startDevice } from '../support/device.ts';

let browser: Browser;
let s: SignInStack;
/** The MCP client's loopback redirect target: it receives the query of each redirect. */
let receiver: LoopbackSite;
let received: (query: URLSearchParams) => void = () => undefined;
let receiverUrl: string;
let swapNextUser: Record<string, unknown> | undefined;

beforeAll(async () => {
  browser = await launchChromium();
  s = await startSignInStack({ autoLogin: false });
  // Registered before the first request (the provider composes its middleware then): re-signs the
  // next ID token, with the IdP's own key, for another user when a test asks.
  const key = await importPKCS8(s.idp.signingKeyPem, 'RS256');
  s.idp.provider.use(async (ctx, next) => {
    await next();
    const body = ctx.body as { id_token?: string } | undefined;
    if (swapNextUser === undefined || ctx.path !== '/token' || typeof body?.id_token !== 'string') return;
    const claims = { ...decodeJwt(body.id_token), ...swapNextUser };
    swapNextUser = undefined;
    body.id_token = await new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: 'demo-key' }).sign(key);
  });
  receiver = await startLoopbackSite((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (url.pathname === '/frame') {
      // Another origin than the sidecar's, trying to frame its consent page.
      res.setHeader('content-type', 'text/html');
      res.end(`<iframe id="f" src="${url.searchParams.get('src')!.replace(/&/g, '&amp;').replace(/"/g, '&quot;')}"></iframe>`);
      return;
    }
    received(url.searchParams);
    res.setHeader('content-type', 'text/html');
    res.end('<p>Signed in. You can close this window.</p>');
  });
  receiverUrl = `${receiver.origin}/callback`;
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await s?.close();
  await receiver?.close();
});

/** The SDK client registers the fixed-port URI and then uses its actually bound loopback port. */
function sdkProvider(): RecordingProvider {
  return new RecordingProvider(receiverUrl);
}

async function startSdkFlow(provider: RecordingProvider): Promise<URL> {
  return (await firstConnection(s.base, provider)).authorizationUrl;
}

describe('sign-in in a real browser', () => {
  it('consent, Approve, IdP login: the client gets a code and the SDK lists tools as the IdP user', async () => {
    const provider = sdkProvider();
    const authorizationUrl = await startSdkFlow(provider);
    const context = await browser.newContext({ javaScriptEnabled: false });
    const page = await context.newPage();
    const arrived = new Promise<URLSearchParams>((resolve) => (received = resolve));
    await page.goto(authorizationUrl.href);
    expect(await page.locator('h1').textContent()).toContain('SDK sign-in e2e');
    expect(await page.locator('body').textContent()).toContain(new URL(receiverUrl).host);
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.getByLabel('Password').fill(DEMO_USER.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    const query = await arrived;
    expect(query.get('iss')).toBe(s.base);
    const code = query.get('code');
    expect(code).toMatch(/^[0-9a-f]{64}$/);
    await context.close();

    const transport = new StreamableHTTPClientTransport(new URL(`${s.base}/mcp`), { authProvider: provider });
    await transport.finishAuth(code!);
    const client = await connectedClient(s.base, provider);
    const seen = JSON.parse(
      ((await client.callTool({ name: 'headers', arguments: {} })) as { content: Array<{ text: string }> }).content[0]!.text,
    );
    expect(seen['x-mcp-auth-subject']).toBe(DEMO_USER.sub);
    await client.close();
  });

  it('a second sign-in in the same browser from the same client skips the consent page; another IdP user is asked after the IdP', async () => {
    const context = await browser.newContext({ javaScriptEnabled: false });
    const page = await context.newPage();
    const provider = sdkProvider();
    // Only the redirect with the answer counts (the browser also asks the receiver for a favicon).
    let codes = 0;
    const answer = () =>
      new Promise<URLSearchParams>((resolve) => {
        received = (q) => {
          if (!q.has('code') && !q.has('error')) return;
          codes++;
          resolve(q);
        };
      });
    let arrived = answer();
    await page.goto((await startSdkFlow(provider)).href);
    expect(await page.getByLabel(/Remember this approval/).isChecked()).toBe(true);
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.getByLabel('Password').fill(DEMO_USER.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    expect((await arrived).get('code')).toMatch(/^[0-9a-f]{64}$/);

    // Same browser, same client (the SDK provider keeps its registration), the IdP session still live:
    // no consent page, no login form, straight back with a code.
    arrived = answer();
    const again = new URL((await startSdkFlow(provider)).href);
    const consentShown: string[] = [];
    page.on('framenavigated', (frame) => {
      if (frame === page.mainFrame() && frame.url().startsWith(`${s.base}/authorize/consent`)) consentShown.push(frame.url());
    });
    await page.goto(again.href);
    expect((await arrived).get('code')).toMatch(/^[0-9a-f]{64}$/);
    expect(consentShown).toEqual([]);

    // The IdP now answers for another user (its ID token re-signed with its own key): that user gets
    // the consent page, naming the account, and the client gets nothing until Approve.
    swapNextUser = { sub: 'second-user', email: 'second.user@example.com' };
    arrived = answer();
    const before = codes;
    await page.goto((await startSdkFlow(provider)).href);
    expect(await page.locator('body').textContent()).toContain('second.user@example.com');
    expect(codes).toBe(before);
    await page.getByRole('button', { name: 'Approve' }).click();
    expect((await arrived).get('code')).toMatch(/^[0-9a-f]{64}$/);
    await context.close();
  });

  it('Deny sends the browser back to the client with access_denied', async () => {
    const authorizationUrl = await startSdkFlow(sdkProvider());
    const context = await browser.newContext({ javaScriptEnabled: false });
    const page = await context.newPage();
    const arrived = new Promise<URLSearchParams>((resolve) => (received = resolve));
    await page.goto(authorizationUrl.href);
    await page.getByRole('button', { name: 'Deny' }).click();
    const query = await arrived;
    expect(query.get('error')).toBe('access_denied');
    expect(query.get('code')).toBeNull();
    await context.close();
  });

  it('the consent page cannot be framed by another site', async () => {
    const authorizationUrl = await startSdkFlow(sdkProvider());
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${new URL(receiverUrl).origin}/frame?src=${encodeURIComponent(authorizationUrl.href)}`);
    const frame = await (await page.$('#f'))!.contentFrame();
    // Blocked: the frame shows the browser's error page, not the consent form.
    const approve = frame ? await frame.locator('button[value="approve"]').count() : 0;
    expect(approve).toBe(0);
    await context.close();
  });
});

describe('device sign-in (RFC 8628) in a real browser', () => {
  it('a client without a redirect URI: the user opens verification_uri_complete, approves, signs in at the IdP; the polled token lists tools through the SDK', async () => {
    const clientId = await registerDeviceClient(s.base, { client_name: 'Headless CI agent' });
    const d = await startDevice(s.base, clientId);
    expect((await poll(s.base, clientId, d.device_code)).body.error).toBe('authorization_pending');

    const context = await browser.newContext({ javaScriptEnabled: false });
    const page = await context.newPage();
    await page.goto(d.verification_uri_complete);
    expect(await page.getByLabel('Code').inputValue()).toBe(d.user_code);
    await page.getByRole('button', { name: 'Continue' }).click();
    expect(await page.locator('h1').textContent()).toContain('Headless CI agent');
    const consent = await page.locator('body').textContent();
    expect(consent).toContain('a device');
    expect(consent).toContain('Approve only a code you started yourself');
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.getByLabel('Password').fill(DEMO_USER.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    expect(await page.locator('h1').textContent()).toBe('Device signed in');
    await context.close();

    s.stack.clock.advance(d.interval * 1000);
    const tokens = await poll(s.base, clientId, d.device_code);
    expect(tokens.status).toBe(200);
    // The official SDK client, holding the device's tokens as an agent's credentials file would.
    const provider = new RecordingProvider(receiverUrl);
    provider.saveClientInformation({ client_id: clientId });
    provider.saveTokens({
      access_token: tokens.body.access_token as string,
      token_type: 'Bearer',
      refresh_token: tokens.body.refresh_token as string,
    });
    const client = await connectedClient(s.base, provider);
    const seen = JSON.parse(
      ((await client.callTool({ name: 'headers', arguments: {} })) as { content: Array<{ text: string }> }).content[0]!.text,
    );
    expect(seen['x-mcp-auth-subject']).toBe(DEMO_USER.sub);
    expect(seen['x-mcp-auth-client-id']).toBe(clientId);
    await client.close();
  });

  it('the device code form cannot be framed by another site', async () => {
    const clientId = await registerDeviceClient(s.base);
    const d = await startDevice(s.base, clientId);
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${new URL(receiverUrl).origin}/frame?src=${encodeURIComponent(d.verification_uri_complete)}`);
    const frame = await (await page.$('#f'))!.contentFrame();
    const inputs = frame ? await frame.locator('input[name="user_code"]').count() : 0;
    expect(inputs).toBe(0);
    await context.close();
  });
});
