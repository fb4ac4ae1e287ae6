// The same hostile requests through both front doors: `/mcp` (the sidecar forwards) and `/authz` (an
// ingress asks, as nginx's auth_request does, and forwards itself). Each door must answer them the
// same way: one answer for unknown, revoked, expired and malformed tokens (no oracle), the per-address
// lockout, the Host and Origin checks, and no client-sent identity header in any spelling standing in
// for the sidecar's (removed before the upstream for /mcp; the request refused by /authz, whose answer
// the ingress copies).

import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashToken, TTL_7_DAYS } from '../../src/model/credentials.ts';
import { startEchoUpstream, type FakeUpstream } from '../support/fake-upstreams.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { sendFrom } from './from-address.ts';
import { cgiView, exchange } from './raw-http.ts';

const LIMIT = 3;
const guess = () => randomBytes(32).toString('hex');

type Door = 'mcp' | 'authz';

/** The request line and headers that ask `door` about a POST /mcp carrying `headers`. */
function through(door: Door, headers: Array<[string, string]>): { target: string; method: string; headers: Array<[string, string]> } {
  if (door === 'mcp')
    return { method: 'POST', target: '/mcp', headers: [['Content-Type', 'application/json'], ['Content-Length', '2'], ...headers] };
  return { method: 'GET', target: '/authz', headers: [['X-Original-Method', 'POST'], ['X-Original-URI', '/mcp'], ...headers] };
}

/** A raw response head's header lines as name/value pairs, in order, as sent. */
function headerLines(raw: string): string[] {
  const head = raw.slice(0, raw.indexOf('\r\n\r\n'));
  return head
    .split('\r\n')
    .slice(1)
    .flatMap((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1).trim()]);
}

