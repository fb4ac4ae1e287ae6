// Browser sign-in over real HTTP: the sidecar on real Redis, a real OpenID provider (oidc-provider,
// in this process), and a fetch-based user agent with a cookie jar standing in for the browser.
// Every bad input gets a clear answer (an error page, or an error redirect with state and iss) and
// nothing is issued; every row of that list is a test here.

import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { decodeJwt, importPKCS8, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.ts';
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
import { consentRequestId, UserAgent } from '../support/user-agent.ts';
import { DEMO_USER } from '../../demo/idp.ts';
import { readable } from '../support/records.ts';
import { rawRedis } from '../support/redis.ts';
import { keyLayout } from '../../src/store/records.ts';

let s: SignInStack;
let base: string;
let clientId: string;

/** What a tampering middleware at the IdP's token endpoint does to the next ID token (then it resets). */
let tamper: ((claims: Record<string, unknown>) => Record<string, unknown>) | undefined;

beforeAll(async () => {
  s = await startSignInStack();
  base = s.base;
  clientId = await registerPublicClient(base);
  const key = await importPKCS8(s.idp.signingKeyPem, 'RS256');
  // Re-signed with the IdP's own key: only the claims are wrong, never the signature.
  s.idp.provider.use(async (ctx, next) => {
    await next();
    const body = ctx.body as { id_token?: string } | undefined;
    if (ctx.path !== '/token' || tamper === undefined || typeof body?.id_token !== 'string') return;
    const claims = tamper(decodeJwt(body.id_token) as Record<string, unknown>);
    tamper = undefined;
    body.id_token = await new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: 'demo-key' }).sign(key);
  });
});
afterAll(async () => {
  await s?.close();
});

async function mcp(token: string): Promise<{ status: number; headers?: Record<string, string> }> {
  const res = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
    }),
  });
  await res.text();
  return { status: res.status };
}

async function signedInCode(extra: Record<string, string | undefined> = {}, id = clientId) {
  const p = pkce();
  const params = standardParams(base, id, p, extra);
  const hop = await approveAndSignIn(new UserAgent(), base, authorizeUrl(base, params));
  const received = clientReceived(hop);
  return { p, params, received, code: received.get('code') };
}

function redeem(code: string, verifier: string, overrides: Record<string, string> = {}, id = clientId) {
  return tokenRequest(base, {
    grant_type: 'authorization_code',
    code,
    redirect_uri: CLIENT_REDIRECT,
    client_id: id,
    code_verifier: verifier,
    ...overrides,
  });
}

