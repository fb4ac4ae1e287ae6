// Whoever knows a client id must not be able to lock that client out. /token counts failed client
// authentications per source address (the proxy's failed-auth limit) and token requests per client
// and address, never per client alone: 65 wrong secrets from one address leave the real client
// untouched, at another address and at the guessing one too; the guesser's failures get 429.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
import { startStack, type Stack } from '../support/stack.ts';
import { UserAgent } from '../support/user-agent.ts';
import { basicAuth, formFrom, sendFrom } from './from-address.ts';

const ATTACKER = '127.0.0.2';
const OWNER = '127.0.0.1';

describe('client lockout through /token', () => {
  let stack: Stack;
  let client: { clientId: string; clientSecret: string };

  beforeAll(async () => {
    stack = await startStack({ config: { rateLimits: { failedAuthPerMinute: 20, tokenRequestsPerMinute: 30 } } });
    client = (await stack.admin('createClient', { clientName: 'victim' })).body;
  });
  afterAll(async () => {
    await stack.close();
  });

  const token = (from: string, secret: string) =>
    formFrom(from, `${stack.proxyUrl}/token`, { grant_type: 'client_credentials' }, basicAuth(client.clientId, secret));

  it('65 wrong secrets from one address: those failures are refused, the client with its secret is not, wherever it is', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 65; i++) statuses.push((await token(ATTACKER, 'f'.repeat(64))).status);
    expect(statuses.slice(0, 20).every((s) => s === 401)).toBe(true);
    expect(statuses.slice(21)).toEqual(Array(44).fill(429));
    // The refused ones are answered without an audit line; the 21 answered failures each have one.
    const audited = stack.logs.filter((l) => l.includes('"msg":"audit"') && l.includes('"action":"token.client_credentials"'));
    expect(audited.filter((l) => l.includes('"result":"invalid_client"'))).toHaveLength(21);
    expect(audited.filter((l) => l.includes('"result":"too_many_requests"'))).toEqual([]);

    const owner = await token(OWNER, client.clientSecret);
    expect(owner.status).toBe(200);
    expect(owner.json().access_token).toMatch(/^[0-9a-f]{64}$/);

    // The guessing address: its wrong secrets are refused, and so are its bad tokens on /mcp (one
    // failure limit per address); the right secret and a valid token from it are served (someone
    // behind the same NAT is not locked out).
    const refused = await token(ATTACKER, 'f'.repeat(64));
    expect(refused.status).toBe(429);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    const mcpWrong = await sendFrom(ATTACKER, stack.mcpUrl, {
      headers: { authorization: `Bearer ${'e'.repeat(64)}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(mcpWrong.status).toBe(429);
    expect((await token(ATTACKER, client.clientSecret)).status).toBe(200);
    // The reference upstream answers (400 for a body that is no JSON-RPC: it was forwarded).
    const mcp = await sendFrom(ATTACKER, stack.mcpUrl, {
      headers: { authorization: `Bearer ${owner.json().access_token}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(mcp.status).toBe(400);

    // The window ends: failures are answered 401 again.
    stack.clock.advance(60_000);
    expect((await token(ATTACKER, 'f'.repeat(64))).status).toBe(401);
  });

  it('token requests are limited per client and address: one address using up its requests leaves the client free elsewhere', async () => {
    const other = (await stack.admin('createClient', { clientName: 'busy' })).body;
    const ask = (from: string) =>
      formFrom(from, `${stack.proxyUrl}/token`, { grant_type: 'client_credentials' }, basicAuth(other.clientId, other.clientSecret));
    const statuses: number[] = [];
    for (let i = 0; i < 31; i++) statuses.push((await ask('127.0.0.3')).status);
    expect(statuses.slice(0, 30).every((s) => s === 200)).toBe(true);
    expect(statuses[30]).toBe(429);
    expect((await ask('127.0.0.4')).status).toBe(200);
  });
});

// A public client (no secret, as MCP clients register) is named, not authenticated: its grant is its
// credential. Someone behind the same address who knows its id sends grants that fail; they count as
// that address's failures, and use up nothing of the client's token requests, which count once they
// succeed. The real user's sign-in and refreshes from that address go through, up to the limit.
describe('a public client through /token', () => {
  let s: SignInStack;
  beforeAll(async () => {
    s = await startSignInStack({ config: { rateLimits: { failedAuthPerMinute: 100, tokenRequestsPerMinute: 4 } } });
  });
  afterAll(() => s?.close());

  it('failed grants naming its id use up none of its requests; its successful ones do', async () => {
    const publicId = await registerPublicClient(s.base);
    const guess = () =>
      formFrom(OWNER, `${s.base}/token`, { grant_type: 'refresh_token', refresh_token: 'f'.repeat(64), client_id: publicId });
    for (let i = 0; i < 10; i++) expect((await guess()).status).toBe(400);

    // The user behind the same address signs in and refreshes: 4 token requests, the limit.
    const p = pkce();
    const params = standardParams(s.base, publicId, p);
    const code = clientReceived(await approveAndSignIn(new UserAgent(), s.base, authorizeUrl(s.base, params))).get('code')!;
    const redeemed = await tokenRequest(s.base, {
      grant_type: 'authorization_code',
      code,
      redirect_uri: CLIENT_REDIRECT,
      client_id: publicId,
      code_verifier: p.verifier,
    });
    expect(redeemed.status).toBe(200);
    let refresh = (redeemed.body as { refresh_token: string }).refresh_token;
    const refreshOnce = () => tokenRequest(s.base, { grant_type: 'refresh_token', refresh_token: refresh, client_id: publicId });
    for (let i = 0; i < 3; i++) {
      const next = await refreshOnce();
      expect(next.status).toBe(200);
      refresh = (next.body as { refresh_token: string }).refresh_token;
    }
    // The fifth successful request would pass the limit: refused before its grant is used.
    const limited = await refreshOnce();
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    s.stack.clock.advance(60_000);
    expect((await refreshOnce()).status).toBe(200);
  });
});