describe.each<Door>(['mcp', 'authz'])('hostile requests through /%s', (door) => {
  let echo: FakeUpstream;
  let stack: Stack;
  let token: string;
  let clientId: string;
  let port: number;
  let host: string;

  beforeAll(async () => {
    echo = await startEchoUpstream();
    stack = await startStack({
      upstreamUrl: echo.url,
      config: { proxy: { forwardAuth: true, publicUrl: 'https://mcp.example.test' }, rateLimits: { failedAuthPerMinute: LIMIT } },
    });
    ({ token, clientId } = await stack.issueOAuthToken());
    port = Number(new URL(stack.proxyUrl).port);
    host = new URL(stack.proxyUrl).host;
  });
  afterAll(async () => {
    await stack.close();
    await echo.close();
  });

  async function send(headers: Array<[string, string]>, hostHeader = host) {
    const r = through(door, headers);
    const lines = [
      `${r.method} ${r.target} HTTP/1.1`,
      `Host: ${hostHeader}`,
      'Connection: close',
      ...r.headers.map(([n, v]) => `${n}: ${v}`),
    ];
    const before = echo.seen.length;
    const { responses, raw } = await exchange(port, `${lines.join('\r\n')}\r\n\r\n${door === 'mcp' ? '{}' : ''}`);
    return { status: responses[0]?.status, body: responses[0]?.body ?? '', lines: headerLines(raw), forwarded: echo.seen.length > before };
  }

  it('one answer for unknown, revoked, expired and malformed tokens: no oracle', async () => {
    const now = stack.clock.now();
    const revoked = guess();
    await stack.store.putUserToken({
      tokenHash: hashToken(revoked),
      subject: 'alice',
      issuer: 'https://idp.example',
      createdAt: now,
      expiresAt: now + TTL_7_DAYS,
    });
    await stack.store.revokeUserToken(hashToken(revoked));
    const expired = guess();
    await stack.store.putUserToken({
      tokenHash: hashToken(expired),
      subject: 'bob',
      issuer: 'https://idp.example',
      createdAt: now - 2000,
      expiresAt: now - 1000,
    });
    const { clientId: deleted, token: ofDeleted } = await stack.issueOAuthToken();
    await stack.admin('deleteClient', { clientId: deleted });
    const answers = [];
    for (const authorization of [
      `Bearer ${guess()}`,
      `Bearer ${revoked}`,
      `Bearer ${expired}`,
      `Bearer ${ofDeleted}`,
      'Bearer abc',
      `Basic ${guess()}`,
      `Bearer ${guess().toUpperCase()}`,
    ]) {
      // Each from its own address: the lockout must not decide this test.
      const from = `127.0.${door === 'mcp' ? 1 : 2}.${answers.length + 10}`;
      const r = through(door, [['Authorization', authorization]]);
      const answer = await sendFrom(from, `${stack.proxyUrl}${r.target}`, {
        method: r.method,
        headers: Object.fromEntries(r.headers),
        ...(door === 'mcp' ? { body: '{}' } : {}),
      });
      answers.push({
        status: answer.status,
        challenge: answer.headers['www-authenticate'],
        body: answer.text,
        identity: Object.keys(answer.headers).filter((n) => n.startsWith('x-mcp-auth')),
      });
    }
    expect(answers[0]).toEqual({
      status: 401,
      challenge:
        'Bearer realm="mcp", resource_metadata="https://mcp.example.test/.well-known/oauth-protected-resource/mcp", error="invalid_token", error_description="the access token is invalid, expired or revoked"',
      body: JSON.stringify({ error: 'invalid_token', error_description: 'the access token is invalid, expired or revoked' }),
      identity: [],
    });
    for (const answer of answers) expect(answer).toEqual(answers[0]);
  });

  it('failures from an address past the limit get 429; a valid token from that address is still served', async () => {
    const from = door === 'mcp' ? '127.0.3.1' : '127.0.3.2';
    const r = (t: string) => through(door, [['Authorization', `Bearer ${t}`]]);
    const ask = (address: string, t: string) =>
      sendFrom(address, `${stack.proxyUrl}${r(t).target}`, {
        method: r(t).method,
        headers: Object.fromEntries(r(t).headers),
        ...(door === 'mcp' ? { body: '{}' } : {}),
      });
    let refusedAt = -1;
    // The proxy does not wait for the count to land: the refusal comes at the limit or soon after.
    for (let i = 0; i < LIMIT + 10 && refusedAt === -1; i++) if ((await ask(from, guess())).status === 429) refusedAt = i;
    expect(refusedAt).toBeGreaterThanOrEqual(LIMIT);
    const locked = await ask(from, guess());
    expect(locked.status).toBe(429);
    expect(Number(locked.headers['retry-after'])).toBeGreaterThan(0);
    // Behind a shared address (a NAT, an ingress not listed as trusted) the guesser's neighbours keep working.
    expect((await ask(from, token)).status).toBe(200);
    expect((await ask(from, stack.masterToken)).status).toBe(200);
    expect((await ask(door === 'mcp' ? '127.0.3.3' : '127.0.3.4', token)).status).toBe(200);
  });

  it.each(['evil.example', 'mcp.example.test.evil.example', '10.0.0.1'])('Host %s is 421 before the token is looked at', async (evil) => {
    const answer = await send([['Authorization', `Bearer ${token}`]], evil);
    expect(answer.status).toBe(421);
    expect(answer.forwarded).toBe(false);
    expect(cgiView(answer.lines).has('X_MCP_AUTH_KIND')).toBe(false);
    expect((await send([['Authorization', `Bearer ${token}`]], 'mcp.example.test')).status).toBe(200);
  });

  it('a foreign Origin is 403', async () => {
    const answer = await send([
      ['Authorization', `Bearer ${token}`],
      ['Origin', 'https://evil.example'],
    ]);
    expect(answer.status).toBe(403);
    expect(answer.forwarded).toBe(false);
  });

  it("no spelling of a client-sent identity header stands in for the sidecar's", async () => {
    const spoofed: Array<[string, string]> = [
      ['X-MCP-Auth-Kind', 'master'],
      ['x-mcp-auth-subject', 'admin'],
      ['x_mcp_auth_kind', 'master'],
      ['X_MCP_AUTH_SUBJECT', 'admin'],
      ['x_Mcp_Auth_Client_Id', 'victim-client'],
      ['x_mcp_auth_scope', 'admin:all'],
      ['X-MCP_Auth-Scope', 'admin:mixed'],
      ['X-MCP-Auth-Assertion', 'forged'],
    ];
    const answer = await send([['Authorization', `Bearer ${token}`], ...spoofed]);
    if (door === 'authz') {
      // The ingress passed them on (it could not remove them all): the check refuses the request, and
      // its answer states no identity for the ingress to copy.
      expect(answer.status).toBe(400);
      expect([...cgiView(answer.lines).keys()].filter((k) => k.startsWith('X_MCP_AUTH'))).toEqual([]);
      const refused = await send([['Authorization', `Bearer ${guess()}`], ...spoofed]);
      expect(refused.status).toBe(400);
      expect([...cgiView(refused.lines).keys()].filter((k) => k.startsWith('X_MCP_AUTH'))).toEqual([]);
      return;
    }
    expect(answer.status).toBe(200);
    // What the upstream received.
    const env = cgiView(echo.seen.at(-1)!.rawHeaders);
    expect(env.get('X_MCP_AUTH_KIND')).toEqual(['oauth']);
    expect(env.get('X_MCP_AUTH_SUBJECT')).toEqual([clientId]);
    expect(env.get('X_MCP_AUTH_CLIENT_ID')).toEqual([clientId]);
    expect(env.get('X_MCP_AUTH_SCOPE')).toBeUndefined();
    expect(env.get('X_MCP_AUTH_ASSERTION')).toBeUndefined();
    // A refusal states no identity at all, whatever the client sent.
    const refused = await send([['Authorization', `Bearer ${guess()}`], ...spoofed]);
    expect(refused.status).toBe(401);
    expect([...cgiView(refused.lines).keys()].filter((k) => k.startsWith('X_MCP_AUTH'))).toEqual([]);
  });
});
