// DPoP-bound tokens (RFC 9449) at the resource, over real sockets with a real Redis: /mcp, /health and
// /authz (in the shape nginx's auth_request asks: GET, the original request in X-Original-Method and
// X-Original-URI, the client's headers passed along) take `Authorization: DPoP` with a proof of the
// token's key, and refuse each way of presenting it wrongly with a DPoP challenge. Proofs are made as
// the MCP SDK's 2.x client makes them (test/support/dpop.ts); tokens come from /token with a proof.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashToken } from '../../src/model/credentials.ts';
import { accessTokenHash } from '../../src/oauth/dpop.ts';
import { basic, initializeRequest } from '../support/http.ts';
import { DpopKey, hmacProof, unsignedProof, type ProofClaims } from '../support/dpop.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { startEchoUpstream, type FakeUpstream } from '../support/fake-upstreams.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';

const ALGS = 'algs="ES256 RS256 PS256 EdDSA"';

type Endpoint = 'mcp' | 'health' | 'authz';

interface Presentation {
  token: string;
  scheme: 'Bearer' | 'DPoP';
  proof?: string | undefined;
}

/** A client of one stack: gets tokens at /token and presents them at each endpoint. */
function clientOf(stack: Stack) {
  const now = () => Math.floor(stack.clock.now() / 1000);
  const urlOf = (endpoint: Endpoint) => `${stack.proxyUrl}${endpoint === 'health' ? '/health' : '/mcp'}`;
  const methodOf = (endpoint: Endpoint) => (endpoint === 'health' ? 'GET' : 'POST');

  return {
    urlOf,
    methodOf,
    /** A proof for `endpoint` (the original request's method and URL), with `claims` over the defaults. */
    proof(key: DpopKey, endpoint: Endpoint, token: string, claims: Partial<ProofClaims> = {}) {
      return key.proof({ htm: methodOf(endpoint), htu: urlOf(endpoint), accessToken: token, iat: now(), ...claims });
    },
    /** An access token from /token for a new client: bound to `key` when one is given. */
    async token(key?: DpopKey): Promise<string> {
      const created = await stack.admin('createClient', { clientName: 'dpop' });
      const auth = basic(created.body.clientId, created.body.clientSecret);
      const headers: Record<string, string> = { ...auth, 'content-type': 'application/x-www-form-urlencoded' };
      if (key)
        headers.dpop = await key.proof({ htm: 'POST', htu: `${stack.proxyUrl.replace('127.0.0.1', 'localhost')}/token`, iat: now() });
      const res = await fetch(`${stack.proxyUrl}/token`, { method: 'POST', headers, body: 'grant_type=client_credentials' });
      const body = (await res.json()) as Record<string, string>;
      if (res.status !== 200) throw new Error(`/token: ${res.status} ${JSON.stringify(body)}`);
      expect(body.token_type).toBe(key ? 'DPoP' : 'Bearer');
      return body.access_token!;
    },
    /** The request at `endpoint`; /authz as nginx's auth_request subrequest for POST /mcp. */
    async send(endpoint: Endpoint, p: Presentation): Promise<{ status: number; challenge: string | null; headers: Headers }> {
      const headers: Record<string, string> = { authorization: `${p.scheme} ${p.token}` };
      if (p.proof !== undefined) headers.dpop = p.proof;
      let res: Response;
      if (endpoint === 'mcp') {
        res = await fetch(urlOf('mcp'), {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
          body: JSON.stringify(initializeRequest()),
        });
      } else if (endpoint === 'health') {
        res = await fetch(urlOf('health'), { headers });
      } else {
        res = await fetch(`${stack.proxyUrl}/authz`, { headers: { ...headers, 'x-original-method': 'POST', 'x-original-uri': '/mcp' } });
      }
      await res.arrayBuffer();
      return { status: res.status, challenge: res.headers.get('www-authenticate'), headers: res.headers };
    },
  };
}

