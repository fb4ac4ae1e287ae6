// private_key_jwt client authentication (RFC 7523 §2.2) at /token, /revoke and /introspect, at the
// handler level on the memory store: registered clients that gave their public keys (inline `jwks`),
// assertions signed with real keys by jose. Metadata-document clients (keys at their `jwks_uri`) are
// driven through browser sign-in in test/e2e/sign-in-cimd-browser.test.ts.

import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ASSERTION_MAX_LIFETIME_SECONDS, JWT_BEARER_ASSERTION } from '../../src/oauth/client-auth.ts';
import { PUBLIC_URL, startOAuthEndpoints, type OAuthEndpoints } from '../support/oauth-endpoints.ts';

const CC = 'client_credentials';
let ep: OAuthEndpoints;
let rsa: { privateKey: CryptoKey; jwk: JWK };
let ec: { privateKey: CryptoKey; jwk: JWK };
let stranger: { privateKey: CryptoKey; jwk: JWK };

async function keyPair(alg: 'RS256' | 'ES256', kid: string) {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' } };
}

beforeAll(async () => {
  ep = await startOAuthEndpoints();
  rsa = await keyPair('RS256', 'rsa-1');
  ec = await keyPair('ES256', 'ec-1');
  stranger = await keyPair('RS256', 'rsa-1'); // same kid, another key: a forgery
});
afterAll(async () => {
  await ep?.close();
});

/** A client registered with private_key_jwt and these public keys. */
async function keyClient(keys: JWK[]): Promise<string> {
  const { clientId } = await ep.client({ grantTypes: [CC], tokenEndpointAuthMethod: 'private_key_jwt', jwks: JSON.stringify({ keys }) });
  return clientId;
}

interface AssertionOptions {
  alg?: string;
  kid?: string | null;
  key?: CryptoKey | Uint8Array;
  aud?: string | string[];
  iss?: string;
  iat?: number;
  exp?: number;
  jti?: string | null;
}

/** A client assertion as a client signs it: iss = sub = the client id, aud the issuer, five minutes or less. */
async function assertion(clientId: string, o: AssertionOptions = {}): Promise<string> {
  const now = Math.floor(ep.clock.now() / 1000);
  const header: Record<string, unknown> = { alg: o.alg ?? 'RS256' };
  if (o.kid !== null) header.kid = o.kid ?? 'rsa-1';
  const jwt = new SignJWT({})
    .setProtectedHeader(header as { alg: string })
    .setIssuer(o.iss ?? clientId)
    .setSubject(clientId)
    .setAudience(o.aud ?? PUBLIC_URL)
    .setIssuedAt(o.iat ?? now)
    .setExpirationTime(o.exp ?? now + 60);
  if (o.jti !== null) jwt.setJti(o.jti ?? randomUUID());
  return jwt.sign(o.key ?? rsa.privateKey);
}

const form = (jwt: string, extra: Record<string, string> = {}) => ({
  client_assertion_type: JWT_BEARER_ASSERTION,
  client_assertion: jwt,
  ...extra,
});

