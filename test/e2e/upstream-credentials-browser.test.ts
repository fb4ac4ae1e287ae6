// Connected accounts with the real parts: the official MCP SDK client (1.x), Debian's chromium driven
// by playwright-core (JavaScript off: the pages need none), the reference MCP upstream, the sidecar on
// real Redis, the organisation's IdP (oidc-provider; the person there is already signed in, so it
// answers without a prompt) and GitHub as the provider (a stub shaped after GitHub's documented OAuth
// app flow, test/support/github-oauth.ts: it approves an app already authorized without a prompt).
// The SDK client, declaring URL-mode elicitation, connects and lists tools without a connected
// account; its first tool call is answered -32042 (the SDK raises UrlElicitationRequiredError).
//   - The attack: an attacker's page sends a victim's browser to the attacker's own connect link. The
//     victim is signed in at the IdP as someone else: a 403 page, nothing kept, GitHub never contacted,
//     and the link still works for its owner.
//   - The owner: signs in, sees the confirm page naming the MCP client and GitHub (never framed), a
//     POST without or with a wrong CSRF token is refused, Connect connects; the SDK's call then carries
//     the GitHub token. The link never appears in the sidecar's log.

import { randomBytes } from 'node:crypto';
import type { Browser, Response as PageResponse } from 'playwright-core';
import { launchChromium, startLoopbackSite, type LoopbackSite } from '../support/chromium.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UrlElicitationRequiredError } from '@modelcontextprotocol/sdk/types.js';
import { generateToken, hashToken } from '../../src/model/credentials.ts';
import { DEMO_USER } from '../../demo/idp.ts';
import { startGitHubStub, type GitHubStub } from '../support/github-oauth.ts';
import {
  approveAndSignIn,
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
import { UserAgent } from '../support/user-agent.ts';
import { ACCOUNT_SESSION_TTL_MS } from '../../src/oauth/account.ts';
import { storeUserToken } from '../support/user-tokens.ts';

const GITHUB_SECRET = randomBytes(20).toString('hex');

let browser: Browser;
let github: GitHubStub;
let s: SignInStack;
/** Another site (127.0.0.1, the sidecar being localhost): `/go?to=` navigates to a URL, `/post?to=&csrf=` posts a form to it. */
let attacker: LoopbackSite;
let attackerUrl: string;

beforeAll(async () => {
  browser = await launchChromium();
  github = await startGitHubStub({ clientId: 'Ov23liEXAMPLE', clientSecret: GITHUB_SECRET });
  s = await startSignInStack({
    config: {
      upstream: {
        credentials: {
          mode: 'oauth',
          key: randomBytes(32).toString('hex'),
          provider: {
            authorizationEndpoint: github.authorizationEndpoint,
            tokenEndpoint: github.tokenEndpoint,
            clientId: 'Ov23liEXAMPLE',
            clientSecret: GITHUB_SECRET,
            scopes: 'repo read:org',
            name: 'GitHub',
          },
        },
      },
    },
  });
  attacker = await startLoopbackSite((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const to = (url.searchParams.get('to') ?? '').replace(/[^A-Za-z0-9_.:/-]/g, '');
    const csrf = (url.searchParams.get('csrf') ?? '').replace(/[^0-9a-f]/g, '');
    res.setHeader('content-type', 'text/html');
    if (url.pathname === '/go') res.end(`<meta http-equiv="refresh" content="0;url=${to}"><p>Loading your prize…</p>`);
    else
      res.end(
        `<form method="post" action="${to}"><input type="hidden" name="csrf" value="${csrf}"><button id="go">Win a prize</button></form>`,
      );
  });
  attackerUrl = attacker.origin;
}, 90_000);
afterAll(async () => {
  await browser?.close();
  await s?.close();
  await github?.close();
  await attacker?.close();
});

async function sdkClient(token: string): Promise<Client> {
  // Declaring URL-mode elicitation (MCP 2025-11-25): the link then comes as -32042.
  const client = new Client({ name: 'upstream-credentials-e2e', version: '1.0.0' }, { capabilities: { elicitation: { url: {} } } });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${s.base}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
  );
  return client;
}

