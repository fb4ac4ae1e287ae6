// POST /token with DPoP proofs (RFC 9449 §5) at the handler level: a proof binds what is issued to its
// key (token_type DPoP, the thumbprint in the record, cnf.jkt at introspection), a bound refresh token
// needs a proof of the same key, and a proof not for this request is refused before anything is issued.
// Proofs are made as the MCP SDK's 2.x client makes them (test/support/dpop.ts).

import { hash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateToken, hashToken } from '../../src/model/credentials.ts';
import { basic } from '../support/http.ts';
import { DpopKey, hmacProof, unsignedProof } from '../support/dpop.ts';
import { PUBLIC_URL, startOAuthEndpoints, type OAuthEndpoints } from '../support/oauth-endpoints.ts';
import { startTestIdp, type TestIdp } from '../support/test-idp.ts';

const CC = 'client_credentials';
const REFRESH = 'refresh_token';
const CODE = 'authorization_code';
const REDIRECT = 'http://127.0.0.1:7777/callback';
const TOKEN_URL = `${PUBLIC_URL}/token`;

let ep: OAuthEndpoints;
let key: DpopKey;

beforeAll(async () => {
  ep = await startOAuthEndpoints({ signIn: true });
  key = await DpopKey.generate('ES256');
});
afterAll(async () => {
  await ep?.close();
});

const proofFor = (k: DpopKey = key) => k.proof({ htm: 'POST', htu: TOKEN_URL, iat: Math.floor(ep.clock.now() / 1000) });

async function machineClient() {
  const c = await ep.client({ grantTypes: [CC, REFRESH] });
  return basic(c.clientId, c.clientSecret!);
}

/** A public client's authorization code (as the sign-in would have stored it), ready to redeem. */
async function publicClientCode() {
  const c = await ep.client({
    grantTypes: [CODE, REFRESH],
    tokenEndpointAuthMethod: 'none',
    redirectUris: [REDIRECT],
    profile: 'interactive',
    source: 'dcr',
  });
  const verifier = randomBytes(32).toString('base64url');
  const raw = generateToken();
  const now = ep.clock.now();
  await ep.store.putAuthorizationCode({
    codeHash: hashToken(raw),
    clientId: c.clientId,
    redirectUri: REDIRECT,
    codeChallenge: hash('sha256', verifier, 'base64url'),
    resource: `${PUBLIC_URL}/mcp`,
    user: { subject: 'user-1', issuer: 'https://idp.example.test' },
    createdAt: now,
    expiresAt: now + 60_000,
  });
  return {
    clientId: c.clientId,
    params: { grant_type: CODE, client_id: c.clientId, code: raw, redirect_uri: REDIRECT, code_verifier: verifier },
  };
}

describe('binding at issuance', () => {
  it("client_credentials with a proof: token_type DPoP, the key thumbprint in the access token record; the confidential client's refresh token is not bound", async () => {
    const auth = await machineClient();
    const res = await ep.token({ grant_type: CC }, { ...auth, dpop: await proofFor() });
    expect(res.status).toBe(200);
    expect(res.body.token_type).toBe('DPoP');
    const jkt = await key.thumbprint();
    expect((await ep.store.lookupToken(hashToken(res.body.access_token))).oauth).toMatchObject({ dpopJkt: jkt });
    expect(await ep.store.getRefreshToken(hashToken(res.body.refresh_token))).not.toHaveProperty('dpopJkt');
  });

  it('without a proof: a Bearer token, unbound', async () => {
    const res = await ep.token({ grant_type: CC }, await machineClient());
    expect(res.body.token_type).toBe('Bearer');
    expect((await ep.store.lookupToken(hashToken(res.body.access_token))).oauth).not.toHaveProperty('dpopJkt');
  });

  it('introspection shows a bound token as type DPoP with cnf.jkt (RFC 9449 §6.2)', async () => {
    const auth = await machineClient();
    const issued = await ep.token({ grant_type: CC }, { ...auth, dpop: await proofFor() });
    const res = await fetch(`${ep.url}/introspect`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: issued.body.access_token }),
    });
    expect(await res.json()).toMatchObject({ active: true, token_type: 'DPoP', cnf: { jkt: await key.thumbprint() } });
  });

  it("a public client's code redeemed with a proof: both the access and the refresh token are bound", async () => {
    const { params } = await publicClientCode();
    const res = await ep.token(params, { dpop: await proofFor() });
    expect([res.status, res.body.token_type]).toEqual([200, 'DPoP']);
    const jkt = await key.thumbprint();
    expect((await ep.store.lookupToken(hashToken(res.body.access_token))).oauth).toMatchObject({ dpopJkt: jkt });
    expect(await ep.store.getRefreshToken(hashToken(res.body.refresh_token))).toMatchObject({ dpopJkt: jkt });
  });
});

