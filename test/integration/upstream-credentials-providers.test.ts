// Mode `oauth` with providers that are not OpenID providers (no discovery, no ID token), over real
// HTTP with the sidecar on real Redis and an echo upstream:
//   - GitHub, as a stub shaped after docs.github.com "Authorizing OAuth apps" (test/support/github-oauth.ts),
//     configured as the worked example of docs/upstream-credentials.md configures it;
//   - an authorization server built on @node-oauth/oauth2-server (test/support/node-oauth-server.ts);
//   - GitHub App user tokens (expiring, with a refresh token): a person who disconnects while a refresh
//     is in flight stays disconnected.
// The people here are signed in to the account page by a session put in the store (what signing in at
// the IdP leaves behind; the IdP sign-in itself is covered by upstream-credentials-oauth.test.ts).

import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoIdp, type DemoIdp } from '../../demo/idp.ts';
import { generateToken, hashToken } from '../../src/model/credentials.ts';
import { URL_ELICITATION_REQUIRED } from '../../src/policy/enforce.ts';
import { openAndConfirm, seedAccountSession } from '../support/connect.ts';
import { startEchoUpstream, type FakeUpstream } from '../support/fake-upstreams.ts';
import { startGitHubStub, type GitHubStub } from '../support/github-oauth.ts';
import { startNodeOAuthServer, type NodeOAuthServer } from '../support/node-oauth-server.ts';
import { startSignInStack, type SignInStack } from '../support/sign-in.ts';
import { UserAgent } from '../support/user-agent.ts';

const CLIENT_ID = 'Ov23liEXAMPLE';
const CLIENT_SECRET = randomBytes(20).toString('hex');

let echo: FakeUpstream;
beforeAll(async () => {
  echo = await startEchoUpstream();
});
afterAll(async () => {
  await echo?.close();
});

/** A sidecar in mode oauth at `provider` (the settings of upstream.credentials.provider). */
function sidecarFor(provider: Record<string, string>): Promise<SignInStack> {
  return startSignInStack({
    upstreamUrl: echo.url,
    config: { upstream: { credentials: { mode: 'oauth', key: randomBytes(32).toString('hex'), provider } } },
  });
}

