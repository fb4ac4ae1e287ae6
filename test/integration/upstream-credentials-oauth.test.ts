// Mode `oauth` (connected accounts) over real HTTP: the organisation's IdP for sign-in and a second,
// separate OpenID provider (oidc-provider) standing in for the third-party provider; the sidecar on
// real Redis; an echo upstream that mints a session for each initialize. The session's handshake and
// lists go through without the user's credential; the first call gets -32042 with a link when the
// client declared URL elicitation at initialize, a tool error naming the link when it did not; the
// browser (a fetch-based user agent with a cookie jar) signs in at the IdP, confirms and connects;
// the same call then reaches the upstream with the user's token at the provider. Bad links, states
// from another browser, and a provider outage are refused. The demo IdP knows one person: the others
// here are signed in by an account-page session put in the store (what signing in leaves behind).

import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoIdp, DEMO_USER, type DemoIdp } from '../../demo/idp.ts';
import { generateToken, hashToken } from '../../src/model/credentials.ts';
import { CREDENTIAL_REQUIRED } from '../../src/upstream-credentials/delivery.ts';
import { URL_ELICITATION_REQUIRED } from '../../src/policy/enforce.ts';
import { startEchoUpstream, type FakeUpstream } from '../support/fake-upstreams.ts';
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
import { openAndConfirm, seedAccountSession } from '../support/connect.ts';

const KEY = randomBytes(32).toString('hex');
const PROVIDER_SECRET = randomBytes(32).toString('hex');
const SERVICE_TOKEN = `service-${randomBytes(16).toString('hex')}`;
let s: SignInStack;
let provider: DemoIdp;
let echo: FakeUpstream;
let base: string;

