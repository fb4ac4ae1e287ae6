// POST /token at the handler level: the OAuth routes in process on the memory store (no proxy, no
// upstream, no Redis), each grant's success and its error rows, in a few seconds. The full stacks on
// Redis (test/integration/oauth.test.ts, sign-in.test.ts) stay the word on storage and the proxy;
// this is the quick loop for a change to a grant. Modelled on the MCP TypeScript SDK's
// src/server/auth/handlers/token.test.ts, without its mocks: real store, real JWTs, real PKCE.

import { hash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateToken, hashToken } from '../../src/model/credentials.ts';
import { GRANTS } from '../../src/oauth/grants/index.ts';
import { keyLayout, userFromFields } from '../../src/store/records.ts';
import { basic } from '../support/http.ts';
import { readable } from '../support/records.ts';
import { PUBLIC_URL, startOAuthEndpoints, type OAuthEndpoints } from '../support/oauth-endpoints.ts';
import { idpKey, startTestIdp, type TestIdp } from '../support/test-idp.ts';
import { SignJWT } from 'jose';

const CC = 'client_credentials';
const REFRESH = 'refresh_token';
const CODE = 'authorization_code';
const DEVICE = 'urn:ietf:params:oauth:grant-type:device_code';
const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const JWT_TYPE = 'urn:ietf:params:oauth:token-type:jwt';
const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const ID_JAG_PROFILE = 'urn:ietf:params:oauth:grant-profile:id-jag';
const AUDIENCE = 'token-endpoint-tests';
const REDIRECT = 'http://127.0.0.1:7777/callback';

let idp: TestIdp;
let ep: OAuthEndpoints;

beforeAll(async () => {
  idp = await startTestIdp();
  ep = await startOAuthEndpoints({
    signIn: true,
    config: {
      idp: { issuer: idp.issuer, audience: AUDIENCE, jwksUrl: idp.jwksUrl, jwksCooldownMs: 0, idJag: true },
      oauth: { refreshReuseGraceSeconds: 2 },
    },
  });
});
afterAll(async () => {
  await ep?.close();
  await idp?.close();
});

const lastAudit = () => ep.auditEvents().at(-1)!;