/** A tool call whose client declares URL elicitation on the request itself (the 2026-07-28 envelope): its link comes as -32042. */
function call(s: SignInStack, token: string) {
  const _meta = { 'io.modelcontextprotocol/clientCapabilities': { elicitation: { url: {} } } };
  return fetch(`${s.base}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: {}, _meta } }),
  });
}

/** The -32042 answer of a call: its message and link. */
async function elicitation(res: Response): Promise<{ message: string; url: string }> {
  expect(res.status).toBe(200);
  const body = (await res.json()) as { error?: { code: number; message: string; data: { elicitations: Array<{ url: string }> } } };
  expect(body.error?.code).toBe(URL_ELICITATION_REQUIRED);
  return { message: body.error!.message, url: body.error!.data.elicitations[0]!.url };
}

/** A call that is forwarded: the credential header the upstream got. */
async function forwarded(s: SignInStack, token: string): Promise<string> {
  const before = echo.seen.length;
  const res = await call(s, token);
  expect(res.status).toBe(200);
  await res.text();
  expect(echo.seen.length).toBe(before + 1);
  return String(echo.seen.at(-1)!.headers.authorization);
}

/** A fresh person: a user-grade token, and a browser signed in to the account page as them. */
async function person(s: SignInStack): Promise<{ subject: string; token: string; browser: UserAgent }> {
  const token = generateToken();
  const subject = `user-${randomBytes(4).toString('hex')}`;
  const now = s.stack.clock.now();
  await s.stack.store.putUserToken({
    tokenHash: hashToken(token),
    subject,
    issuer: s.idp.issuer,
    createdAt: now,
    expiresAt: now + 48 * 3_600_000,
  });
  const browser = new UserAgent();
  await seedAccountSession(s.stack, s.base, browser, { subject, issuer: s.idp.issuer });
  return { subject, token, browser };
}

describe('GitHub (an OAuth app): the worked example of docs/upstream-credentials.md', () => {
  let github: GitHubStub;
  let s: SignInStack;
  beforeAll(async () => {
    github = await startGitHubStub({ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET });
    // docs/upstream-credentials.md, "Mode `oauth`, worked example", with github.com's two endpoints
    // at the stub: UPSTREAM_PROVIDER_AUTHORIZATION_ENDPOINT, _TOKEN_ENDPOINT, _CLIENT_ID,
    // _CLIENT_SECRET, _SCOPES="repo read:org", _NAME=GitHub.
    s = await sidecarFor({
      authorizationEndpoint: github.authorizationEndpoint,
      tokenEndpoint: github.tokenEndpoint,
      clientId: CLIENT_ID,
      clientSecret: CLIENT_SECRET,
      scopes: 'repo read:org',
      name: 'GitHub',
    });
  });
  afterAll(async () => {
    await s?.close();
    await github?.close();
  });

  it("the stub's token endpoint answers as GitHub documents: form-encoded by default, JSON with Accept: application/json", async () => {
    const codeFor = async () => {
      const res = await fetch(
        `${github.authorizationEndpoint}?client_id=${CLIENT_ID}&redirect_uri=http://127.0.0.1:9/cb&scope=repo&state=s`,
        {
          redirect: 'manual',
        },
      );
      return new URL(res.headers.get('location')!).searchParams.get('code')!;
    };
    const redeem = (code: string, accept?: string) =>
      fetch(github.tokenEndpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...(accept ? { accept } : {}) },
        body: new URLSearchParams({ client_id: CLIENT_ID, client_secret: CLIENT_SECRET, code, redirect_uri: 'http://127.0.0.1:9/cb' }),
      });
    const form = await redeem(await codeFor());
    expect(form.headers.get('content-type')).toMatch(/^application\/x-www-form-urlencoded/);
    const fields = new URLSearchParams(await form.text());
    expect([...fields.keys()].sort()).toEqual(['access_token', 'scope', 'token_type']);
    expect(fields.get('token_type')).toBe('bearer');
    const json = await redeem(await codeFor(), 'application/json');
    expect(json.headers.get('content-type')).toMatch(/^application\/json/);
    expect(Object.keys((await json.json()) as object).sort()).toEqual(['access_token', 'scope', 'token_type']);
  });

  it('connects without any ID token: no nonce is sent, the code is redeemed asking for JSON, and the call then carries the GitHub token', async () => {
    const p = await person(s);
    const { message, url } = await elicitation(await call(s, p.token));
    // The -32042 message names the provider by its display name.
    expect(message).toContain('connect your GitHub account');
    const done = await openAndConfirm(p.browser, url);
    expect(done.status).toBe(200);
    expect(done.body).toContain('Connected');
    const authorize = github.requests.filter((r) => r.path === '/login/oauth/authorize');
    const tokenRequests = github.requests.filter((r) => r.path === '/login/oauth/access_token');
    expect(authorize.length).toBeGreaterThan(0);
    expect(tokenRequests.at(-1)!.accept).toContain('application/json');
    expect(tokenRequests.at(-1)!.body!.get('client_secret')).toBe(CLIENT_SECRET);
    const header = await forwarded(s, p.token);
    expect(header).toMatch(/^Bearer gho_/);
    const user = await fetch(`${github.url}/user`, { headers: { authorization: header } });
    expect(((await user.json()) as { login: string }).login).toBe('octocat');
  });

  it('the authorization request carries no nonce (nothing OpenID is asked of GitHub)', async () => {
    const p = await person(s);
    const { url } = await elicitation(await call(s, p.token));
    const confirm = await p.browser.follow(await p.browser.request(url));
    const csrf = /name="csrf" value="([0-9a-f]{64})"/.exec(confirm.body)![1]!;
    const toGitHub = await p.browser.request(url, { form: { csrf } });
    expect(toGitHub.status).toBe(303);
    const query = new URL(toGitHub.location!).searchParams;
    expect(query.get('nonce')).toBeNull();
    expect(query.get('scope')).toBe('repo read:org');
    expect(query.get('code_challenge_method')).toBe('S256');
  });
});

