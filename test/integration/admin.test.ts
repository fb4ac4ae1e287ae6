// The admin listener (docs/admin.md): every operation and every error row, over real HTTP
// with a real Redis.

import { request } from 'node:http';
import { exportJWK, generateKeyPair } from 'jose';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateToken, hashToken, TTL_7_DAYS } from '../../src/model/credentials.ts';
import { grantIdOf } from '../../src/model/person-grants.ts';
import { createSidecar } from '../../src/app.ts';
import { buildConfig } from '../../src/config/load.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { startEchoUpstream, type FakeUpstream } from '../support/fake-upstreams.ts';
import { keysUnder, rawRedis } from '../support/redis.ts';

let stack: Stack;
let echo: FakeUpstream;

beforeAll(async () => {
  echo = await startEchoUpstream();
  stack = await startStack({ upstreamUrl: echo.url });
});
afterAll(async () => {
  await stack.close();
  await echo.close();
});

async function post(path: string, body: string | Buffer | undefined, headers: Record<string, string> = {}) {
  const res = await fetch(`${stack.adminUrl}${path}`, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json', ...headers },
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

describe('admin operations', () => {
  it('createClient returns the secret once; listClients shows no secret and no hash', async () => {
    const created = await stack.admin('createClient', {
      clientName: 'ci bot',
      scope: 'mcp:read mcp:write',
      grantTypes: ['client_credentials'],
    });
    expect(created.status).toBe(201);
    expect(created.body.clientId).toMatch(/^mcp_[0-9a-f]{32}$/);
    expect(created.body.clientSecret).toMatch(/^[0-9a-f]{64}$/);
    expect(created.body).toMatchObject({
      clientName: 'ci bot',
      scope: 'mcp:read mcp:write',
      grantTypes: ['client_credentials'],
      profile: 'default',
    });
    const listed = await stack.admin('listClients');
    expect(listed.status).toBe(200);
    const mine = listed.body.clients.find((c: { clientId: string }) => c.clientId === created.body.clientId);
    expect(mine).toMatchObject({ clientName: 'ci bot' });
    const text = JSON.stringify(listed.body);
    expect(text).not.toContain(created.body.clientSecret);
    expect(text).not.toContain(hashToken(created.body.clientSecret));
    expect(text).not.toContain('clientSecret');
  });

  it('createAccessToken issues a working token with the admin-chosen lifetime', async () => {
    const client = await stack.admin('createClient', {});
    const issued = await stack.admin('createAccessToken', { clientId: client.body.clientId, lifetimeSeconds: 120 });
    expect(issued.status).toBe(201);
    expect(issued.body).toMatchObject({ tokenType: 'Bearer', expiresIn: 120, clientId: client.body.clientId });
    expect(issued.body.accessToken).toMatch(/^[0-9a-f]{64}$/);
    expect(issued.body.expiresAt).toBe(stack.clock.now() + 120_000);
    const res = await fetch(stack.mcpUrl, { method: 'POST', body: '{}', headers: { authorization: `Bearer ${issued.body.accessToken}` } });
    expect(res.status).toBe(200);
    stack.clock.advance(120_000);
    const late = await fetch(stack.mcpUrl, { method: 'POST', body: '{}', headers: { authorization: `Bearer ${issued.body.accessToken}` } });
    expect(late.status).toBe(401);
  });

  it('deleteClient revokes the client and every token it has, atomically, and is idempotent', async () => {
    const client = await stack.admin('createClient', {});
    const tokens: string[] = [];
    for (let i = 0; i < 3; i++)
      tokens.push((await stack.admin('createAccessToken', { clientId: client.body.clientId, lifetimeSeconds: 600 })).body.accessToken);
    const deleted = await stack.admin('deleteClient', { clientId: client.body.clientId });
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({
      clientId: client.body.clientId,
      revokedAt: stack.clock.now(),
      accessTokensRevoked: 3,
      refreshTokensRevoked: 0,
    });
    for (const token of tokens) {
      const res = await fetch(stack.mcpUrl, { method: 'POST', body: '{}', headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(401);
    }
    const again = await stack.admin('deleteClient', { clientId: client.body.clientId });
    expect(again.body).toEqual({ ...deleted.body, accessTokensRevoked: 0 });
    const afterDelete = await stack.admin('createAccessToken', { clientId: client.body.clientId, lifetimeSeconds: 60 });
    expect(afterDelete.status).toBe(400);
    const listed = await stack.admin('listClients');
    expect(listed.body.clients.find((c: { clientId: string }) => c.clientId === client.body.clientId).revokedAt).toBe(
      deleted.body.revokedAt,
    );
  });

  it('seedDefaultProfiles is idempotent and never overwrites an edited profile', async () => {
    const first = await stack.admin('seedDefaultProfiles');
    expect(first.status).toBe(200);
    expect(first.body.created).toEqual(['default', 'service', 'dynamic', 'interactive']);
    const raw = await rawRedis();
    const [profileKey] = (await keysUnder(raw, stack.prefix)).filter((k) => k.endsWith(':profiles:default'));
    await raw.hset(profileKey!, 'accessTokenLifetimeSeconds', '42');
    const second = await stack.admin('seedDefaultProfiles');
    expect(second.body.created).toEqual([]);
    expect(second.body.profiles.find((p: { name: string }) => p.name === 'default').accessTokenLifetimeSeconds).toBe(42);
    await raw.quit();
  });

  it('revokeUserToken by token or by tokenHash', async () => {
    for (const form of ['token', 'tokenHash'] as const) {
      const token = randomBytes(32).toString('hex');
      const now = stack.clock.now();
      await stack.store.putUserToken({
        tokenHash: hashToken(token),
        subject: 'bob',
        issuer: 'https://idp',
        createdAt: now,
        expiresAt: now + TTL_7_DAYS,
      });
      const res = await stack.admin('revokeUserToken', form === 'token' ? { token } : { tokenHash: hashToken(token) });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ tokenHash: hashToken(token), revoked: true });
      const denied = await fetch(stack.mcpUrl, { method: 'POST', body: '{}', headers: { authorization: `Bearer ${token}` } });
      expect(denied.status).toBe(401);
    }
  });

  it('listGrants pages: limit at a time in grant id order, nextCursor until the last page; grants made or revoked meanwhile shift no page', async () => {
    const clientId = (await stack.admin('createClient', { clientName: 'many grants', grantTypes: ['client_credentials'] })).body.clientId;
    const subject = `paged-${randomBytes(4).toString('hex')}`;
    const now = stack.clock.now();
    const grant = async () => {
      const tokenHash = hashToken(generateToken());
      const record = { tokenHash, clientId, user: { subject, issuer: 'https://idp.example' }, createdAt: now, expiresAt: now + 600_000 };
      expect(await stack.store.createAccessToken(record)).toBe('ok');
      return tokenHash;
    };
    const hashes: string[] = [];
    for (let i = 0; i < 250; i++) hashes.push(await grant());
    const page = (body: Record<string, unknown>) => stack.admin('listGrants', { subject, ...body });

    const first = await page({});
    expect(first.status).toBe(200);
    expect(first.body.grants).toHaveLength(100);
    expect(first.body.nextCursor).toEqual(expect.any(String));
    const ids: string[] = first.body.grants.map((g: { grantId: string }) => g.grantId);
    expect(ids).toEqual([...ids].sort());
    // Meanwhile: one grant of the first page ends, and 20 new ones are made (anywhere in id order).
    expect(
      await stack.store.revokeAccessToken(
        hashes.find((h) => ids.includes(grantIdOf({ tokenHash: h })))!,
        stack.clock.now(),
      ),
    ).toBe(true);
    const added: string[] = [];
    for (let i = 0; i < 20; i++) added.push(grantIdOf({ tokenHash: await grant() }));
    let cursor: string | undefined = first.body.nextCursor;
    while (cursor !== undefined) {
      const next = await page({ cursor });
      expect(next.status).toBe(200);
      expect(next.body.grants.length).toBeLessThanOrEqual(100);
      ids.push(...next.body.grants.map((g: { grantId: string }) => g.grantId));
      cursor = next.body.nextCursor;
    }
    // Every grant that existed throughout, exactly once, in order; of those made meanwhile, the ones after the first page.
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual([...ids].sort());
    expect(ids).toEqual(expect.arrayContaining(hashes.map((h) => grantIdOf({ tokenHash: h }))));
    const lastOfFirst = first.body.grants.at(-1).grantId as string;
    expect(ids.filter((id) => added.includes(id)).sort()).toEqual(added.filter((id) => id > lastOfFirst).sort());

    // A large limit: all of them at once, no cursor.
    const all = await page({ limit: 1000 });
    expect(all.body.grants).toHaveLength(250 - 1 + 20);
    expect(all.body.nextCursor).toBeUndefined();
    // By client too.
    const byClient = await stack.admin('listGrants', { clientId, limit: 7 });
    expect(byClient.body.grants).toHaveLength(7);
    expect(byClient.body.nextCursor).toEqual(expect.any(String));
  });

  it('the master token works in Authorization: Bearer instead of callerToken', async () => {
    const res = await post('/oauth/listClients', '{}', { authorization: `Bearer ${stack.masterToken}` });
    expect(res.status).toBe(200);
    expect(Array.isArray(res.body.clients)).toBe(true);
  });
});

describe('admin error rows', () => {
  it('listGrants: a cursor it did not give, a limit out of 1..1000: 400 invalid_request', async () => {
    const forged = Buffer.from('g1:zz', 'utf8').toString('base64url');
    const other = Buffer.from(`g1:${'a'.repeat(32)}`, 'utf8').toString('base64'); // base64, not base64url: not a cursor given
    for (const body of [
      { cursor: 'not-a-cursor' },
      { cursor: forged },
      { cursor: `${other}=` },
      { cursor: 12 },
      { limit: 0 },
      { limit: 1001 },
      { limit: 2.5 },
      { limit: '10' },
    ]) {
      const answer = await stack.admin('listGrants', { subject: 'someone', ...body });
      expect(answer.status, JSON.stringify(body)).toBe(400);
      expect(answer.body.error, JSON.stringify(body)).toBe('invalid_request');
    }
  });

  const wrong = randomBytes(32).toString('hex');
  const rows: Array<[string, () => Promise<{ status: number; body: unknown; headers?: Headers }>, number, unknown]> = [
    ['no master token', () => post('/oauth/listClients', '{}'), 401, { error: 'unauthorized' }],
    ['wrong callerToken', () => post('/oauth/listClients', JSON.stringify({ callerToken: wrong })), 401, { error: 'unauthorized' }],
    ['wrong bearer', () => post('/oauth/listClients', '{}', { authorization: `Bearer ${wrong}` }), 401, { error: 'unauthorized' }],
    ['unknown operation without the master token (nothing revealed)', () => post('/oauth/nope', '{}'), 401, { error: 'unauthorized' }],
    ['unknown operation', () => stack.admin('nope'), 404, { error: 'not_found' }],
    ['prototype name as operation', () => stack.admin('constructor'), 404, { error: 'not_found' }],
    [
      'bad JSON',
      () => post('/oauth/listClients', '{"callerToken":'),
      400,
      { error: 'invalid_request', error_description: 'the body is not valid JSON' },
    ],
    [
      'JSON that is not an object',
      () => post('/oauth/listClients', '[1,2]'),
      400,
      { error: 'invalid_request', error_description: 'the body must be a JSON object' },
    ],
    [
      // JSON.parse takes it, and JSON.stringify of it overflows the stack: every JSON body is bounded in depth.
      'JSON nested ten thousand levels deep (within the body limit)',
      () =>
        post('/oauth/createClient', `{"clientName":"deep","x":${'['.repeat(10_000)}${']'.repeat(10_000)}}`, {
          authorization: `Bearer ${stack.masterToken}`,
        }),
      400,
      { error: 'invalid_request', error_description: 'the body nests deeper than 32 levels' },
    ],
    [
      'deleteClient without clientId',
      () => stack.admin('deleteClient'),
      400,
      { error: 'invalid_request', error_description: 'clientId must be a non-empty string' },
    ],
    ['deleteClient of an unknown client', () => stack.admin('deleteClient', { clientId: 'mcp_unknown' }), 404, { error: 'not_found' }],
    [
      'createAccessToken for an unknown client',
      () => stack.admin('createAccessToken', { clientId: 'mcp_unknown', lifetimeSeconds: 60 }),
      404,
      { error: 'not_found' },
    ],
    [
      'createClient with a bad redirect URI',
      () => stack.admin('createClient', { redirectUris: ['http://evil.example/cb'] }),
      400,
      expect.objectContaining({ error: 'invalid_request' }),
    ],
    [
      'createClient with an unknown grant type',
      () => stack.admin('createClient', { grantTypes: ['password'] }),
      400,
      expect.objectContaining({ error: 'invalid_request' }),
    ],
    [
      'createClient with an unknown profile',
      () => stack.admin('createClient', { profile: 'nope' }),
      400,
      expect.objectContaining({ error: 'invalid_request' }),
    ],
    [
      'revokeUserToken without token',
      () => stack.admin('revokeUserToken'),
      400,
      { error: 'invalid_request', error_description: 'token or tokenHash is required' },
    ],
    [
      'revokeUserToken with a malformed token',
      () => stack.admin('revokeUserToken', { token: 'abc' }),
      400,
      expect.objectContaining({ error: 'invalid_request' }),
    ],
    [
      'revokeUserToken of an unknown token',
      () => stack.admin('revokeUserToken', { tokenHash: 'a'.repeat(64) }),
      404,
      { error: 'not_found' },
    ],
    [
      'revokeUserToken with token and tokenHash',
      () => stack.admin('revokeUserToken', { token: 'a'.repeat(64), tokenHash: 'a'.repeat(64) }),
      400,
      { error: 'invalid_request', error_description: 'give either token or tokenHash, not both' },
    ],
    [
      'explainPolicy without method',
      () => stack.admin('explainPolicy', { tokenHash: 'a'.repeat(64) }),
      400,
      { error: 'invalid_request', error_description: 'method must be a JSON-RPC method name' },
    ],
    [
      'listAuditEvents with count over its bound',
      () => stack.admin('listAuditEvents', { count: 1001 }),
      400,
      { error: 'invalid_request', error_description: 'count must be an integer from 1 to 1000' },
    ],
    [
      'createClient with an unknown auth method',
      () => stack.admin('createClient', { tokenEndpointAuthMethod: 'tls_client_auth' }),
      400,
      {
        error: 'invalid_request',
        error_description: 'tokenEndpointAuthMethod must be one of client_secret_basic, client_secret_post, private_key_jwt, none',
      },
    ],
    [
      'createClient with jwks that is not an object',
      () => stack.admin('createClient', { tokenEndpointAuthMethod: 'private_key_jwt', jwks: '{"keys":[]}' }),
      400,
      { error: 'invalid_request', error_description: 'jwks must be a JSON Web Key Set of 1 to 32 public keys' },
    ],
    [
      'createClient with a name that is not a string',
      () => stack.admin('createClient', { clientName: 5 }),
      400,
      {
        error: 'invalid_request',
        error_description:
          'clientName must be a string of at most 256 characters, without control characters or invisible formatting characters (bidi controls, zero-width characters)',
      },
    ],
    ['unknown path', () => post('/other', '{}'), 404, { error: 'not_found' }],
  ];
  it.each(rows)('%s', async (_name, send, status, body) => {
    const res = await send();
    expect(res.status).toBe(status);
    expect(res.body).toEqual(body);
  });

  it.each([0, 1.5, -1, 31_536_001, '60', null])('createAccessToken with lifetimeSeconds=%s: 400', async (lifetimeSeconds) => {
    const client = await stack.admin('createClient', {});
    const res = await stack.admin('createAccessToken', { clientId: client.body.clientId, lifetimeSeconds });
    expect(res.status).toBe(400);
    expect(res.body.error_description).toBe('lifetimeSeconds must be an integer from 1 to 31536000');
  });

  it('createClient takes a private_key_jwt client with its public keys (jwks)', async () => {
    const { publicKey } = await generateKeyPair('ES256');
    const jwks = { keys: [{ ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256' }] };
    const created = await stack.admin('createClient', {
      tokenEndpointAuthMethod: 'private_key_jwt',
      jwks,
      grantTypes: ['client_credentials'],
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ tokenEndpointAuthMethod: 'private_key_jwt', jwks });
  });

  it('a field sent as null is not given; a field nobody declared is ignored', async () => {
    const listed = await stack.admin('listAuditEvents', { count: null, verbose: true });
    expect(listed.status).toBe(200);
    const client = await stack.admin('createClient', { clientName: null, scope: null, colour: 'blue' });
    expect(client.status).toBe(201);
    expect(client.body).not.toHaveProperty('clientName');
    expect(client.body).not.toHaveProperty('colour');
    const unknown = await stack.admin('revokeUserToken', { token: null, tokenHash: 'b'.repeat(64) });
    expect(unknown).toMatchObject({ status: 404, body: { error: 'not_found' } });
  });

  it('accepts the maximum lifetime of 31536000 s', async () => {
    const client = await stack.admin('createClient', {});
    const res = await stack.admin('createAccessToken', { clientId: client.body.clientId, lifetimeSeconds: 31_536_000 });
    expect(res.status).toBe(201);
  });

  it('another method: 405 with Allow: POST', async () => {
    const res = await fetch(`${stack.adminUrl}/oauth/listClients`);
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('POST');
  });

  it('a body over 64 KiB: 413 (declared length)', async () => {
    const res = await post('/oauth/createClient', JSON.stringify({ callerToken: stack.masterToken, clientName: 'x'.repeat(70_000) }));
    expect(res.status).toBe(413);
    expect(res.body.error).toBe('payload_too_large');
  });

  it('a chunked body over 64 KiB: 413 without reading it all', async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        `${stack.adminUrl}/oauth/createClient`,
        { method: 'POST', headers: { 'transfer-encoding': 'chunked' } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.write(Buffer.alloc(40_000, 0x20));
      req.write(Buffer.alloc(40_000, 0x20));
      req.end();
    });
    expect(status).toBe(413);
  });

  it('GET /livez, /readyz, /metrics without authentication', async () => {
    expect((await fetch(`${stack.adminUrl}/livez`)).status).toBe(200);
    const ready = await fetch(`${stack.adminUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ok', store: 'ok' });
    const metrics = await fetch(`${stack.adminUrl}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.headers.get('content-type')).toContain('text/plain');
    const text = await metrics.text();
    expect(text).toContain('mcp_auth_requests_total');
    expect(text).toContain('mcp_auth_validation_seconds');
  });
});

describe('the admin listener of a primary of worker processes (src/entry/workers.ts)', () => {
  it('answers /readyz 503 until every worker listens, and /metrics with the group scrape', async () => {
    const config = buildConfig(
      {
        store: 'memory',
        upstream: { url: echo.url },
        proxy: { host: '127.0.0.1', port: 0 },
        admin: { host: '127.0.0.1', port: 0 },
        logLevel: 'error',
      },
      { BEARER_SECRET_MASTER: generateToken() },
    );
    let listening = 1;
    const sidecar = await createSidecar({
      config,
      defaultMetrics: false,
      admin: {
        notReady: () => (listening < 2 ? `${listening} of 2 workers listening` : undefined),
        scrape: async () => 'mcp_auth_group_sample 7\n',
      },
    });
    try {
      const adminUrl = await sidecar.listenAdmin();
      expect(sidecar.proxyServer.listening).toBe(false);
      const notReady = await fetch(`${adminUrl}/readyz`);
      expect(notReady.status).toBe(503);
      expect(await notReady.json()).toEqual({ status: 'unavailable', store: 'ok', workers: '1 of 2 workers listening' });
      listening = 2;
      expect((await fetch(`${adminUrl}/readyz`)).status).toBe(200);
      expect(await (await fetch(`${adminUrl}/metrics`)).text()).toBe('mcp_auth_group_sample 7\n');
    } finally {
      await sidecar.shutdown(0);
    }
  });
});