describe('discovery and registration', () => {
  it('metadata advertises the authorization endpoint, code + S256, iss on responses', async () => {
    const meta = (await (await fetch(`${base}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
    expect(meta).toMatchObject({
      issuer: base,
      authorization_endpoint: `${base}/authorize`,
      response_types_supported: ['code'],
      code_challenge_methods_supported: ['S256'],
      authorization_response_iss_parameter_supported: true,
    });
    expect(meta.grant_types_supported).toContain('authorization_code');
  });

  it('browser-based clients (the MCP Inspector) may call discovery, /register and /token cross-origin, without credentials', async () => {
    const preflight = await fetch(`${base}/token`, {
      method: 'OPTIONS',
      headers: { origin: 'http://localhost:6274', 'access-control-request-method': 'POST' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
    expect(preflight.headers.get('access-control-allow-methods')).toBe('POST');
    expect(preflight.headers.get('access-control-allow-credentials')).toBeNull();
    const meta = await fetch(`${base}/.well-known/oauth-authorization-server`, { headers: { origin: 'http://localhost:6274' } });
    expect(meta.headers.get('access-control-allow-origin')).toBe('*');
    const refused = await fetch(`${base}/token`, { method: 'POST', headers: { origin: 'http://localhost:6274' } });
    expect(refused.status).toBe(400);
    expect(refused.headers.get('access-control-allow-origin')).toBe('*');
    // Not the sign-in pages: they rely on a cookie.
    const page = await fetch(`${base}/authorize/consent`, { method: 'OPTIONS' });
    expect(page.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('DCR accepts a public client with authorization_code, response_types code and a loopback redirect URI', async () => {
    const res = await fetch(`${base}/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        redirect_uris: ['http://localhost:6274/oauth/callback'],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
      }),
    });
    const body = (await res.json()) as Record<string, unknown>;
    expect(res.status).toBe(201);
    expect(body).toMatchObject({
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
    });
    expect(body.client_secret).toBeUndefined();
  });

  it.each([
    ['response_types other than code', { response_types: ['token'] }, 'invalid_client_metadata'],
    ['response_types code without the authorization_code grant', { grant_types: ['refresh_token'] }, 'invalid_client_metadata'],
    ['authorization_code without a redirect URI', { redirect_uris: [] }, 'invalid_redirect_uri'],
    ['a redirect URI with a fragment', { redirect_uris: ['https://app.example/cb#x'] }, 'invalid_redirect_uri'],
    ['plain http to a non-loopback host', { redirect_uris: ['http://app.example/cb'] }, 'invalid_redirect_uri'],
  ])('DCR refuses %s', async (_name, extra, error) => {
    const res = await fetch(`${base}/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        redirect_uris: [CLIENT_REDIRECT],
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
        ...extra,
      }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toBe(error);
  });
});

describe('GET /authorize: a bad client_id or redirect_uri is an error page, never a redirect', () => {
  const p = pkce();
  const rows: Array<[string, (id: string) => Record<string, string | undefined>, number]> = [
    ['no client_id', (id) => ({ ...standardParams('', id, p), client_id: undefined }), 400],
    ['an unknown client_id', (id) => standardParams('', `${id.slice(0, -4)}0000`, p), 400],
    ['no redirect_uri', (id) => ({ ...standardParams('', id, p), redirect_uri: undefined }), 400],
    ['an unregistered redirect_uri', (id) => standardParams('', id, p, { redirect_uri: 'https://evil.example/callback' }), 400],
    ['a redirect_uri with a fragment', (id) => standardParams('', id, p, { redirect_uri: `${CLIENT_REDIRECT}#frag` }), 400],
    [
      'another loopback host (localhost for 127.0.0.1)',
      (id) => standardParams('', id, p, { redirect_uri: 'http://localhost:7777/callback' }),
      400,
    ],
    ['another path on the loopback host', (id) => standardParams('', id, p, { redirect_uri: 'http://127.0.0.1:7777/other' }), 400],
    [
      'https instead of http on the loopback host',
      (id) => standardParams('', id, p, { redirect_uri: 'https://127.0.0.1:7777/callback' }),
      400,
    ],
  ];
  it.each(rows)('%s', async (_name, params, status) => {
    const res = await new UserAgent().request(authorizeUrl(base, params(clientId)));
    expect(res.status).toBe(status);
    expect(res.location).toBeUndefined();
    expect(res.headers.get('content-type')).toContain('text/html');
    expect(res.body).not.toContain('evil.example');
  });

  it('a registered client whose record was edited into something unreadable is refused as an unknown one, and logged', async () => {
    // The file's client, edited and then put back (a new registration would spend the address's budget).
    const key = keyLayout(s.stack.prefix).client(clientId);
    const redis = await rawRedis();
    const source = await redis.hget(key, 'source');
    try {
      await redis.hset(key, 'source', 'operator');
      const res = await new UserAgent().request(authorizeUrl(base, standardParams(base, clientId, p)));
      expect(res.status).toBe(400);
      expect(res.location).toBeUndefined();
      expect(s.stack.logs.filter((l) => l.includes('client record unreadable') && l.includes(clientId))).toHaveLength(1);
    } finally {
      await redis.hset(key, 'source', source!);
      redis.disconnect();
    }
    expect((await new UserAgent().request(authorizeUrl(base, standardParams(base, clientId, p)))).status).toBe(200);
  });

  it('a duplicated client_id is refused with a page', async () => {
    const url = `${authorizeUrl(base, standardParams(base, clientId, p))}&client_id=${clientId}`;
    const res = await new UserAgent().request(url);
    expect(res.status).toBe(400);
    expect(res.location).toBeUndefined();
  });

  it('a loopback redirect URI matches on any port (RFC 8252 §7.3)', async () => {
    const res = await new UserAgent().request(
      authorizeUrl(base, standardParams(base, clientId, p, { redirect_uri: 'http://127.0.0.1:51234/callback' })),
    );
    expect(res.status).toBe(200);
    expect(res.body).toContain('http://127.0.0.1:51234');
  });
});

describe('GET /authorize: other errors go back to the client with error, state and iss', () => {
  const p = pkce();
  it.each([
    ['no response_type', { response_type: undefined }, 'invalid_request'],
    ['response_type token', { response_type: 'token' }, 'unsupported_response_type'],
    ['no PKCE', { code_challenge: undefined, code_challenge_method: undefined }, 'invalid_request'],
    ['PKCE plain', { code_challenge_method: 'plain', code_challenge: 'a'.repeat(43) }, 'invalid_request'],
    ['no code_challenge_method', { code_challenge_method: undefined }, 'invalid_request'],
    ['a code_challenge that is no SHA-256', { code_challenge: 'short' }, 'invalid_request'],
    ['a foreign resource', { resource: 'https://other.example/mcp' }, 'invalid_target'],
    ['a malformed scope', { scope: 'a\u0001b' }, 'invalid_scope'],
  ])('%s', async (_name, extra, error) => {
    const params = standardParams(base, clientId, p, extra as Record<string, string | undefined>);
    const res = await new UserAgent().request(authorizeUrl(base, params));
    expect(res.status).toBe(302);
    const back = new URL(res.location!);
    expect(`${back.origin}${back.pathname}`).toBe(CLIENT_REDIRECT);
    expect(back.searchParams.get('error')).toBe(error);
    expect(back.searchParams.get('state')).toBe(params.state);
    expect(back.searchParams.get('iss')).toBe(base);
    expect(back.searchParams.get('code')).toBeNull();
  });

  it("a scope beyond the client's is invalid_scope", async () => {
    const narrow = await registerPublicClient(base, { scope: 'mcp:read' });
    const res = await new UserAgent().request(authorizeUrl(base, standardParams(base, narrow, p, { scope: 'mcp:read mcp:write' })));
    expect(new URL(res.location!).searchParams.get('error')).toBe('invalid_scope');
  });

  it('a client without the authorization_code grant is unauthorized_client', async () => {
    const created = await s.stack.admin('createClient', { redirectUris: [CLIENT_REDIRECT], grantTypes: ['client_credentials'] });
    const res = await new UserAgent().request(authorizeUrl(base, standardParams(base, created.body.clientId, p)));
    expect(new URL(res.location!).searchParams.get('error')).toBe('unauthorized_client');
  });
});

describe('the consent page', () => {
  it('names the client, where the code goes and the scopes; cannot be framed or cached', async () => {
    const named = await registerPublicClient(base, { client_name: 'Evil <script>alert(1)</script> & co', scope: 'mcp:read mcp:write' });
    const res = await new UserAgent().request(authorizeUrl(base, standardParams(base, named, pkce(), { scope: 'mcp:read' })));
    expect(res.status).toBe(200);
    expect(res.body).toContain('Evil &lt;script&gt;alert(1)&lt;/script&gt; &amp; co');
    expect(res.body).not.toContain('<script>');
    expect(res.body).toContain('http://127.0.0.1:7777');
    // No policy names scopes here, so mcp:read means nothing: shown as not granted, never as access.
    expect(res.body).toContain('not defined by this server and not granted: mcp:read.');
    expect(res.body).not.toContain('<code>mcp:read</code>');
    expect(res.body).not.toContain('mcp:write');
    expect(res.body).toContain(new URL(s.idp.issuer).host);
    expect(res.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(res.headers.get('content-security-policy')).not.toContain('form-action');
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('set-cookie')).toMatch(/^mcp-sign-in=[0-9a-f]{64}; Path=\/; HttpOnly; SameSite=Lax; Max-Age=600$/);
  });

  async function pending() {
    const agent = new UserAgent();
    const params = standardParams(base, clientId, pkce());
    const page = await agent.request(authorizeUrl(base, params));
    return { agent, params, requestId: consentRequestId(page.body) };
  }

  it('Deny goes back with access_denied, state and iss, and the request cannot be used again', async () => {
    const { agent, params, requestId } = await pending();
    const res = await agent.request(`${base}/authorize/consent`, { form: { request: requestId, decision: 'deny' } });
    expect(res.status).toBe(303);
    const back = new URL(res.location!);
    expect(Object.fromEntries(back.searchParams)).toEqual({
      error: 'access_denied',
      error_description: 'the user denied access',
      state: params.state,
      iss: base,
    });
    const again = await agent.request(`${base}/authorize/consent`, { form: { request: requestId, decision: 'approve' } });
    expect(again.status).toBe(400);
    expect(again.location).toBeUndefined();
  });

  it('a consent POST without the browser cookie (CSRF) is refused: 403 page, nothing sent to the IdP', async () => {
    const { requestId } = await pending();
    const res = await new UserAgent().request(`${base}/authorize/consent`, { form: { request: requestId, decision: 'approve' } });
    expect(res.status).toBe(403);
    expect(res.location).toBeUndefined();
  });

  it("a consent POST with another browser's cookie is refused", async () => {
    const victim = await pending();
    const attacker = await pending();
    const res = await attacker.agent.request(`${base}/authorize/consent`, { form: { request: victim.requestId, decision: 'approve' } });
    expect(res.status).toBe(403);
  });

  it('a consent POST from another origin is refused', async () => {
    const { agent, requestId } = await pending();
    const res = await agent.request(`${base}/authorize/consent`, {
      form: { request: requestId, decision: 'approve' },
      headers: { origin: 'https://evil.example' },
    });
    expect(res.status).toBe(403);
  });

  it('a consent POST without its CSRF token (the request handle), or with an unknown one, is refused', async () => {
    const { agent } = await pending();
    expect((await agent.request(`${base}/authorize/consent`, { form: { decision: 'approve' } })).status).toBe(400);
    expect((await agent.request(`${base}/authorize/consent`, { form: { request: 'f'.repeat(64), decision: 'approve' } })).status).toBe(400);
  });

  it('GET on the consent endpoint is 405', async () => {
    expect((await fetch(`${base}/authorize/consent`)).status).toBe(405);
  });
});

describe('codes and tokens', () => {
  it('a signed-in user gets a code; its tokens act for the IdP sub, at /mcp and after refresh', async () => {
    const { p, params, received, code } = await signedInCode({ scope: undefined });
    expect(received.get('state')).toBe(params.state);
    expect(received.get('iss')).toBe(base);
    expect(code).toMatch(/^[0-9a-f]{64}$/);
    const tokens = await redeem(code!, p.verifier);
    expect(tokens.status).toBe(200);
    expect(tokens.headers.get('cache-control')).toBe('no-store');
    expect(tokens.body).toMatchObject({ token_type: 'Bearer', expires_in: 3600 });
    const access = tokens.body.access_token as string;
    expect((await mcp(access)).status).toBe(200);
    const introspected = await s.stack.store.lookupToken((await import('../../src/model/credentials.ts')).hashToken(access));
    expect(introspected.oauth).toMatchObject({
      clientId,
      subject: DEMO_USER.sub,
      email: DEMO_USER.email,
      groups: DEMO_USER.groups,
    });
    // The code itself is stored only as its hash.
    expect(s.stack.logs.join('\n')).not.toContain(code);
    const refreshed = await tokenRequest(base, {
      grant_type: 'refresh_token',
      refresh_token: tokens.body.refresh_token as string,
      client_id: clientId,
    });
    expect(refreshed.status).toBe(200);
    const after = await s.stack.store.lookupToken(
      (await import('../../src/model/credentials.ts')).hashToken(refreshed.body.access_token as string),
    );
    expect(readable(after.oauth)?.subject).toBe(DEMO_USER.sub);
  });

  it('a wrong code_verifier is invalid_grant, and does not burn the code', async () => {
    const { p, code } = await signedInCode();
    const wrong = await redeem(code!, pkce().verifier);
    expect(wrong).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    expect((await redeem(code!, p.verifier)).status).toBe(200);
  });

  it.each([
    ['no code_verifier', { code_verifier: '' }, 'invalid_request'],
    ['another redirect_uri', { redirect_uri: 'http://127.0.0.1:7778/callback' }, 'invalid_grant'],
    ['a code that was never issued', { code: 'a'.repeat(64) }, 'invalid_grant'],
    ['a code that is not 64 hex', { code: 'not-a-code' }, 'invalid_grant'],
  ])('%s: refused', async (_name, overrides, error) => {
    const { p, code } = await signedInCode();
    const res = await redeem(code!, p.verifier, overrides);
    expect(res.status).toBe(400);
    expect(res.body.error).toBe(error);
  });

  it("another client's code is invalid_grant and leaves the code to its owner", async () => {
    const { p, code } = await signedInCode();
    const thief = await registerPublicClient(base);
    expect((await redeem(code!, p.verifier, {}, thief)).body.error).toBe('invalid_grant');
    expect((await redeem(code!, p.verifier)).status).toBe(200);
  });

  it('an expired code (past 60 s) is invalid_grant', async () => {
    const { p, code } = await signedInCode();
    s.stack.clock.advance(61_000);
    expect((await redeem(code!, p.verifier)).body.error).toBe('invalid_grant');
  });

  it('a code used twice: the second use is invalid_grant and revokes what the first issued', async () => {
    const { p, code } = await signedInCode();
    const first = await redeem(code!, p.verifier);
    expect(first.status).toBe(200);
    expect((await mcp(first.body.access_token as string)).status).toBe(200);
    const second = await redeem(code!, p.verifier);
    expect(second.body.error).toBe('invalid_grant');
    expect((await mcp(first.body.access_token as string)).status).toBe(401);
    const refresh = await tokenRequest(base, {
      grant_type: 'refresh_token',
      refresh_token: first.body.refresh_token as string,
      client_id: clientId,
    });
    expect(refresh.body.error).toBe('invalid_grant');
  });

  it('a confidential client authenticates with its secret; a wrong secret is invalid_client', async () => {
    const created = await s.stack.admin('createClient', {
      redirectUris: [CLIENT_REDIRECT],
      grantTypes: ['authorization_code', 'refresh_token'],
    });
    expect(created.status).toBe(201);
    const { clientId: id, clientSecret } = created.body as { clientId: string; clientSecret: string };
    const basic = (secret: string) => ({ authorization: `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}` });
    const one = await signedInCode({}, id);
    const wrong = await tokenRequest(
      base,
      { grant_type: 'authorization_code', code: one.code!, redirect_uri: CLIENT_REDIRECT, code_verifier: one.p.verifier },
      basic('f'.repeat(64)),
    );
    expect(wrong.status).toBe(401);
    expect(wrong.body.error).toBe('invalid_client');
    const right = await tokenRequest(
      base,
      { grant_type: 'authorization_code', code: one.code!, redirect_uri: CLIENT_REDIRECT, code_verifier: one.p.verifier },
      basic(clientSecret),
    );
    expect(right.status).toBe(200);
  });

  it('deleteClient revokes sign-in tokens, and a code not yet redeemed can no longer be', async () => {
    const doomed = await registerPublicClient(base);
    const used = await signedInCode({}, doomed);
    const tokens = await redeem(used.code!, used.p.verifier, {}, doomed);
    const waiting = await signedInCode({}, doomed);
    const deleted = await s.stack.admin('deleteClient', { clientId: doomed });
    expect(deleted.body).toMatchObject({ accessTokensRevoked: 1, refreshTokensRevoked: 1 });
    expect((await mcp(tokens.body.access_token as string)).status).toBe(401);
    const late = await redeem(waiting.code!, waiting.p.verifier, {}, doomed);
    expect(late.status).toBe(401);
    expect(late.body.error).toBe('invalid_client');
  });
});

describe('the IdP callback', () => {
  /** Runs the flow up to the IdP and returns the state the sidecar sent there, and the agent. */
  async function atTheIdp() {
    const agent = new UserAgent();
    const params = standardParams(base, clientId, pkce());
    const page = await agent.request(authorizeUrl(base, params));
    const approved = await agent.request(`${base}/authorize/consent`, {
      form: { request: consentRequestId(page.body), decision: 'approve' },
    });
    const toIdp = new URL(approved.location!);
    expect(toIdp.origin).toBe(s.idp.issuer);
    return { agent, params, approved, idpState: toIdp.searchParams.get('state')! };
  }

  it('a replayed callback (same state twice) is refused the second time with a page', async () => {
    const { agent, approved } = await atTheIdp();
    const callback = await agent.follow(approved, `${base}/oauth/callback`);
    const first = await agent.request(callback.location!);
    expect(first.status).toBe(303);
    expect(new URL(first.location!).searchParams.get('code')).toMatch(/^[0-9a-f]{64}$/);
    const replay = await agent.request(callback.location!);
    expect(replay.status).toBe(400);
    expect(replay.location).toBeUndefined();
    expect(replay.body).toContain('expired or was already used');
  });

  it('a callback in another browser (no cookie) is refused, and nothing is issued', async () => {
    const { agent, approved } = await atTheIdp();
    const callback = await agent.follow(approved, `${base}/oauth/callback`);
    const res = await new UserAgent().request(callback.location!);
    expect(res.status).toBe(403);
    expect(res.location).toBeUndefined();
  });

  it('a callback with an unknown or missing state is an error page', async () => {
    expect((await new UserAgent().request(`${base}/oauth/callback?code=x&state=unknown`)).status).toBe(400);
    expect((await new UserAgent().request(`${base}/oauth/callback?code=x`)).status).toBe(400);
  });

  it('an IdP error goes back to the client as access_denied with state and iss; no code', async () => {
    const { agent, params, idpState } = await atTheIdp();
    const res = await agent.request(
      `${base}/oauth/callback?error=access_denied&state=${encodeURIComponent(idpState)}&iss=${encodeURIComponent(s.idp.issuer)}`,
    );
    expect(res.status).toBe(303);
    const back = new URL(res.location!);
    expect(back.searchParams.get('error')).toBe('access_denied');
    expect(back.searchParams.get('state')).toBe(params.state);
    expect(back.searchParams.get('iss')).toBe(base);
    expect(back.searchParams.get('code')).toBeNull();
  });

  it.each([
    ['a wrong aud', (c: Record<string, unknown>) => ({ ...c, aud: 'someone-else' }), 'aud'],
    ['a wrong nonce', (c: Record<string, unknown>) => ({ ...c, nonce: 'not-the-nonce' }), 'nonce'],
    ['a wrong iss', (c: Record<string, unknown>) => ({ ...c, iss: 'https://evil.example' }), 'iss'],
    [
      'an expired token',
      (c: Record<string, unknown>) => ({ ...c, exp: Math.floor(Date.now() / 1000) - 3600, iat: Math.floor(Date.now() / 1000) - 7200 }),
      'exp',
    ],
  ])('an ID token with %s: error redirect, nothing issued', async (_name, change, claim) => {
    tamper = change;
    const logged = s.stack.logs.length;
    const hop = await approveAndSignIn(new UserAgent(), base, authorizeUrl(base, standardParams(base, clientId, pkce())));
    expect(tamper).toBeUndefined();
    const back = clientReceived(hop);
    expect(back.get('error')).toBe('access_denied');
    expect(back.get('code')).toBeNull();
    const refusal = s.stack.logs.slice(logged).find((l) => l.includes('sign-in at the identity provider refused'));
    expect(JSON.parse(refusal!).reason).toContain(`(claim "${claim}")`);
  });
});

describe('sign-in refused by configuration, and an IdP that is down', () => {
  it.each([
    ['a user outside the allowed email domains', { allowedEmailDomains: ['corp.example'] }, 'email domain not allowed'],
    ['a user without the required group', { requiredGroup: 'admins' }, 'required group missing'],
    ['an ID token algorithm that is not pinned', { algorithms: ['ES256'] }, 'algorithm RS256 is not allowed'],
  ])('%s: access_denied, nothing issued', async (_name, idpConfig, reason) => {
    const other = await startSignInStack({ idp: idpConfig });
    try {
      const id = await registerPublicClient(other.base);
      const hop = await approveAndSignIn(new UserAgent(), other.base, authorizeUrl(other.base, standardParams(other.base, id, pkce())));
      const back = clientReceived(hop);
      expect(back.get('error')).toBe('access_denied');
      expect(back.get('code')).toBeNull();
      expect(other.stack.logs.some((l) => l.includes(reason))).toBe(true);
    } finally {
      await other.close();
    }
  });

  describe.each([
    ['refuses connections', 'closed'],
    ['accepts connections and never answers', 'silent'],
  ])('an IdP that %s', (_name, kind) => {
    let stack: Stack;
    let silent: Server | undefined;
    beforeAll(async () => {
      silent = createServer(() => undefined); // never answers
      silent.listen(0, '127.0.0.1');
      await once(silent, 'listening');
      const port = (silent.address() as AddressInfo).port;
      if (kind === 'closed') {
        await new Promise((r) => silent!.close(r));
        silent = undefined;
      }
      stack = await startStack({
        config: { idp: { issuer: `http://127.0.0.1:${port}`, clientId: 'x', clientSecret: 'y', requestTimeoutMs: 300 } },
      });
    });
    afterAll(async () => {
      await stack?.close();
      silent?.closeAllConnections();
      await new Promise((r) => (silent ? silent.close(r) : r(undefined)));
    });

    it('Approve answers a 503 page within the bound, not a hang', async () => {
      const b = stack.sidecar.publicUrl();
      const id = await registerPublicClient(b);
      const agent = new UserAgent();
      const page = await agent.request(authorizeUrl(b, standardParams(b, id, pkce())));
      const res = await agent.request(`${b}/authorize/consent`, { form: { request: consentRequestId(page.body), decision: 'approve' } });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBeTruthy();
      expect(res.body).toContain('identity provider cannot be reached');
    });
  });
});