describe('an OAuth 2.0 server on @node-oauth/oauth2-server (authorization code + PKCE, no ID token)', () => {
  let server: NodeOAuthServer;
  let s: SignInStack;
  beforeAll(async () => {
    let callback = '';
    server = await startNodeOAuthServer({
      clientId: CLIENT_ID,
      clientSecret: CLIENT_SECRET,
      redirectUri: () => callback,
      user: 'alice-at-notes',
    });
    s = await sidecarFor({
      authorizationEndpoint: server.authorizationEndpoint,
      tokenEndpoint: server.tokenEndpoint,
      clientId: CLIENT_ID,
      clientSecret: CLIENT_SECRET,
      scopes: 'notes:read',
    });
    callback = `${s.base}/connect/callback`;
  });
  afterAll(async () => {
    await s?.close();
    await server?.close();
  });

  it('connects; the call carries a token the server itself says is its user', async () => {
    const p = await person(s);
    const { message, url } = await elicitation(await call(s, p.token));
    // No display name configured: the provider's host.
    expect(message).toContain(`connect your ${new URL(server.url).host} account`);
    const done = await openAndConfirm(p.browser, url);
    expect(done.status).toBe(200);
    expect(done.body).toContain('Connected');
    expect(server.requests.map((r) => r.path)).toEqual(expect.arrayContaining(['/authorize', '/token']));
    const header = await forwarded(s, p.token);
    expect(await server.whoHolds(header)).toBe('alice-at-notes');
  });
});

describe('GitHub App user tokens (expiring, refreshed): a disconnect during a refresh', () => {
  let github: GitHubStub;
  let s: SignInStack;
  beforeAll(async () => {
    github = await startGitHubStub({ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, expiring: true });
    s = await sidecarFor({
      authorizationEndpoint: github.authorizationEndpoint,
      tokenEndpoint: github.tokenEndpoint,
      clientId: CLIENT_ID,
      clientSecret: CLIENT_SECRET,
      name: 'GitHub',
    });
  });
  afterAll(async () => {
    await s?.close();
    await github?.close();
  });

  it('the person disconnects on the account page while the provider holds the refresh: the record stays deleted and the next call gets the link', async () => {
    const p = await person(s);
    const { url } = await elicitation(await call(s, p.token));
    expect((await openAndConfirm(p.browser, url)).status).toBe(200);
    const first = await forwarded(s, p.token);
    // Half a minute before the 8 hours run out: the next call refreshes first.
    s.stack.clock.advance(28800 * 1000 - 30_000);
    const held = github.holdNextRefresh();
    const inFlight = call(s, p.token);
    await held.arrived;
    // Meanwhile, on the account page (a session of now: the first one has expired).
    const browser = new UserAgent();
    await seedAccountSession(s.stack, s.base, browser, { subject: p.subject, issuer: s.idp.issuer });
    const page = await browser.request(`${s.base}/account`);
    const csrf = /name="csrf" value="([0-9a-f]{64})"/.exec(page.body)![1]!;
    const connection = /name="connection" value="([0-9a-f]{32})"/.exec(page.body)![1]!;
    const disconnected = await browser.request(`${s.base}/account/disconnect`, { form: { csrf, connection } });
    expect(disconnected.body).toContain('Disconnected');
    held.release();
    // The call in flight goes without the credential it lost: the link, not the refreshed token.
    await elicitation(await inFlight);
    expect(await s.stack.store.listSubjectUpstreamCredentials(p.subject)).toEqual([]);
    const before = echo.seen.length;
    await elicitation(await call(s, p.token));
    expect(echo.seen.length).toBe(before);
    expect(first).toMatch(/^Bearer gho_/);
  });
});

describe('an OpenID provider found by discovery, its scopes without `openid` (a second oidc-provider)', () => {
  let provider: DemoIdp;
  let s: SignInStack;
  beforeAll(async () => {
    let callback = '';
    provider = await startDemoIdp({
      clientId: 'third-party-app',
      clientSecret: CLIENT_SECRET,
      redirectUri: () => callback,
      autoLogin: true,
    });
    s = await sidecarFor({ issuer: provider.issuer, clientId: 'third-party-app', clientSecret: CLIENT_SECRET, scopes: 'email' });
    callback = `${s.base}/connect/callback`;
  });
  afterAll(async () => {
    await s?.close();
    await provider?.close();
  });

  it('is asked for `openid` with a nonce, and its ID token is checked: the connection completes', async () => {
    const p = await person(s);
    const { url } = await elicitation(await call(s, p.token));
    const confirm = await p.browser.follow(await p.browser.request(url));
    const csrf = /name="csrf" value="([0-9a-f]{64})"/.exec(confirm.body)![1]!;
    const toProvider = await p.browser.request(url, { form: { csrf } });
    expect(toProvider.status).toBe(303);
    const query = new URL(toProvider.location!).searchParams;
    expect(query.get('scope')).toBe('openid email');
    expect(query.get('nonce')).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    const done = await p.browser.follow(toProvider);
    expect(done.status).toBe(200);
    expect(done.body).toContain('Connected');
    expect(await forwarded(s, p.token)).toMatch(/^Bearer \S+$/);
  });
});
