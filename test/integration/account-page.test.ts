// The account page over real HTTP: the sidecar on real Redis, a real OpenID provider (oidc-provider, in
// this process), and a fetch-based user agent with a cookie jar (test/support/user-agent.ts) standing in
// for the browser. A person signs in, sees the two MCP clients that hold a grant for them and the
// approval they remembered, revokes one grant (its tokens fail at once, the other client's work) and
// forgets the approval; disconnects a kept upstream credential (a connected account) of their own;
// forged, cross-site, session-less, oversized and malformed posts are refused.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashToken } from '../../src/model/credentials.ts';
import { DEMO_USER } from '../../demo/idp.ts';
import { initializeStatus } from '../support/http.ts';
import type { StoredUpstreamCredential } from '../../src/store/types.ts';
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
import { consentRequestId, UserAgent, type Hop } from '../support/user-agent.ts';

let s: SignInStack;

beforeAll(async () => {
  s = await startSignInStack();
});
afterAll(async () => {
  await s?.close();
});

/** A browser sign-in through `clientId`, approving on the consent page (remembering it when asked), and the code redeemed: the tokens. */
async function signIn(clientId: string, remember: boolean): Promise<{ access: string; refresh: string }> {
  const agent = new UserAgent();
  const p = pkce();
  const pageHop = await agent.request(authorizeUrl(s.base, standardParams(s.base, clientId, p)));
  const form: Record<string, string> = { request: consentRequestId(pageHop.body), decision: 'approve' };
  if (remember) form.remember = 'yes';
  const hop = await agent.follow(await agent.request(`${s.base}/authorize/consent`, { form }), CLIENT_REDIRECT);
  const code = clientReceived(hop).get('code')!;
  const tokens = await tokenRequest(s.base, {
    grant_type: 'authorization_code',
    code,
    redirect_uri: CLIENT_REDIRECT,
    client_id: clientId,
    code_verifier: p.verifier,
  });
  expect(tokens.status).toBe(200);
  return { access: tokens.body.access_token as string, refresh: tokens.body.refresh_token as string };
}

/** The status of an MCP initialize with `token` (what an MCP client sends first), through the sidecar. */
const mcpStatus = (token: string): Promise<number> => initializeStatus({ mcpUrl: `${s.base}/mcp` }, token);

/** GET /account in `agent`, through the IdP (auto-login) and back: the page. */
async function openAccount(agent: UserAgent): Promise<Hop> {
  const first = await agent.request(`${s.base}/account`);
  expect(first.status).toBe(303);
  expect(first.location!.startsWith(s.idp.issuer)).toBe(true);
  return agent.follow(first);
}

function csrfOf(html: string): string {
  return /name="csrf" value="([0-9a-f]{64})"/.exec(html)![1]!;
}

/** The hidden id of the row whose text mentions `text`, for the field `name`. */
function rowId(html: string, text: string, name: 'grant' | 'consent' | 'connection'): string {
  const row = html.split('<tr>').find((r) => r.includes(text) && r.includes(`name="${name}"`));
  return new RegExp(`name="${name}" value="([0-9a-f]{32})"`).exec(row ?? '')![1]!;
}