describe('the device grant (RFC 8628) with a proof', () => {
  it("the approved device code is redeemed for tokens bound to the polling client's key", async () => {
    const c = await ep.client({
      grantTypes: ['urn:ietf:params:oauth:grant-type:device_code', REFRESH],
      tokenEndpointAuthMethod: 'none',
      profile: 'interactive',
      source: 'dcr',
    });
    const deviceCode = generateToken();
    const now = ep.clock.now();
    const stored = await ep.store.putDeviceAuthorization(
      {
        deviceCodeHash: hashToken(deviceCode),
        userCodeHash: hashToken('ABCD-EFGH'),
        clientId: c.clientId,
        createdAt: now,
        expiresAt: now + 600_000,
        interval: 5,
      },
      600_000,
      { address: '127.0.0.1', perAddress: 0, total: 0, now },
    );
    expect(stored).toEqual({ stored: true });
    expect(
      await ep.store.decideDeviceAuthorization(hashToken(deviceCode), now, { subject: 'user-1', issuer: 'https://idp.example.test' }),
    ).toBe(true);
    const res = await ep.token(
      { grant_type: 'urn:ietf:params:oauth:grant-type:device_code', device_code: deviceCode, client_id: c.clientId },
      { dpop: await proofFor() },
    );
    expect([res.status, res.body.token_type]).toEqual([200, 'DPoP']);
    expect((await ep.store.lookupToken(hashToken(res.body.access_token))).oauth).toMatchObject({ dpopJkt: await key.thumbprint() });
  });
});

describe('a bound refresh token', () => {
  async function boundRefresh() {
    const { clientId, params } = await publicClientCode();
    const res = await ep.token(params, { dpop: await proofFor() });
    return { clientId, refresh: res.body.refresh_token as string };
  }

  it('refreshes with a proof of its key: a new pair, bound to the same key', async () => {
    const { clientId, refresh } = await boundRefresh();
    const res = await ep.token({ grant_type: REFRESH, client_id: clientId, refresh_token: refresh }, { dpop: await proofFor() });
    expect([res.status, res.body.token_type]).toEqual([200, 'DPoP']);
    expect(await ep.store.getRefreshToken(hashToken(res.body.refresh_token))).toMatchObject({ dpopJkt: await key.thumbprint() });
  });

  it('presented again within the grace window (with a proof of its key): the same pair, still of type DPoP', async () => {
    const { clientId, refresh } = await boundRefresh();
    const first = await ep.token({ grant_type: REFRESH, client_id: clientId, refresh_token: refresh }, { dpop: await proofFor() });
    const again = await ep.token({ grant_type: REFRESH, client_id: clientId, refresh_token: refresh }, { dpop: await proofFor() });
    expect([again.status, again.body.token_type, again.body.access_token]).toEqual([200, 'DPoP', first.body.access_token]);
  });

  it('without a proof: 400 invalid_dpop_proof, the token not rotated', async () => {
    const { clientId, refresh } = await boundRefresh();
    const res = await ep.token({ grant_type: REFRESH, client_id: clientId, refresh_token: refresh });
    expect([res.status, res.body.error]).toEqual([400, 'invalid_dpop_proof']);
    expect(await ep.store.getRefreshToken(hashToken(refresh))).not.toHaveProperty('rotatedAt');
  });

  it('with a proof of another key: 400 invalid_grant, the token not rotated', async () => {
    const { clientId, refresh } = await boundRefresh();
    const res = await ep.token(
      { grant_type: REFRESH, client_id: clientId, refresh_token: refresh },
      { dpop: await proofFor(await DpopKey.generate()) },
    );
    expect([res.status, res.body.error]).toEqual([400, 'invalid_grant']);
    expect(await ep.store.getRefreshToken(hashToken(refresh))).not.toHaveProperty('rotatedAt');
  });
});

