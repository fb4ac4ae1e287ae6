// Two identity providers, one sidecar: two real OpenID providers (oidc-provider, in this process, each
// with its own issuer, signing key, login page and claims; one shaping its tokens as Entra ID does, with
// `tid`, `oid` and group object ids, one as Okta's org authorization server does, with group names)
// sign the SAME `sub` in through Debian's chromium (JavaScript off) and the sidecar's chooser page. The
// MCP SDK client then works through the sidecar with each token. The same `sub` at both is two people:
// the upstream is told the issuer, and a token, a session handle and a per-subject quota of one are
// never the other's; offboarding names the issuer.

import { randomBytes } from 'node:crypto';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { DEMO_USER, startDemoIdp, type DemoIdp } from '../../demo/idp.ts';
import { launchChromium, startLoopbackSite, type LoopbackSite } from '../support/chromium.ts';
import { connectedClient, firstConnection, RecordingProvider } from '../support/sdk-oauth.ts';
import { startStack, type Stack } from '../support/stack.ts';

/** Entra ID's token shape (Microsoft identity platform, ID token claims reference): tenant, object id, group object ids. */
const ENTRA_CLAIMS = {
  tid: '72f988bf-86f1-41af-91ab-2d7cd011db47',
  oid: '00000000-0000-0000-66f3-3332eca7ea81',
  email: 'ann@contoso.example',
  groups: ['9e1d3c4b-7a4e-4c43-9c0e-3f8a1b2c7d10'],
};
/** Okta's org authorization server shape (Okta ID token claims): group names from a groups claim. */
const OKTA_CLAIMS = { email: 'ann@fabrikam.example', groups: ['Everyone', 'mcp-users'] };

let browser: Browser;
let entra: DemoIdp;
let okta: DemoIdp;
let stack: Stack;
let base = '';
let receiver: LoopbackSite;
let receiverUrl = '';
let received: (query: URLSearchParams) => void = () => undefined;

beforeAll(async () => {
  browser = await launchChromium();
  const secrets = { entra: randomBytes(32).toString('hex'), okta: randomBytes(32).toString('hex') };
  const common = { redirectUri: () => `${base}/oauth/callback`, autoLogin: false };
  entra = await startDemoIdp({
    ...common,
    clientId: 'sidecar-at-entra',
    clientSecret: secrets.entra,
    loginTitle: 'Sign in to Contoso (Entra ID)',
    idTokenClaims: ['tid', 'oid'],
    userClaims: ENTRA_CLAIMS,
  });
  okta = await startDemoIdp({
    ...common,
    clientId: 'sidecar-at-okta',
    clientSecret: secrets.okta,
    loginTitle: 'Okta: Fabrikam sign-in',
    userClaims: OKTA_CLAIMS,
  });
  stack = await startStack({
    config: {
      idp: {
        requestTimeoutMs: 10_000,
        providers: [
          { name: 'entra', issuer: entra.issuer, clientId: 'sidecar-at-entra', clientSecret: secrets.entra, domains: ['contoso.example'] },
          { name: 'okta', issuer: okta.issuer, clientId: 'sidecar-at-okta', clientSecret: secrets.okta, domains: ['fabrikam.example'] },
        ],
      },
      policy: { quotas: [{ name: 'echo-per-person', match: { tools: ['echo'] }, per: 'subject', limit: 2, windowSeconds: 3600 }] },
    },
  });
  base = stack.sidecar.publicUrl();
  receiver = await startLoopbackSite((req, res) => {
    received(new URL(req.url ?? '/', 'http://127.0.0.1').searchParams);
    res.setHeader('content-type', 'text/html');
    res.end('<p>Signed in.</p>');
  });
  receiverUrl = `${receiver.origin}/callback`;
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await stack?.close();
  await entra?.close();
  await okta?.close();
  await receiver?.close();
});

type Choice = { provider: 'entra' | 'okta' } | { email: string };

/**
 * The SDK's sign-in as a person does it in the browser: the chooser (a provider's link, or an e-mail
 * whose domain finds one), the consent page, that provider's own login page. `sameClientAs`: reuse
 * another provider's client registration (one MCP client, two people). Returns the signed-in provider.
 */
async function signIn(choice: Choice, loginTitle: string, sameClientAs?: RecordingProvider): Promise<RecordingProvider> {
  const provider = new RecordingProvider(receiverUrl);
  const registered = sameClientAs?.clientInformation();
  if (registered !== undefined) provider.saveClientInformation(registered);
  const { authorizationUrl } = await firstConnection(base, provider);
  const context = await browser.newContext({ javaScriptEnabled: false });
  const page = await context.newPage();
  const arrived = new Promise<URLSearchParams>((resolve) => {
    received = (q) => {
      if (q.has('code') || q.has('error')) resolve(q);
    };
  });
  await page.goto(authorizationUrl.href);
  expect(await page.locator('h1').textContent()).toBe('Choose how to sign in');
  if ('email' in choice) {
    await page.getByLabel(/work e-mail/).fill(choice.email);
    await page.getByRole('button', { name: 'Continue' }).click();
  } else {
    await page.getByRole('link', { name: choice.provider }).click();
  }
  await page.getByRole('button', { name: 'Approve' }).click();
  // Each provider's own login page.
  expect(await page.locator('h1').textContent()).toBe(loginTitle);
  await page.getByLabel('Password').fill(DEMO_USER.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  const code = (await arrived).get('code');
  await context.close();
  expect(code).toMatch(/^[0-9a-f]{64}$/);
  await new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { authProvider: provider }).finishAuth(code!);
  return provider;
}

