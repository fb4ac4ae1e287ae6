// The sign-in pages with two identity providers (the IDP_* one, `default`, and one of idp.providers):
// /authorize, /device and /account ask which first, a link names one, an e-mail's domain chooses one
// (and travels on as the provider's login_hint), a name or domain no provider has gets the chooser
// again. Records written before issuers were kept belong to the `default` provider. Real sidecar,
// real Redis, two real OpenID providers (oidc-provider).

import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startDemoIdp, DEMO_USER, type DemoIdp } from '../../demo/idp.ts';
import { generateToken, hashToken } from '../../src/model/credentials.ts';
import { compilePolicy, decide } from '../../src/policy/rules.ts';
import { authorizeUrl, pkce, registerPublicClient, standardParams, startSignInStack, type SignInStack } from '../support/sign-in.ts';
import { rawRedis } from '../support/redis.ts';
import { UserAgent } from '../support/user-agent.ts';

let s: SignInStack;
let other: DemoIdp;
let base: string;

beforeAll(async () => {
  const secret = randomBytes(32).toString('hex');
  other = await startDemoIdp({ clientId: 'sidecar', clientSecret: secret, redirectUri: () => `${base}/oauth/callback`, autoLogin: true });
  s = await startSignInStack({
    idp: {
      providers: [{ name: 'fabrikam', issuer: other.issuer, clientId: 'sidecar', clientSecret: secret, domains: ['fabrikam.example'] }],
    },
  });
  base = s.base;
}, 60_000);
afterAll(async () => {
  await s?.close();
  await other?.close();
});

function links(html: string): string[] {
  return [...html.matchAll(/<a href="([^"]+)">/g)].map((m) => m[1]!.replace(/&amp;/g, '&'));
}

describe('the provider chooser', () => {
  it('/authorize asks which provider; a link names one and the consent page names its host', async () => {
    const clientId = await registerPublicClient(base);
    const agent = new UserAgent();
    const href = authorizeUrl(base, standardParams(base, clientId, pkce()));
    const chooser = await agent.request(href);
    expect(chooser.status).toBe(200);
    expect(chooser.body).toContain('Choose how to sign in');
    const offered = links(chooser.body);
    expect(offered.map((l) => new URL(l).searchParams.get('idp'))).toEqual(['default', 'fabrikam']);
    // Every parameter of the request is kept on each link.
    expect(new URL(offered[1]!).searchParams.get('client_id')).toBe(clientId);
    const consent = await agent.request(offered[1]!);
    expect(consent.status).toBe(200);
    expect(consent.body).toContain(new URL(other.issuer).host);
    expect(consent.body).not.toContain('Choose how to sign in');
  });

  it("an e-mail's domain chooses the provider and is passed on as its login_hint; an unknown domain or name is asked again", async () => {
    const clientId = await registerPublicClient(base);
    const agent = new UserAgent();
    const params = standardParams(base, clientId, pkce());
    const chosen = await agent.request(authorizeUrl(base, { ...params, login_hint: 'ann@Fabrikam.example' }));
    expect(chosen.body).toContain('Allow access');
    const requestId = /name="request" value="([0-9a-f]+)"/.exec(chosen.body)![1]!;
    const approved = await agent.request(`${base}/authorize/consent`, { form: { request: requestId, decision: 'approve' } });
    const atIdp = new URL(approved.location!);
    expect(atIdp.origin).toBe(new URL(other.issuer).origin);
    expect(atIdp.searchParams.get('login_hint')).toBe('ann@Fabrikam.example');
    const unknown = await agent.request(authorizeUrl(base, { ...params, login_hint: 'ann@elsewhere.example' }));
    expect(unknown.body).toContain('No sign-in is set up for that e-mail address here');
    const forged = await agent.request(authorizeUrl(base, { ...params, idp: '"><script>x</script>' }));
    expect(forged.body).toContain('Choose how to sign in');
    expect(forged.body).not.toContain('<script>x');
  });

  it('/account and /device ask too; the device form carries the choice, and a post without one goes back to the chooser', async () => {
    const agent = new UserAgent();
    const account = await agent.request(`${base}/account`);
    expect(account.status).toBe(200);
    expect(links(account.body)).toEqual([`${base}/account?idp=default`, `${base}/account?idp=fabrikam`]);
    const toIdp = await agent.request(`${base}/account?idp=fabrikam`);
    expect(toIdp.status).toBe(303);
    expect(new URL(toIdp.location!).origin).toBe(new URL(other.issuer).origin);
    const device = await agent.request(`${base}/device?user_code=ABCD-EFGH`);
    expect(links(device.body)).toContain(`${base}/device?user_code=ABCD-EFGH&idp=default`);
    const form = await agent.request(`${base}/device?user_code=ABCD-EFGH&idp=default`);
    expect(form.body).toContain('<input type="hidden" name="idp" value="default">');
    const posted = await agent.request(`${base}/device`, { form: { user_code: 'ABCD-EFGH' }, headers: { origin: base } });
    expect(posted.status).toBe(303);
    expect(posted.location).toBe(`${base}/device?user_code=ABCD-EFGH`);
  });

  it('the account page signs a person in at the provider named, and knows them by that issuer', async () => {
    const agent = new UserAgent();
    const done = await agent.follow(await agent.request(`${base}/account?idp=fabrikam`));
    expect(done.status).toBe(200);
    expect(done.body).toContain(DEMO_USER.email);
    const audit = await s.stack.admin('listAuditEvents', { limit: 50 });
    const signIns = audit.body.events.filter((e: { action: string }) => e.action === 'account.sign_in');
    expect(signIns.at(0)).toMatchObject({ subject: DEMO_USER.sub, detail: { issuer: other.issuer } });
  });
});

describe('records written before issuers were kept', () => {
  it("a user-grade token without an issuer belongs to the default provider's person", async () => {
    const token = generateToken();
    const tokenHash = hashToken(token);
    const raw = await rawRedis();
    const now = Date.now();
    // The seed's shape of a user-grade token: no issuer field.
    await raw.hset(`${s.stack.prefix}userBearerTokens:${tokenHash}`, {
      tokenHash,
      subject: 'old-person',
      revoked: 'false',
      createdAt: String(now),
      expiresAt: String(now + 3_600_000),
    });
    raw.disconnect();
    const client = new Client({ name: 'old-records', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
    );
    const seen = JSON.parse(
      ((await client.callTool({ name: 'headers', arguments: {} })) as { content: Array<{ text: string }> }).content[0]!.text,
    ) as Record<string, string>;
    await client.close();
    expect(seen['x-mcp-auth-subject']).toBe('old-person');
    expect(decodeURIComponent(seen['x-mcp-auth-issuer']!)).toBe(s.idp.issuer);
  });

  it('policy principals match issuers', () => {
    const problems: string[] = [];
    const policy = compilePolicy(
      { default: 'deny', rules: [{ name: 'fabrikam', effect: 'allow', principals: { issuers: ['https://fabrikam.example/*'] } }] },
      problems,
    );
    expect(problems).toEqual([]);
    const call = { method: 'tools/call', name: 'echo' };
    expect(decide(policy!, { kind: 'user', subject: 'x', issuer: 'https://fabrikam.example/oauth2' }, call).effect).toBe('allow');
    expect(decide(policy!, { kind: 'user', subject: 'x', issuer: 'https://contoso.example/' }, call).effect).toBe('deny');
    expect(decide(policy!, { kind: 'user', subject: 'x' }, call).effect).toBe('deny');
  });
});