describe('the account page', () => {
  it('shows both clients and the remembered approval; revoking one grant ends its tokens at once and forgets its approval, the other keeps working', async () => {
    const first = await registerPublicClient(s.base, { client_name: 'Alpha Editor' });
    const second = await registerPublicClient(s.base, { client_name: 'Beta <Assistant>' });
    const alpha = await signIn(first, true);
    const beta = await signIn(second, false);
    expect(await mcpStatus(alpha.access)).toBe(200);
    expect(await mcpStatus(beta.access)).toBe(200);

    const browser = new UserAgent();
    const page = await openAccount(browser);
    expect(page.url).toBe(`${s.base}/account`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    expect(page.headers.get('cache-control')).toBe('no-store');
    expect(page.body).toContain(DEMO_USER.email);
    expect(page.body).toContain('Alpha Editor');
    // The client's own name is escaped, never markup.
    expect(page.body).toContain('Beta &lt;Assistant&gt;');
    expect(page.body).not.toContain('<Assistant>');
    expect(page.body).toContain('127.0.0.1:7777');
    expect(page.body.match(/Revoke<\/button>/g)).toHaveLength(3);
    for (const raw of [alpha.access, alpha.refresh, beta.access, beta.refresh]) {
      expect(page.body).not.toContain(raw);
      expect(page.body).not.toContain(hashToken(raw));
    }
    // The only 64-hex value on the page is the CSRF token.
    expect(new Set(page.body.match(/[0-9a-f]{64}/g))).toEqual(new Set([csrfOf(page.body)]));
    // The session cookie: random, HttpOnly, SameSite=Lax (no Secure on this http test origin).
    const session = browser.jar.get(new URL(s.base).host)!.get('mcp-account')!;
    expect(session).toMatch(/^[0-9a-f]{64}$/);
    expect(await s.stack.store.getAccountSession(hashToken(session), s.stack.clock.now())).toMatchObject({
      user: { subject: DEMO_USER.sub },
    });

    const revoked = await browser.request(`${s.base}/account/revoke`, {
      form: { csrf: csrfOf(page.body), grant: rowId(page.body, 'Alpha Editor', 'grant') },
      headers: { origin: new URL(s.base).origin },
    });
    expect(revoked.status).toBe(200);
    expect(revoked.body).toContain('Revoked');
    expect(await mcpStatus(alpha.access)).toBe(401);
    expect((await tokenRequest(s.base, { grant_type: 'refresh_token', refresh_token: alpha.refresh, client_id: first })).status).toBe(400);
    expect(await mcpStatus(beta.access)).toBe(200);
    // Its approval went with it: the page now lists one grant and no approval.
    expect(revoked.body).not.toContain('Alpha Editor');
    expect(revoked.body).toContain('No approval is remembered.');
    expect(await s.stack.store.listSubjectConsents(DEMO_USER.sub, s.stack.clock.now())).toEqual([]);
  });

  it('forgets a remembered approval on its own, leaving the grant', async () => {
    const client = await registerPublicClient(s.base, { client_name: 'Gamma Notes' });
    const gamma = await signIn(client, true);
    const browser = new UserAgent();
    const page = await openAccount(browser);
    const forgot = await browser.request(`${s.base}/account/forget`, {
      form: { csrf: csrfOf(page.body), consent: rowId(page.body, 'Gamma Notes', 'consent') },
    });
    expect(forgot.status).toBe(200);
    expect(forgot.body).toContain('Forgotten');
    expect((await s.stack.store.listSubjectConsents(DEMO_USER.sub, s.stack.clock.now())).filter((c) => c.clientId === client)).toEqual([]);
    expect(await mcpStatus(gamma.access)).toBe(200);
  });

  it('refuses forged, cross-site, session-less, oversized and malformed posts; nothing is revoked', async () => {
    const client = await registerPublicClient(s.base, { client_name: 'Delta Tool' });
    const delta = await signIn(client, false);
    const browser = new UserAgent();
    const page = await openAccount(browser);
    const csrf = csrfOf(page.body);
    const grant = rowId(page.body, 'Delta Tool', 'grant');
    const post = (agent: UserAgent, form: Record<string, string>, headers: Record<string, string> = {}) =>
      agent.request(`${s.base}/account/revoke`, { form, headers });

    expect((await post(browser, { grant })).status).toBe(403);
    expect((await post(browser, { grant, csrf: '0'.repeat(64) })).status).toBe(403);
    expect((await post(browser, { grant, csrf: csrf.slice(1) })).status).toBe(403);
    // A page on another site posting with the person's cookies (what a browser sends for a cross-site form).
    expect((await post(browser, { grant, csrf }, { origin: 'https://evil.example' })).status).toBe(403);
    expect((await post(browser, { grant, csrf }, { 'sec-fetch-site': 'cross-site' })).status).toBe(403);
    // No session: another browser with a token lifted from the page.
    expect((await post(new UserAgent(), { grant, csrf })).status).toBe(403);
    // Bad input.
    expect((await post(browser, { grant: 'x'.repeat(8000), csrf })).status).toBe(413);
    expect((await post(browser, { grant: 'not-an-id', csrf })).status).toBe(400);
    expect((await post(browser, { csrf })).status).toBe(400);
    // Not a form (what a script's fetch with JSON would send): refused before anything is read from it.
    const json = await browser.request(`${s.base}/account/revoke`, { method: 'POST', headers: { 'content-type': 'application/json' } });
    expect(json.status).toBe(400);
    const unknown = await post(browser, { grant: 'f'.repeat(32), csrf });
    expect(unknown.status).toBe(200);
    expect(unknown.body).toContain('already ended');
    expect(await mcpStatus(delta.access)).toBe(200);
  });

  it('a sign-in finished in another browser than the one that started it is refused; signing out ends the session', async () => {
    const starter = new UserAgent();
    const first = await starter.request(`${s.base}/account`);
    // Another browser carries the IdP link to the end (it has none of the starter's cookies).
    const other = new UserAgent();
    const back = await other.follow(await other.request(first.location!), `${s.base}/account`);
    expect(back.status).toBe(403);
    expect(back.body).toContain('another browser');
    expect(other.jar.get(new URL(s.base).host)?.get('mcp-account')).toBeUndefined();

    const browser = new UserAgent();
    const page = await openAccount(browser);
    const out = await browser.request(`${s.base}/account/sign-out`, { form: { csrf: csrfOf(page.body) } });
    expect(out.status).toBe(200);
    const again = await browser.request(`${s.base}/account`);
    expect(again.status).toBe(303);
  });

  describe('connected accounts', () => {
    const OTHER_ISSUER = 'https://other-idp.example/';
    /** A kept credential as the upstream-credentials module stores it; `sealed` is opaque here (the page never decrypts it). */
    function kept(overrides: Partial<StoredUpstreamCredential> & { sealed: string }): StoredUpstreamCredential {
      return {
        subject: DEMO_USER.sub,
        issuer: s.idp.issuer,
        provider: 'idp',
        keyId: '0123456789abcdef',
        createdAt: Date.UTC(2026, 0, 2, 3, 4, 5),
        ...overrides,
      };
    }
    const github = () => kept({ provider: 'oauth:github', sealed: 'U0VBTEVELUdJVEhVQi1UT0tFTg' });
    const idp = () => kept({ sealed: 'U0VBTEVELUlEUC1UT0tFTg' });
    const exchanged = () => kept({ provider: 'exchange:https://api.example/', sealed: 'U0VBTEVELUVYQ0hBTkdFRA' });
    // The same person's record under another issuer, and another person's: neither is theirs to see or end.
    const otherIssuer = () => kept({ issuer: OTHER_ISSUER, provider: 'oauth:gitlab', sealed: 'U0VBTEVELU9USEVSLUlTU1VFUg' });
    const someoneElse = () => kept({ subject: 'someone-else', provider: 'oauth:github', sealed: 'U0VBTEVELVNPTUVPTkUtRUxTRQ' });

    async function keepAll(): Promise<void> {
      for (const r of [github(), idp(), exchanged(), otherIssuer(), someoneElse()]) await s.stack.store.putUpstreamCredential(r);
    }
    async function cleanUp(): Promise<void> {
      await s.stack.store.deleteUpstreamCredentials(DEMO_USER.sub);
      await s.stack.store.deleteUpstreamCredentials('someone-else');
    }

    it("lists the person's own connected accounts without any token text; disconnecting one deletes only that record, audited", async () => {
      await keepAll();
      try {
        const browser = new UserAgent();
        const page = await openAccount(browser);
        expect(page.status).toBe(200);
        expect(page.body).toContain('Connected accounts');
        expect(page.body).toContain('<bdi>github</bdi>');
        expect(page.body).toContain("Your identity provider's token");
        expect(page.body).toContain('A token exchanged for <bdi>https://api.example/</bdi>');
        expect(page.body).toContain('2026-01-02 03:04:05Z');
        expect(page.body.match(/Disconnect<\/button>/g)).toHaveLength(3);
        // Never the sealed tokens, nor the other issuer's record, nor another person's.
        for (const r of [github(), idp(), exchanged(), otherIssuer(), someoneElse()]) expect(page.body).not.toContain(r.sealed);
        expect(page.body).not.toContain('gitlab');

        const done = await browser.request(`${s.base}/account/disconnect`, {
          form: { csrf: csrfOf(page.body), connection: rowId(page.body, 'oauth:github', 'connection') },
          headers: { origin: new URL(s.base).origin },
        });
        expect(done.status).toBe(200);
        expect(done.body).toContain('Disconnected');
        expect(done.body).not.toContain('oauth:github');
        expect(done.body.match(/Disconnect<\/button>/g)).toHaveLength(2);
        const store = s.stack.store;
        expect(await store.getUpstreamCredential(DEMO_USER.sub, s.idp.issuer, 'oauth:github')).toBeNull();
        expect(await store.getUpstreamCredential(DEMO_USER.sub, s.idp.issuer, 'idp')).toEqual(idp());
        expect(await store.getUpstreamCredential(DEMO_USER.sub, OTHER_ISSUER, 'oauth:gitlab')).toEqual(otherIssuer());
        expect(await store.getUpstreamCredential('someone-else', s.idp.issuer, 'oauth:github')).toEqual(someoneElse());
        const audited = (await store.listAuditEvents(50)).find((e) => e.action === 'account.disconnect');
        expect(audited).toMatchObject({ who: 'user', result: 'ok', subject: DEMO_USER.sub, detail: { provider: 'oauth:github' } });

        // The same form again: nothing left to delete, said so.
        const again = await browser.request(`${s.base}/account/disconnect`, {
          form: { csrf: csrfOf(page.body), connection: rowId(page.body, 'oauth:github', 'connection') },
        });
        expect(again.status).toBe(200);
        expect(again.body).toContain('already been disconnected');
      } finally {
        await cleanUp();
      }
    });

    it('refuses forged, cross-site, session-less and malformed disconnects; the record stays', async () => {
      await keepAll();
      try {
        const browser = new UserAgent();
        const page = await openAccount(browser);
        const csrf = csrfOf(page.body);
        const connection = rowId(page.body, 'oauth:github', 'connection');
        const post = (agent: UserAgent, form: Record<string, string>, headers: Record<string, string> = {}) =>
          agent.request(`${s.base}/account/disconnect`, { form, headers });

        expect((await post(browser, { connection })).status).toBe(403);
        expect((await post(browser, { connection, csrf: '0'.repeat(64) })).status).toBe(403);
        // What a browser sends for a form another site posts with the person's cookies.
        expect((await post(browser, { connection, csrf }, { origin: 'https://evil.example' })).status).toBe(403);
        expect((await post(browser, { connection, csrf }, { 'sec-fetch-site': 'cross-site' })).status).toBe(403);
        expect((await post(new UserAgent(), { connection, csrf })).status).toBe(403);
        expect((await post(browser, { connection: 'not-an-id', csrf })).status).toBe(400);
        expect((await post(browser, { csrf })).status).toBe(400);
        expect(await s.stack.store.getUpstreamCredential(DEMO_USER.sub, s.idp.issuer, 'oauth:github')).toEqual(github());
        expect(await s.stack.store.listSubjectUpstreamCredentials(DEMO_USER.sub)).toHaveLength(4);
      } finally {
        await cleanUp();
      }
    });
  });
});