/** The `headers` tool's answer: the headers the upstream saw. */
async function headersCall(client: Client): Promise<Record<string, string>> {
  return JSON.parse(
    ((await client.callTool({ name: 'headers', arguments: {} })) as { content: Array<{ text: string }> }).content[0]!.text,
  ) as Record<string, string>;
}

/**
 * The link (and message) the SDK is given for a token without a connected account: it connects and
 * lists the tools without one; its first tool call is refused. The connected client comes back too.
 */
async function elicitationOf(token: string): Promise<{ url: string; message: string; client: Client }> {
  const client = await sdkClient(token);
  expect((await client.listTools()).tools.map((t) => t.name)).toContain('headers');
  const refused = await headersCall(client).then(
    () => new Error('called a tool without a credential'),
    (e: unknown) => e,
  );
  expect(refused).toBeInstanceOf(UrlElicitationRequiredError);
  const [elicitation] = (refused as UrlElicitationRequiredError).elicitations;
  expect(elicitation).toMatchObject({ mode: 'url', url: expect.stringMatching(new RegExp(`^${s.base}/connect/`)) });
  return { ...(elicitation as { url: string; message: string }), client };
}

/** A user-grade token of `subject` at the IdP. */
function userToken(subject: string): Promise<string> {
  return storeUserToken(s.stack, subject, { issuer: s.idp.issuer, lifetimeMs: 3_600_000 });
}

/** The last response of the browser for a URL starting with `prefix`. */
function lastResponse(responses: PageResponse[], prefix: string): PageResponse {
  const found = responses.filter((r) => r.url().startsWith(prefix)).at(-1);
  if (found === undefined) throw new Error(`no response for ${prefix}`);
  return found;
}