async function post(path: string, params: Record<string, string>) {
  const res = await fetch(`${ep.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(params).toString(),
  });
  const text = await res.text();
  return { status: res.status, body: text === '' ? undefined : JSON.parse(text) };
}

describe('private_key_jwt at /token', () => {
  it('a good assertion authenticates the client (RS256 by kid; ES256; aud the token endpoint or a one-element array)', async () => {
    const clientId = await keyClient([rsa.jwk, ec.jwk]);
    for (const jwt of [
      await assertion(clientId),
      await assertion(clientId, { alg: 'ES256', kid: 'ec-1', key: ec.privateKey }),
      await assertion(clientId, { aud: `${PUBLIC_URL}/token` }),
      await assertion(clientId, { aud: [PUBLIC_URL] }),
    ]) {
      const res = await ep.token({ grant_type: CC, ...form(jwt) });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.access_token).toMatch(/^[0-9a-f]{64}$/);
    }
    expect(ep.auditEvents().at(-1)).toMatchObject({ who: `client:${clientId}`, result: 'ok' });
  });

  it('client_id may accompany the assertion when it names the same client', async () => {
    const clientId = await keyClient([rsa.jwk]);
    expect((await ep.token({ grant_type: CC, client_id: clientId, ...form(await assertion(clientId)) })).status).toBe(200);
    const other = await keyClient([rsa.jwk]);
    expect((await ep.token({ grant_type: CC, client_id: other, ...form(await assertion(clientId)) })).status).toBe(401);
  });

  it.each<[string, (clientId: string) => Promise<Record<string, string>>]>([
    ['replayed (the same jti twice)', async (id) => form(await assertion(id, { jti: 'once-only' }))],
    ['forged (signed by another key under the same kid)', async (id) => form(await assertion(id, { key: stranger.privateKey }))],
    ['for another audience', async (id) => form(await assertion(id, { aud: 'https://other-server.example' }))],
    [
      'for several audiences, this server among them',
      async (id) => form(await assertion(id, { aud: [PUBLIC_URL, 'https://other-server.example'] })),
    ],
    ["for this server's /mcp instead of the issuer", async (id) => form(await assertion(id, { aud: `${PUBLIC_URL}/mcp` }))],
    [
      'expired',
      async (id) =>
        form(await assertion(id, { iat: Math.floor(ep.clock.now() / 1000) - 600, exp: Math.floor(ep.clock.now() / 1000) - 300 })),
    ],
    [
      'living longer than the limit',
      async (id) => form(await assertion(id, { exp: Math.floor(ep.clock.now() / 1000) + ASSERTION_MAX_LIFETIME_SECONDS + 60 })),
    ],
    [
      'issued in the future',
      async (id) =>
        form(await assertion(id, { iat: Math.floor(ep.clock.now() / 1000) + 120, exp: Math.floor(ep.clock.now() / 1000) + 180 })),
    ],
    ['without jti', async (id) => form(await assertion(id, { jti: null }))],
    ['iss other than sub', async (id) => form(await assertion(id, { iss: 'someone-else' }))],
    ['alg none (unsigned)', async (id) => form(unsigned(id))],
    [
      "HS256 keyed with the client's public key",
      async (id) => form(await assertion(id, { alg: 'HS256', key: new TextEncoder().encode(JSON.stringify(rsa.jwk)) })),
    ],
    [
      'the wrong client_assertion_type',
      async (id) => ({ ...form(await assertion(id)), client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:saml2-bearer' }),
    ],
    ['not a JWT', async () => form('not.a.jwt')],
    ['only the client id, no assertion', async (id) => ({ client_id: id })],
    ['a client secret instead of an assertion', async (id) => ({ client_id: id, client_secret: 'guess' })],
  ])('%s: 401 invalid_client, nothing in the answer says why', async (label, params) => {
    const clientId = await keyClient([rsa.jwk]);
    const first = await params(clientId);
    if (label.startsWith('replayed')) expect((await ep.token({ grant_type: CC, ...first })).status).toBe(200);
    const logged = ep.logs.length;
    const res = await ep.token({ grant_type: CC, ...first });
    expect([res.status, res.body.error]).toEqual([401, 'invalid_client']);
    expect(JSON.stringify(res.body)).not.toMatch(/jti|aud|alg|kid|expired|signature|replay/i);
    // The reason is in the log for the operator.
    expect(ep.logs.slice(logged).some((l) => l.includes('client authentication refused'))).toBe(true);
  });

  it('a key set with several keys that fit and an assertion without kid: refused (no guessing among keys)', async () => {
    const second = await keyPair('RS256', 'rsa-2');
    const clientId = await keyClient([rsa.jwk, second.jwk]);
    expect((await ep.token({ grant_type: CC, ...form(await assertion(clientId, { kid: null })) })).status).toBe(401);
    expect((await ep.token({ grant_type: CC, ...form(await assertion(clientId, { kid: 'rsa-2', key: second.privateKey })) })).status).toBe(
      200,
    );
    // One key: kid may be left out.
    const single = await keyClient([rsa.jwk]);
    expect((await ep.token({ grant_type: CC, ...form(await assertion(single, { kid: null })) })).status).toBe(200);
  });

  it('an assertion and a client secret together: invalid_request', async () => {
    const clientId = await keyClient([rsa.jwk]);
    const res = await ep.token({ grant_type: CC, client_secret: 'x', ...form(await assertion(clientId)) });
    expect([res.status, res.body.error]).toEqual([400, 'invalid_request']);
  });

  it('a client registered with a secret cannot switch to an assertion', async () => {
    const { clientId } = await ep.client({ grantTypes: [CC], jwks: JSON.stringify({ keys: [rsa.jwk] }) });
    expect((await ep.token({ grant_type: CC, ...form(await assertion(clientId)) })).status).toBe(401);
  });

  it('the jti is remembered until the assertion expires, then forgotten (no unbounded store)', async () => {
    const clientId = await keyClient([rsa.jwk]);
    const now = Math.floor(ep.clock.now() / 1000);
    const jwt = await assertion(clientId, { jti: 'bounded', exp: now + 10 });
    expect((await ep.token({ grant_type: CC, ...form(jwt) })).status).toBe(200);
    expect((await ep.token({ grant_type: CC, ...form(jwt) })).status).toBe(401);
    ep.clock.advance(60_000);
    // Past exp (and the skew) the same assertion is refused as expired, whatever the store holds.
    expect((await ep.token({ grant_type: CC, ...form(jwt) })).status).toBe(401);
  });
});

describe('private_key_jwt at /revoke and /introspect', () => {
  it('the client revokes and introspects its own token with fresh assertions', async () => {
    const clientId = await keyClient([rsa.jwk]);
    const issued = await ep.token({ grant_type: CC, ...form(await assertion(clientId)) });
    const token = issued.body.access_token as string;
    const seen = await post('/introspect', { token, ...form(await assertion(clientId)) });
    expect(seen.body).toMatchObject({ active: true, client_id: clientId });
    const forged = await post('/introspect', { token, ...form(await assertion(clientId, { key: stranger.privateKey })) });
    expect([forged.status, forged.body.error]).toEqual([401, 'invalid_client']);
    expect((await post('/revoke', { token, ...form(await assertion(clientId)) })).status).toBe(200);
    expect((await post('/introspect', { token, ...form(await assertion(clientId)) })).body).toEqual({ active: false });
  });
});

describe('registration and discovery', () => {
  it('POST /register takes private_key_jwt with jwks: no secret is issued; without keys it is refused', async () => {
    const ok = await fetch(`${ep.url}/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        redirect_uris: ['http://127.0.0.1/cb'],
        grant_types: ['refresh_token'],
        token_endpoint_auth_method: 'private_key_jwt',
        jwks: { keys: [rsa.jwk] },
      }),
    });
    const body = (await ok.json()) as Record<string, unknown>;
    expect(ok.status, JSON.stringify(body)).toBe(201);
    expect(body).toMatchObject({
      token_endpoint_auth_method: 'private_key_jwt',
      jwks: { keys: [expect.objectContaining({ kid: 'rsa-1' })] },
    });
    expect(body.client_secret).toBeUndefined();
    for (const extra of [
      {},
      { jwks: { keys: [{ kty: 'oct', k: 'c2VjcmV0' }] } },
      { jwks_uri: 'http://keys.example/jwks' },
      { jwks: { keys: [rsa.jwk] }, jwks_uri: 'https://keys.example/jwks' },
    ]) {
      const bad = await fetch(`${ep.url}/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          redirect_uris: ['http://127.0.0.1/cb'],
          grant_types: ['refresh_token'],
          token_endpoint_auth_method: 'private_key_jwt',
          ...extra,
        }),
      });
      expect(bad.status, JSON.stringify(extra)).toBe(400);
      expect(((await bad.json()) as Record<string, unknown>).error).toBe('invalid_client_metadata');
    }
  });

  it('POST /register refuses a jwks_uri when metadata documents (and so outbound fetches) are off: such a client could never authenticate', async () => {
    const res = await fetch(`${ep.url}/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        redirect_uris: ['http://127.0.0.1/cb'],
        grant_types: ['refresh_token'],
        token_endpoint_auth_method: 'private_key_jwt',
        jwks_uri: 'https://keys.example/jwks',
      }),
    });
    const body = (await res.json()) as Record<string, unknown>;
    expect(res.status).toBe(400);
    expect(body.error).toBe('invalid_client_metadata');
    expect(body.error_description).toMatch(/oauth\.clientMetadataDocuments\.enabled.*jwks/);
  });

  it('metadata advertises private_key_jwt and its algorithms at every endpoint that authenticates clients', async () => {
    const meta = (await (await fetch(`${ep.url}/.well-known/oauth-authorization-server`)).json()) as Record<string, string[]>;
    for (const endpoint of ['token', 'revocation', 'introspection']) {
      expect(meta[`${endpoint}_endpoint_auth_methods_supported`]).toContain('private_key_jwt');
      expect(meta[`${endpoint}_endpoint_auth_signing_alg_values_supported`]).toEqual(['RS256', 'PS256', 'ES256']);
    }
  });
});

/** An `alg: none` JWT (what jose will not sign): header and claims, no signature. */
function unsigned(clientId: string): string {
  const now = Math.floor(ep.clock.now() / 1000);
  const part = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${part({ alg: 'none', kid: 'rsa-1' })}.${part({ iss: clientId, sub: clientId, aud: PUBLIC_URL, iat: now, exp: now + 60, jti: randomUUID() })}.`;
}