describe('DPoP at the resource', () => {
  let echo: FakeUpstream;
  let stack: Stack;
  let client: ReturnType<typeof clientOf>;
  let key: DpopKey;
  let bound: string;
  let unbound: string;

  beforeAll(async () => {
    echo = await startEchoUpstream();
    stack = await startStack({ upstreamUrl: echo.url, config: { proxy: { forwardAuth: true } } });
    client = clientOf(stack);
    key = await DpopKey.generate('ES256');
    bound = await client.token(key);
    unbound = await client.token();
  });
  afterAll(async () => {
    await stack?.close();
    await echo?.close();
  });

  describe.each<Endpoint>(['mcp', 'health', 'authz'])('%s', (endpoint) => {
    it('a bound token with a proof of its key is served; a fresh proof each request', async () => {
      for (let i = 0; i < 2; i++) {
        const res = await client.send(endpoint, { token: bound, scheme: 'DPoP', proof: await client.proof(key, endpoint, bound) });
        expect(res.status).toBe(200);
      }
    });

    it('an unbound token as Bearer keeps working', async () => {
      expect((await client.send(endpoint, { token: unbound, scheme: 'Bearer' })).status).toBe(200);
    });

    const other = DpopKey.generate('ES256');
    const refusals: Array<[string, 'invalid_dpop_proof' | 'invalid_token', () => Promise<Presentation>]> = [
      ['a bound token presented as Bearer', 'invalid_token', async () => ({ token: bound, scheme: 'Bearer' })],
      [
        'a bound token presented as Bearer with a good proof',
        'invalid_token',
        async () => ({ token: bound, scheme: 'Bearer', proof: await client.proof(key, endpoint, bound) }),
      ],
      ['DPoP without a proof', 'invalid_dpop_proof', async () => ({ token: bound, scheme: 'DPoP' })],
      [
        'a proof for another URL',
        'invalid_dpop_proof',
        async () => ({
          token: bound,
          scheme: 'DPoP',
          proof: await client.proof(key, endpoint, bound, { htu: `${stack.proxyUrl}/elsewhere` }),
        }),
      ],
      [
        'a proof for another method',
        'invalid_dpop_proof',
        async () => ({ token: bound, scheme: 'DPoP', proof: await client.proof(key, endpoint, bound, { htm: 'PUT' }) }),
      ],
      [
        'a proof of another key',
        'invalid_token',
        async () => ({ token: bound, scheme: 'DPoP', proof: await client.proof(await other, endpoint, bound) }),
      ],
      [
        "a proof whose ath is another token's",
        'invalid_dpop_proof',
        async () => ({ token: bound, scheme: 'DPoP', proof: await client.proof(key, endpoint, unbound) }),
      ],
      [
        'a proof without ath',
        'invalid_dpop_proof',
        async () => ({
          token: bound,
          scheme: 'DPoP',
          proof: await key.proof({
            htm: client.methodOf(endpoint),
            htu: client.urlOf(endpoint),
            iat: Math.floor(stack.clock.now() / 1000),
          }),
        }),
      ],
      [
        'an unsigned proof (alg none)',
        'invalid_dpop_proof',
        async () => ({
          token: bound,
          scheme: 'DPoP',
          proof: unsignedProof(key.publicJwk, { htm: client.methodOf(endpoint), htu: client.urlOf(endpoint), ath: accessTokenHash(bound) }),
        }),
      ],
      [
        'an HS256 proof',
        'invalid_dpop_proof',
        async () => ({
          token: bound,
          scheme: 'DPoP',
          proof: await hmacProof({ htm: client.methodOf(endpoint), htu: client.urlOf(endpoint), ath: accessTokenHash(bound) }),
        }),
      ],
      [
        'an unbound token presented as DPoP with a proof',
        'invalid_token',
        async () => ({ token: unbound, scheme: 'DPoP', proof: await client.proof(key, endpoint, unbound) }),
      ],
      [
        'the master token presented as DPoP with a proof',
        'invalid_token',
        async () => ({ token: stack.masterToken, scheme: 'DPoP', proof: await client.proof(key, endpoint, stack.masterToken) }),
      ],
    ];

    it.each(refusals)('%s: 401, DPoP error="%s" with algs', async (_label, error, present) => {
      const res = await client.send(endpoint, await present());
      expect(res.status).toBe(401);
      expect(res.challenge).toMatch(
        new RegExp(`^DPoP realm="mcp", resource_metadata="[^"]+", error="${error}", error_description="[^"]+", ${ALGS}$`),
      );
    });

    it('a proof used a second time (replayed): 401 invalid_dpop_proof', async () => {
      const proof = await client.proof(key, endpoint, bound);
      expect((await client.send(endpoint, { token: bound, scheme: 'DPoP', proof })).status).toBe(200);
      const again = await client.send(endpoint, { token: bound, scheme: 'DPoP', proof });
      expect(again.status).toBe(401);
      expect(again.challenge).toContain('error="invalid_dpop_proof"');
    });
  });

  it('the proof is not forwarded to the upstream (nor the Authorization header)', async () => {
    const before = echo.seen.length;
    expect((await client.send('mcp', { token: bound, scheme: 'DPoP', proof: await client.proof(key, 'mcp', bound) })).status).toBe(200);
    const seen = echo.seen.slice(before).find((s) => s.method === 'POST')!;
    expect(seen.headers.dpop).toBeUndefined();
    expect(seen.headers.authorization).toBeUndefined();
    expect(seen.headers['x-mcp-auth-kind']).toBe('oauth');
  });

  it('each refusal is counted once, as denied with its DPoP reason (never also as refused)', async () => {
    const count = async (outcome: string, reason: string) => {
      const text = await (await fetch(`${stack.adminUrl}/metrics`)).text();
      const line = text
        .split('\n')
        .find((l) => l.startsWith('mcp_auth_requests_total{') && l.includes(`outcome="${outcome}"`) && l.includes(`reason="${reason}"`));
      return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
    };
    const reasons = ['dpop_proof', 'dpop_binding', 'dpop_replay'];
    const before = await Promise.all(reasons.map((r) => count('denied', r)));
    await client.send('mcp', { token: bound, scheme: 'DPoP' });
    await client.send('mcp', { token: bound, scheme: 'Bearer' });
    const proof = await client.proof(key, 'mcp', bound);
    await client.send('mcp', { token: bound, scheme: 'DPoP', proof });
    await client.send('mcp', { token: bound, scheme: 'DPoP', proof });
    const after = await Promise.all(reasons.map((r) => count('denied', r)));
    expect(after.map((n, i) => n - before[i]!)).toEqual([1, 1, 1]);
    expect(await count('refused', 'invalid_dpop_proof')).toBe(0);
  });

  it('a refused proof is logged with the rule it broke, never with the proof', async () => {
    const proof = await client.proof(key, 'mcp', bound, { htm: 'PUT' });
    await client.send('mcp', { token: bound, scheme: 'DPoP', proof });
    const line = stack.logs
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .findLast((l) => l.msg === 'request' && l.dpopRefusal !== undefined);
    expect(line).toMatchObject({ status: 401, denial: 'dpop_proof', dpopRefusal: 'htm' });
    expect(stack.logs.join('\n')).not.toContain(proof);
    await client.send('mcp', { token: bound, scheme: 'DPoP' });
    const missing = stack.logs
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .findLast((l) => l.msg === 'request' && l.dpopRefusal !== undefined);
    expect(missing).toMatchObject({ status: 401, denial: 'dpop_proof', dpopRefusal: 'missing' });
  });

  it('a revoked bound token is refused from the next request (RFC 7009 /revoke by its client)', async () => {
    const created = await stack.admin('createClient', { clientName: 'revoking' });
    const auth = { ...basic(created.body.clientId, created.body.clientSecret), 'content-type': 'application/x-www-form-urlencoded' };
    const tokenProof = await key.proof({
      htm: 'POST',
      htu: `${stack.proxyUrl.replace('127.0.0.1', 'localhost')}/token`,
      iat: Math.floor(stack.clock.now() / 1000),
    });
    const issued = await fetch(`${stack.proxyUrl}/token`, {
      method: 'POST',
      headers: { ...auth, dpop: tokenProof },
      body: 'grant_type=client_credentials',
    });
    const token = ((await issued.json()) as { access_token: string }).access_token;
    expect((await client.send('mcp', { token, scheme: 'DPoP', proof: await client.proof(key, 'mcp', token) })).status).toBe(200);
    const revoked = await fetch(`${stack.proxyUrl}/revoke`, { method: 'POST', headers: auth, body: new URLSearchParams({ token }) });
    expect(revoked.status).toBe(200);
    expect((await stack.store.lookupToken(hashToken(token))).oauth).toMatchObject({ revoked: true });
    const res = await client.send('mcp', { token, scheme: 'DPoP', proof: await client.proof(key, 'mcp', token) });
    expect(res.status).toBe(401);
    expect(res.challenge).toContain('error="invalid_token"');
  });
});