describe('proofs refused at /token: 400 invalid_dpop_proof, nothing issued', () => {
  const now = () => Math.floor(ep.clock.now() / 1000);
  it.each<[string, () => Promise<string>]>([
    ['for another URL (the resource)', () => key.proof({ htm: 'POST', htu: `${PUBLIC_URL}/mcp`, iat: now() })],
    ['for another method', () => key.proof({ htm: 'GET', htu: TOKEN_URL, iat: now() })],
    ['alg none', async () => unsignedProof(key.publicJwk, { htm: 'POST', htu: TOKEN_URL })],
    ['HS256', () => hmacProof({ htm: 'POST', htu: TOKEN_URL })],
    ['typ JWT', () => key.proof({ htm: 'POST', htu: TOKEN_URL, iat: now() }, { typ: 'JWT' })],
    ['an iat out of the window', () => key.proof({ htm: 'POST', htu: TOKEN_URL, iat: now() - 3600 })],
    ['not a JWS', async () => 'x'],
  ])('a proof %s', async (_label, make) => {
    const auth = await machineClient();
    const before = ep.auditEvents().filter((e) => e.result === 'ok').length;
    const res = await ep.token({ grant_type: CC }, { ...auth, dpop: await make() });
    expect([res.status, res.body.error]).toEqual([400, 'invalid_dpop_proof']);
    expect(res.body.access_token).toBeUndefined();
    expect(ep.auditEvents().filter((e) => e.result === 'ok').length).toBe(before);
  });

  it('the same proof twice: the second is refused (its jti was spent)', async () => {
    const auth = await machineClient();
    const proof = await proofFor();
    expect((await ep.token({ grant_type: CC }, { ...auth, dpop: proof })).status).toBe(200);
    const again = await ep.token({ grant_type: CC }, { ...auth, dpop: proof });
    expect([again.status, again.body.error]).toEqual([400, 'invalid_dpop_proof']);
  });
});

describe('token exchange (RFC 8693) with a proof', () => {
  let idp: TestIdp;
  let withIdp: OAuthEndpoints;
  beforeAll(async () => {
    idp = await startTestIdp();
    withIdp = await startOAuthEndpoints({
      config: { idp: { issuer: idp.issuer, audience: 'dpop-tests', jwksUrl: idp.jwksUrl, jwksCooldownMs: 0 } },
    });
  });
  afterAll(async () => {
    await withIdp?.close();
    await idp?.close();
  });

  it('the user-grade token it issues is bound: token_type DPoP, the thumbprint in its record', async () => {
    const now = Math.floor(withIdp.clock.now() / 1000);
    const subjectToken = await idp.sign({ iss: idp.issuer, aud: 'dpop-tests', sub: 'u-1', exp: now + 60 });
    const res = await withIdp.token(
      {
        grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
        subject_token: subjectToken,
        subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
      },
      { dpop: await key.proof({ htm: 'POST', htu: TOKEN_URL, iat: now }) },
    );
    expect([res.status, res.body.token_type]).toEqual([200, 'DPoP']);
    expect((await withIdp.store.lookupToken(hashToken(res.body.access_token))).user).toMatchObject({
      subject: 'u-1',
      dpopJkt: await key.thumbprint(),
    });
  });
});

describe('discovery', () => {
  it('both metadata documents list the DPoP algorithms; the resource says whether bound tokens are required', async () => {
    const as = (await (await fetch(`${ep.url}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
    const pr = (await (await fetch(`${ep.url}/.well-known/oauth-protected-resource/mcp`)).json()) as Record<string, unknown>;
    expect(as.dpop_signing_alg_values_supported).toEqual(['ES256', 'RS256', 'PS256', 'EdDSA']);
    expect(pr.dpop_signing_alg_values_supported).toEqual(['ES256', 'RS256', 'PS256', 'EdDSA']);
    expect(pr.dpop_bound_access_tokens_required).toBe(false);
  });
});

describe('server nonces (oauth.dpopNonce)', () => {
  it('a proof without the nonce: 400 use_dpop_nonce with a DPoP-Nonce; signed again with it: issued', async () => {
    const withNonces = await startOAuthEndpoints({ config: { oauth: { dpopNonce: true } } });
    try {
      const c = await withNonces.client({ grantTypes: [CC] });
      const auth = basic(c.clientId, c.clientSecret!);
      const iat = Math.floor(withNonces.clock.now() / 1000);
      const first = await withNonces.token({ grant_type: CC }, { ...auth, dpop: await key.proof({ htm: 'POST', htu: TOKEN_URL, iat }) });
      expect([first.status, first.body.error]).toEqual([400, 'use_dpop_nonce']);
      const nonce = first.headers.get('dpop-nonce');
      expect(nonce).toMatch(/^[A-Za-z0-9_-]{32}$/);
      const second = await withNonces.token(
        { grant_type: CC },
        { ...auth, dpop: await key.proof({ htm: 'POST', htu: TOKEN_URL, iat, nonce: nonce! }) },
      );
      expect([second.status, second.body.token_type]).toEqual([200, 'DPoP']);
    } finally {
      await withNonces.close();
    }
  });
});
