// DPoP through real ingresses: nginx (auth_request) and Caddy (forward_auth) run from examples/, the
// sidecar as their authorization service. The ingress passes the client's Authorization and DPoP
// headers to /authz with the original method and URI (X-Original-* for nginx, X-Forwarded-* for
// Caddy); the proof is checked against the URL the client used, PUBLIC_URL (the ingress). Each way of
// presenting a bound token wrongly reaches the client as the sidecar's 401 and DPoP challenge; the
// SDK 2.x client with DPoP on signs in and calls tools through the ingress. The proof never reaches the
// MCP server (as in proxy mode, where the sidecar removes it).
// Skipped where the ingress is not installed, unless REQUIRE_INGRESS is set (.ci/run sets it).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accessTokenHash } from '../../src/oauth/dpop.ts';
import { DpopKey, hmacProof, unsignedProof, type ProofClaims } from '../support/dpop.ts';
import { basic, initializeRequest } from '../support/http.ts';
import { freePort, ingressAvailable, startIngress, type Ingress, type IngressKind } from '../support/ingress.ts';
import { approveAndSignIn, clientReceived, startSignInStack, type SignInStack } from '../support/sign-in.ts';
import { connectedClient2, firstConnection2, RecordingProvider2 } from '../support/sdk2-oauth.ts';
import { UserAgent } from '../support/user-agent.ts';

const KINDS: IngressKind[] = ['nginx', 'caddy'];
const ALGS = 'algs="ES256 RS256 PS256 EdDSA"';

function textOf(result: object): string {
  return ((result as { content: Array<{ text?: string }> }).content[0]?.text ?? '') as string;
}

