// Rate limits shared through Redis: failed authentications per client address on the proxy
// listener, token-endpoint requests per client_id. Successful /mcp traffic is never counted.

import { afterEach, describe, expect, it } from 'vitest';
import { createSidecar, type Sidecar } from '../../src/app.ts';
import { openRedisStore } from '../support/redis.ts';
import { startEchoUpstream, type FakeUpstream } from '../support/fake-upstreams.ts';
import { basic, postForm } from '../support/http.ts';
import { startStack, type Stack } from '../support/stack.ts';

const WRONG = 'e'.repeat(64);

async function status(url: string, token?: string): Promise<{ status: number; retryAfter: string | null; error?: string }> {
  const res = await fetch(url, { method: 'POST', headers: token ? { authorization: `Bearer ${token}` } : {}, body: '{}' });
  const text = await res.text();
  return {
    status: res.status,
    retryAfter: res.headers.get('retry-after'),
    error: text.startsWith('{') ? JSON.parse(text).error : undefined,
  };
}

/** Sends bad tokens until the limiter (updated just after each 401) refuses the address; bounded. */
async function failUntilRefused(url: string, bound = 50): Promise<number> {
  for (let i = 1; i <= bound; i++) if ((await status(url, WRONG)).status === 429) return i;
  throw new Error(`still not refused after ${bound} failures`);
}