describe('oauth.requireDpop: true', () => {
  let echo: FakeUpstream;
  let stack: Stack;
  let client: ReturnType<typeof clientOf>;

  beforeAll(async () => {
    echo = await startEchoUpstream();
    stack = await startStack({ upstreamUrl: echo.url, config: { oauth: { requireDpop: true }, proxy: { forwardAuth: true } } });
    client = clientOf(stack);
  });
  afterAll(async () => {
    await stack?.close();
    await echo?.close();
  });

  it('an unbound token as Bearer is refused with a DPoP challenge; a bound one with its proof is served; the master token still is', async () => {
    const unbound = await client.token();
    for (const endpoint of ['mcp', 'health', 'authz'] as const) {
      const res = await client.send(endpoint, { token: unbound, scheme: 'Bearer' });
      expect([endpoint, res.status]).toEqual([endpoint, 401]);
      expect(res.challenge).toContain('DPoP realm="mcp"');
      expect(res.challenge).toContain('error="invalid_token"');
      expect((await client.send(endpoint, { token: stack.masterToken, scheme: 'Bearer' })).status).toBe(200);
    }
    const key = await DpopKey.generate('EdDSA');
    const bound = await client.token(key);
    expect((await client.send('mcp', { token: bound, scheme: 'DPoP', proof: await client.proof(key, 'mcp', bound) })).status).toBe(200);
  });

  it('no token: the DPoP challenge without an error, and the resource metadata says bound tokens are required', async () => {
    const res = await fetch(`${stack.proxyUrl}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toMatch(new RegExp(`^DPoP realm="mcp", resource_metadata="[^"]+", ${ALGS}$`));
    const meta = (await (await fetch(`${stack.proxyUrl}/.well-known/oauth-protected-resource/mcp`)).json()) as Record<string, unknown>;
    expect(meta.dpop_bound_access_tokens_required).toBe(true);
  });
});