describe.each(KINDS)('%s in front: DPoP-bound tokens', (kind) => {
  const available = ingressAvailable(kind);
  let s: SignInStack;
  let ingress: Ingress;
  let base: string;
  let key: DpopKey;
  let bound: string;

  const now = () => Math.floor(s.stack.clock.now() / 1000);
  const proof = (claims: Partial<ProofClaims> = {}, k: DpopKey = key) =>
    k.proof({ htm: 'POST', htu: `${base}/mcp`, accessToken: bound, iat: now(), ...claims });

  async function post(authorization: string, dpop?: string): Promise<{ status: number; challenge: string | null }> {
    const headers: Record<string, string> = {
      authorization,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    };
    if (dpop !== undefined) headers.dpop = dpop;
    const res = await fetch(`${base}/mcp`, { method: 'POST', headers, body: JSON.stringify(initializeRequest()) });
    await res.arrayBuffer();
    return { status: res.status, challenge: res.headers.get('www-authenticate') };
  }

  beforeAll(async () => {
    if (!available) return;
    const port = await freePort();
    s = await startSignInStack({
      config: { proxy: { forwardAuth: true, trustedProxies: ['127.0.0.1'], publicUrl: `http://127.0.0.1:${port}` } },
    });
    ingress = await startIngress(kind, { port, sidecar: s.stack.proxyUrl, upstream: s.stack.upstream!.url });
    base = s.base;
    key = await DpopKey.generate('ES256');
    // A machine client's token, bound at /token (through the ingress) to `key`.
    const created = await s.stack.admin('createClient', { clientName: 'dpop-ingress' });
    const res = await fetch(`${base}/token`, {
      method: 'POST',
      headers: {
        ...basic(created.body.clientId, created.body.clientSecret),
        'content-type': 'application/x-www-form-urlencoded',
        dpop: await key.proof({ htm: 'POST', htu: `${base}/token`, iat: now() }),
      },
      body: 'grant_type=client_credentials',
    });
    const body = (await res.json()) as { access_token: string; token_type: string };
    expect(body.token_type).toBe('DPoP');
    bound = body.access_token;
  });
  afterAll(async () => {
    await ingress?.stop();
    await s?.close();
  });

  it.skipIf(!available)('a bound token with a proof of its key for the ingress URL is served', async () => {
    expect((await post(`DPoP ${bound}`, await proof())).status).toBe(200);
  });

  it.skipIf(!available)('the proof, spent by the check, never reaches the MCP server', async () => {
    const before = s.stack.upstream!.seenHeaders.length;
    const sent = await proof();
    expect((await post(`DPoP ${bound}`, sent)).status).toBe(200);
    const seen = s.stack.upstream!.seenHeaders.slice(before);
    expect(seen).toHaveLength(1);
    expect(seen[0]!['x-mcp-auth-kind']).toBe('oauth');
    expect(Object.keys(seen[0]!).filter((name) => name.replaceAll('_', '-').toLowerCase() === 'dpop')).toEqual([]);
    expect(JSON.stringify(seen[0])).not.toContain(sent);
    expect(seen[0]!.authorization).toBeUndefined();
  });

  const refusals: Array<[string, 'invalid_dpop_proof' | 'invalid_token', () => Promise<[string, string | undefined]>]> = [
    ['the bound token as Bearer', 'invalid_token', async () => [`Bearer ${bound}`, undefined]],
    ['DPoP without a proof', 'invalid_dpop_proof', async () => [`DPoP ${bound}`, undefined]],
    ['a proof for another URL', 'invalid_dpop_proof', async () => [`DPoP ${bound}`, await proof({ htu: `${base}/other` })]],
    [
      "a proof for the sidecar's own address instead of the ingress's",
      'invalid_dpop_proof',
      async () => [`DPoP ${bound}`, await proof({ htu: `${s.stack.proxyUrl}/authz` })],
    ],
    ['a proof for another method', 'invalid_dpop_proof', async () => [`DPoP ${bound}`, await proof({ htm: 'GET' })]],
    ['a proof of another key', 'invalid_token', async () => [`DPoP ${bound}`, await proof({}, await DpopKey.generate('ES256'))]],
    [
      'a proof for another token (ath)',
      'invalid_dpop_proof',
      async () => [`DPoP ${bound}`, await proof({ ath: accessTokenHash('0'.repeat(64)) })],
    ],
    [
      'alg none',
      'invalid_dpop_proof',
      async () => [`DPoP ${bound}`, unsignedProof(key.publicJwk, { htm: 'POST', htu: `${base}/mcp`, ath: accessTokenHash(bound) })],
    ],
    [
      'HS256',
      'invalid_dpop_proof',
      async () => [`DPoP ${bound}`, await hmacProof({ htm: 'POST', htu: `${base}/mcp`, ath: accessTokenHash(bound) })],
    ],
  ];

  it.skipIf(!available).each(refusals)('%s: 401 with DPoP error="%s" at the client', async (_label, error, make) => {
    const [authorization, dpop] = await make();
    const res = await post(authorization, dpop);
    expect(res.status).toBe(401);
    expect(res.challenge).toMatch(
      new RegExp(
        `^DPoP realm="mcp", resource_metadata="${base}/\\.well-known/oauth-protected-resource/mcp", error="${error}", error_description="[^"]+", ${ALGS}$`,
      ),
    );
  });

  it.skipIf(!available)('a replayed proof: the first request is served, the second is 401 invalid_dpop_proof', async () => {
    const once = await proof();
    expect((await post(`DPoP ${bound}`, once)).status).toBe(200);
    const again = await post(`DPoP ${bound}`, once);
    expect(again.status).toBe(401);
    expect(again.challenge).toContain('error="invalid_dpop_proof"');
  });

  it.skipIf(!available)(
    'the SDK 2.x client with DPoP on signs in and calls tools through the ingress',
    async () => {
      const provider = new RecordingProvider2({ dpop: true });
      const { transport, authorizationUrl } = await firstConnection2(base, provider);
      expect(authorizationUrl.origin).toBe(base);
      const hop = await approveAndSignIn(new UserAgent(), base, authorizationUrl.href);
      await transport.finishAuth(clientReceived(hop));
      expect(provider.tokens()?.token_type).toBe('DPoP');
      const client = await connectedClient2(base, provider);
      expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'via the ingress' } }))).toBe('via the ingress');
      const seen = JSON.parse(textOf(await client.callTool({ name: 'headers', arguments: {} }))) as Record<string, string>;
      expect(seen['x-mcp-auth-kind']).toBe('oauth');
      expect(seen.authorization).toBeUndefined();
      await client.close();
    },
    60_000,
  );
});