describe('every grant', () => {
  it.each<[string, Record<string, string>, number, string]>([
    ['no grant_type', {}, 400, 'invalid_request'],
    ['an unknown grant_type', { grant_type: 'password' }, 400, 'unsupported_grant_type'],
    ['a resource that is not this /mcp', { grant_type: CC, resource: 'https://elsewhere.example/mcp' }, 400, 'invalid_target'],
    ['an audience that is not this /mcp', { grant_type: EXCHANGE, audience: 'https://elsewhere.example/mcp' }, 400, 'invalid_target'],
  ])('%s: %i %s, audited as an anonymous refusal', async (_label, params, status, error) => {
    const res = await ep.token(params);
    expect([res.status, res.body.error]).toEqual([status, error]);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(lastAudit()).toMatchObject({ who: 'anonymous', result: error, detail: { status } });
  });

  it('a refusal is audited under the grant it asked for', async () => {
    await ep.token({ grant_type: REFRESH, client_id: 'mcp_00000000000000000000000000000000' });
    expect(lastAudit()).toMatchObject({
      who: 'anonymous',
      action: 'token.refresh_token',
      result: 'invalid_client',
      clientId: 'mcp_00000000000000000000000000000000',
    });
  });

  // RFC 6749 §3.2: request parameters must not be included more than once; the form refuses a
  // repeat before any grant runs, so every parameter of every grant is refused alike.
  it.each(GRANTS.flatMap((g) => g.parameters.map((p) => [g.grantType, p] as const)))(
    '%s: %s sent twice is invalid_request',
    async (grant, name) => {
      const res = await fetch(`${ep.url}/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: `grant_type=${encodeURIComponent(grant)}&${name}=a&${name}=b`,
      });
      expect([res.status, ((await res.json()) as { error: string }).error]).toEqual([400, 'invalid_request']);
    },
  );

  // RFC 6749 §3.2: a parameter sent without a value is treated as omitted.
  it('grant_type, or a grant parameter, sent empty is answered as when omitted', async () => {
    expect([(await ep.token({ grant_type: '' })).body, (await ep.token({})).body]).toEqual([
      { error: 'invalid_request', error_description: 'grant_type is required' },
      { error: 'invalid_request', error_description: 'grant_type is required' },
    ]);
    const c = (await ep.client({ grantTypes: [REFRESH] })) as { clientId: string; clientSecret: string };
    const auth = basic(c.clientId, c.clientSecret);
    const empty = await ep.token({ grant_type: REFRESH, refresh_token: '' }, auth);
    const omitted = await ep.token({ grant_type: REFRESH }, auth);
    expect([empty.status, empty.body]).toEqual([400, { error: 'invalid_request', error_description: 'refresh_token is required' }]);
    expect([omitted.status, omitted.body]).toEqual([empty.status, empty.body]);
  });

  it('each grant in the list has its own audit action', () => {
    const actions = GRANTS.map((g) => g.action);
    expect(new Set(actions).size).toBe(GRANTS.length);
  });

  it('grant_types_supported lists the enabled grants; without an IdP or sign-in those are off', async () => {
    const meta = (await (await fetch(`${ep.url}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
    expect(meta.grant_types_supported).toEqual([CC, REFRESH, CODE, DEVICE, EXCHANGE, JWT_BEARER]);
    expect(meta.authorization_grant_profiles_supported).toEqual([ID_JAG_PROFILE]);
    const bare = await startOAuthEndpoints();
    try {
      const meta2 = (await (await fetch(`${bare.url}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
      expect(meta2.grant_types_supported).toEqual([CC, REFRESH]);
      expect(meta2.authorization_grant_profiles_supported).toBeUndefined();
      for (const grant of [CODE, DEVICE, EXCHANGE, JWT_BEARER]) {
        const res = await bare.token({ grant_type: grant });
        expect([res.status, res.body.error]).toEqual([400, 'unsupported_grant_type']);
      }
    } finally {
      await bare.close();
    }
  });
});

describe('client authentication', () => {
  it.each<[string, (c: { clientId: string; clientSecret: string }) => [Record<string, string>, Record<string, string>], string, boolean]>([
    ['no client at all', () => [{}, {}], 'invalid_client', false],
    ['a wrong secret by Basic: with a Basic challenge', (c) => [{}, basic(c.clientId, 'wrong')], 'invalid_client', true],
    ['a wrong secret in the form', (c) => [{ client_id: c.clientId, client_secret: 'wrong' }, {}], 'invalid_client', false],
    ['an unknown client by Basic', () => [{}, basic('mcp_ffffffffffffffffffffffffffffffff', 'x')], 'invalid_client', true],
    ['malformed Basic', () => [{}, { authorization: 'Basic !!!' }], 'invalid_client', true],
    [
      'Basic and client_secret both',
      (c) => [{ client_secret: c.clientSecret }, basic(c.clientId, c.clientSecret)],
      'invalid_request',
      false,
    ],
    [
      'a form client_id other than the Basic one',
      (c) => [{ client_id: 'mcp_other' }, basic(c.clientId, c.clientSecret)],
      'invalid_request',
      false,
    ],
    ['a secret without a client_id', (c) => [{ client_secret: c.clientSecret }, {}], 'invalid_client', false],
  ])('%s: %s', async (_label, credentials, error, challenge) => {
    const c = (await ep.client({ grantTypes: [CC] })) as { clientId: string; clientSecret: string };
    const [params, headers] = credentials(c);
    const res = await ep.token({ grant_type: CC, ...params }, headers);
    expect(res.body.error).toBe(error);
    expect(res.status).toBe(error === 'invalid_client' ? 401 : 400);
    expect(res.headers.get('www-authenticate')).toBe(challenge ? 'Basic realm="mcp-bearer-proxy", charset="UTF-8"' : null);
  });
});

describe('client_credentials', () => {
  it('issues an access token (and a refresh token under the default profile) and audits it as the client', async () => {
    const c = await ep.client({ grantTypes: [CC, REFRESH], scope: 'read write' });
    const res = await ep.token({ grant_type: CC, scope: 'read' }, basic(c.clientId, c.clientSecret!));
    expect(res.status).toBe(200);
    expect(res.headers.get('pragma')).toBe('no-cache');
    expect(res.body).toMatchObject({ token_type: 'Bearer', expires_in: 3600, scope: 'read' });
    expect(res.body.refresh_token).toMatch(/^[0-9a-f]{64}$/);
    const found = await ep.store.lookupToken(hashToken(res.body.access_token));
    expect(found.oauth).toMatchObject({ clientId: c.clientId, scope: 'read' });
    // The log redacts a field named refreshToken; the audit stream keeps the flag.
    const [streamed] = await ep.ctx.audit.list(1);
    expect(streamed).toMatchObject({
      who: `client:${c.clientId}`,
      action: 'token.client_credentials',
      result: 'ok',
      clientId: c.clientId,
      detail: { refreshToken: true },
    });
  });

  it("client_secret_post works too, and no scope asked is the client's scope", async () => {
    const c = await ep.client({ grantTypes: [CC], scope: 'read', profile: 'service' });
    const res = await ep.token({ grant_type: CC, client_id: c.clientId, client_secret: c.clientSecret! });
    expect(res.status).toBe(200);
    expect(res.body.scope).toBe('read');
    expect(res.body.refresh_token).toBeUndefined();
  });

  it.each<[string, Parameters<OAuthEndpoints['client']>[0], Record<string, string>, string]>([
    ['a client without the grant', { grantTypes: [REFRESH] }, {}, 'unauthorized_client'],
    ["a scope beyond the client's", { grantTypes: [CC], scope: 'read' }, { scope: 'read admin' }, 'invalid_scope'],
    ['a malformed scope', { grantTypes: [CC] }, { scope: 'a\u0001b' }, 'invalid_request'],
    ['a profile that no longer exists', { grantTypes: [CC], profile: 'gone' }, {}, 'unauthorized_client'],
  ])('%s: %s', async (_label, fields, params, error) => {
    const c = await ep.client(fields);
    const res = await ep.token({ grant_type: CC, ...params }, basic(c.clientId, c.clientSecret!));
    expect([res.status, res.body.error]).toEqual([400, error]);
  });

  it.each([
    ['not a number', 'abc'],
    ['a fraction', '1.5'],
    ['zero', '0'],
  ])(
    'a stored profile whose access-token lifetime is %s: refused, nothing issued (never a token that expires at once or never)',
    async (_label, lifetime) => {
      const name = `custom-${lifetime}`;
      await ep.store.seedProfiles([
        {
          name,
          description: 'edited by hand',
          accessTokenLifetimeSeconds: 3600,
          refreshTokenLifetimeSeconds: 0,
          grantTypes: [CC],
          createdAt: ep.clock.now(),
        },
      ]);
      ep.store.setRawField(keyLayout('mcpauth:').profile(name), 'accessTokenLifetimeSeconds', lifetime);
      const c = await ep.client({ grantTypes: [CC], profile: name });
      const res = await ep.token({ grant_type: CC }, basic(c.clientId, c.clientSecret!));
      expect([res.status, res.body.error]).toEqual([400, 'unauthorized_client']);
      // Zero reads as a number out of range; anything but whole seconds makes the stored profile unreadable.
      const why = lifetime === '0' ? 'has no usable token lifetime' : 'is unreadable';
      expect(res.body.error_description).toMatch(new RegExp(`profile "${name}" ${why}`));
      expect(res.body.access_token).toBeUndefined();
    },
  );

  it('a public client is refused', async () => {
    const c = await ep.client({ grantTypes: [CC], tokenEndpointAuthMethod: 'none' });
    const res = await ep.token({ grant_type: CC, client_id: c.clientId });
    expect([res.status, res.body.error]).toEqual([400, 'unauthorized_client']);
  });
});

describe('refresh_token', () => {
  async function pair(scope?: string) {
    const c = await ep.client({ grantTypes: [CC, REFRESH], ...(scope ? { scope } : {}) });
    const res = await ep.token({ grant_type: CC }, basic(c.clientId, c.clientSecret!));
    return { c, auth: basic(c.clientId, c.clientSecret!), refresh: res.body.refresh_token as string };
  }

  it('rotates: a new pair, the old refresh token spent', async () => {
    const { c, auth, refresh } = await pair();
    const res = await ep.token({ grant_type: REFRESH, refresh_token: refresh }, auth);
    expect(res.status).toBe(200);
    expect(res.body.refresh_token).not.toBe(refresh);
    expect(lastAudit()).toMatchObject({
      action: 'token.refresh_token',
      result: 'ok',
      clientId: c.clientId,
      detail: { rotatedFrom: hashToken(refresh).slice(0, 8) },
    });
  });

  it('a stored refresh token that reads as corrupt (a hand edit broke its expiry): invalid_grant, nothing rotated', async () => {
    const { auth, refresh } = await pair();
    const key = keyLayout('mcpauth:').refreshToken(hashToken(refresh));
    ep.store.setRawField(key, 'expiresAt', 'soon');
    const res = await ep.token({ grant_type: REFRESH, refresh_token: refresh }, auth);
    expect([res.status, res.body.error]).toEqual([400, 'invalid_grant']);
    // The record is still there, as edited, and not rotated (a missing record would not be "not rotated").
    expect(ep.store.rawHash(key)).toMatchObject({ expiresAt: 'soon' });
    expect(ep.store.rawHash(key)).not.toHaveProperty('rotatedAt');
  });

  it('presented again within the grace window: new tokens; after it: the family revoked, audited as reuse', async () => {
    const { c, auth, refresh } = await pair();
    const first = await ep.token({ grant_type: REFRESH, refresh_token: refresh }, auth);
    const again = await ep.token({ grant_type: REFRESH, refresh_token: refresh }, auth);
    expect(again.status).toBe(200);
    expect(lastAudit()).toMatchObject({ result: 'ok', detail: { graceReuse: true } });
    ep.clock.advance(2001);
    const replay = await ep.token({ grant_type: REFRESH, refresh_token: refresh }, auth);
    expect([replay.status, replay.body.error]).toEqual([400, 'invalid_grant']);
    const events = ep.auditEvents();
    expect(events.at(-1)).toMatchObject({
      who: `client:${c.clientId}`,
      action: 'token.refresh_token',
      result: 'reuse_detected',
      detail: { familyRevoked: true },
    });
    // One event for the replay, not a second anonymous one besides it.
    expect(events.at(-2)).toMatchObject({ result: 'ok' });
    const successor = await ep.token({ grant_type: REFRESH, refresh_token: first.body.refresh_token }, auth);
    expect(successor.body.error).toBe('invalid_grant');
  });

  it.each<[string, (r: string) => Record<string, string>, string]>([
    ['no refresh_token', () => ({}), 'invalid_request'],
    ['not token-shaped', () => ({ refresh_token: 'x' }), 'invalid_grant'],
    ['unknown', () => ({ refresh_token: generateToken() }), 'invalid_grant'],
    ['a wider scope than the grant', (r) => ({ refresh_token: r, scope: 'read admin' }), 'invalid_scope'],
  ])('%s: %s', async (_label, params, error) => {
    const { auth, refresh } = await pair('read');
    const res = await ep.token({ grant_type: REFRESH, ...params(refresh) }, auth);
    expect([res.status, res.body.error]).toEqual([400, error]);
  });

  it('a grant issued without a scope cannot gain one at refresh (RFC 6749 §6): invalid_scope, the token still usable', async () => {
    const { auth, refresh } = await pair();
    for (const scope of ['mcp:write admin', 'read']) {
      const res = await ep.token({ grant_type: REFRESH, refresh_token: refresh, scope }, auth);
      expect([res.status, res.body.error]).toEqual([400, 'invalid_scope']);
    }
    const plain = await ep.token({ grant_type: REFRESH, refresh_token: refresh }, auth);
    expect(plain.status).toBe(200);
    expect(plain.body.scope).toBeUndefined();
  });

  it('a narrower scope at refresh is granted, and the next refresh stays within it', async () => {
    const { auth, refresh } = await pair('read write');
    const narrowed = await ep.token({ grant_type: REFRESH, refresh_token: refresh, scope: 'read' }, auth);
    expect([narrowed.status, narrowed.body.scope]).toEqual([200, 'read']);
    const widened = await ep.token({ grant_type: REFRESH, refresh_token: narrowed.body.refresh_token, scope: 'read write' }, auth);
    expect(widened.body.error).toBe('invalid_scope');
  });

  it("another client's refresh token is invalid_grant and stays usable by its owner", async () => {
    const { auth, refresh } = await pair();
    const other = await ep.client({ grantTypes: [REFRESH] });
    const res = await ep.token({ grant_type: REFRESH, refresh_token: refresh }, basic(other.clientId, other.clientSecret!));
    expect(res.body.error).toBe('invalid_grant');
    expect((await ep.token({ grant_type: REFRESH, refresh_token: refresh }, auth)).status).toBe(200);
  });

  it('expired: invalid_grant', async () => {
    const { auth, refresh } = await pair();
    ep.clock.advance(31 * 24 * 3600 * 1000);
    const res = await ep.token({ grant_type: REFRESH, refresh_token: refresh }, auth);
    expect(res.body.error).toBe('invalid_grant');
  });
});

describe('authorization_code', () => {
  const user = { subject: 'user-1', issuer: 'https://idp.example.test', email: 'ann@example.com', groups: ['staff'] };

  async function code(clientFields: Partial<Parameters<OAuthEndpoints['client']>[0]> = {}) {
    const c = await ep.client({
      grantTypes: [CODE, REFRESH],
      tokenEndpointAuthMethod: 'none',
      redirectUris: [REDIRECT],
      profile: 'interactive',
      source: 'dcr',
      ...clientFields,
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
      scope: 'read',
      user,
      createdAt: now,
      expiresAt: now + 60_000,
    });
    return { c, params: { grant_type: CODE, client_id: c.clientId, code: raw, redirect_uri: REDIRECT, code_verifier: verifier } };
  }

  it('redeems a code for tokens acting for the signed-in user', async () => {
    const { c, params } = await code();
    const res = await ep.token(params);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ token_type: 'Bearer', scope: 'read' });
    expect(res.body.refresh_token).toMatch(/^[0-9a-f]{64}$/);
    const found = await ep.store.lookupToken(hashToken(res.body.access_token));
    // The record of this access token, for this client and user, not revoked (null would be no record).
    expect(found.oauth).toMatchObject({ clientId: c.clientId, subject: 'user-1' });
    expect(found.oauth).toMatchObject({ revoked: false });
    expect(lastAudit()).toMatchObject({ who: `client:${c.clientId}`, action: 'token.authorization_code', result: 'ok', subject: 'user-1' });
  });

  it.each<[string, (p: Record<string, string>) => Record<string, string>, string]>([
    ['no code', ({ code: _c, ...p }) => p, 'invalid_request'],
    ['no redirect_uri', ({ redirect_uri: _r, ...p }) => p, 'invalid_request'],
    ['no code_verifier', ({ code_verifier: _v, ...p }) => p, 'invalid_request'],
    ['a wrong code_verifier', (p) => ({ ...p, code_verifier: randomBytes(32).toString('base64url') }), 'invalid_grant'],
    ['another redirect_uri', (p) => ({ ...p, redirect_uri: 'http://127.0.0.1:7778/callback' }), 'invalid_grant'],
    ['an unknown code', (p) => ({ ...p, code: generateToken() }), 'invalid_grant'],
  ])('%s: %s, and the code stays good', async (_label, change, error) => {
    const { params } = await code();
    const res = await ep.token(change(params));
    expect([res.status, res.body.error]).toEqual([400, error]);
    expect((await ep.token(params)).status).toBe(200);
  });

  it('a code used twice: invalid_grant, what the first use issued is revoked, audited as code reuse', async () => {
    const { c, params } = await code();
    const first = await ep.token(params);
    const second = await ep.token(params);
    expect([second.status, second.body.error]).toEqual([400, 'invalid_grant']);
    expect(lastAudit()).toMatchObject({
      who: `client:${c.clientId}`,
      action: 'token.authorization_code',
      result: 'code_reuse',
      subject: 'user-1',
      detail: { revoked: true },
    });
    const found = await ep.store.lookupToken(hashToken(first.body.access_token));
    expect(found.oauth).toMatchObject({ revoked: true });
  });

  it('a stored code that reads as corrupt (a hand edit emptied its subject): invalid_grant, nothing redeemed', async () => {
    const { params } = await code();
    const key = keyLayout('mcpauth:').authorizationCode(hashToken(params.code));
    ep.store.setRawField(key, 'subject', '');
    const res = await ep.token(params);
    expect([res.status, res.body.error]).toEqual([400, 'invalid_grant']);
    // The record is still there, as edited, and not redeemed (a missing record would not be "not redeemed").
    expect(ep.store.rawHash(key)).toMatchObject({ subject: '' });
    expect(ep.store.rawHash(key)).not.toHaveProperty('redeemedAt');
  });

  it("another client's code: invalid_grant", async () => {
    const { params } = await code();
    const other = await ep.client({ grantTypes: [CODE], tokenEndpointAuthMethod: 'none', redirectUris: [REDIRECT] });
    const res = await ep.token({ ...params, client_id: other.clientId });
    expect(res.body.error).toBe('invalid_grant');
  });
});

describe('token exchange (RFC 8693)', () => {
  const jwt = (claims: Record<string, unknown> = {}, header: Record<string, unknown> = {}) => {
    const now = Math.floor(ep.clock.now() / 1000);
    return idp.sign({ iss: idp.issuer, aud: AUDIENCE, sub: 'u-9', exp: now + 60, email: 'u9@example.com', ...claims }, header);
  };

  // The types of an ID token (none, or JWT) and of an RFC 9068 access token, in the spellings RFC 7515 §4.1.9 allows.
  it.each([
    ['no typ', {}],
    ...['JWT', 'jwt', 'application/jwt', 'at+jwt', 'application/at+jwt', 'AT+JWT'].map((typ) => [`typ ${typ}`, { typ }]),
  ] as Array<[string, Record<string, unknown>]>)('a JWT with %s is taken', async (_label, header) => {
    const res = await ep.token({ grant_type: EXCHANGE, subject_token: await jwt({}, header), subject_token_type: JWT_TYPE });
    expect(res.status).toBe(200);
  });

  // An ID-JAG (and every JWT made for another purpose) signed by the same IdP for the same audience
  // is not an identity to exchange: the ID-JAG is a single-use grant bound to one client.
  it.each([
    'oauth-id-jag+jwt',
    'application/oauth-id-jag+jwt',
    'logout+jwt',
    'secevent+jwt',
    'dpop+jwt',
    'client-authentication+jwt',
    'jwt+other',
    '',
  ])('a JWT with typ %j is invalid_grant, and the reason is logged', async (typ) => {
    const res = await ep.token({
      grant_type: EXCHANGE,
      subject_token: await jwt({ jti: randomBytes(8).toString('hex'), client_id: 'mcp_x' }, { typ }),
      subject_token_type: JWT_TYPE,
    });
    expect([res.status, res.body.error]).toEqual([400, 'invalid_grant']);
    const refused = ep.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'token exchange refused');
    expect(refused.at(-1)).toMatchObject({ reason: 'typ not an ID token or access token' });
  });

  it('a typ that is not a string is invalid_grant', async () => {
    const res = await ep.token({ grant_type: EXCHANGE, subject_token: await jwt({}, { typ: ['JWT'] }), subject_token_type: JWT_TYPE });
    expect([res.status, res.body.error]).toEqual([400, 'invalid_grant']);
  });

  it('an IdP JWT becomes a seven-day user-grade token, audited as the user', async () => {
    const res = await ep.token({ grant_type: EXCHANGE, subject_token: await jwt(), subject_token_type: JWT_TYPE });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      token_type: 'Bearer',
      issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      expires_in: 604800,
    });
    const found = await ep.store.lookupToken(hashToken(res.body.access_token));
    expect(found.user).toMatchObject({ subject: 'u-9' });
    expect(lastAudit()).toMatchObject({ who: 'user', action: 'token.token_exchange', result: 'ok', subject: 'u-9' });
  });

  it.each<[string, () => Promise<Record<string, string>>, string]>([
    ['no subject_token', async () => ({ subject_token_type: JWT_TYPE }), 'invalid_request'],
    ['no subject_token_type', async () => ({ subject_token: await jwt() }), 'invalid_request'],
    ['another subject_token_type', async () => ({ subject_token: await jwt(), subject_token_type: 'urn:x' }), 'invalid_request'],
    ['an actor_token', async () => ({ subject_token: await jwt(), subject_token_type: JWT_TYPE, actor_token: 'x' }), 'invalid_request'],
    [
      'another requested_token_type',
      async () => ({ subject_token: await jwt(), subject_token_type: JWT_TYPE, requested_token_type: 'urn:x' }),
      'invalid_request',
    ],
    [
      'an expired JWT',
      async () => ({ subject_token: await jwt({ exp: Math.floor(ep.clock.now() / 1000) - 600 }), subject_token_type: JWT_TYPE }),
      'invalid_grant',
    ],
    [
      'another audience',
      async () => ({ subject_token: await jwt({ aud: 'someone-else' }), subject_token_type: JWT_TYPE }),
      'invalid_grant',
    ],
    ['an empty subject_token', async () => ({ subject_token: '', subject_token_type: JWT_TYPE }), 'invalid_grant'],
  ])('%s: %s', async (_label, params, error) => {
    const res = await ep.token({ grant_type: EXCHANGE, ...(await params()) });
    expect([res.status, res.body.error]).toEqual([400, error]);
  });

  it('a client that authenticates must hold the grant', async () => {
    const c = await ep.client({ grantTypes: [CC] });
    const res = await ep.token(
      { grant_type: EXCHANGE, subject_token: await jwt(), subject_token_type: JWT_TYPE },
      basic(c.clientId, c.clientSecret!),
    );
    expect([res.status, res.body.error]).toEqual([400, 'unauthorized_client']);
  });
});

describe('identity assertion grant (ID-JAG, jwt-bearer)', () => {
  // The claims of the MCP Enterprise-Managed Authorization extension's example ID-JAG (its §4.3),
  // bound to this server: aud its issuer, resource its /mcp, client_id the client presenting it.
  const ID_JAG_TYP = 'oauth-id-jag+jwt';
  const claims = (clientId: string, extra: Record<string, unknown> = {}) => {
    const now = Math.floor(ep.clock.now() / 1000);
    return {
      iss: idp.issuer,
      sub: 'U019488227',
      aud: PUBLIC_URL,
      resource: `${PUBLIC_URL}/mcp`,
      client_id: clientId,
      jti: randomBytes(12).toString('hex'),
      iat: now,
      exp: now + 300,
      scope: 'read write',
      email: 'ann@example.com',
      email_verified: true,
      groups: ['staff'],
      ...extra,
    };
  };
  const idJag = (clientId: string, extra: Record<string, unknown> = {}, header: Record<string, unknown> = { typ: ID_JAG_TYP }) =>
    idp.sign(claims(clientId, extra), header);
  const confidential = (fields: Partial<Parameters<OAuthEndpoints['client']>[0]> = {}) =>
    ep.client({ grantTypes: [JWT_BEARER], profile: 'service', ...fields });
  const present = (c: { clientId: string; clientSecret: string | undefined }, assertion: string, params: Record<string, string> = {}) =>
    ep.token({ grant_type: JWT_BEARER, assertion, ...params }, basic(c.clientId, c.clientSecret!));
  const unsigned = (payload: Record<string, unknown>, header: Record<string, unknown>) =>
    `${Buffer.from(JSON.stringify(header)).toString('base64url')}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.`;

  it("issues an access token acting for the assertion's user (no refresh token), audited as the client", async () => {
    const c = await confidential({ grantTypes: [JWT_BEARER, REFRESH], scope: 'read admin', profile: 'default' });
    const res = await present(c, await idJag(c.clientId));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ token_type: 'Bearer', expires_in: 3600, scope: 'read' });
    // The default profile gives refresh tokens to clients holding refresh_token; this grant never does:
    // the client asks the IdP for a fresh ID-JAG instead.
    expect(res.body.refresh_token).toBeUndefined();
    const found = await ep.store.lookupToken(hashToken(res.body.access_token));
    expect(found.oauth).toMatchObject({ clientId: c.clientId, scope: 'read' });
    expect(found.oauth).toMatchObject({ subject: 'U019488227', issuer: idp.issuer, email: 'ann@example.com', groups: ['staff'] });
    // The log redacts a field named refreshToken; the audit stream keeps the flag.
    const [streamed] = await ep.ctx.audit.list(1);
    expect(streamed).toMatchObject({
      who: `client:${c.clientId}`,
      action: 'token.id_jag',
      result: 'ok',
      clientId: c.clientId,
      subject: 'U019488227',
      detail: { refreshToken: false },
    });
  });

  it('aud as a one-element array naming this server is taken: it is that string (RFC 7519 §4.1.3)', async () => {
    const c = await confidential();
    expect((await present(c, await idJag(c.clientId, { aud: [PUBLIC_URL] }))).status).toBe(200);
  });

  it('client_secret_post works too; without a resource claim the assertion is taken', async () => {
    const c = await confidential();
    const res = await ep.token({
      grant_type: JWT_BEARER,
      assertion: await idJag(c.clientId, { resource: undefined }),
      client_id: c.clientId,
      client_secret: c.clientSecret!,
    });
    expect(res.status).toBe(200);
  });

  it.each<[string, (c: string) => Promise<string>, string]>([
    ['another aud', (c) => idJag(c, { aud: 'https://other-as.example.test' }), 'ERR_JWT_CLAIM_VALIDATION_FAILED (aud)'],
    ['aud naming this server and another', (c) => idJag(c, { aud: [PUBLIC_URL, 'https://other-as.example.test'] }), 'several audiences'],
    ['aud naming this server twice', (c) => idJag(c, { aud: [PUBLIC_URL, PUBLIC_URL] }), 'several audiences'],
    ['aud an empty array', (c) => idJag(c, { aud: [] }), 'ERR_JWT_CLAIM_VALIDATION_FAILED (aud)'],
    [
      'aud with a trailing slash (not this issuer exactly)',
      (c) => idJag(c, { aud: `${PUBLIC_URL}/` }),
      'ERR_JWT_CLAIM_VALIDATION_FAILED (aud)',
    ],
    ['another iss', (c) => idJag(c, { iss: 'https://other-idp.example.test' }), 'ERR_JWT_CLAIM_VALIDATION_FAILED (iss)'],
    ["another client's client_id", () => idJag('mcp_ffffffffffffffffffffffffffffffff'), 'client_id mismatch'],
    ['no client_id', (c) => idJag(c, { client_id: undefined }), 'ERR_JWT_CLAIM_VALIDATION_FAILED (client_id)'],
    ['another resource', (c) => idJag(c, { resource: 'https://other.example.test/mcp' }), 'resource mismatch'],
    ['the base URL as resource', (c) => idJag(c, { resource: PUBLIC_URL }), 'resource mismatch'],
    ['typ JWT', (c) => idJag(c, {}, { typ: 'JWT' }), 'ERR_JWT_CLAIM_VALIDATION_FAILED (typ)'],
    ['no typ (an ID token)', (c) => idJag(c, {}, {}), 'ERR_JWT_CLAIM_VALIDATION_FAILED (typ)'],
    [
      'expired',
      (c) => idJag(c, { iat: Math.floor(ep.clock.now() / 1000) - 400, exp: Math.floor(ep.clock.now() / 1000) - 100 }),
      'ERR_JWT_EXPIRED (exp)',
    ],
    ['a lifetime over ten minutes', (c) => idJag(c, { exp: Math.floor(ep.clock.now() / 1000) + 3600 }), 'lifetime too long'],
    [
      'issued in the future',
      (c) => idJag(c, { iat: Math.floor(ep.clock.now() / 1000) + 120, exp: Math.floor(ep.clock.now() / 1000) + 300 }),
      'ERR_JWT_CLAIM_VALIDATION_FAILED (iat)',
    ],
    ['no iat', (c) => idJag(c, { iat: undefined }), 'ERR_JWT_CLAIM_VALIDATION_FAILED (iat)'],
    ['no jti', (c) => idJag(c, { jti: undefined }), 'ERR_JWT_CLAIM_VALIDATION_FAILED (jti)'],
    ['alg none', async (c) => unsigned(claims(c), { alg: 'none', typ: ID_JAG_TYP }), 'ERR_JOSE_ALG_NOT_ALLOWED'],
    // HMAC keyed with the IdP's public key (the classic confusion): the allow-list refuses it before any key is looked up.
    [
      'alg HS256 keyed with the public key',
      (c) =>
        new SignJWT(claims(c))
          .setProtectedHeader({ alg: 'HS256', typ: ID_JAG_TYP, kid: idp.key.kid })
          .sign(Buffer.from(JSON.stringify(idp.key.jwk))),
      'ERR_JOSE_ALG_NOT_ALLOWED',
    ],
    // A key the IdP publishes, of an algorithm outside idp.algorithms: only the allow-list refuses it.
    [
      'ES384 (published, not allowed)',
      async (c) => idp.sign(claims(c), { typ: ID_JAG_TYP }, await idp.publish('ES384')),
      'ERR_JOSE_ALG_NOT_ALLOWED',
    ],
    [
      'a key the IdP never published',
      async (c) => idp.sign(claims(c), { typ: ID_JAG_TYP }, await idpKey('ES256', 'k1')),
      'ERR_JWS_SIGNATURE_VERIFICATION_FAILED',
    ],
    ['a malformed scope claim', (c) => idJag(c, { scope: 'read\u0001' }), 'bad scope'],
    ['not a JWT', async () => 'not-a-jwt', 'not a compact JWS'],
  ])('%s: invalid_grant, the reason audited and not answered', async (_label, make, reason) => {
    const c = await confidential();
    const res = await present(c, await make(c.clientId));
    expect([res.status, res.body]).toEqual([400, { error: 'invalid_grant', error_description: 'the assertion is not acceptable' }]);
    expect(lastAudit()).toMatchObject({ who: `client:${c.clientId}`, action: 'token.id_jag', result: 'invalid_grant', detail: { reason } });
  });

  it('an empty assertion is invalid_grant; none at all is invalid_request', async () => {
    const c = await confidential();
    expect((await present(c, '')).body.error).toBe('invalid_grant');
    expect((await ep.token({ grant_type: JWT_BEARER }, basic(c.clientId, c.clientSecret!))).body.error).toBe('invalid_request');
  });

  it('used twice: invalid_grant, audited as a replay; the first token keeps working', async () => {
    const c = await confidential();
    const assertion = await idJag(c.clientId);
    const first = await present(c, assertion);
    expect(first.status).toBe(200);
    const again = await present(c, assertion);
    expect([again.status, again.body.error]).toEqual([400, 'invalid_grant']);
    expect(lastAudit()).toMatchObject({
      who: `client:${c.clientId}`,
      action: 'token.id_jag',
      result: 'replay',
      subject: 'U019488227',
      detail: { reason: 'replay' },
    });
    // The first token's record exists, for this client, and is not revoked (no record would be no token).
    const record = (await ep.store.lookupToken(hashToken(first.body.access_token))).oauth;
    expect(record).toMatchObject({ clientId: c.clientId, subject: 'U019488227', revoked: false });
  });

  it('a refused presentation does not spend the jti: the client it was issued to still gets its token', async () => {
    const c = await confidential();
    const thief = await confidential();
    const assertion = await idJag(c.clientId);
    expect((await present(thief, assertion)).body.error).toBe('invalid_grant');
    expect((await present(c, assertion)).status).toBe(200);
  });

  it('a jti is remembered until the assertion expires (plus the clock tolerance), then forgotten with it', async () => {
    const c = await confidential();
    const assertion = await idJag(c.clientId);
    expect((await present(c, assertion)).status).toBe(200);
    // Still within exp + 30 s tolerance: the assertion would verify, so the replay must be caught.
    ep.clock.advance(320_000);
    expect(lastAudit().result).toBe('ok');
    expect((await present(c, assertion)).body.error).toBe('invalid_grant');
    expect(lastAudit().result).toBe('replay');
    ep.clock.advance(20_000);
    expect((await present(c, assertion)).body.error).toBe('invalid_grant');
    expect(lastAudit().detail.reason).toBe('ERR_JWT_EXPIRED (exp)');
  });

  it('a key the IdP rotated in is fetched on its first use', async () => {
    const c = await confidential();
    const before = idp.jwksFetches;
    const rotated = await idp.rotate();
    const res = await present(c, await idp.sign(claims(c.clientId), { typ: ID_JAG_TYP }, rotated));
    expect(res.status).toBe(200);
    expect(idp.jwksFetches).toBeGreaterThan(before);
  });

  // The extension's §5: the client authenticates with its credentials as registered here, and may use
  // private_key_jwt. The assertion is built as RFC 7523 §3 asks: iss = sub = the client id, aud this issuer.
  it('a private_key_jwt client holding the grant gets its token (client authentication by signed assertion)', async () => {
    const key = await idpKey('ES256', 'agent-key');
    const c = await confidential({ tokenEndpointAuthMethod: 'private_key_jwt', jwks: JSON.stringify({ keys: [key.jwk] }) });
    const now = Math.floor(ep.clock.now() / 1000);
    const clientAssertion = await new SignJWT({})
      .setProtectedHeader({ alg: 'ES256', kid: key.kid })
      .setIssuer(c.clientId)
      .setSubject(c.clientId)
      .setAudience(PUBLIC_URL)
      .setIssuedAt(now)
      .setExpirationTime(now + 60)
      .setJti(randomBytes(8).toString('hex'))
      .sign(key.privateKey);
    const res = await ep.token({
      grant_type: JWT_BEARER,
      assertion: await idJag(c.clientId),
      client_id: c.clientId,
      client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
      client_assertion: clientAssertion,
    });
    expect(res.status).toBe(200);
    expect(lastAudit()).toMatchObject({ who: `client:${c.clientId}`, action: 'token.id_jag', result: 'ok' });
  });

  it('a private_key_jwt client without the grant is unauthorized_client: signing proves who it is, not that it may use ID-JAG', async () => {
    const key = await idpKey('ES256', 'other-agent-key');
    const c = await ep.client({
      grantTypes: ['client_credentials'],
      profile: 'service',
      tokenEndpointAuthMethod: 'private_key_jwt',
      jwks: JSON.stringify({ keys: [key.jwk] }),
    });
    const now = Math.floor(ep.clock.now() / 1000);
    const clientAssertion = await new SignJWT({})
      .setProtectedHeader({ alg: 'ES256', kid: key.kid })
      .setIssuer(c.clientId)
      .setSubject(c.clientId)
      .setAudience(PUBLIC_URL)
      .setIssuedAt(now)
      .setExpirationTime(now + 60)
      .setJti(randomBytes(8).toString('hex'))
      .sign(key.privateKey);
    const res = await ep.token({
      grant_type: JWT_BEARER,
      assertion: await idJag(c.clientId),
      client_id: c.clientId,
      client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
      client_assertion: clientAssertion,
    });
    expect([res.status, res.body.error]).toEqual([400, 'unauthorized_client']);
    expect(res.body.access_token).toBeUndefined();
  });

  it('a public client is invalid_client (this grant needs client authentication), whether or not it holds the grant', async () => {
    const pub = await confidential({ tokenEndpointAuthMethod: 'none' });
    const res = await ep.token({ grant_type: JWT_BEARER, assertion: await idJag(pub.clientId), client_id: pub.clientId });
    expect([res.status, res.body.error]).toEqual([401, 'invalid_client']);
    const none = await ep.token({ grant_type: JWT_BEARER, assertion: await idJag(pub.clientId) });
    expect([none.status, none.body.error]).toEqual([401, 'invalid_client']);
  });

  it('a confidential client without the grant is unauthorized_client', async () => {
    const c = await ep.client({ grantTypes: [CC] });
    const res = await present(c, await idJag(c.clientId));
    expect([res.status, res.body.error]).toEqual([400, 'unauthorized_client']);
  });

  it.each<[string, string | undefined, string | undefined, string | undefined, string | undefined]>([
    // [label, the assertion's scope, the request's scope, the client's scope, granted]
    ["the assertion's within the client's", 'read write', undefined, 'read write admin', 'read write'],
    ["the assertion's narrowed to the client's", 'read write', undefined, 'read', 'read'],
    ["the assertion's, narrowed to what the request asks", 'read write', 'write', undefined, 'write'],
    ['a request asking beyond the assertion gets the common part only', 'read', 'read admin', undefined, 'read'],
    ['all three', 'read write delete', 'write delete admin', 'delete write', 'write delete'],
    ['nothing in common: a token without scopes', 'admin', undefined, 'read', undefined],
    ['an assertion without scopes: none', undefined, 'read', 'read', undefined],
  ])('scope: %s', async (_label, assertionScope, requested, clientScope, granted) => {
    const c = await confidential(clientScope !== undefined ? { scope: clientScope } : {});
    const res = await present(c, await idJag(c.clientId, { scope: assertionScope }), requested !== undefined ? { scope: requested } : {});
    expect(res.status).toBe(200);
    expect(res.body.scope).toBe(granted);
    expect(readable((await ep.store.lookupToken(hashToken(res.body.access_token))).oauth)?.scope).toBe(granted);
  });

  it('the email is kept only when the IdP verified it', async () => {
    const c = await confidential();
    const res = await present(c, await idJag(c.clientId, { email_verified: false }));
    expect(res.status).toBe(200);
    const stored = readable((await ep.store.lookupToken(hashToken(res.body.access_token))).oauth);
    expect(stored).toMatchObject({ subject: 'U019488227', issuer: idp.issuer, groups: ['staff'] });
    expect(stored).not.toHaveProperty('email');
  });

  it('the idp claim rules apply: a required group the assertion lacks is invalid_grant', async () => {
    const strict = await startOAuthEndpoints({
      config: { idp: { issuer: idp.issuer, jwksUrl: idp.jwksUrl, idJag: true, requiredGroup: 'mcp-users' } },
    });
    try {
      const c = await strict.client({ grantTypes: [JWT_BEARER] });
      const now = Math.floor(strict.clock.now() / 1000);
      const sign = (groups: string[]) =>
        idp.sign({ ...claims(c.clientId), aud: PUBLIC_URL, iat: now, exp: now + 300, groups }, { typ: ID_JAG_TYP });
      const refused = await strict.token({ grant_type: JWT_BEARER, assertion: await sign(['staff']) }, basic(c.clientId, c.clientSecret!));
      expect(refused.body.error).toBe('invalid_grant');
      const taken = await strict.token(
        { grant_type: JWT_BEARER, assertion: await sign(['mcp-users']) },
        basic(c.clientId, c.clientSecret!),
      );
      expect(taken.status).toBe(200);
    } finally {
      await strict.close();
    }
  });
});

describe('token lifetimes of the built-in profiles are configuration (oauth.profiles)', () => {
  let configured: OAuthEndpoints;
  beforeAll(async () => {
    configured = await startOAuthEndpoints({
      config: { oauth: { profiles: { default: { accessTokenLifetimeSeconds: 600, refreshTokenLifetimeSeconds: 7200 } } } },
    });
  });
  afterAll(async () => {
    await configured?.close();
  });

  it('the configured lifetimes apply although the store holds the profile seeded with others; a refresh keeps them', async () => {
    expect(readable(await configured.store.getProfile('default'))?.accessTokenLifetimeSeconds).toBe(3600);
    const c = await configured.client({ grantTypes: [CC, REFRESH] });
    const issuedAt = configured.clock.now();
    const res = await configured.token({ grant_type: CC }, basic(c.clientId, c.clientSecret!));
    expect([res.status, res.body.expires_in]).toEqual([200, 600]);
    const refresh = await configured.store.getRefreshToken(hashToken(res.body.refresh_token as string));
    expect(refresh).toMatchObject({ expiresAt: issuedAt + 7200 * 1000 });
    const rotated = await configured.token(
      { grant_type: REFRESH, refresh_token: res.body.refresh_token },
      basic(c.clientId, c.clientSecret!),
    );
    expect(rotated.body.expires_in).toBe(600);
  });

  it('a profile that is not built in keeps its stored lifetimes', async () => {
    await configured.store.seedProfiles([
      {
        name: 'custom',
        description: '',
        accessTokenLifetimeSeconds: 120,
        refreshTokenLifetimeSeconds: 0,
        grantTypes: [CC],
        createdAt: configured.clock.now(),
      },
    ]);
    const c = await configured.client({ grantTypes: [CC], profile: 'custom' });
    const res = await configured.token({ grant_type: CC }, basic(c.clientId, c.clientSecret!));
    expect([res.status, res.body.expires_in, res.body.refresh_token]).toEqual([200, 120, undefined]);
  });
});