const ENTRA_LOGIN = 'Sign in to Contoso (Entra ID)';
const OKTA_LOGIN = 'Okta: Fabrikam sign-in';

async function headersSeen(provider: RecordingProvider): Promise<Record<string, string>> {
  const client = await connectedClient(base, provider);
  const result = (await client.callTool({ name: 'headers', arguments: {} })) as { content: Array<{ text: string }> };
  await client.close();
  return JSON.parse(result.content[0]!.text) as Record<string, string>;
}

/** A raw JSON-RPC POST to /mcp with `token` (and a session id), as the Streamable HTTP transport sends it. */
async function post(token: string, body: unknown, sessionId?: string): Promise<{ status: number; text: string }> {
  const res = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-06-18',
      ...(sessionId !== undefined ? { 'mcp-session-id': sessionId } : {}),
    },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}

describe('two identity providers, one sidecar, the same sub at both', () => {
  it('each signs its person in through its own login page; the upstream sees the same sub at two issuers', async () => {
    const atEntra = await signIn({ provider: 'entra' }, ENTRA_LOGIN);
    // Home-realm discovery: the e-mail's domain chooses Okta.
    const atOkta = await signIn({ email: 'ann@fabrikam.example' }, OKTA_LOGIN);
    const seenEntra = await headersSeen(atEntra);
    const seenOkta = await headersSeen(atOkta);
    expect(seenEntra['x-mcp-auth-subject']).toBe(DEMO_USER.sub);
    expect(seenOkta['x-mcp-auth-subject']).toBe(DEMO_USER.sub);
    expect(decodeURIComponent(seenEntra['x-mcp-auth-issuer']!)).toBe(entra.issuer);
    expect(decodeURIComponent(seenOkta['x-mcp-auth-issuer']!)).toBe(okta.issuer);
  }, 120_000);

  it("a session handle of one person is not the other's, through the same MCP client", async () => {
    const atEntra = await signIn({ provider: 'entra' }, ENTRA_LOGIN);
    const atOkta = await signIn({ provider: 'okta' }, OKTA_LOGIN, atEntra);
    expect(atOkta.clientInformation()!.client_id).toBe(atEntra.clientInformation()!.client_id);
    const client = await connectedClient(base, atEntra);
    const sessionId = (client.transport as StreamableHTTPClientTransport | undefined)?.sessionId;
    expect(sessionId).toBeTruthy();
    const list = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} };
    expect((await post(atEntra.tokens()!.access_token, list, sessionId)).status).toBe(200);
    const foreign = await post(atOkta.tokens()!.access_token, list, sessionId);
    expect(foreign.status).toBe(404);
    expect(foreign.text).toContain('Session not found');
    await client.close();
  }, 120_000);

  it('a per-subject quota counts each person apart, through the same MCP client', async () => {
    const atEntra = await signIn({ provider: 'entra' }, ENTRA_LOGIN);
    const atOkta = await signIn({ provider: 'okta' }, OKTA_LOGIN, atEntra);
    const echo = (provider: RecordingProvider, client: Awaited<ReturnType<typeof connectedClient>>) =>
      client.callTool({ name: 'echo', arguments: { text: provider === atEntra ? 'entra' : 'okta' } }) as Promise<{ isError?: boolean }>;
    const entraClient = await connectedClient(base, atEntra);
    // This file's earlier tests spent none of these: no echo before here.
    expect((await echo(atEntra, entraClient)).isError).toBeFalsy();
    expect((await echo(atEntra, entraClient)).isError).toBeFalsy();
    expect((await echo(atEntra, entraClient)).isError).toBe(true);
    const oktaClient = await connectedClient(base, atOkta);
    expect((await echo(atOkta, oktaClient)).isError).toBeFalsy();
    await entraClient.close();
    await oktaClient.close();
  }, 120_000);

  it("a token is one person's: offboarding names the issuer, and the other person's token keeps working", async () => {
    const atEntra = await signIn({ provider: 'entra' }, ENTRA_LOGIN);
    const atOkta = await signIn({ provider: 'okta' }, OKTA_LOGIN);
    const ping = { jsonrpc: '2.0', id: 1, method: 'ping' };
    const unnamed = await stack.admin('revokeSubject', { subject: DEMO_USER.sub });
    expect(unnamed.status).toBe(400);
    expect(unnamed.body.error_description).toMatch(/issuer is required/);
    const grants = await stack.admin('listGrants', { subject: DEMO_USER.sub, issuer: okta.issuer });
    expect(grants.status).toBe(200);
    expect(grants.body.grants.length).toBeGreaterThan(0);
    expect(grants.body.grants.every((g: { issuer: string }) => g.issuer === okta.issuer)).toBe(true);
    const revoked = await stack.admin('revokeSubject', { subject: DEMO_USER.sub, issuer: entra.issuer });
    expect(revoked.status).toBe(200);
    expect(revoked.body.accessTokensRevoked).toBeGreaterThan(0);
    expect((await post(atEntra.tokens()!.access_token, ping)).status).toBe(401);
    expect((await headersSeen(atOkta))['x-mcp-auth-subject']).toBe(DEMO_USER.sub);
    // The audit trail names each person by issuer and subject.
    const events = (await stack.admin('listAuditEvents', { limit: 200 })).body.events as Array<{
      action: string;
      detail?: Record<string, unknown>;
    }>;
    const issuersOf = (action: string) => new Set(events.filter((e) => e.action === action).map((e) => e.detail?.issuer));
    expect(issuersOf('authorize')).toEqual(new Set([entra.issuer, okta.issuer]));
    expect(issuersOf('token.authorization_code')).toEqual(new Set([entra.issuer, okta.issuer]));
  }, 120_000);
});