describe('server nonces (oauth.dpopNonce: true)', () => {
  let echo: FakeUpstream;
  let stack: Stack;
  let client: ReturnType<typeof clientOf>;

  beforeAll(async () => {
    echo = await startEchoUpstream();
    stack = await startStack({ upstreamUrl: echo.url, config: { oauth: { dpopNonce: true } } });
    client = clientOf(stack);
  });
  afterAll(async () => {
    await stack?.close();
    await echo?.close();
  });

  it('a proof without the nonce: 401 use_dpop_nonce with DPoP-Nonce; signed again with it: served', async () => {
    const key = await DpopKey.generate();
    // /token asks for the nonce first, as the resource does.
    const created = await stack.admin('createClient', { clientName: 'nonce' });
    const auth = { ...basic(created.body.clientId, created.body.clientSecret), 'content-type': 'application/x-www-form-urlencoded' };
    const tokenUrl = `${stack.proxyUrl.replace('127.0.0.1', 'localhost')}/token`;
    const iat = Math.floor(stack.clock.now() / 1000);
    const first = await fetch(`${stack.proxyUrl}/token`, {
      method: 'POST',
      headers: { ...auth, dpop: await key.proof({ htm: 'POST', htu: tokenUrl, iat }) },
      body: 'grant_type=client_credentials',
    });
    expect([first.status, ((await first.json()) as { error: string }).error]).toEqual([400, 'use_dpop_nonce']);
    const nonce = first.headers.get('dpop-nonce')!;
    const issued = await fetch(`${stack.proxyUrl}/token`, {
      method: 'POST',
      headers: { ...auth, dpop: await key.proof({ htm: 'POST', htu: tokenUrl, iat, nonce }) },
      body: 'grant_type=client_credentials',
    });
    const token = ((await issued.json()) as { access_token: string }).access_token;

    const without = await client.send('mcp', { token, scheme: 'DPoP', proof: await client.proof(key, 'mcp', token) });
    expect(without.status).toBe(401);
    expect(without.challenge).toContain('error="use_dpop_nonce"');
    const resourceNonce = without.headers.get('dpop-nonce')!;
    expect(resourceNonce).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(
      (await client.send('mcp', { token, scheme: 'DPoP', proof: await client.proof(key, 'mcp', token, { nonce: resourceNonce }) })).status,
    ).toBe(200);
  });
});

describe('the lookup cache (redis.lookupCache: tracking) with bound tokens', () => {
  let echo: FakeUpstream;
  let stack: Stack;
  let client: ReturnType<typeof clientOf>;

  beforeAll(async () => {
    echo = await startEchoUpstream();
    stack = await startStack({ upstreamUrl: echo.url, config: { redis: { lookupCache: 'tracking' } } });
    client = clientOf(stack);
  });
  afterAll(async () => {
    await stack?.close();
    await echo?.close();
  });

  it('a cached record keeps its binding: served with proofs from the cache, still refused as Bearer', async () => {
    const cache = (stack.store as RedisTokenStore).lookupCache!;
    const key = await DpopKey.generate();
    const token = await client.token(key);
    const hitsBefore = cache.stats.hits;
    for (let i = 0; i < 2; i++)
      expect((await client.send('mcp', { token, scheme: 'DPoP', proof: await client.proof(key, 'mcp', token) })).status).toBe(200);
    expect(cache.stats.hits).toBeGreaterThan(hitsBefore);
    const hitsNow = cache.stats.hits;
    const asBearer = await client.send('mcp', { token, scheme: 'Bearer' });
    expect(cache.stats.hits).toBe(hitsNow + 1);
    expect(asBearer.status).toBe(401);
    expect(asBearer.challenge).toContain('error="invalid_token"');
  });
});
