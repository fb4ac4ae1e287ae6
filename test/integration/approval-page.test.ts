// The approval page over real HTTP: the sidecar on real Redis, a real OpenID provider (oidc-provider, in
// this process), and a fetch-based user agent with a cookie jar standing in for the browser. A person's
// MCP call is held; the link signs them in at the IdP and shows the call complete and escaped, never
// framed; Approve is a POST with a CSRF token; the retried call then runs once. Someone the rule does
// not name gets a 403; forged and cross-site posts are refused; the account page lists the calls
// waiting for this person.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_USER } from '../../demo/idp.ts';
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

const POLICY = {
  default: 'allow',
  rules: [
    {
      name: 'loud-echo-confirmed-by-the-user',
      effect: 'approve',
      requests: { methods: ['tools/call'], names: ['echo'] },
      arguments: [{ path: '/text', prefix: 'LOUD' }],
      approval: { approvers: 'self' },
    },
    {
      name: 'sums-need-sre',
      effect: 'approve',
      requests: { methods: ['tools/call'], names: ['add'] },
      approval: { approvers: { claims: { groups: ['sre'] } }, notSelf: true },
    },
  ],
};

const MODERN = '2026-07-28';
let s: SignInStack;
let token: string;

/** A browser sign-in of the demo user through a public client: its access token. */
async function signIn(): Promise<string> {
  const clientId = await registerPublicClient(s.base, { client_name: 'Approval test' });
  const agent = new UserAgent();
  const p = pkce();
  const pageHop = await agent.request(authorizeUrl(s.base, standardParams(s.base, clientId, p)));
  const hop = await agent.follow(
    await agent.request(`${s.base}/authorize/consent`, { form: { request: consentRequestId(pageHop.body), decision: 'approve' } }),
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

/** A 2026-07-28 tool call that declares no URL elicitation: a held call's link comes in the tool error's text. */
async function callTool(name: string, args: Record<string, unknown>): Promise<{ isError?: boolean; content: { text: string }[] }> {
  const res = await fetch(`${s.base}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': MODERN,
      'mcp-method': 'tools/call',
      'mcp-name': name,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: {
        name,
        arguments: args,
        _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} },
      },
    }),
  });
  return ((await res.json()) as { result: { isError?: boolean; content: { text: string }[] } }).result;
}

const linkIn = (text: string) => /(http\S+\/approve\/[0-9a-f]{32})/.exec(text)![1]!;
const csrfOf = (html: string) => /name="csrf" value="([0-9a-f]{64})"/.exec(html)![1]!;

/** Opens `url` in `agent`, through the IdP (auto-login) the first time: the page. */
async function open(agent: UserAgent, url: string): Promise<Hop> {
  const first = await agent.request(url);
  return first.status === 303 ? agent.follow(first) : first;
}

beforeAll(async () => {
  s = await startSignInStack({ config: { policy: POLICY } });
  token = await signIn();
});
afterAll(async () => {
  await s?.close();
});

describe('the approval page', () => {
  it('self-confirmation: sign in, the call shown complete and escaped, never framed; Approve; the retry runs once', async () => {
    const text = 'LOUD <script>alert(1)</script> & "quotes"';
    const held = await callTool('echo', { text });
    expect(held.isError).toBe(true);
    const link = linkIn(held.content[0]!.text);
    const agent = new UserAgent();
    const first = await agent.request(link);
    expect(first.status).toBe(303);
    expect(first.location!.startsWith(s.idp.issuer)).toBe(true);
    const shown = await agent.follow(first);
    expect(shown.status).toBe(200);
    expect(shown.headers.get('x-frame-options')).toBe('DENY');
    expect(shown.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(shown.body).not.toContain('<script>alert');
    expect(shown.body).toContain('LOUD &lt;script&gt;alert(1)&lt;/script&gt; &amp; \\&quot;quotes\\&quot;');
    expect(shown.body).toContain(DEMO_USER.sub);
    // A forged post (no CSRF token) and a cross-site one decide nothing.
    expect((await agent.request(link, { form: { decision: 'approve' } })).status).toBe(403);
    const csrf = csrfOf(shown.body);
    expect((await agent.request(link, { form: { csrf, decision: 'approve' }, headers: { origin: 'https://evil.example' } })).status).toBe(
      403,
    );
    expect((await callTool('echo', { text })).isError).toBe(true);
    const decided = await agent.request(link, { form: { csrf, decision: 'approve' } });
    expect(decided.status).toBe(200);
    expect(decided.body).toContain(`approved by ${DEMO_USER.email}`);
    const before = s.stack.upstream!.toolCalls.length;
    expect(await callTool('echo', { text })).toMatchObject({ content: [{ text }] });
    expect(s.stack.upstream!.toolCalls.length).toBe(before + 1);
    expect((await callTool('echo', { text })).isError).toBe(true);
  });

  it('denied on the page: the retry is a tool error quoting the reason', async () => {
    const link = linkIn((await callTool('echo', { text: 'LOUD deny me' })).content[0]!.text);
    const agent = new UserAgent();
    const shown = await open(agent, link);
    await agent.request(link, { form: { csrf: csrfOf(shown.body), decision: 'deny', reason: 'not now' } });
    const retry = await callTool('echo', { text: 'LOUD deny me' });
    expect(retry.isError).toBe(true);
    expect(retry.content[0]!.text).toContain('"not now"');
  });

  it('a second-person rule: the caller, outside the group, gets 403 and decides nothing; the account page lists only what they may decide', async () => {
    const sums = linkIn((await callTool('add', { a: 1, b: 2 })).content[0]!.text);
    const agent = new UserAgent();
    const refused = await open(agent, sums);
    expect(refused.status).toBe(403);
    expect(refused.body).toContain('Not yours to decide');
    expect((await agent.request(sums, { form: { csrf: '0'.repeat(64), decision: 'approve' } })).status).toBe(403);
    const waiting = linkIn((await callTool('echo', { text: 'LOUD waiting' })).content[0]!.text);
    const account = await open(agent, `${s.base}/account`);
    expect(account.status).toBe(200);
    expect(account.body).toContain(`href="${waiting}"`);
    expect(account.body).not.toContain(sums);
    expect((await agent.request(`${s.base}/approve/${'0'.repeat(32)}`)).status).toBe(404);
  });
});
