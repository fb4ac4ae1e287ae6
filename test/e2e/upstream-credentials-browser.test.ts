// Connected accounts with the real parts: the official MCP SDK client (1.x), Debian's chromium driven
// by playwright-core, the reference MCP upstream, the sidecar on real Redis, and a second OpenID
// provider (oidc-provider) as the third-party provider. The SDK client, declaring URL-mode elicitation,
// connects and lists tools; its first tool call is answered -32042 (the SDK raises
// UrlElicitationRequiredError); the browser opens the link and connects; the same client's tool call
// then reaches the upstream with the user's token at the provider.

import { existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UrlElicitationRequiredError } from '@modelcontextprotocol/sdk/types.js';
import { generateToken, hashToken } from '../../src/model/credentials.ts';
import { DEMO_USER, startDemoIdp, type DemoIdp } from '../../demo/idp.ts';
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
const PROVIDER_SECRET = randomBytes(32).toString('hex');

let browser: Browser;
let provider: DemoIdp;
let s: SignInStack;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install chromium (.ci/run does)`);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, timeout: 60_000 });
  let callback = '';
  provider = await startDemoIdp({
    clientId: 'third-party-app',
    clientSecret: PROVIDER_SECRET,
    redirectUri: () => callback,
    autoLogin: false,
  });
  s = await startSignInStack({
    config: {
      upstream: {
        credentials: {
          mode: 'oauth',
          key: randomBytes(32).toString('hex'),
          provider: { issuer: provider.issuer, clientId: 'third-party-app', clientSecret: PROVIDER_SECRET, scopes: 'openid' },
        },
      },
    },
  });
  callback = `${s.base}/connect/callback`;
}, 90_000);
afterAll(async () => {
  await browser?.close();
  await s?.close();
  await provider?.close();
});

async function sdkClient(token: string): Promise<Client> {
  const client = new Client({ name: 'upstream-credentials-e2e', version: '1.0.0' }, { capabilities: { elicitation: { url: {} } } });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${s.base}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
  );
  return client;
}

describe('connected accounts, end to end', () => {
  it('the SDK connects, then its call gets UrlElicitationRequiredError; chromium connects at the provider; the same call then reaches the upstream with the provider token', async () => {
    const token = generateToken();
    const now = s.stack.clock.now();
    await s.stack.store.putUserToken({
      tokenHash: hashToken(token),
      subject: 'browser-user',
      issuer: s.idp.issuer,
      createdAt: now,
      expiresAt: now + 3_600_000,
    });

    const client = await sdkClient(token);
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('headers');
    const headersCall = async () =>
      JSON.parse(
        ((await client.callTool({ name: 'headers', arguments: {} })) as { content: Array<{ text: string }> }).content[0]!.text,
      ) as Record<string, string>;
    const refused = await headersCall().then(
      () => new Error('called a tool without a credential'),
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(UrlElicitationRequiredError);
    const [elicitation] = (refused as UrlElicitationRequiredError).elicitations;
    expect(elicitation).toMatchObject({ mode: 'url', url: expect.stringMatching(new RegExp(`^${s.base}/connect/`)) });

    const context = await browser.newContext({ javaScriptEnabled: false });
    const page = await context.newPage();
    await page.goto(elicitation!.url);
    await page.getByLabel('Password').fill(DEMO_USER.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    // The demo provider grants the consent itself after the login (demo/idp.ts), as sign-in tests rely on.
    await page.waitForURL((url) => url.href.startsWith(`${s.base}/connect/callback`));
    expect(await page.locator('h1').textContent()).toBe('Connected');
    await context.close();

    const seen = await headersCall();
    await client.close();
    expect(seen['x-mcp-auth-subject']).toBe('browser-user');
    expect(seen.authorization).toMatch(/^Bearer \S+$/);
    expect(seen.authorization).not.toContain(token);
    const userinfo = await fetch(`${provider.issuer}/me`, { headers: { authorization: seen.authorization! } });
    expect(userinfo.status).toBe(200);
    expect(s.stack.logs.join('\n')).not.toContain(seen.authorization!.slice(7));
  }, 90_000);
});
