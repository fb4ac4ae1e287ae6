// Flooding GET /authorize: every request that passes the checks leaves a pending sign-in in Redis
// for ten minutes (one address made 2,110 requests/s at 3.4 KB each). It is limited per client
// address and minute, the pending sign-ins one address or one client may hold are bounded (over a
// bound: a 429 page with Retry-After, nothing stored), and a pending record holds only what the
// later steps need. Real Redis, a real OpenID provider (the demo's, in this process).

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { rawRedis, keysUnder } from '../support/redis.ts';
import {
  authorizeUrl,
  CLIENT_REDIRECT,
  pkce,
  registerPublicClient,
  standardParams,
  startSignInStack,
  type SignInStack,
} from '../support/sign-in.ts';
import { consentRequestId, UserAgent } from '../support/user-agent.ts';
import { sendFrom } from './from-address.ts';

describe('GET /authorize floods', () => {
  const stacks: SignInStack[] = [];
  afterEach(async () => {
    while (stacks.length) await stacks.pop()!.close();
  });
  async function signInStack(rateLimits: Record<string, number>): Promise<{ s: SignInStack; clientId: string }> {
    const s = await startSignInStack({ config: { rateLimits } });
    stacks.push(s);
    return { s, clientId: await registerPublicClient(s.base) };
  }
  const authorize = (s: SignInStack, from: string, clientId: string, extra: Record<string, string> = {}) =>
    sendFrom(from, authorizeUrl(s.base, standardParams(s.base, clientId, pkce(), extra)), { method: 'GET' });
  async function pendingKeys(s: SignInStack): Promise<string[]> {
    const raw = await rawRedis();
    try {
      return (await keysUnder(raw, s.stack.prefix)).filter((k) => k.includes(':oauthAuthorizationRequests:'));
    } finally {
      await raw.quit();
    }
  }

  it('requests for a known client per address and minute: past the limit a 429 page with Retry-After, nothing stored; another address goes on', async () => {
    const { s, clientId } = await signInStack({ authorizeRequestsPerMinute: 4, pendingSignInsPerAddress: 0 });
    const statuses = [];
    for (let i = 0; i < 6; i++) statuses.push((await authorize(s, '127.0.0.2', clientId)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 429, 429]);
    const refused = await authorize(s, '127.0.0.2', clientId);
    expect(refused.headers['content-type']).toMatch(/^text\/html/);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(refused.text).toContain('Too many sign-in requests from this address');
    expect(await pendingKeys(s)).toHaveLength(4);
    expect((await authorize(s, '127.0.0.3', clientId)).status).toBe(200);
    s.stack.clock.advance(60_000);
    expect((await authorize(s, '127.0.0.2', clientId)).status).toBe(200);
  });

  // What a scanner, or a broken client, behind the same NAT as real users sends: sign-in requests for
  // applications this server does not know. Before, each counted towards the limit of real sign-ins.
  it('requests naming no known client count apart: past their limit they get a 429 page, and a real sign-in from the same address still works', async () => {
    const { s, clientId } = await signInStack({ authorizeRequestsPerMinute: 60, authorizeUnknownClientsPerMinute: 5 });
    const junk = (i: number) =>
      sendFrom('127.0.0.2', authorizeUrl(s.base, standardParams(s.base, `mcp_${i.toString(16).padStart(32, '0')}`, pkce())), {
        method: 'GET',
      });
    const statuses: number[] = [];
    for (let i = 0; i < 60; i++) statuses.push((await junk(i)).status);
    // The usual error page while within their limit (the sixth is counted over it), then the refusal.
    expect(statuses).toEqual([...new Array<number>(6).fill(400), ...new Array<number>(54).fill(429)]);
    const refused = await junk(999);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(refused.text).toContain('Too many sign-in requests for unknown applications from this address');
    // A request without any client_id is junk too.
    expect((await sendFrom('127.0.0.2', `${s.base}/authorize?response_type=code`, { method: 'GET' })).status).toBe(429);
    // The real user behind the same address: the consent page, the sign-in stored.
    for (let i = 0; i < 3; i++) expect((await authorize(s, '127.0.0.2', clientId)).status).toBe(200);
    expect(await pendingKeys(s)).toHaveLength(3);
    // Another address's junk has its own count.
    expect(
      (await sendFrom('127.0.0.3', authorizeUrl(s.base, standardParams(s.base, 'mcp_unknown', pkce())), { method: 'GET' })).status,
    ).toBe(400);
  });

  it('requests for a known client do not count towards the unknown-client limit', async () => {
    const { s, clientId } = await signInStack({
      authorizeRequestsPerMinute: 60,
      authorizeUnknownClientsPerMinute: 2,
      pendingSignInsPerAddress: 0,
    });
    for (let i = 0; i < 5; i++) expect((await authorize(s, '127.0.0.2', clientId)).status).toBe(200);
    expect(
      (await sendFrom('127.0.0.2', authorizeUrl(s.base, standardParams(s.base, 'mcp_unknown', pkce())), { method: 'GET' })).status,
    ).toBe(400);
  });

  it('pending sign-ins per address: over the bound a 429 page and nothing stored, until the oldest expires', async () => {
    const { s, clientId } = await signInStack({ pendingSignInsPerAddress: 3 });
    for (let i = 0; i < 3; i++) expect((await authorize(s, '127.0.0.2', clientId)).status).toBe(200);
    const refused = await authorize(s, '127.0.0.2', clientId);
    expect(refused.status).toBe(429);
    expect(refused.text).toContain('This address has too many sign-ins in progress');
    const retryAfter = Number(refused.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(600);
    expect(await pendingKeys(s)).toHaveLength(3);
    // Not an error redirect: nothing goes to the client's redirect URI.
    expect(refused.headers.location).toBeUndefined();
    expect((await authorize(s, '127.0.0.3', clientId)).status).toBe(200);
    s.stack.clock.advance(10 * 60_000);
    expect((await authorize(s, '127.0.0.2', clientId)).status).toBe(200);
  });

  it('a remembered consent goes straight to the IdP, and those sign-ins count towards the same bound', async () => {
    const { s, clientId } = await signInStack({ pendingSignInsPerAddress: 3 });
    const agent = new UserAgent();
    const url = () => authorizeUrl(s.base, standardParams(s.base, clientId, pkce()));
    const page = await agent.request(url());
    expect(page.status).toBe(200);
    await agent.follow(
      await agent.request(`${s.base}/authorize/consent`, {
        form: { request: consentRequestId(page.body), decision: 'approve', remember: 'yes' },
      }),
      CLIENT_REDIRECT,
    );
    // One pending sign-in so far (the consent page's); two more, remembered, go to the IdP; the next is refused.
    for (let i = 0; i < 2; i++) {
      const hop = await agent.request(url());
      expect(hop.status).toBe(302);
      expect(hop.location).toContain(new URL(s.idp.issuer).host);
    }
    const refused = await agent.request(url());
    expect(refused.status).toBe(429);
    expect(refused.body).toContain('This address has too many sign-ins in progress');
  });

  it('pending sign-ins per client, from all addresses together: over the bound a 429 page; other clients go on', async () => {
    const { s, clientId } = await signInStack({ pendingSignInsPerClient: 4 });
    for (let i = 0; i < 4; i++) expect((await authorize(s, `127.0.0.${2 + i}`, clientId)).status).toBe(200);
    const refused = await authorize(s, '127.0.0.9', clientId);
    expect(refused.status).toBe(429);
    expect(refused.text).toContain('This application has too many sign-ins in progress');
    expect(await pendingKeys(s)).toHaveLength(4);
    const other = await registerPublicClient(s.base);
    expect((await authorize(s, '127.0.0.9', other)).status).toBe(200);
  });
});

describe('the size of a pending sign-in in Redis', () => {
  let s: SignInStack;
  let clientId: string;
  beforeAll(async () => {
    s = await startSignInStack();
    clientId = await registerPublicClient(s.base, { client_name: 'A client with a name of some length, as shown on the consent page' });
  });
  afterAll(() => s?.close());

  /** MEMORY USAGE of the one pending record an /authorize with `extra` leaves. */
  async function bytesOfOne(extra: Record<string, string>): Promise<{ bytes: number; fields: string[] }> {
    const raw = await rawRedis();
    try {
      const before = new Set(await keysUnder(raw, s.stack.prefix));
      expect(
        (await sendFrom('127.0.0.1', authorizeUrl(s.base, standardParams(s.base, clientId, pkce(), extra)), { method: 'GET' })).status,
      ).toBe(200);
      const added = (await keysUnder(raw, s.stack.prefix)).filter((k) => !before.has(k) && k.includes(':oauthAuthorizationRequests:'));
      expect(added).toHaveLength(1);
      return {
        bytes: Number(await raw.memory('USAGE', added[0]!, 'SAMPLES', '0')),
        fields: Object.keys(await raw.hgetall(added[0]!)).sort(),
      };
    } finally {
      await raw.quit();
    }
  }

  it('holds only what the later steps need: no client name (shown once, on the consent page), no resource (always this server)', async () => {
    const typical = await bytesOfOne({ state: 'x'.repeat(43) });
    expect(typical.fields).toEqual(['browser', 'clientId', 'codeChallenge', 'redirectUri', 'stage', 'state']);
    // A sign-in as MCP clients start it: 520 bytes on Redis 7 (1008 with the two fields: a client name
    // longer than 64 bytes also turns the hash from Redis's compact encoding to its larger one).
    expect(typical.bytes).toBeLessThan(640);
    // The largest state accepted (1024 characters) is most of the largest record (2080 bytes; 2240 before).
    const largest = await bytesOfOne({ state: 'x'.repeat(1024) });
    expect(largest.bytes).toBeLessThan(2400);
  });
});