describe('rate limits', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    while (cleanups.length) await cleanups.pop()!();
  });

  async function stackWith(rateLimits: Record<string, number>): Promise<{ stack: Stack; echo: FakeUpstream }> {
    const echo = await startEchoUpstream();
    const stack = await startStack({ upstreamUrl: echo.url, config: { rateLimits } });
    cleanups.push(
      () => echo.close(),
      () => stack.close(),
    );
    return { stack, echo };
  }

  it('failed authentications past the limit are answered 429 with Retry-After until the window ends; a valid token from that address is still served', async () => {
    const { stack, echo } = await stackWith({ failedAuthPerMinute: 3 });
    const { token } = await stack.issueOAuthToken();
    for (let i = 0; i < 3; i++) expect((await status(stack.mcpUrl, WRONG)).status).toBe(401);
    expect((await status(stack.mcpUrl, token)).status).toBe(200);
    // The 4th failure passes the limit; the refusal starts as soon as its count comes back.
    const failures = await failUntilRefused(stack.mcpUrl);
    expect(failures).toBeGreaterThanOrEqual(2);
    const refused = await status(stack.mcpUrl, WRONG);
    expect(refused).toMatchObject({ status: 429, error: 'too_many_requests' });
    expect(Number(refused.retryAfter)).toBeGreaterThan(0);
    expect(Number(refused.retryAfter)).toBeLessThanOrEqual(60);
    // Someone else's failures never refuse a valid token: it is forwarded as before.
    const forwarded = echo.seen.length;
    expect((await status(stack.mcpUrl, token)).status).toBe(200);
    expect(echo.seen.length).toBe(forwarded + 1);
    expect((await status(stack.mcpUrl, WRONG)).status).toBe(429);
    stack.clock.advance(61_000);
    expect((await status(stack.mcpUrl, WRONG)).status).toBe(401);
  });

  it('requests without any token (discovery) and successful requests are never counted', async () => {
    const { stack } = await stackWith({ failedAuthPerMinute: 2 });
    const { token } = await stack.issueOAuthToken();
    for (let i = 0; i < 20; i++) expect((await status(stack.mcpUrl)).status).toBe(401);
    for (let i = 0; i < 20; i++) expect((await status(stack.mcpUrl, token)).status).toBe(200);
  });

  it('replicas on one Redis count failures together', async () => {
    const { stack } = await stackWith({ failedAuthPerMinute: 4 });
    const { token } = await stack.issueOAuthToken();
    const store = await openRedisStore(stack.prefix);
    const replica: Sidecar = await createSidecar({
      config: stack.sidecar.config,
      store,
      clock: stack.clock,
      logger: stack.sidecar.logger,
      defaultMetrics: false,
    });
    const { proxyUrl } = await replica.listen();
    cleanups.push(() => replica.shutdown(1000));
    for (let i = 0; i < 4; i++) expect((await status(stack.mcpUrl, WRONG)).status).toBe(401);
    // Alone, the replica would answer 401 five times and refuse the sixth call. Counting together, it
    // refuses right after its first failure (fifth overall); the bound leaves room for the first
    // replica's last counts still being in flight to Redis when the replica's own arrive.
    expect(await failUntilRefused(`${proxyUrl}/mcp`)).toBeLessThanOrEqual(4);
    expect((await status(`${proxyUrl}/mcp`, token)).status).toBe(200);
  });

  it('token requests per client_id past the limit get 429 with Retry-After; other clients are unaffected', async () => {
    const { stack } = await stackWith({ tokenRequestsPerMinute: 2 });
    const clients = [];
    for (let i = 0; i < 2; i++) clients.push((await stack.admin('createClient', { clientName: `c${i}` })).body);
    const ask = (c: { clientId: string; clientSecret: string }, secret = c.clientSecret) =>
      postForm(`${stack.proxyUrl}/token`, { grant_type: 'client_credentials' }, basic(c.clientId, secret));
    const [a, b] = clients;
    // Wrong secrets are failures of the address, not requests of the client: they use up nothing of a's.
    for (let i = 0; i < 3; i++) expect((await ask(a, 'f'.repeat(64))).status).toBe(401);
    expect((await ask(a)).status).toBe(200);
    expect((await ask(a)).status).toBe(200);
    const limited = await ask(a);
    expect(limited.status).toBe(429);
    expect(limited.body).toMatchObject({ error: 'too_many_requests' });
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await ask(b)).status).toBe(200);
  });

  it('behind a trusted proxy, failures and registrations count per forwarded client address, not per proxy', async () => {
    const echo = await startEchoUpstream();
    const stack = await startStack({
      upstreamUrl: echo.url,
      config: {
        proxy: { trustedProxies: ['127.0.0.1', '::1'] },
        rateLimits: { failedAuthPerMinute: 2 },
        oauth: { registrationRateLimitPerMinute: 1 },
      },
    });
    cleanups.push(
      () => echo.close(),
      () => stack.close(),
    );
    const { token } = await stack.issueOAuthToken();
    const from = (address: string, auth?: string) =>
      fetch(stack.mcpUrl, {
        method: 'POST',
        headers: { 'x-forwarded-for': `203.0.113.9, ${address}`, ...(auth ? { authorization: `Bearer ${auth}` } : {}) },
        body: '{}',
      });
    // One client behind the ingress fails until refused...
    let refusedAfter = 0;
    for (let i = 1; i <= 50 && refusedAfter === 0; i++) if ((await from('198.51.100.1', WRONG)).status === 429) refusedAfter = i;
    expect(refusedAfter).toBeGreaterThan(0);
    expect((await from('198.51.100.1', WRONG)).status).toBe(429);
    expect((await from('198.51.100.1', token)).status).toBe(200);
    // ...while another client behind the same ingress (same TCP peer) is not affected.
    expect((await from('198.51.100.2', token)).status).toBe(200);
    expect(echo.seen.at(-1)!.headers['x-forwarded-for']).toBe('203.0.113.9, 198.51.100.2, 127.0.0.1');

    const register = (address: string) =>
      fetch(`${stack.proxyUrl}/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': address },
        body: JSON.stringify({ client_name: 'x', redirect_uris: ['http://127.0.0.1:9/cb'] }),
      });
    expect((await register('198.51.100.3')).status).toBe(201);
    expect((await register('198.51.100.3')).status).toBe(429);
    expect((await register('198.51.100.4')).status).toBe(201);
  });

  // Azure Application Gateway writes the client's address with its source port (`IP:port`, and
  // `[IPv6]:port`), per its documented X-Forwarded-For format: the port is dropped, so each client
  // counts on its own (not in the gateway's bucket) and a new source port is not a new bucket.
  it('behind a gateway that appends the client port to X-Forwarded-For, registrations count per client address', async () => {
    const stack = await startStack({
      config: { proxy: { trustedProxies: ['127.0.0.1', '::1'] }, oauth: { registrationRateLimitPerMinute: 1 } },
    });
    cleanups.push(() => stack.close());
    const register = (forwardedFor: string) =>
      fetch(`${stack.proxyUrl}/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': forwardedFor },
        body: JSON.stringify({ client_name: 'x', redirect_uris: ['http://127.0.0.1:9/cb'] }),
      });
    expect((await register('203.0.113.5:4711')).status).toBe(201);
    expect((await register('203.0.113.5:4712')).status).toBe(429);
    expect((await register('203.0.113.6:4711')).status).toBe(201);
    expect((await register('[2001:db8::1]:443')).status).toBe(201);
    expect((await register('[2001:db8::1]:444')).status).toBe(429);
    expect((await register('2001:db8::1')).status).toBe(429);
  });

  // One host given a /64 (as ISPs, clouds and container hosts give them) can send from any of its
  // addresses; every per-address limit counts the /64 together. The addresses reach the sidecar as a
  // trusted ingress forwards them, last in X-Forwarded-For.
  describe('IPv6: the addresses of one /64 count together', () => {
    const inNetwork = (i: number) => `2001:db8:1:2::${i.toString(16)}`;

    it('failed authentications on /mcp from ever new addresses of one /64 are refused together; a valid token and another /64 are not', async () => {
      const echo = await startEchoUpstream();
      const stack = await startStack({
        upstreamUrl: echo.url,
        config: { proxy: { trustedProxies: ['127.0.0.1', '::1'] }, rateLimits: { failedAuthPerMinute: 5 } },
      });
      cleanups.push(
        () => echo.close(),
        () => stack.close(),
      );
      const { token } = await stack.issueOAuthToken();
      const from = (address: string, auth: string) =>
        fetch(stack.mcpUrl, { method: 'POST', headers: { 'x-forwarded-for': address, authorization: `Bearer ${auth}` }, body: '{}' });
      // Each request from an address never used before; bounded well past the limit of 5.
      let refusedAfter = 0;
      for (let i = 1; i <= 300 && refusedAfter === 0; i++) if ((await from(inNetwork(i), WRONG)).status === 429) refusedAfter = i;
      expect(refusedAfter).toBeGreaterThan(5);
      expect(refusedAfter).toBeLessThan(300);
      expect((await from(inNetwork(0xfff0), WRONG)).status).toBe(429);
      expect((await from(inNetwork(0xfff1), token)).status).toBe(200);
      expect((await from('2001:db8:1:3::1', WRONG)).status).toBe(401);
    });

    const register = (stack: Stack, address: string) =>
      fetch(`${stack.proxyUrl}/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': address },
        body: JSON.stringify({ client_name: 'x', redirect_uris: ['http://127.0.0.1:9/cb'] }),
      });

    it('registrations, /authorize, /revoke: one count for the /64; the IPv4-mapped forms of an IPv4 address are that address', async () => {
      const stack = await startStack({
        config: {
          proxy: { trustedProxies: ['127.0.0.1', '::1'] },
          rateLimits: { authorizeUnknownClientsPerMinute: 2, revocationRequestsPerMinute: 2 },
          oauth: { registrationRateLimitPerMinute: 2 },
        },
      });
      cleanups.push(() => stack.close());
      expect((await register(stack, inNetwork(1))).status).toBe(201);
      expect((await register(stack, inNetwork(2))).status).toBe(201);
      expect((await register(stack, inNetwork(3))).status).toBe(429);
      expect((await register(stack, '2001:db8:1:3::1')).status).toBe(201);
      // IPv4-mapped, as a dual-stack ingress may write it (dotted, or in hex), is the IPv4 host.
      expect((await register(stack, '198.51.100.7')).status).toBe(201);
      expect((await register(stack, '::ffff:198.51.100.7')).status).toBe(201);
      expect((await register(stack, '::ffff:c633:6407')).status).toBe(429);

      // Sign-in requests for an unknown client: the third is counted over the limit, the fourth refused.
      const authorize = (address: string) =>
        fetch(`${stack.proxyUrl}/authorize?client_id=unknown`, { headers: { 'x-forwarded-for': address } });
      expect((await authorize('2001:db8:9:9::1')).status).toBe(400);
      expect((await authorize('2001:db8:9:9::2')).status).toBe(400);
      expect((await authorize('2001:db8:9:9::3')).status).toBe(400);
      expect((await authorize('2001:db8:9:9::4')).status).toBe(429);

      const revoke = (address: string) =>
        fetch(`${stack.proxyUrl}/revoke`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-for': address },
          body: 'token=x',
        });
      expect((await revoke('2001:db8:7:7::1')).status).not.toBe(429);
      expect((await revoke('2001:db8:7:7::2')).status).not.toBe(429);
      expect((await revoke('2001:db8:7:7::3')).status).toBe(429);
    });

    it('rateLimits.ipv6PrefixLength 128 counts each address on its own', async () => {
      const stack = await startStack({
        config: {
          proxy: { trustedProxies: ['127.0.0.1', '::1'] },
          rateLimits: { ipv6PrefixLength: 128 },
          oauth: { registrationRateLimitPerMinute: 1 },
        },
      });
      cleanups.push(() => stack.close());
      expect((await register(stack, inNetwork(1))).status).toBe(201);
      expect((await register(stack, inNetwork(2))).status).toBe(201);
      expect((await register(stack, inNetwork(1))).status).toBe(429);
    });
  });
});