/** A JSON-RPC message as an MCP client sends it over Streamable HTTP, in its session when it has one. */
function post(token: string, message: unknown, session?: string) {
  return fetch(`${base}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(session !== undefined ? { 'mcp-session-id': session } : {}),
    },
    body: JSON.stringify(message),
  });
}

/** A tools/call as an MCP client sends it over Streamable HTTP. */
function call(token: string, id = 1, session?: string) {
  return post(token, { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: {} } }, session);
}

/**
 * The handshake: `initialize` (declaring URL-mode elicitation or not, MCP 2025-11-25
 * ClientCapabilities.elicitation.url) and `notifications/initialized`; the session the upstream minted.
 */
async function initialize(token: string, urlElicitation: boolean): Promise<string> {
  const capabilities = urlElicitation ? { elicitation: { form: {}, url: {} } } : { elicitation: { form: {} } };
  const res = await post(token, {
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities, clientInfo: { name: 'test', version: '1' } },
  });
  expect(res.status).toBe(200);
  await res.text();
  const session = res.headers.get('mcp-session-id');
  expect(session).not.toBeNull();
  const initialized = await post(token, { jsonrpc: '2.0', method: 'notifications/initialized' }, session!);
  expect(initialized.status).toBe(200);
  await initialized.text();
  return session!;
}

/** A fresh sign-in of the demo user through a new MCP client: its access token at the sidecar. */
async function signIn(): Promise<string> {
  const clientId = await registerPublicClient(base);
  const p = pkce();
  const hop = await approveAndSignIn(new UserAgent(), base, authorizeUrl(base, standardParams(base, clientId, p)));
  const tokens = await tokenRequest(base, {
    grant_type: 'authorization_code',
    code: clientReceived(hop).get('code')!,
    redirect_uri: CLIENT_REDIRECT,
    client_id: clientId,
    code_verifier: p.verifier,
  });
  return tokens.body.access_token as string;
}

/** A user-grade token of a user of its own (a fresh subject): one who has connected nothing yet. */
async function freshUser(): Promise<string> {
  return (await freshPerson()).token;
}

/** A fresh person: their user-grade token, and a browser signed in to the account page as them. */
async function freshPerson(): Promise<{ token: string; browser: UserAgent; subject: string }> {
  const raw = generateToken();
  const now = s.stack.clock.now();
  const subject = `user-${randomBytes(4).toString('hex')}`;
  await s.stack.store.putUserToken({
    tokenHash: hashToken(raw),
    subject,
    issuer: s.idp.issuer,
    createdAt: now,
    expiresAt: now + 24 * 3_600_000,
  });
  const browser = new UserAgent();
  await seedAccountSession(s.stack, base, browser, { subject, issuer: s.idp.issuer });
  return { token: raw, browser, subject };
}

/** The link of the -32042 answer to a call in a session whose client declared URL elicitation. */
async function elicitationUrl(token: string, session?: string): Promise<string> {
  const res = await call(token, 1, session ?? (await initialize(token, true)));
  expect(res.status).toBe(200);
  const body = (await res.json()) as { error: { code: number; data: { elicitations: Array<{ url: string }> } } };
  expect(body.error.code).toBe(URL_ELICITATION_REQUIRED);
  return body.error.data.elicitations[0]!.url;
}

beforeAll(async () => {
  echo = await startEchoUpstream({ mintSessions: true });
  let connectCallback = '';
  provider = await startDemoIdp({
    clientId: 'third-party-app',
    clientSecret: PROVIDER_SECRET,
    redirectUri: () => connectCallback,
    autoLogin: true,
  });
  s = await startSignInStack({
    upstreamUrl: echo.url,
    config: {
      proxy: { forwardAuth: true },
      upstream: {
        credentials: {
          mode: 'oauth',
          key: KEY,
          serviceToken: SERVICE_TOKEN,
          provider: { issuer: provider.issuer, clientId: 'third-party-app', clientSecret: PROVIDER_SECRET, scopes: 'openid email' },
        },
      },
    },
  });
  base = s.base;
  connectCallback = `${base}/connect/callback`;
});
afterAll(async () => {
  await s?.close();
  await echo?.close();
  await provider?.close();
});

describe('upstream credentials, mode oauth (connected accounts)', () => {
  it('-32042 first; the browser connects at the provider; the same call then reaches the upstream with the provider token', async () => {
    const token = await signIn();
    const session = await initialize(token, true);
    const before = echo.seen.length;
    const url = await elicitationUrl(token, session);
    expect(echo.seen.length).toBe(before);
    // A browser without a session: signs in at the IdP (as the demo user, whose token this is) first.
    const browser = new UserAgent();
    const done = await openAndConfirm(browser, url);
    expect(done.status).toBe(200);
    expect(done.body).toContain('Connected');
    const res = await call(token, 2);
    expect(res.status).toBe(200);
    await res.text();
    const forwarded = String(echo.seen.at(-1)!.headers.authorization);
    expect(forwarded).toMatch(/^Bearer \S+$/);
    // The provider's own userinfo endpoint takes it as the user's token there.
    const userinfo = await fetch(`${provider.issuer}/me`, { headers: { authorization: forwarded } });
    expect(userinfo.status).toBe(200);
    expect(((await userinfo.json()) as { sub: string }).sub).toBe(DEMO_USER.sub);
    expect(s.stack.logs.join('\n')).not.toContain(forwarded.slice(7));
    expect(s.stack.logs.join('\n')).toContain('upstream_credential_connected');
    const metrics = await (await fetch(`${s.stack.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/^mcp_auth_upstream_credentials_connected_total [1-9]/m);
    expect(metrics).toMatch(/^mcp_auth_upstream_credentials_missing_total [1-9]/m);
    expect(metrics).not.toContain(forwarded.slice(7));
  });

  it('without a credential, the handshake and the lists go on with the service token; a call gets -32042 in a session that declared URL elicitation', async () => {
    const token = await freshUser();
    const before = echo.seen.length;
    const session = await initialize(token, true);
    for (const [i, method] of ['tools/list', 'prompts/list', 'resources/list', 'resources/templates/list', 'ping'].entries()) {
      const res = await post(token, { jsonrpc: '2.0', id: 10 + i, method, params: {} }, session);
      expect(res.status).toBe(200);
      await res.text();
    }
    // initialize, notifications/initialized, five lifecycle requests: each forwarded with the service token, never the client's.
    const forwarded = echo.seen.slice(before);
    expect(forwarded).toHaveLength(7);
    for (const seen of forwarded) expect(seen.headers.authorization).toBe(`Bearer ${SERVICE_TOKEN}`);
    // The first request that needs the user's credential: the MCP error of URL-mode elicitation, nothing forwarded.
    for (const [id, method, params] of [
      [20, 'tools/call', { name: 'echo', arguments: {} }],
      [21, 'resources/read', { uri: 'file:///x' }],
      [22, 'prompts/get', { name: 'p' }],
    ] as const) {
      const res = await post(token, { jsonrpc: '2.0', id, method, params }, session);
      expect(res.status).toBe(200);
      const body = (await res.json()) as {
        id: number;
        error: { code: number; message: string; data: { elicitations: Array<{ url: string }> } };
      };
      expect(body.id).toBe(id);
      expect(body.error.code).toBe(URL_ELICITATION_REQUIRED);
      expect(body.error.data.elicitations[0]!.url).toMatch(new RegExp(`^${base}/connect/`));
      // The provider by its label (no name configured here: its host), the link too.
      expect(body.error.message).toBe(
        `connect your ${new URL(provider.issuer).host} account: open ${body.error.data.elicitations[0]!.url} in a browser, then retry`,
      );
    }
    expect(echo.seen.length).toBe(before + 7);
  });

  it('a client that declared no URL elicitation (or no session at all) gets the link in a tool error, or in a JSON-RPC error for other methods', async () => {
    const { token, browser } = await freshPerson();
    const before = echo.seen.length;
    const session = await initialize(token, false);
    const tools = await post(token, { jsonrpc: '2.0', id: 5, method: 'tools/list' }, session);
    expect(tools.status).toBe(200);
    await tools.text();
    expect(echo.seen.length).toBe(before + 3);
    for (const presented of [session, undefined]) {
      const res = await call(token, 6, presented);
      expect(res.status).toBe(200);
      // MCP CallToolResult with isError: the client shows the text to its user or model.
      const body = (await res.json()) as { id: number; result: { isError: boolean; content: Array<{ type: string; text: string }> } };
      expect(body.id).toBe(6);
      expect(body.result.isError).toBe(true);
      expect(body.result.content).toHaveLength(1);
      expect(body.result.content[0]!.type).toBe('text');
      expect(body.result.content[0]!.text).toMatch(
        new RegExp(`^connect your ${new URL(provider.issuer).host} account: open ${base}/connect/\\S+ in a browser, then retry$`),
      );
      expect(JSON.stringify(body)).not.toContain(String(URL_ELICITATION_REQUIRED));
    }
    const read = await post(token, { jsonrpc: '2.0', id: 'r', method: 'resources/read', params: { uri: 'file:///x' } }, session);
    expect(read.status).toBe(200);
    const error = (await read.json()) as { id: string; error: { code: number; message: string; data: { url: string } } };
    expect(error.id).toBe('r');
    expect(error.error.code).toBe(CREDENTIAL_REQUIRED);
    expect(error.error.message).toContain(error.error.data.url);
    expect(error.error.data.url).toMatch(new RegExp(`^${base}/connect/`));
    expect(echo.seen.length).toBe(before + 3);
    // The link of a tool error works like any other: once connected, the call goes through with the user's token.
    const link = /open (\S+) in a browser/.exec(
      ((await (await call(token, 7, session)).json()) as { result: { content: Array<{ text: string }> } }).result.content[0]!.text,
    )![1]!;
    expect((await openAndConfirm(browser, link)).status).toBe(200);
    const done = await call(token, 8, session);
    expect(done.status).toBe(200);
    await done.text();
    expect(echo.seen.at(-1)!.headers.authorization).toMatch(/^Bearer \S+$/);
    expect(echo.seen.at(-1)!.headers.authorization).not.toBe(`Bearer ${SERVICE_TOKEN}`);
  });

  it("a user without a credential is one request outcome, refused as upstream_credential_missing on /mcp (the -32042 answer and the 401 alike); /authz's marked 401 is `connect`, its request counted where /authz-connect decides it", async () => {
    const requests = async () => {
      const text = await (await fetch(`${s.stack.adminUrl}/metrics`)).text();
      const series = [...text.matchAll(/^mcp_auth_requests_total\{([^}]*)\} (\S+)$/gm)];
      const sum = (labels: string) => series.filter((m) => m[1]!.includes(labels)).reduce((n, m) => n + Number(m[2]), 0);
      return {
        missing: sum('outcome="refused",reason="upstream_credential_missing"'),
        connect: sum('outcome="connect"'),
        total: sum(''),
      };
    };
    const token = await freshUser();
    const session = await initialize(token, true);
    const before = await requests();
    await elicitationUrl(token, session);
    const afterElicitation = await requests();
    expect(afterElicitation.missing - before.missing).toBe(1);
    expect(afterElicitation.total - before.total).toBe(1);
    // A batch of calls is not answered with one link: the 401 challenge, counted the same way, once.
    const call = { jsonrpc: '2.0', method: 'tools/call', params: { name: 'echo', arguments: {} } };
    const get = await post(token, [
      { ...call, id: 1 },
      { ...call, id: 2 },
    ]);
    expect(get.status).toBe(401);
    await get.text();
    const afterGet = await requests();
    expect(afterGet.missing - afterElicitation.missing).toBe(1);
    expect(afterGet.total - afterElicitation.total).toBe(1);
    // Forward-auth: the ingress gets the marked 401, counted once, as handed on (not as missing: the
    // request may be the handshake, which /authz-connect forwards).
    const authz = await fetch(`${base}/authz`, {
      headers: { authorization: `Bearer ${token}`, 'x-original-uri': '/mcp', 'x-original-method': 'POST' },
    });
    expect(authz.status).toBe(401);
    await authz.text();
    const afterAuthz = await requests();
    expect(afterAuthz.missing - afterGet.missing).toBe(0);
    expect(afterAuthz.connect - afterGet.connect).toBe(1);
    expect(afterAuthz.total - afterGet.total).toBe(1);
  });

  it('a link works once: a second confirmation is refused with a page, and nothing is connected by it', async () => {
    const { token, browser } = await freshPerson();
    const url = await elicitationUrl(token);
    const page = await browser.request(url);
    expect(page.status).toBe(200);
    expect((await openAndConfirm(browser, url)).status).toBe(200);
    // The confirm page seen before: posting it again is refused, and nothing goes to the provider.
    const again = await browser.request(url, { form: { csrf: /name="csrf" value="([0-9a-f]{64})"/.exec(page.body)![1]! } });
    expect(again.status).toBe(400);
    expect(again.body).toContain('not valid');
  });

  it('an altered link, and an expired one, are refused', async () => {
    const token = await freshUser();
    const url = await elicitationUrl(token);
    const altered = url.slice(0, -3) + (url.endsWith('AAA') ? 'BBB' : 'AAA');
    expect((await new UserAgent().request(altered)).status).toBe(400);
    // Past the link's 10 minutes (the sidecar's clock; nothing else in this file depends on it).
    s.stack.clock.advance(11 * 60_000);
    expect((await new UserAgent().request(url)).status).toBe(400);
  });

  it('a callback in another browser (the state without its cookie) is refused, and the state is not spent by it', async () => {
    const { token, browser: victim } = await freshPerson();
    const url = await elicitationUrl(token);
    // The provider's redirect back to the sidecar, replayed by someone without the browser's cookies.
    const back = await openAndConfirm(victim, url, `${base}/connect/callback`);
    expect(back.location).toMatch(new RegExp(`^${base}/connect/callback\\?`));
    const attacker = new UserAgent();
    const refused = await attacker.request(back.location!);
    expect(refused.status).toBe(400);
    expect(refused.body).toContain('another browser');
    // The right browser still completes it.
    expect((await victim.request(back.location!)).status).toBe(200);
  });

  it('another person at the link is refused before the provider (403, nothing kept), and the link still works for its owner', async () => {
    const owner = await freshPerson();
    const other = await freshPerson();
    const url = await elicitationUrl(owner.token);
    const refused = await other.browser.request(url);
    expect(refused.status).toBe(403);
    expect(refused.body).toContain('another person');
    expect(refused.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(refused.headers.get('x-frame-options')).toBe('DENY');
    // Nor can they post a confirmation: their session's token is not the owner's page's.
    const ownerPage = await owner.browser.request(url);
    expect(ownerPage.status).toBe(200);
    expect(ownerPage.body).toContain('a user token');
    const csrf = /name="csrf" value="([0-9a-f]{64})"/.exec(ownerPage.body)![1]!;
    expect((await other.browser.request(url, { form: { csrf } })).status).toBe(403);
    expect((await openAndConfirm(owner.browser, url)).status).toBe(200);
    const res = await call(owner.token, 4);
    expect(res.status).toBe(200);
    await res.text();
  });

  it("the callback refuses a browser whose session is no longer the confirming person's, and keeps nothing", async () => {
    const owner = await freshPerson();
    const url = await elicitationUrl(owner.token);
    const back = await openAndConfirm(owner.browser, url, `${base}/connect/callback`);
    // Another person signs in to the account page in this browser before the provider's answer arrives.
    const other = await freshPerson();
    const host = new URL(base).host;
    owner.browser.jar.get(host)!.set('mcp-account', other.browser.jar.get(host)!.get('mcp-account')!);
    const refused = await owner.browser.request(back.location!);
    expect(refused.status).toBe(403);
    const again = await call(owner.token, 5, await initialize(owner.token, true));
    expect(((await again.json()) as { error: { code: number } }).error.code).toBe(URL_ELICITATION_REQUIRED);
  });

  describe('offboarding (revokeSubject) voids links and flows begun before it', () => {
    /** Offboards `subject`; the sidecar's clock then moves past the second of the call (links carry whole seconds). */
    async function offboard(subject: string): Promise<void> {
      expect((await s.stack.admin('revokeSubject', { subject })).status).toBe(200);
      s.stack.clock.advance(1000);
    }
    const kept = (subject: string) => s.stack.store.listSubjectUpstreamCredentials(subject);

    it('a link not yet opened is refused after, even to the same person signed in again', async () => {
      const person = await freshPerson();
      const url = await elicitationUrl(person.token);
      await offboard(person.subject);
      const again = new UserAgent();
      await seedAccountSession(s.stack, base, again, { subject: person.subject, issuer: s.idp.issuer });
      const refused = await again.request(url);
      expect(refused.status).toBe(400);
      expect(refused.body).toContain('not valid');
      expect(await kept(person.subject)).toEqual([]);
    });

    it('a flow at the provider when the person is offboarded keeps nothing, even with the person signed in again', async () => {
      const person = await freshPerson();
      const url = await elicitationUrl(person.token);
      const back = await openAndConfirm(person.browser, url, `${base}/connect/callback`);
      await offboard(person.subject);
      await seedAccountSession(s.stack, base, person.browser, { subject: person.subject, issuer: s.idp.issuer });
      const refused = await person.browser.request(back.location!);
      expect(refused.status).toBe(403);
      expect(refused.body).toContain('revoked');
      expect(await kept(person.subject)).toEqual([]);
    });

    it('offboarded while the provider answers (after the callback checked): what it wrote is deleted again', async () => {
      const person = await freshPerson();
      const url = await elicitationUrl(person.token);
      const back = await openAndConfirm(person.browser, url, `${base}/connect/callback`);
      // The offboarding lands after the callback's checks, just before its write (its deletion finds
      // nothing yet): only the read after the write can take the credential back.
      const store = s.stack.store;
      const write = store.putUpstreamCredential.bind(store);
      let landed = false;
      store.putUpstreamCredential = async (record) => {
        if (record.subject === person.subject && !landed) {
          landed = true;
          await offboard(person.subject);
        }
        return write(record);
      };
      try {
        const refused = await person.browser.request(back.location!);
        expect(refused.status).toBe(403);
      } finally {
        store.putUpstreamCredential = write;
      }
      expect(landed).toBe(true);
      expect(await kept(person.subject)).toEqual([]);
    });
  });

  it("two users' links in parallel: each connection is kept for the principal whose link it was", async () => {
    const [pa, pb] = await Promise.all([freshPerson(), freshPerson()]);
    const [a, b] = [pa.token, pb.token];
    const [urlA, urlB] = await Promise.all([elicitationUrl(a), elicitationUrl(b)]);
    expect(urlA).not.toBe(urlB);
    await Promise.all(
      [
        [urlA, pa.browser],
        [urlB, pb.browser],
      ].map(async ([u, agent]) => {
        expect((await openAndConfirm(agent as UserAgent, u as string)).status).toBe(200);
      }),
    );
    const forwarded: string[] = [];
    for (const t of [a, b]) {
      const res = await call(t, 3);
      expect(res.status).toBe(200);
      await res.text();
      forwarded.push(String(echo.seen.at(-1)!.headers.authorization));
    }
    // Each user's own connection: two different tokens at the provider.
    expect(forwarded[0]).toMatch(/^Bearer /);
    expect(forwarded[1]).toMatch(/^Bearer /);
    expect(forwarded[0]).not.toBe(forwarded[1]);
  });

  // Last: it stops the provider.
  it('a provider outage is a clear 503 page, nothing is kept, and the call is still refused without the credential', async () => {
    const { token, browser } = await freshPerson();
    const url = await elicitationUrl(token);
    // The user authorizes; the provider goes down before the sidecar redeems the code.
    const back = await openAndConfirm(browser, url, `${base}/connect/callback`);
    await provider.close();
    const page = await browser.request(back.location!);
    expect(page.status).toBe(503);
    expect(page.body).toContain('cannot be reached');
    const session = await initialize(token, true);
    const before = echo.seen.length;
    expect(await elicitationUrl(token, session)).toMatch(new RegExp(`^${base}/connect/`));
    expect(echo.seen.length).toBe(before);
  });
});
