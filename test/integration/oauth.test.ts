// The authorization-server surface (discovery, /register, /token, /revoke, /introspect) over real HTTP, real Redis and a real local
// JWKS endpoint whose keys are generated at test time. Each RFC error case is a table row.

import { keyLayout } from '../../src/store/records.ts';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashToken, TTL_7_DAYS } from '../../src/model/credentials.ts';
import { basic, initializeStatus as mcpStatus, postForm as form, postJson as json } from '../support/http.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { rawRedis } from '../support/redis.ts';

const PUBLIC_URL = 'https://mcp.example.test';
const ISSUER = 'https://idp.example.test/';
const AUDIENCE = 'mcp-bearer-proxy-tests';
const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const JWT_TYPE = 'urn:ietf:params:oauth:token-type:jwt';

interface Jwks {
  url: string;
  fetches: number;
  publish(jwk: JWK): void;
  close(): Promise<void>;
}

async function startJwks(initial: JWK[]): Promise<Jwks> {
  const keys = [...initial];
  const state = { fetches: 0 };
  const server: Server = createServer((req, res) => {
    state.fetches++;
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ keys }));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`,
    get fetches() {
      return state.fetches;
    },
    publish: (jwk) => keys.push(jwk),
    close: () => new Promise((r) => server.close(() => r())),
  };
}

interface SigningKey {
  kid: string;
  alg: string;
  privateKey: CryptoKey;
  jwk: JWK;
}

async function signingKey(alg: 'RS256' | 'ES256', kid: string): Promise<SigningKey> {
  const { publicKey, privateKey } = await generateKeyPair(alg);
  return { kid, alg, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' } };
}

function b64url(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

describe('OAuth authorization server', () => {
  let stack: Stack;
  let jwks: Jwks;
  let rsa: SigningKey;
  let ec: SigningKey;
  let foreign: SigningKey;
  let base: string;

  beforeAll(async () => {
    rsa = await signingKey('RS256', 'rsa-1');
    ec = await signingKey('ES256', 'ec-1');
    foreign = await signingKey('RS256', 'rsa-1'); // same kid, a key the IdP never published
    jwks = await startJwks([rsa.jwk, ec.jwk]);
    stack = await startStack({
      config: {
        proxy: { publicUrl: PUBLIC_URL },
        idp: { issuer: ISSUER, audience: AUDIENCE, jwksUrl: jwks.url, jwksCooldownMs: 0, algorithms: ['RS256', 'ES256'] },
        oauth: { registrationRateLimitPerMinute: 1000 },
      },
    });
    base = stack.proxyUrl;
  });
  afterAll(async () => {
    await stack?.close();
    await jwks?.close();
  });

  function jwt(key: SigningKey, claims: Record<string, unknown> = {}, header: Record<string, unknown> = {}): Promise<string> {
    const now = Math.floor(stack.clock.now() / 1000);
    const payload = { iss: ISSUER, aud: AUDIENCE, sub: 'user-42', iat: now, exp: now + 300, ...claims };
    for (const [k, v] of Object.entries(payload)) if (v === undefined) delete (payload as Record<string, unknown>)[k];
    return new SignJWT(payload).setProtectedHeader({ alg: key.alg, kid: key.kid, ...header }).sign(key.privateKey);
  }

  function exchange(subjectToken: string, extra: Record<string, string> = {}, headers: Record<string, string> = {}) {
    return form(`${base}/token`, { grant_type: EXCHANGE, subject_token: subjectToken, subject_token_type: JWT_TYPE, ...extra }, headers);
  }

  async function adminClient(body: Record<string, unknown> = {}) {
    const created = await stack.admin('createClient', { clientName: 'machine', ...body });
    expect(created.status).toBe(201);
    return { id: created.body.clientId as string, secret: created.body.clientSecret as string };
  }

  describe('discovery', () => {
    it('RFC 8414 metadata names every endpoint under PUBLIC_URL, whatever the Host header says', async () => {
      const res = await fetch(`${base}/.well-known/oauth-authorization-server`, {
        headers: { host: 'evil.example', 'x-forwarded-host': 'evil.example' },
      });
      expect(res.status).toBe(200);
      const meta = (await res.json()) as Record<string, unknown>;
      expect(meta).toMatchObject({
        issuer: PUBLIC_URL,
        token_endpoint: `${PUBLIC_URL}/token`,
        registration_endpoint: `${PUBLIC_URL}/register`,
        revocation_endpoint: `${PUBLIC_URL}/revoke`,
        introspection_endpoint: `${PUBLIC_URL}/introspect`,
        grant_types_supported: ['client_credentials', 'refresh_token', EXCHANGE],
        token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'private_key_jwt', 'none'],
      });
      expect(JSON.stringify(meta)).not.toContain('evil');
    });

    it('RFC 9728 metadata at both paths points at this authorization server; the 401 challenge points at it', async () => {
      for (const path of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
        const meta = await (await fetch(`${base}${path}`, { headers: { host: 'evil.example' } })).json();
        expect(meta).toMatchObject({ resource: `${PUBLIC_URL}/mcp`, authorization_servers: [PUBLIC_URL] });
      }
      const res = await fetch(stack.mcpUrl, { method: 'POST', headers: { host: 'mcp.example.test' } });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe(
        `Bearer realm="mcp", resource_metadata="${PUBLIC_URL}/.well-known/oauth-protected-resource/mcp"`,
      );
    });

    it('a POST to a discovery document is 405; a GET to /token is 405', async () => {
      expect((await fetch(`${base}/.well-known/oauth-authorization-server`, { method: 'POST' })).status).toBe(405);
      const res = await fetch(`${base}/token`);
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe('POST, OPTIONS');
    });
  });

  describe('token exchange (RFC 8693)', () => {
    it('an IdP JWT becomes a seven-day user-grade token with exactly the documented record', async () => {
      const res = await exchange(await jwt(rsa));
      expect(res.status).toBe(200);
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(res.body).toEqual({
        access_token: expect.stringMatching(/^[0-9a-f]{64}$/),
        token_type: 'Bearer',
        expires_in: 604800,
        issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      });
      const tokenHash = hashToken(res.body.access_token);
      const raw = await rawRedis();
      try {
        const key = `${stack.prefix}userBearerTokens:${tokenHash}`;
        const now = stack.clock.now();
        expect(await raw.hgetall(key)).toEqual({
          tokenHash,
          subject: 'user-42',
          issuer: ISSUER,
          revoked: 'false',
          createdAt: String(now),
          expiresAt: String(now + TTL_7_DAYS),
        });
        expect(await raw.pexpiretime(key)).toBe(now + TTL_7_DAYS);
      } finally {
        await raw.quit();
      }
      expect(await mcpStatus(stack, res.body.access_token)).toBe(200);
      expect(stack.upstream!.seenHeaders.at(-1)).toMatchObject({ 'x-mcp-auth-kind': 'user', 'x-mcp-auth-subject': 'user-42' });
    });

    it('an ES256 JWT is accepted too; a small clock skew within the tolerance is accepted', async () => {
      expect((await exchange(await jwt(ec))).status).toBe(200);
      const now = Math.floor(stack.clock.now() / 1000);
      expect((await exchange(await jwt(rsa, { exp: now - 10, nbf: now + 10 }))).status).toBe(200);
    });

    const bad: Array<[string, () => Promise<string>]> = [
      [
        'alg none',
        async () => `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url({ iss: ISSUER, aud: AUDIENCE, sub: 'x', exp: 9999999999 })}.`,
      ],
      [
        'HS256 signed with the public key text as secret (algorithm confusion)',
        async () => {
          const now = Math.floor(stack.clock.now() / 1000);
          return new SignJWT({ iss: ISSUER, aud: AUDIENCE, sub: 'x', exp: now + 300 })
            .setProtectedHeader({ alg: 'HS256', kid: 'rsa-1' })
            .sign(new TextEncoder().encode(JSON.stringify(rsa.jwk)));
        },
      ],
      ['a foreign key under a published kid', () => jwt(foreign)],
      ['a foreign key under an unknown kid', () => jwt({ ...foreign, kid: 'unknown-kid' })],
      ['wrong issuer', () => jwt(rsa, { iss: 'https://other-idp.example/' })],
      ['issuer differing by a trailing slash', () => jwt(rsa, { iss: ISSUER.slice(0, -1) })],
      ['wrong audience', () => jwt(rsa, { aud: 'someone-else' })],
      ['expired beyond the tolerance', () => jwt(rsa, { exp: Math.floor(stack.clock.now() / 1000) - 3600 })],
      ['missing exp', () => jwt(rsa, { exp: undefined })],
      ['not yet valid (nbf an hour ahead)', () => jwt(rsa, { nbf: Math.floor(stack.clock.now() / 1000) + 3600 })],
      ['missing sub', () => jwt(rsa, { sub: undefined })],
      [
        'a tampered payload',
        async () => {
          const [h, , s] = (await jwt(rsa)).split('.');
          return `${h}.${b64url({ iss: ISSUER, aud: AUDIENCE, sub: 'admin', exp: 9999999999 })}.${s}`;
        },
      ],
      ['garbage', async () => 'this is not a jwt'],
      ['three dots of nothing', async () => '..'],
      ['empty', async () => ''],
    ];
    it.each(bad)('%s: 400 invalid_grant and no record', async (_name, make) => {
      const raw = await rawRedis();
      try {
        const before = (await raw.keys(`${stack.prefix}userBearerTokens:*`)).length;
        const res = await exchange(await make());
        expect(res.status).toBe(400);
        expect(res.body).toEqual({ error: 'invalid_grant', error_description: 'the subject token is not acceptable' });
        expect(res.headers.get('cache-control')).toBe('no-store');
        expect((await raw.keys(`${stack.prefix}userBearerTokens:*`)).length).toBe(before);
      } finally {
        await raw.quit();
      }
    });

    it('a key published after start-up is fetched on first sight of its kid', async () => {
      const rotated = await signingKey('RS256', 'rsa-2');
      expect((await exchange(await jwt(rotated))).status).toBe(400);
      jwks.publish(rotated.jwk);
      const before = jwks.fetches;
      expect((await exchange(await jwt(rotated))).status).toBe(200);
      expect(jwks.fetches).toBe(before + 1);
    });

    const requestErrors: Array<[string, Record<string, string>, string]> = [
      ['no subject_token', { grant_type: EXCHANGE, subject_token_type: JWT_TYPE }, 'invalid_request'],
      ['no subject_token_type', { grant_type: EXCHANGE, subject_token: 'x.y.z' }, 'invalid_request'],
      [
        'an unsupported subject_token_type',
        { grant_type: EXCHANGE, subject_token: 'x.y.z', subject_token_type: 'urn:ietf:params:oauth:token-type:saml2' },
        'invalid_request',
      ],
      [
        'an actor token (delegation)',
        { grant_type: EXCHANGE, subject_token: 'x.y.z', subject_token_type: JWT_TYPE, actor_token: 'a', actor_token_type: JWT_TYPE },
        'invalid_request',
      ],
      [
        'a requested_token_type other than access_token',
        {
          grant_type: EXCHANGE,
          subject_token: 'x.y.z',
          subject_token_type: JWT_TYPE,
          requested_token_type: 'urn:ietf:params:oauth:token-type:refresh_token',
        },
        'invalid_request',
      ],
      [
        'a resource naming another server',
        { grant_type: EXCHANGE, subject_token: 'x.y.z', subject_token_type: JWT_TYPE, resource: 'https://other.example/mcp' },
        'invalid_target',
      ],
      [
        'an audience naming another server',
        { grant_type: EXCHANGE, subject_token: 'x.y.z', subject_token_type: JWT_TYPE, audience: 'https://other.example' },
        'invalid_target',
      ],
    ];
    it.each(requestErrors)('%s: 400 %s', async (_name, params, code) => {
      const res = await form(`${base}/token`, params);
      expect(res.status).toBe(400);
      expect(res.body.error).toBe(code);
    });

    it('a resource naming this server is accepted', async () => {
      expect((await exchange(await jwt(rsa), { resource: `${PUBLIC_URL}/mcp` })).status).toBe(200);
    });

    it('a client that authenticates must hold the token-exchange grant', async () => {
      const machine = await adminClient({ profile: 'service' });
      const res = await exchange(await jwt(rsa), {}, basic(machine.id, machine.secret));
      expect(res.status).toBe(400);
      expect(res.body.error).toBe('unauthorized_client');
      const bad = await exchange(await jwt(rsa), {}, basic(machine.id, 'f'.repeat(64)));
      expect(bad.status).toBe(401);
      expect(bad.body.error).toBe('invalid_client');
    });
  });

  describe('client_credentials', () => {
    it('client_secret_basic: an access token with the profile lifetime and a refresh token; it works at /mcp', async () => {
      const c = await adminClient();
      const res = await form(`${base}/token`, { grant_type: 'client_credentials' }, basic(c.id, c.secret));
      expect(res.status).toBe(200);
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(res.headers.get('pragma')).toBe('no-cache');
      expect(res.body).toEqual({
        access_token: expect.stringMatching(/^[0-9a-f]{64}$/),
        refresh_token: expect.stringMatching(/^[0-9a-f]{64}$/),
        token_type: 'Bearer',
        expires_in: 3600,
      });
      expect(await mcpStatus(stack, res.body.access_token)).toBe(200);
      expect(stack.upstream!.seenHeaders.at(-1)).toMatchObject({ 'x-mcp-auth-kind': 'oauth', 'x-mcp-auth-client-id': c.id });
      // A refresh token is not an access token.
      expect(await mcpStatus(stack, res.body.refresh_token)).toBe(401);
    });

    it('client_secret_post works; the service profile gives no refresh token; scope is narrowed, never widened', async () => {
      const c = await adminClient({ profile: 'service', scope: 'mcp:read mcp:write' });
      const res = await form(`${base}/token`, {
        grant_type: 'client_credentials',
        client_id: c.id,
        client_secret: c.secret,
        scope: 'mcp:read',
      });
      expect(res.status).toBe(200);
      expect(res.body.refresh_token).toBeUndefined();
      expect(res.body.scope).toBe('mcp:read');
      const wider = await form(`${base}/token`, {
        grant_type: 'client_credentials',
        client_id: c.id,
        client_secret: c.secret,
        scope: 'mcp:admin',
      });
      expect(wider.status).toBe(400);
      expect(wider.body.error).toBe('invalid_scope');
    });

    it('error rows', async () => {
      const c = await adminClient();
      const exchanger = await adminClient({ profile: 'dynamic' });
      const deleted = await adminClient();
      expect((await stack.admin('deleteClient', { clientId: deleted.id })).status).toBe(200);
      const cc = { grant_type: 'client_credentials' };
      const rows: Array<[string, Promise<Awaited<ReturnType<typeof form>>>, number, string, boolean]> = [
        ['wrong secret (Basic)', form(`${base}/token`, cc, basic(c.id, 'a'.repeat(64))), 401, 'invalid_client', true],
        [
          'wrong secret (post)',
          form(`${base}/token`, { ...cc, client_id: c.id, client_secret: 'a'.repeat(64) }),
          401,
          'invalid_client',
          false,
        ],
        [
          'secret of another length',
          form(`${base}/token`, { ...cc, client_id: c.id, client_secret: 'short' }),
          401,
          'invalid_client',
          false,
        ],
        ['unknown client', form(`${base}/token`, cc, basic('mcp_unknown', c.secret)), 401, 'invalid_client', true],
        ['no client authentication', form(`${base}/token`, cc), 401, 'invalid_client', false],
        ['malformed Basic header', form(`${base}/token`, cc, { authorization: 'Basic !!!' }), 401, 'invalid_client', true],
        [
          'Basic and post at once',
          form(`${base}/token`, { ...cc, client_secret: c.secret }, basic(c.id, c.secret)),
          400,
          'invalid_request',
          false,
        ],
        ['a client without the grant', form(`${base}/token`, cc, basic(exchanger.id, exchanger.secret)), 400, 'unauthorized_client', false],
        ['a deleted client', form(`${base}/token`, cc, basic(deleted.id, deleted.secret)), 401, 'invalid_client', true],
        [
          'a resource naming another server',
          form(`${base}/token`, { ...cc, resource: 'https://elsewhere.example/mcp' }, basic(c.id, c.secret)),
          400,
          'invalid_target',
          false,
        ],
        ['no grant_type', form(`${base}/token`, {}, basic(c.id, c.secret)), 400, 'invalid_request', false],
        [
          'an unsupported grant_type',
          form(`${base}/token`, { grant_type: 'password' }, basic(c.id, c.secret)),
          400,
          'unsupported_grant_type',
          false,
        ],
        [
          'authorization_code (browser sign-in not configured)',
          form(`${base}/token`, { grant_type: 'authorization_code', code: 'x' }, basic(c.id, c.secret)),
          400,
          'unsupported_grant_type',
          false,
        ],
      ];
      for (const [name, pending, status, error, challenge] of rows) {
        const res = await pending;
        expect([name, res.status, res.body?.error]).toEqual([name, status, error]);
        expect([name, res.headers.get('cache-control')]).toEqual([name, 'no-store']);
        expect([name, res.headers.get('www-authenticate')?.startsWith('Basic ') ?? false]).toEqual([name, challenge]);
      }
    });

    it('a body that is not a form, a repeated parameter and an oversized body are refused', async () => {
      const c = await adminClient();
      const asJson = await json(`${base}/token`, { grant_type: 'client_credentials' }, basic(c.id, c.secret));
      expect([asJson.status, asJson.body.error]).toEqual([400, 'invalid_request']);
      const repeated = await fetch(`${base}/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...basic(c.id, c.secret) },
        body: 'grant_type=client_credentials&grant_type=client_credentials',
      });
      expect([repeated.status, ((await repeated.json()) as { error: string }).error]).toEqual([400, 'invalid_request']);
      const huge = await form(`${base}/token`, { grant_type: 'client_credentials', pad: 'x'.repeat(64 * 1024) }, basic(c.id, c.secret));
      expect(huge.status).toBe(413);
    });
  });

  describe('refresh_token', () => {
    async function issue() {
      const c = await adminClient();
      const res = await form(`${base}/token`, { grant_type: 'client_credentials' }, basic(c.id, c.secret));
      expect(res.status).toBe(200);
      return { client: c, access: res.body.access_token as string, refresh: res.body.refresh_token as string };
    }
    const refresh = (c: { id: string; secret: string }, token: string) =>
      form(`${base}/token`, { grant_type: 'refresh_token', refresh_token: token }, basic(c.id, c.secret));

    const graceMs = () => stack.sidecar.config.oauth.refreshReuseGraceSeconds * 1000;

    async function graceReuses(): Promise<number> {
      const text = await (await fetch(`${stack.adminUrl}/metrics`)).text();
      return Number(/^mcp_auth_refresh_grace_reuses_total (\d+)$/m.exec(text)?.[1]);
    }

    it('rotates on every use; reusing a rotated token after the grace window revokes the whole family', async () => {
      // The default window: five minutes, for parallel sessions of one client that share its tokens.
      expect(graceMs()).toBe(300_000);
      const first = await issue();
      const second = await refresh(first.client, first.refresh);
      expect(second.status).toBe(200);
      expect(second.headers.get('cache-control')).toBe('no-store');
      expect(second.body.refresh_token).not.toBe(first.refresh);
      const third = await refresh(first.client, second.body.refresh_token);
      expect(third.status).toBe(200);
      expect(await mcpStatus(stack, third.body.access_token)).toBe(200);

      stack.clock.advance(graceMs());
      const replay = await refresh(first.client, first.refresh);
      expect(replay.status).toBe(400);
      expect(replay.body.error).toBe('invalid_grant');
      for (const token of [first.access, second.body.access_token, third.body.access_token])
        expect(await mcpStatus(stack, token)).toBe(401);
      expect((await refresh(first.client, third.body.refresh_token)).body.error).toBe('invalid_grant');
      expect(stack.logs.some((l) => l.includes('refresh token reused after rotation'))).toBe(true);
    });

    it('eight processes sharing one credentials file refresh with the same token at once: all get the SAME pair and stay signed in; a replay after the window revokes it', async () => {
      const first = await issue();
      const before = await graceReuses();
      const results = await Promise.all(Array.from({ length: 8 }, () => refresh(first.client, first.refresh)));
      for (const r of results) expect(r.status).toBe(200);
      // One pair, handed to every process: the family never forks, the credentials file holds one token.
      expect(new Set(results.map((r) => r.body.access_token)).size).toBe(1);
      expect(new Set(results.map((r) => r.body.refresh_token)).size).toBe(1);
      const pair = results[0]!.body;
      expect(await mcpStatus(stack, pair.access_token)).toBe(200);
      expect(await graceReuses()).toBe(before + 7);
      const audited = stack.logs.filter(
        (l) => l.includes('"msg":"audit"') && l.includes(first.client.id) && l.includes('token.refresh_token'),
      );
      expect(audited.filter((l) => l.includes('"graceReuse":true'))).toHaveLength(7);
      expect(stack.logs.some((l) => l.includes('presented again within the grace window'))).toBe(true);
      // The shared pair rotates on, once for all of them.
      const next = await Promise.all(Array.from({ length: 8 }, () => refresh(first.client, pair.refresh_token)));
      expect(new Set(next.map((r) => `${r.status} ${r.body.refresh_token}`)).size).toBe(1);

      stack.clock.advance(graceMs());
      const replay = await refresh(first.client, first.refresh);
      expect([replay.status, replay.body.error]).toEqual([400, 'invalid_grant']);
      for (const token of [first.access, pair.access_token, next[0]!.body.access_token]) expect(await mcpStatus(stack, token)).toBe(401);
    });

    it('processes refreshing one after another within the minute, in any order, each get the pair of the rotation; expires_in is what is left of its access token', async () => {
      const first = await issue();
      const sessionA = await refresh(first.client, first.refresh);
      stack.clock.advance(4 * 60_000);
      const sessionB = await refresh(first.client, first.refresh);
      expect(sessionB.status).toBe(200);
      expect(sessionB.body.access_token).toBe(sessionA.body.access_token);
      expect(sessionB.body.refresh_token).toBe(sessionA.body.refresh_token);
      expect(sessionB.body.expires_in).toBe((sessionA.body.expires_in as number) - 240);
      const third = await refresh(first.client, first.refresh);
      expect(third.body.refresh_token).toBe(sessionA.body.refresh_token);
      expect(await mcpStatus(stack, sessionB.body.access_token)).toBe(200);
      expect((await refresh(first.client, sessionB.body.refresh_token)).status).toBe(200);
    });

    it('the successor is sealed with the presented token: Redis holds neither raw token of the successor', async () => {
      const first = await issue();
      const second = await refresh(first.client, first.refresh);
      const raw = await rawRedis();
      try {
        const fields = await raw.hgetall(keyLayout(stack.prefix).refreshToken(hashToken(first.refresh)));
        expect(fields.successor).toMatch(/^[\w-]+\.\.[\w-]+\.[\w-]+\.[\w-]+$/);
        expect(JSON.stringify(fields)).not.toContain(second.body.refresh_token);
        expect(JSON.stringify(fields)).not.toContain(second.body.access_token);
      } finally {
        raw.disconnect();
      }
    });

    it('a grace-window answer does not stretch the window: a replay after it, counted from the rotation, revokes the family', async () => {
      const first = await issue();
      const second = await refresh(first.client, first.refresh);
      stack.clock.advance(graceMs() - 1);
      const racing = await refresh(first.client, first.refresh);
      expect(racing.status).toBe(200);
      expect(racing.body.access_token).toBe(second.body.access_token);
      stack.clock.advance(1);
      expect((await refresh(first.client, first.refresh)).body.error).toBe('invalid_grant');
      expect(await mcpStatus(stack, second.body.access_token)).toBe(401);
    });

    it('no grace for a deleted client', async () => {
      const first = await issue();
      expect((await refresh(first.client, first.refresh)).status).toBe(200);
      await stack.admin('deleteClient', { clientId: first.client.id });
      const again = await refresh(first.client, first.refresh);
      expect([again.status, again.body.error]).toEqual([401, 'invalid_client']);
    });

    describe('with oauth.refreshReuseGraceSeconds: 0', () => {
      let strict: Stack;
      beforeAll(async () => {
        strict = await startStack({ store: 'memory', config: { oauth: { refreshReuseGraceSeconds: 0 } } });
      });
      afterAll(async () => {
        await strict?.close();
      });

      it('two concurrent refreshes with the same token give at most one success, and the family is revoked', async () => {
        const created = await strict.admin('createClient', { clientName: 'strict' });
        const c = { id: created.body.clientId as string, secret: created.body.clientSecret as string };
        const issued = await form(`${strict.proxyUrl}/token`, { grant_type: 'client_credentials' }, basic(c.id, c.secret));
        const results = await Promise.all(
          Array.from({ length: 6 }, () =>
            form(
              `${strict.proxyUrl}/token`,
              { grant_type: 'refresh_token', refresh_token: issued.body.refresh_token },
              basic(c.id, c.secret),
            ),
          ),
        );
        expect(results.filter((r) => r.status === 200)).toHaveLength(1);
        for (const r of results.filter((r) => r.status !== 200)) expect(r.body.error).toBe('invalid_grant');
        for (const r of results.filter((r) => r.status === 200)) expect(await mcpStatus(strict, r.body.access_token)).toBe(401);
      });
    });

    it('error rows: another client, garbage, missing, a deleted client', async () => {
      const mine = await issue();
      const other = await adminClient();
      expect((await refresh(other, mine.refresh)).body.error).toBe('invalid_grant');
      expect((await refresh(mine.client, 'z'.repeat(64))).body.error).toBe('invalid_grant');
      expect((await refresh(mine.client, 'a'.repeat(64))).body.error).toBe('invalid_grant');
      const missing = await form(`${base}/token`, { grant_type: 'refresh_token' }, basic(mine.client.id, mine.client.secret));
      expect([missing.status, missing.body.error]).toEqual([400, 'invalid_request']);
      // The other client's failed attempt did not burn the token.
      expect((await refresh(mine.client, mine.refresh)).status).toBe(200);
      const gone = await issue();
      await stack.admin('deleteClient', { clientId: gone.client.id });
      const after = await refresh(gone.client, gone.refresh);
      expect([after.status, after.body.error]).toEqual([401, 'invalid_client']);
    });
  });

  describe('dynamic client registration (RFC 7591)', () => {
    it('registers a confidential client: snake_case metadata, secret once, listed by admin, removed by deleteClient, expires when unused', async () => {
      const res = await json(`${base}/register`, {
        client_name: 'Claude',
        redirect_uris: ['http://127.0.0.1:3333/cb', 'https://app.example/cb'],
        unknown_field: 1,
      });
      expect(res.status).toBe(201);
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(res.body).toEqual({
        client_id: expect.stringMatching(/^mcp_[0-9a-f]{32}$/),
        client_secret: expect.stringMatching(/^[0-9a-f]{64}$/),
        client_secret_expires_at: 0,
        client_id_issued_at: Math.floor(stack.clock.now() / 1000),
        client_name: 'Claude',
        redirect_uris: ['http://127.0.0.1:3333/cb', 'https://app.example/cb'],
        grant_types: [EXCHANGE],
        token_endpoint_auth_method: 'client_secret_basic',
      });
      const listed = await stack.admin('listClients');
      const entry = listed.body.clients.find((c: { clientId: string }) => c.clientId === res.body.client_id);
      expect(entry).toMatchObject({ source: 'dcr', profile: 'dynamic' });
      expect(JSON.stringify(listed.body)).not.toContain(res.body.client_secret);
      const raw = await rawRedis();
      try {
        const ttl = await raw.pttl(keyLayout(stack.prefix).client(res.body.client_id));
        expect(ttl).toBeGreaterThan(0);
        expect(ttl).toBeLessThanOrEqual(30 * 24 * 3600 * 1000);
      } finally {
        await raw.quit();
      }
      // The registered client can exchange a JWT; it cannot use client_credentials.
      expect((await exchange(await jwt(rsa), {}, basic(res.body.client_id, res.body.client_secret))).status).toBe(200);
      const cc = await form(`${base}/token`, { grant_type: 'client_credentials' }, basic(res.body.client_id, res.body.client_secret));
      expect(cc.body.error).toBe('unauthorized_client');
      expect((await stack.admin('deleteClient', { clientId: res.body.client_id })).status).toBe(200);
      expect((await exchange(await jwt(rsa), {}, basic(res.body.client_id, res.body.client_secret))).status).toBe(401);
    });

    it('a public client (auth method none) gets no secret', async () => {
      const res = await json(`${base}/register`, { token_endpoint_auth_method: 'none', redirect_uris: ['http://localhost:8765/callback'] });
      expect(res.status).toBe(201);
      expect(res.body.client_secret).toBeUndefined();
      expect(res.body.token_endpoint_auth_method).toBe('none');
    });

    const rows: Array<[string, unknown, string]> = [
      ['plain-http redirect URI off loopback', { redirect_uris: ['http://app.example/cb'] }, 'invalid_redirect_uri'],
      ['a redirect URI with a fragment', { redirect_uris: ['https://app.example/cb#x'] }, 'invalid_redirect_uri'],
      ['a redirect URI that is not a URL', { redirect_uris: ['not a url'] }, 'invalid_redirect_uri'],
      ['a custom scheme', { redirect_uris: ['javascript:alert(1)'] }, 'invalid_redirect_uri'],
      ['redirect_uris not a list', { redirect_uris: 'https://app.example/cb' }, 'invalid_client_metadata'],
      ['a client-chosen client_id', { client_id: 'mine' }, 'invalid_client_metadata'],
      ['a client-chosen client_secret', { client_secret: 'mine' }, 'invalid_client_metadata'],
      ['client_credentials', { grant_types: ['client_credentials'] }, 'invalid_client_metadata'],
      ['authorization_code', { grant_types: ['authorization_code'] }, 'invalid_client_metadata'],
      ['response_types code', { response_types: ['code'] }, 'invalid_client_metadata'],
      ['an unknown auth method', { token_endpoint_auth_method: 'private_key_jwt' }, 'invalid_client_metadata'],
      ['a bad scope', { scope: 'a\u0000b' }, 'invalid_client_metadata'],
      ['a client_name that is not a string', { client_name: 42 }, 'invalid_client_metadata'],
      ['a JSON array body', [], 'invalid_client_metadata'],
    ];
    it.each(rows)('%s: 400 %s, nothing stored', async (_name, body, code) => {
      const before = (await stack.admin('listClients')).body.clients.length;
      const res = await json(`${base}/register`, body);
      expect(res.status).toBe(400);
      expect(res.body.error).toBe(code);
      expect((await stack.admin('listClients')).body.clients.length).toBe(before);
    });

    it('a body that is not JSON, or not application/json, is invalid_client_metadata', async () => {
      const broken = await fetch(`${base}/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{' });
      expect([broken.status, ((await broken.json()) as { error: string }).error]).toEqual([400, 'invalid_client_metadata']);
      const asForm = await form(`${base}/register`, { client_name: 'x' });
      expect([asForm.status, asForm.body.error]).toEqual([400, 'invalid_client_metadata']);
    });
  });

  describe('revocation (RFC 7009)', () => {
    const revoke = (params: Record<string, string>, headers: Record<string, string> = {}) => form(`${base}/revoke`, params, headers);

    it('a client revokes its own access token; not another client’s (same 200, nothing revoked)', async () => {
      const a = await adminClient();
      const b = await adminClient();
      const ta = (await form(`${base}/token`, { grant_type: 'client_credentials' }, basic(a.id, a.secret))).body;
      const tb = (await form(`${base}/token`, { grant_type: 'client_credentials' }, basic(b.id, b.secret))).body;
      const refused = await revoke({ token: tb.access_token }, basic(a.id, a.secret));
      expect(refused.status).toBe(200);
      expect(await mcpStatus(stack, tb.access_token)).toBe(200);
      const ok = await revoke({ token: ta.access_token, token_type_hint: 'access_token' }, basic(a.id, a.secret));
      expect(ok.status).toBe(200);
      expect(ok.headers.get('cache-control')).toBe('no-store');
      expect(await mcpStatus(stack, ta.access_token)).toBe(401);
      // Revoking a refresh token takes its family (the access token issued with it) along.
      expect((await revoke({ token: tb.refresh_token, token_type_hint: 'refresh_token' }, basic(b.id, b.secret))).status).toBe(200);
      expect(await mcpStatus(stack, tb.access_token)).toBe(401);
      expect(
        (await form(`${base}/token`, { grant_type: 'refresh_token', refresh_token: tb.refresh_token }, basic(b.id, b.secret))).body.error,
      ).toBe('invalid_grant');
    });

    it('the master token revokes anything; a user-grade token is revoked by its holder', async () => {
      const { token } = await stack.issueOAuthToken();
      expect((await revoke({ token }, { authorization: `Bearer ${stack.masterToken}` })).status).toBe(200);
      expect(await mcpStatus(stack, token)).toBe(401);
      const user = (await exchange(await jwt(rsa))).body.access_token as string;
      expect(await mcpStatus(stack, user)).toBe(200);
      expect((await revoke({ token: user })).status).toBe(200);
      expect(await mcpStatus(stack, user)).toBe(401);
      const raw = await rawRedis();
      try {
        expect(await raw.hget(`${stack.prefix}userBearerTokens:${hashToken(user)}`, 'revoked')).toBe('true');
      } finally {
        await raw.quit();
      }
    });

    it('unknown and malformed tokens get 200, and so does an OAuth token without its client (not revoked); a wrong client secret is invalid_client; no token is invalid_request', async () => {
      expect((await revoke({ token: randomBytes(32).toString('hex') })).status).toBe(200);
      expect((await revoke({ token: 'not-a-token' })).status).toBe(200);
      const { token } = await stack.issueOAuthToken();
      const anonymous = await revoke({ token });
      expect(anonymous.status).toBe(200);
      expect(await mcpStatus(stack, token)).toBe(200);
      const c = await adminClient();
      const wrongSecret = await revoke({ token }, basic(c.id, 'b'.repeat(64)));
      expect([wrongSecret.status, wrongSecret.body.error]).toEqual([401, 'invalid_client']);
      const missing = await revoke({});
      expect([missing.status, missing.body.error]).toEqual([400, 'invalid_request']);
    });
  });

  describe('introspection (RFC 7662)', () => {
    const introspect = (token: string, headers: Record<string, string>) => form(`${base}/introspect`, { token }, headers);
    const master = () => ({ authorization: `Bearer ${stack.masterToken}` });

    it('the master token sees every valid token; anything else is only {"active":false}', async () => {
      const c = await adminClient({ scope: 'mcp:read' });
      const issued = (await form(`${base}/token`, { grant_type: 'client_credentials' }, basic(c.id, c.secret))).body;
      const access = await introspect(issued.access_token, master());
      expect(access.status).toBe(200);
      expect(access.body).toEqual({
        active: true,
        token_type: 'Bearer',
        client_id: c.id,
        sub: c.id,
        scope: 'mcp:read',
        exp: Math.floor(stack.clock.now() / 1000) + 3600,
        aud: `${PUBLIC_URL}/mcp`,
        auth_kind: 'oauth',
      });
      expect((await introspect(issued.refresh_token, master())).body).toMatchObject({
        active: true,
        token_type: 'refresh_token',
        client_id: c.id,
      });
      const user = (await exchange(await jwt(rsa, { sub: 'alice' }))).body.access_token;
      expect((await introspect(user, master())).body).toMatchObject({ active: true, sub: 'alice', auth_kind: 'user' });
      for (const inactive of [randomBytes(32).toString('hex'), 'garbage', stack.masterToken]) {
        expect((await introspect(inactive, master())).body).toEqual({ active: false });
      }
      await form(`${base}/revoke`, { token: issued.access_token }, master());
      expect((await introspect(issued.access_token, master())).body).toEqual({ active: false });
    });

    it('a confidential client sees its own tokens only; anonymous and public callers are refused', async () => {
      const a = await adminClient();
      const b = await adminClient();
      const ta = (await form(`${base}/token`, { grant_type: 'client_credentials' }, basic(a.id, a.secret))).body.access_token;
      expect((await introspect(ta, basic(a.id, a.secret))).body.active).toBe(true);
      expect((await introspect(ta, basic(b.id, b.secret))).body).toEqual({ active: false });
      const anonymous = await form(`${base}/introspect`, { token: ta });
      expect([anonymous.status, anonymous.body.error]).toEqual([401, 'invalid_client']);
      const pub = await json(`${base}/register`, { token_endpoint_auth_method: 'none' });
      const asPublic = await form(`${base}/introspect`, { token: ta, client_id: pub.body.client_id });
      expect([asPublic.status, asPublic.body.error]).toEqual([401, 'invalid_client']);
      const wrong = await introspect(ta, basic(a.id, 'b'.repeat(64)));
      expect(wrong.status).toBe(401);
      expect(wrong.headers.get('www-authenticate')).toMatch(/^Basic /);
    });
  });

  describe('the official SDK client with issued tokens', () => {
    async function connect(token: string): Promise<string[]> {
      const client = new Client({ name: 'oauth-test', version: '1.0.0' });
      const transport = new StreamableHTTPClientTransport(new URL(stack.mcpUrl), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      });
      await client.connect(transport);
      try {
        return (await client.listTools()).tools.map((t) => t.name);
      } finally {
        await client.close();
      }
    }

    it('connects with a user-grade token from the exchange and with a client_credentials token', async () => {
      const user = (await exchange(await jwt(rsa))).body.access_token;
      expect(await connect(user)).toContain('echo');
      const c = await adminClient();
      const machine = (await form(`${base}/token`, { grant_type: 'client_credentials' }, basic(c.id, c.secret))).body.access_token;
      expect(await connect(machine)).toContain('echo');
    });
  });
});

describe('OAuth settings', () => {
  it('without an IdP the exchange is unsupported_grant_type and not advertised', async () => {
    const stack = await startStack({});
    try {
      const res = await form(`${stack.proxyUrl}/token`, { grant_type: EXCHANGE, subject_token: 'a.b.c', subject_token_type: JWT_TYPE });
      expect([res.status, res.body.error]).toEqual([400, 'unsupported_grant_type']);
      const meta = (await (await fetch(`${stack.proxyUrl}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
      expect(meta.grant_types_supported).toEqual(['client_credentials', 'refresh_token']);
      expect(meta.issuer).toBe(stack.proxyUrl.replace('127.0.0.1', 'localhost'));
    } finally {
      await stack.close();
    }
  });

  it('claim rules: only allowed email domains (verified) and members of the required group may exchange', async () => {
    const key = await signingKey('ES256', 'rules');
    const idpKeys = await startJwks([key.jwk]);
    const stack = await startStack({
      config: {
        idp: {
          issuer: ISSUER,
          audience: AUDIENCE,
          jwksUrl: idpKeys.url,
          allowedEmailDomains: ['Example.COM'],
          requiredGroup: 'mcp-users',
          groupsClaim: 'roles',
        },
      },
    });
    try {
      const now = Math.floor(stack.clock.now() / 1000);
      const sign = (claims: Record<string, unknown>) =>
        new SignJWT({ iss: ISSUER, aud: AUDIENCE, sub: 'u', exp: now + 60, ...claims })
          .setProtectedHeader({ alg: 'ES256', kid: 'rules' })
          .sign(key.privateKey);
      const rows: Array<[string, Record<string, unknown>, number]> = [
        ['allowed domain and group', { email: 'ann@example.com', email_verified: true, roles: ['mcp-users'] }, 200],
        ['domain compared case-insensitively', { email: 'Ann@EXAMPLE.com', email_verified: true, roles: ['mcp-users'] }, 200],
        ['another domain', { email: 'ann@example.org', email_verified: true, roles: ['mcp-users'] }, 400],
        ['a subdomain is another domain', { email: 'ann@evil.example.com', email_verified: true, roles: ['mcp-users'] }, 400],
        ['no email', { roles: ['mcp-users'] }, 400],
        ['email not verified', { email: 'ann@example.com', email_verified: false, roles: ['mcp-users'] }, 400],
        ['email_verified absent', { email: 'ann@example.com', roles: ['mcp-users'] }, 400],
        ['group missing', { email: 'ann@example.com', email_verified: true, roles: ['other'] }, 400],
        ['groups claim not a list', { email: 'ann@example.com', email_verified: true, roles: 'mcp-users' }, 400],
      ];
      for (const [name, claims, status] of rows) {
        const res = await form(`${stack.proxyUrl}/token`, {
          grant_type: EXCHANGE,
          subject_token: await sign(claims),
          subject_token_type: JWT_TYPE,
        });
        expect([name, res.status, res.body.error]).toEqual([name, status, status === 200 ? undefined : 'invalid_grant']);
      }
    } finally {
      await stack.close();
      await idpKeys.close();
    }
  });

  it("the exchanged JWT's email and groups are kept in the user-grade record and seen by per-tool policy", async () => {
    const key = await signingKey('ES256', 'facts');
    const idpKeys = await startJwks([key.jwk]);
    const policy = {
      default: 'deny',
      rules: [
        {
          name: 'eng-at-example',
          effect: 'allow',
          principals: { kinds: ['user'], groups: ['eng'], emailDomains: ['example.com'] },
          requests: { methods: ['tools/call'] },
        },
      ],
    };
    const stack = await startStack({
      config: { idp: { issuer: ISSUER, audience: AUDIENCE, jwksUrl: idpKeys.url, groupsClaim: 'roles' }, policy },
    });
    try {
      const now = Math.floor(stack.clock.now() / 1000);
      const exchange = async (claims: Record<string, unknown>) => {
        const jwt = await new SignJWT({ iss: ISSUER, aud: AUDIENCE, sub: 'u-facts', exp: now + 60, ...claims })
          .setProtectedHeader({ alg: 'ES256', kid: 'facts' })
          .sign(key.privateKey);
        const res = await form(`${stack.proxyUrl}/token`, { grant_type: EXCHANGE, subject_token: jwt, subject_token_type: JWT_TYPE });
        expect(res.status).toBe(200);
        return res.body.access_token as string;
      };
      const eng = await exchange({ email: 'Ann@Example.com', email_verified: true, roles: ['eng', 7] });
      const explained = await stack.admin('explainPolicy', { token: eng, method: 'tools/call', name: 'x' });
      expect(explained.body).toMatchObject({
        effect: 'allow',
        rule: 'eng-at-example',
        principal: { kind: 'user', email: 'Ann@Example.com', groups: ['eng'] },
      });
      const other = await exchange({ email: 'bob@example.com', email_verified: true, roles: ['ops'] });
      expect((await stack.admin('explainPolicy', { token: other, method: 'tools/call', name: 'x' })).body).toMatchObject({
        effect: 'deny',
        decidedBy: 'default',
      });
    } finally {
      await stack.close();
      await idpKeys.close();
    }
  });

  it.each([
    ['email_verified: false', { email_verified: false }, {}, 'deny'],
    ['no email_verified claim', {}, {}, 'deny'],
    ['email_verified: true', { email_verified: true }, {}, 'allow'],
    ['no claim, the IdP trusted (requireVerifiedEmail: false)', {}, { requireVerifiedEmail: false }, 'allow'],
    ['email_verified: false, whatever requireVerifiedEmail says', { email_verified: false }, { requireVerifiedEmail: false }, 'deny'],
    // Entra ID sends no email_verified; its optional claim xms_edov says the domain owner is verified.
    ['Entra ID: xms_edov true, named by emailVerifiedClaim', { xms_edov: true }, { emailVerifiedClaim: 'xms_edov' }, 'allow'],
    ['Entra ID: xms_edov false', { xms_edov: false }, { emailVerifiedClaim: 'xms_edov' }, 'deny'],
    ['email_verified: true when another claim is named', { email_verified: true }, { emailVerifiedClaim: 'xms_edov' }, 'deny'],
  ])("an exchanged JWT's email counts for the policy only when verified: %s", async (_name, claims, idp, effect) => {
    const key = await signingKey('ES256', 'verified');
    const idpKeys = await startJwks([key.jwk]);
    const policy = {
      default: 'deny',
      rules: [{ name: 'staff', effect: 'allow', principals: { emailDomains: ['example.com'] }, requests: { methods: ['tools/call'] } }],
    };
    const stack = await startStack({ config: { idp: { issuer: ISSUER, audience: AUDIENCE, jwksUrl: idpKeys.url, ...idp }, policy } });
    try {
      const now = Math.floor(stack.clock.now() / 1000);
      const jwt = await new SignJWT({ iss: ISSUER, aud: AUDIENCE, sub: 'mallory', exp: now + 60, email: 'mallory@example.com', ...claims })
        .setProtectedHeader({ alg: 'ES256', kid: 'verified' })
        .sign(key.privateKey);
      const res = await form(`${stack.proxyUrl}/token`, { grant_type: EXCHANGE, subject_token: jwt, subject_token_type: JWT_TYPE });
      expect(res.status).toBe(200);
      const explained = await stack.admin('explainPolicy', { token: res.body.access_token, method: 'tools/call', name: 'delete_repo' });
      expect(explained.body).toMatchObject({ effect });
      expect(explained.body.principal.email).toBe(effect === 'allow' ? 'mallory@example.com' : undefined);
    } finally {
      await stack.close();
      await idpKeys.close();
    }
  });

  it('an unreachable JWKS endpoint is 503 temporarily_unavailable, not invalid_grant', async () => {
    const key = await signingKey('RS256', 'k');
    const closed = createServer();
    closed.listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const stack = await startStack({
      config: { idp: { issuer: ISSUER, audience: AUDIENCE, jwksUrl: `http://127.0.0.1:${port}/jwks`, jwksTimeoutMs: 1000 } },
    });
    try {
      const now = Math.floor(Date.now() / 1000);
      const token = await new SignJWT({ iss: ISSUER, aud: AUDIENCE, sub: 's', exp: now + 60 })
        .setProtectedHeader({ alg: 'RS256', kid: 'k' })
        .sign(key.privateKey);
      const res = await form(`${stack.proxyUrl}/token`, { grant_type: EXCHANGE, subject_token: token, subject_token_type: JWT_TYPE });
      expect([res.status, res.body.error]).toEqual([503, 'temporarily_unavailable']);
      expect(res.headers.get('retry-after')).toBeTruthy();
    } finally {
      await stack.close();
    }
  });

  it('protected registration needs the master token as initial access token', async () => {
    const stack = await startStack({ config: { oauth: { registration: 'protected' } } });
    try {
      const denied = await json(`${stack.proxyUrl}/register`, { client_name: 'x' });
      expect([denied.status, denied.body.error]).toEqual([401, 'invalid_token']);
      expect(denied.headers.get('www-authenticate')).toMatch(/^Bearer /);
      const wrong = await json(`${stack.proxyUrl}/register`, { client_name: 'x' }, { authorization: `Bearer ${'0'.repeat(64)}` });
      expect(wrong.status).toBe(401);
      const ok = await json(`${stack.proxyUrl}/register`, { client_name: 'x' }, { authorization: `Bearer ${stack.masterToken}` });
      expect(ok.status).toBe(201);
    } finally {
      await stack.close();
    }
  });

  it('registrations are rate limited per address, with Retry-After, and the window reopens', async () => {
    const stack = await startStack({ config: { oauth: { registrationRateLimitPerMinute: 2 } } });
    try {
      const register = () => json(`${stack.proxyUrl}/register`, { client_name: 'x' });
      expect((await register()).status).toBe(201);
      expect((await register()).status).toBe(201);
      const limited = await register();
      expect([limited.status, limited.body.error]).toEqual([429, 'too_many_requests']);
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
      stack.clock.advance(60_000);
      expect((await register()).status).toBe(201);
    } finally {
      await stack.close();
    }
  });

  it('storage down: /token, /revoke, /register and /introspect answer 503, never 200', async () => {
    const { startRedisServer } = await import('../support/redis-server.ts');
    const redis = await startRedisServer();
    const stack = await startStack({ redisUrl: redis.url });
    try {
      const { token } = await stack.issueOAuthToken();
      await redis.kill();
      const master = { authorization: `Bearer ${stack.masterToken}` };
      const results = await Promise.all([
        form(`${stack.proxyUrl}/revoke`, { token }, master),
        form(`${stack.proxyUrl}/introspect`, { token }, master),
        form(`${stack.proxyUrl}/token`, { grant_type: 'client_credentials' }, basic('mcp_x', 'y')),
        json(`${stack.proxyUrl}/register`, { client_name: 'x' }),
      ]);
      for (const r of results) expect([r.status, r.body.error]).toEqual([503, 'temporarily_unavailable']);
    } finally {
      await stack.close();
      await redis.stop();
    }
  });
});