describe('connected accounts, end to end', () => {
  it("the attack: the attacker's link opened in a victim's browser (signed in as another person) is a 403 page; nothing is kept, GitHub never contacted, the link not used up", async () => {
    const attackerSubject = `attacker-${randomBytes(4).toString('hex')}`;
    const { url: link, client } = await elicitationOf(await userToken(attackerSubject));
    await client.close();
    const githubBefore = github.requests.length;

    const victim = await browser.newContext({ javaScriptEnabled: false });
    const page = await victim.newPage();
    const responses: PageResponse[] = [];
    page.on('response', (r) => responses.push(r));
    await page.goto(`${attackerUrl}/go?to=${encodeURIComponent(link)}`);
    // The meta refresh takes the browser to the link, the link to the IdP (the victim is signed in
    // there: no prompt) and back: the page the victim ends on.
    await page.waitForURL((url) => url.href.startsWith(`${s.base}/connect/`));
    expect(await page.locator('h1').textContent()).toBe('Another account');
    expect(lastResponse(responses, link).status()).toBe(403);
    await victim.close();

    expect(github.requests.length).toBe(githubBefore);
    expect(await s.stack.store.listSubjectUpstreamCredentials(attackerSubject)).toEqual([]);
    expect(await s.stack.store.listSubjectUpstreamCredentials(DEMO_USER.sub)).toEqual([]);

    // The link still works for the person it was made for (an account-page session of theirs).
    const owner = await browser.newContext({ javaScriptEnabled: false });
    const value = generateToken();
    const now = s.stack.clock.now();
    await s.stack.store.putAccountSession(hashToken(value), {
      user: { subject: attackerSubject, issuer: s.idp.issuer },
      createdAt: now,
      expiresAt: now + ACCOUNT_SESSION_TTL_MS,
    });
    await owner.addCookies([{ name: 'mcp-account', value, url: s.base }]);
    const ownerPage = await owner.newPage();
    const confirm = await ownerPage.goto(link);
    expect(confirm?.status()).toBe(200);
    expect(await ownerPage.getByRole('button', { name: 'Connect' }).count()).toBe(1);
    await owner.close();
    expect(github.requests.length).toBe(githubBefore);
  }, 90_000);

  it('the owner signs in, sees the confirm page naming the client and GitHub (never framed), confirms, and the SDK call then carries the GitHub token; forged confirmations are refused', async () => {
    // The demo user's MCP client, signed in through the sidecar like any client.
    const clientId = await registerPublicClient(s.base, { client_name: 'Notes Assistant' });
    const p = pkce();
    const hop = await approveAndSignIn(new UserAgent(), s.base, authorizeUrl(s.base, standardParams(s.base, clientId, p)));
    const tokens = await tokenRequest(s.base, {
      grant_type: 'authorization_code',
      code: clientReceived(hop).get('code')!,
      redirect_uri: CLIENT_REDIRECT,
      client_id: clientId,
      code_verifier: p.verifier,
    });
    const token = tokens.body.access_token as string;
    const { url: link, message, client } = await elicitationOf(token);
    expect(message).toContain('connect your GitHub account');

    const context = await browser.newContext({ javaScriptEnabled: false });
    const page = await context.newPage();
    const responses: PageResponse[] = [];
    page.on('response', (r) => responses.push(r));
    await page.goto(link);
    await page.waitForURL((url) => url.href.startsWith(`${s.base}/connect/`));
    expect(await page.locator('h1').textContent()).toBe('Connect your GitHub account');
    const text = (await page.locator('body').textContent())!;
    expect(text).toContain('Notes Assistant');
    expect(text).toContain(DEMO_USER.email);
    const confirmPage = lastResponse(responses, link);
    expect(confirmPage.status()).toBe(200);
    const headers = confirmPage.headers();
    expect(headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(headers['x-frame-options']).toBe('DENY');

    // Posts that are not this page's form: without the token, with a wrong one (this browser's
    // cookies, as the context's request API sends them), and a form on another site.
    const githubBefore = github.requests.length;
    expect((await context.request.post(link, { form: {}, maxRedirects: 0 })).status()).toBe(403);
    expect((await context.request.post(link, { form: { csrf: 'a'.repeat(64) }, maxRedirects: 0 })).status()).toBe(403);
    const forged = await context.newPage();
    await forged.goto(`${attackerUrl}/post?to=${encodeURIComponent(link)}&csrf=${'b'.repeat(64)}`);
    const forgedAnswer = forged.waitForResponse((r) => r.url() === link);
    await forged.locator('#go').click();
    expect((await forgedAnswer).status()).toBe(403);
    await forged.close();
    expect(github.requests.length).toBe(githubBefore);
    expect(await s.stack.store.listSubjectUpstreamCredentials(DEMO_USER.sub)).toEqual([]);

    await page.getByRole('button', { name: 'Connect' }).click();
    await page.waitForURL((url) => url.href.startsWith(`${s.base}/connect/callback`));
    expect(await page.locator('h1').textContent()).toBe('Connected');
    await context.close();

    // The same client, in the same session, now calls with the GitHub token.
    const seen = await headersCall(client);
    await client.close();
    expect(seen['x-mcp-auth-subject']).toBe(DEMO_USER.sub);
    expect(seen.authorization).toMatch(/^Bearer gho_/);
    const user = await fetch(`${github.url}/user`, { headers: { authorization: seen.authorization! } });
    expect(((await user.json()) as { login: string }).login).toBe('octocat');
    const logs = s.stack.logs.join('\n');
    expect(logs).not.toContain(seen.authorization!.slice(7));

    // The access log recorded the connect requests, the link in none of them.
    const linkSegment = link.slice(`${s.base}/connect/`.length);
    expect(logs).not.toContain(linkSegment);
    expect(logs).not.toContain(linkSegment.split('.')[2]);
    expect(logs).toContain('"path":"/connect/…"');
  }, 90_000);
});
