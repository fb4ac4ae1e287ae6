// Mode `idp` over real HTTP: a real OpenID provider (oidc-provider), the sidecar on real Redis, an echo
// upstream that reports what it received. The user's own IdP access token, kept (encrypted) from
// browser sign-in, reaches the upstream on every forwarded request and nowhere else; a user without
// one gets through the handshake with no credential header, then the MCP error -32042 with a link
// (the tool error naming it, to a client that declared no URL elicitation), and nothing is forwarded.

import { randomBytes } from 'node:crypto';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateToken, hashToken } from '../../src/model/credentials.ts';
import { URL_ELICITATION_REQUIRED } from '../../src/policy/enforce.ts';
import { startEchoUpstream, type FakeUpstream } from '../support/fake-upstreams.ts';
import { keysUnder, rawRedis } from '../support/redis.ts';
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
import { DEMO_USER } from '../../demo/idp.ts';
import { storeUserToken } from '../support/user-tokens.ts';

const KEY = randomBytes(32).toString('hex');
let s: SignInStack;
let echo: FakeUpstream;
let base: string;
let userToken: string;

/** A call as an MCP client makes it (Streamable HTTP: JSON-RPC POST, both media types accepted). */
function call(
  token: string,
  body: unknown = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'echo', arguments: { text: 'hi' } } },
  session?: string,
) {
  return fetch(`${base}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(session !== undefined ? { 'mcp-session-id': session } : {}),
    },
    body: JSON.stringify(body),
  });
}

/** `initialize` declaring URL-mode elicitation (MCP 2025-11-25 ClientCapabilities.elicitation.url): the session minted. */
async function initialize(token: string): Promise<string> {
  const res = await call(token, {
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: { elicitation: { url: {} } }, clientInfo: { name: 'test', version: '1' } },
  });
  expect(res.status).toBe(200);
  await res.text();
  return res.headers.get('mcp-session-id')!;
}

/** The link a tools/call answer names: the tool error's text (a client that declared no URL elicitation). */
async function toolErrorLink(res: Response): Promise<string> {
  const body = (await res.json()) as { result: { isError: boolean; content: Array<{ text: string }> } };
  expect(body.result.isError).toBe(true);
  return /open (\S+) in a browser/.exec(body.result.content[0]!.text)![1]!;
}

beforeAll(async () => {
  echo = await startEchoUpstream({ mintSessions: true });
  s = await startSignInStack({
    upstreamUrl: echo.url,
    connectCallback: true,
    config: { upstream: { credentials: { mode: 'idp', key: KEY } }, proxy: { forwardAuth: true } },
  });
  base = s.base;
  const clientId = await registerPublicClient(base);
  const p = pkce();
  const hop = await approveAndSignIn(new UserAgent(), base, authorizeUrl(base, standardParams(base, clientId, p)));
  const code = clientReceived(hop).get('code')!;
  const tokens = await tokenRequest(base, {
    grant_type: 'authorization_code',
    code,
    redirect_uri: CLIENT_REDIRECT,
    client_id: clientId,
    code_verifier: p.verifier,
  });
  userToken = tokens.body.access_token as string;
});
afterAll(async () => {
  await s?.close();
  await echo?.close();
});

describe('upstream credentials, mode idp', () => {
  it("the signed-in user's IdP access token reaches the upstream as Authorization: Bearer; the IdP says it is that user's", async () => {
    const before = echo.seen.length;
    const res = await call(userToken);
    expect(res.status).toBe(200);
    await res.text();
    const seen = echo.seen.slice(before);
    expect(seen).toHaveLength(1);
    const forwarded = String(seen[0]!.headers.authorization);
    expect(forwarded).toMatch(/^Bearer \S+$/);
    const idpToken = forwarded.slice('Bearer '.length);
    expect(idpToken).not.toBe(userToken);
    // The IdP's own userinfo endpoint accepts it as the demo user's access token.
    const userinfo = await fetch(`${s.idp.issuer}/me`, { headers: { authorization: `Bearer ${idpToken}` } });
    expect(userinfo.status).toBe(200);
    expect(((await userinfo.json()) as { sub: string }).sub).toBe(DEMO_USER.sub);
    // Never in a log line, never in clear in Redis.
    expect(s.stack.logs.join('\n')).not.toContain(idpToken);
    const raw = await rawRedis();
    try {
      const dump: string[] = [];
      for (const key of await keysUnder(raw, s.stack.prefix))
        dump.push(((await raw.dumpBuffer(key)) ?? Buffer.alloc(0)).toString('latin1'));
      expect(dump.join('\n')).not.toContain(idpToken);
      expect((await keysUnder(raw, s.stack.prefix)).some((k) => k.includes('upstreamCredentials:'))).toBe(true);
    } finally {
      await raw.quit();
    }
  });

  it('a GET stream of the user carries it too; a client-sent credential header never passes', async () => {
    const before = echo.seen.length;
    const res = await fetch(`${base}/mcp`, { headers: { authorization: `Bearer ${userToken}`, accept: 'text/event-stream' } });
    await res.text();
    expect(echo.seen.slice(before)[0]!.headers.authorization).toMatch(/^Bearer /);
    expect(echo.seen.slice(before)[0]!.headers.authorization).not.toBe(`Bearer ${userToken}`);
  });

  it('a user with no IdP token kept gets HTTP 200 with the MCP error -32042, a link bound to them, and nothing is forwarded', async () => {
    const raw = await storeUserToken(s.stack, 'exchanged-user', { issuer: s.idp.issuer, lifetimeMs: 3_600_000 });
    // The handshake goes on without the user's credential, and without any (no service token configured).
    let before = echo.seen.length;
    const session = await initialize(raw);
    expect(echo.seen.length).toBe(before + 1);
    expect(echo.seen.at(-1)!.headers.authorization).toBeUndefined();
    before = echo.seen.length;
    const res = await call(raw, undefined, session);
    expect(res.status).toBe(200);
    // The shape of MCP 2025-11-25's URLElicitationRequiredError (the SDK's UrlElicitationRequiredError).
    const body = (await res.json()) as {
      jsonrpc: string;
      id: number;
      error: { code: number; message: string; data: { elicitations: Array<Record<string, string>> } };
    };
    expect(body).toMatchObject({ jsonrpc: '2.0', id: 7, error: { code: URL_ELICITATION_REQUIRED } });
    const [elicitation] = body.error.data.elicitations;
    expect(elicitation).toMatchObject({
      mode: 'url',
      elicitationId: expect.stringMatching(/^[0-9a-f]{32}$/),
      url: expect.stringMatching(new RegExp(`^${base}/connect/`)),
    });
    expect(body.error.message).toContain(elicitation!.url);
    expect(echo.seen.length).toBe(before);
    // Two refusals, two links: each is single use.
    const again = (await (await call(raw, undefined, session)).json()) as typeof body;
    expect(again.error.data.elicitations[0]!.url).not.toBe(elicitation!.url);
  });

  it('for that user, the GET stream and lifecycle notifications go on without a credential; a batch, a body that is not JSON-RPC, or a body on another method gets the 401 challenge', async () => {
    const raw = await storeUserToken(s.stack, 'exchanged-user-2', { issuer: s.idp.issuer, lifetimeMs: 3_600_000 });
    let before = echo.seen.length;
    const get = await fetch(`${base}/mcp`, { headers: { authorization: `Bearer ${raw}`, accept: 'text/event-stream' } });
    expect(get.status).toBe(200);
    await get.text();
    const notification = await call(raw, { jsonrpc: '2.0', method: 'notifications/initialized' });
    expect(notification.status).toBe(200);
    await notification.text();
    expect(echo.seen.slice(before).map((r) => [r.method, r.headers.authorization])).toEqual([
      ['GET', undefined],
      ['POST', undefined],
    ]);
    before = echo.seen.length;
    const tool = { jsonrpc: '2.0', method: 'tools/call', params: { name: 'echo', arguments: {} } };
    for (const body of [
      [
        { ...tool, id: 1 },
        { ...tool, id: 2 },
      ],
      tool,
      'not JSON-RPC',
    ]) {
      const refused = await call(raw, body);
      expect(refused.status).toBe(401);
      expect(refused.headers.get('www-authenticate')).toContain('resource_metadata=');
      await refused.text();
    }
    // A call in the body of another method is never decided: never forwarded either (an upstream that
    // ignores the method, as Go's encoding/json readers do, would run it with the service token).
    for (const method of ['PUT', 'DELETE', 'PATCH']) {
      const refused = await fetch(`${base}/mcp`, {
        method,
        headers: { authorization: `Bearer ${raw}`, 'content-type': 'application/json' },
        body: JSON.stringify({ ...tool, id: 3 }),
      });
      expect(refused.status).toBe(401);
      await refused.text();
    }
    expect(echo.seen.length).toBe(before);
  });

  it('a token without a user (client_credentials) gets no user credential, and no client-sent Authorization', async () => {
    const { token } = await s.stack.issueOAuthToken();
    const before = echo.seen.length;
    const res = await call(token);
    expect(res.status).toBe(200);
    await res.text();
    expect(echo.seen.slice(before)[0]!.headers.authorization).toBeUndefined();
  });

  it("forward-auth: /authz's 200 carries the same credential header for the ingress to copy; a user without one gets the marked 401", async () => {
    // What nginx's auth_request sends (examples/nginx/mcp.conf): the client's headers plus the original request.
    const ask = (token: string) =>
      fetch(`${base}/authz`, { headers: { authorization: `Bearer ${token}`, 'x-original-method': 'POST', 'x-original-uri': '/mcp' } });
    const allowed = await ask(userToken);
    expect(allowed.status).toBe(200);
    const header = allowed.headers.get('authorization');
    expect(header).toMatch(/^Bearer \S+$/);
    expect(header).not.toBe(`Bearer ${userToken}`);
    const userinfo = await fetch(`${s.idp.issuer}/me`, { headers: { authorization: header! } });
    expect(userinfo.status).toBe(200);
    const raw = await storeUserToken(s.stack, 'exchanged-user-3', { issuer: s.idp.issuer, lifetimeMs: 3_600_000 });
    const refused = await ask(raw);
    expect(refused.status).toBe(401);
    expect(refused.headers.get('authorization')).toBeNull();
    // Marked, for the ingress to hand the request to /authz-connect (which answers -32042); an allowing answer is not.
    expect(refused.headers.get('x-mcp-auth-connect')).toBe('1');
    expect(allowed.headers.get('x-mcp-auth-connect')).toBeNull();
    const unknown = await ask(generateToken());
    expect(unknown.status).toBe(401);
    expect(unknown.headers.get('x-mcp-auth-connect')).toBeNull();
  });

  it('the link of mode idp signs in at the IdP again: kept for the same user, refused for another', async () => {
    // Another user's link: the IdP signs in the demo user, who is not that user.
    const other = await storeUserToken(s.stack, 'someone-else', { issuer: s.idp.issuer, lifetimeMs: 3_600_000 });
    const otherLink = await toolErrorLink(await call(other));
    const agent = new UserAgent();
    const refused = await agent.follow(await agent.request(otherLink));
    expect(refused.status).toBe(403);
    expect(refused.body).toContain('another user');
    expect(await s.stack.store.getUpstreamCredential('someone-else', s.idp.issuer, 'idp')).toBeNull();
    // The demo user's kept tokens are gone (as after a refusal to refresh): the link brings them back.
    expect(await s.stack.store.deleteUpstreamCredentials(DEMO_USER.sub)).toBeGreaterThan(0);
    const link = await toolErrorLink(await call(userToken));
    const browser = new UserAgent();
    const done = await browser.follow(await browser.request(link));
    expect(done.status).toBe(200);
    const before = echo.seen.length;
    const again = await call(userToken);
    expect(again.status).toBe(200);
    await again.text();
    expect(echo.seen.slice(before)[0]!.headers.authorization).toMatch(/^Bearer \S+$/);
  });

  // Last: it moves the clock past a ticket's minute.
  it("forward-auth: the marked 401's ticket takes on the request it was given for at /authz-connect, once, as that user only", async () => {
    const subject = `ticket-user-${randomBytes(4).toString('hex')}`;
    const raw = await storeUserToken(s.stack, subject, { issuer: s.idp.issuer, lifetimeMs: 3_600_000 });
    /** /authz's marked 401 for `method` (presenting `session`): its ticket. */
    const ticketFor = async (method = 'POST', session?: string, token = raw) => {
      const refused = await fetch(`${base}/authz`, {
        headers: {
          authorization: `Bearer ${token}`,
          'x-original-method': method,
          'x-original-uri': '/mcp',
          ...(session !== undefined ? { 'mcp-session-id': session } : {}),
        },
      });
      expect(refused.status).toBe(401);
      expect(refused.headers.get('x-mcp-auth-connect')).toBe('1');
      return refused.headers.get('x-mcp-auth-connect-ticket')!;
    };
    // A call whose client declares URL elicitation on the request itself (the 2026-07-28 envelope).
    const body = {
      jsonrpc: '2.0',
      id: 'ticketed',
      method: 'tools/call',
      params: {
        name: 'echo',
        arguments: {},
        _meta: { 'io.modelcontextprotocol/clientCapabilities': { elicitation: { url: {} } } },
      },
    };
    /** What an ingress sends: the client's request (no credential of its own needed) with the ticket. */
    const answer = (ticket: string | undefined, method = 'POST', extra: { body?: unknown; session?: string } = {}) =>
      fetch(`${base}/authz-connect`, {
        method,
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...(ticket !== undefined ? { 'x-mcp-auth-connect-ticket': ticket } : {}),
          ...(extra.session !== undefined ? { 'mcp-session-id': extra.session } : {}),
        },
        ...(method === 'POST' ? { body: JSON.stringify(extra.body ?? body) } : {}),
      });
    const challenged = async (res: Response) => {
      await res.text();
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toMatch(/^Bearer realm="mcp", resource_metadata=/);
    };
    let before = echo.seen.length;

    // The handshake is forwarded by the sidecar, as the ticket's user, with no credential and no ticket.
    const hello = await answer(await ticketFor(), 'POST', { body: { jsonrpc: '2.0', id: 0, method: 'initialize', params: {} } });
    expect(hello.status).toBe(200);
    await hello.text();
    const session = hello.headers.get('mcp-session-id')!;
    expect(session).toBeTruthy();
    expect(echo.seen.length).toBe(before + 1);
    const forwarded = echo.seen.at(-1)!.headers;
    expect(forwarded['x-mcp-auth-subject']).toBe(subject);
    expect(forwarded.authorization).toBeUndefined();
    expect(Object.keys(forwarded).filter((n) => n.startsWith('x-mcp-auth-connect'))).toEqual([]);
    // The session the upstream answered is recorded for that user: a ticket for the session takes on its GET stream.
    const stream = await answer(await ticketFor('GET', session), 'GET', { session });
    expect(stream.status).toBe(200);
    await stream.text();
    expect(echo.seen.length).toBe(before + 2);
    before = echo.seen.length;

    const ticket = await ticketFor();
    expect(ticket).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
    const first = await answer(ticket);
    expect(first.status).toBe(200);
    const answered = (await first.json()) as { id: string; error: { code: number; data: { elicitations: Array<{ url: string }> } } };
    expect(answered.id).toBe('ticketed');
    expect(answered.error.code).toBe(URL_ELICITATION_REQUIRED);
    const link = answered.error.data.elicitations[0]!.url;
    expect(link.startsWith(`${base}/connect/`)).toBe(true);
    // The link is that user's (the person at it must sign in as them, as a link from /mcp).
    expect(decodeJwt(link.slice(`${base}/connect/`.length)).sub).toBe(subject);

    // Used once; no ticket, an altered one, the link in its place: the 401 challenge.
    await challenged(await answer(ticket));
    await challenged(await answer(undefined));
    const fresh = await ticketFor();
    const [head, payload, signature] = fresh.split('.');
    const other = Buffer.from(JSON.stringify({ ...decodeJwt(fresh), sub: DEMO_USER.sub })).toString('base64url');
    await challenged(await answer(`${head}.${other}.${signature}`));
    await challenged(await answer(link.slice(`${base}/connect/`.length)));
    // A ticket is no link: it starts no connection.
    const agent = new UserAgent();
    const asLink = await agent.request(`${base}/connect/${fresh}`);
    expect(asLink.status).toBe(400);
    // Put on another request than /authz was asked about (another method, a session it did not
    // present): the challenge, the ticket used up all the same.
    await challenged(await answer(fresh, 'GET'));
    await challenged(await answer(`${head}.${payload}.${signature}`));
    await challenged(await answer(await ticketFor(), 'POST', { session }));
    await challenged(await answer(await ticketFor('GET', session), 'GET'));
    // The token revoked after /authz gave the ticket: refused where the ticket is used.
    const revokedTicket = await ticketFor();
    expect(await s.stack.store.revokeUserToken(hashToken(raw))).toBe(true);
    await challenged(await answer(revokedTicket));
    // A ticket works for a minute.
    const other2 = generateToken();
    await s.stack.store.putUserToken({
      tokenHash: hashToken(other2),
      subject,
      issuer: s.idp.issuer,
      createdAt: s.stack.clock.now(),
      expiresAt: s.stack.clock.now() + 3_600_000,
    });
    const late = await ticketFor('POST', undefined, other2);
    s.stack.clock.advance(61_000);
    await challenged(await answer(late));
    expect(echo.seen.length).toBe(before);
  });
});
