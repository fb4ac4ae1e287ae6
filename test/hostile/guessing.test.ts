// Token guessing through /introspect and /revoke: both count towards the same per-address failure
// limit as /mcp, an address whose failures are refused on /mcp has them refused there too (a valid
// credential's own requests are still served), and /revoke is no existence oracle below the limit
// (RFC 7009 §2.2): the answer depends on the caller's authentication, never on the token.

import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEchoUpstream, type FakeUpstream } from '../support/fake-upstreams.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { basicAuth, formFrom, sendFrom, type Answer } from './from-address.ts';

const LIMIT = 3;
const guess = () => randomBytes(32).toString('hex');

describe('token guessing through /introspect and /revoke', () => {
  let echo: FakeUpstream;
  let stack: Stack;
  let client: { clientId: string; clientSecret: string };
  let validToken: string;
  /** A token of `client` itself, which it may introspect. */
  let ownToken: string;

  beforeAll(async () => {
    echo = await startEchoUpstream();
    stack = await startStack({ upstreamUrl: echo.url, config: { rateLimits: { failedAuthPerMinute: LIMIT } } });
    client = (await stack.admin('createClient', { clientName: 'resource-server' })).body;
    ({ token: validToken } = await stack.issueOAuthToken());
    ownToken = (
      await formFrom(
        '127.0.0.1',
        `${stack.proxyUrl}/token`,
        { grant_type: 'client_credentials' },
        basicAuth(client.clientId, client.clientSecret),
      )
    ).json().access_token;
  });
  afterAll(async () => {
    await stack.close();
    await echo.close();
  });

  const mcp = (from: string, token: string) =>
    sendFrom(from, stack.mcpUrl, { headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: '{}' });
  const introspect = (from: string, token: string) =>
    formFrom(from, `${stack.proxyUrl}/introspect`, { token }, basicAuth(client.clientId, client.clientSecret));
  const revoke = (from: string, token: string, headers: Record<string, string> = {}) =>
    formFrom(from, `${stack.proxyUrl}/revoke`, { token }, headers);

  /** Sends `attempt` until the address is refused; bounded. Returns how many were answered before the 429. */
  async function untilRefused(attempt: () => Promise<Answer>, bound = 20): Promise<number> {
    for (let i = 0; i < bound; i++) if ((await attempt()).status === 429) return i;
    throw new Error(`not refused after ${bound} attempts`);
  }

  it('an address over the limit on /mcp has its misses on /introspect and /revoke refused too; its own tokens are answered', async () => {
    const from = '127.0.0.2';
    await untilRefused(() => mcp(from, guess()));
    const introspected = await introspect(from, guess());
    expect(introspected.status).toBe(429);
    expect(Number(introspected.headers['retry-after'])).toBeGreaterThan(0);
    expect((await revoke(from, guess(), basicAuth(client.clientId, client.clientSecret))).status).toBe(429);
    // The client's question about its own token is no failure: answered from that address too.
    expect((await introspect(from, ownToken)).json()).toMatchObject({ active: true });
    expect((await introspect('127.0.0.9', ownToken)).json()).toMatchObject({ active: true });
  });

  it('introspecting tokens one does not hold counts as failed authentication, and then /mcp refuses the address', async () => {
    const from = '127.0.0.3';
    const answered = await untilRefused(() => introspect(from, guess()));
    expect(answered).toBe(LIMIT + 1);
    expect((await mcp(from, guess())).status).toBe(429);
    expect((await mcp(from, validToken)).status).toBe(200);
    expect((await mcp('127.0.0.10', validToken)).status).toBe(200);
  });

  it('wrong client secrets at /introspect count too', async () => {
    const from = '127.0.0.4';
    const wrong = () => formFrom(from, `${stack.proxyUrl}/introspect`, { token: ownToken }, basicAuth(client.clientId, 'e'.repeat(64)));
    expect(await untilRefused(wrong)).toBe(LIMIT + 1);
  });

  it('/revoke gives the same answer whether or not the token exists, and revoking nothing counts as a failure', async () => {
    const from = '127.0.0.5';
    const other = (await stack.admin('createClient', { clientName: 'other' })).body;
    // Anonymous: an existing OAuth token and an unknown one get the same answer; neither is revoked.
    const existing = await revoke(from, validToken);
    const unknown = await revoke(from, guess());
    expect([existing.status, existing.text]).toEqual([200, '']);
    expect([unknown.status, unknown.text]).toEqual([existing.status, existing.text]);
    // Another client's token: same answer again, and nothing revoked.
    const foreign = await revoke(from, validToken, basicAuth(other.clientId, other.clientSecret));
    expect([foreign.status, foreign.text]).toEqual([200, '']);
    expect((await mcp('127.0.0.1', validToken)).status).toBe(200);
    // Those were three misses: the fourth passes the limit, and the address is refused from then on.
    await revoke(from, guess());
    expect((await revoke(from, guess())).status).toBe(429);
    expect((await mcp(from, guess())).status).toBe(429);
    expect((await mcp(from, validToken)).status).toBe(200);
  });
});
