// The caller assertion (upstream.assertion): every forwarded request carries an ES256 JWT the
// reference upstream verifies against the sidecar's JWKS (examples/assertion/node, jose); forged,
// expired, wrong-audience and `alg: none` assertions are refused; a client-sent one never reaches the
// upstream in any spelling; keys rotate with no failed verification; the private key is nowhere in
// Redis or the logs. Time moves through the stack's ManualClock, never by sleeping.

import { createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { decodeJwt, decodeProtectedHeader, SignJWT, type JWK } from 'jose';
import { ANNOUNCE_MS, HEARTBEAT_MS } from '../../src/assertion/keys.ts';
import { JWKS_PATH } from '../../src/assertion/jwks.ts';
import { exchange } from '../hostile/raw-http.ts';
import { postMcp } from '../support/http.ts';
import { keysUnder, rawRedis } from '../support/redis.ts';
import { startEchoStack, startStack, type EchoStack, type Stack } from '../support/stack.ts';

const LIFETIME_S = 60;

/** The stack's reference upstream verifying assertions against its sidecar, on the stack's clock. */
function requireAssertions(
  stack: Stack,
  jwks: { cooldownDuration?: number; cacheMaxAge?: number } = {},
): { issuer: string; audience: string; jwksUrl: string } {
  const upstream = stack.upstream!;
  const settings = { jwksUrl: `${stack.proxyUrl}${JWKS_PATH}`, issuer: stack.sidecar.publicUrl(), audience: new URL(upstream.url).origin };
  upstream.requireAssertions({ ...settings, jwks, currentDate: () => new Date(stack.clock.now()) });
  return settings;
}

async function connect(stack: Stack, token: string): Promise<Client> {
  const client = new Client({ name: 'assertion-test', version: '1' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(stack.mcpUrl), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
  );
  return client;
}

/** The assertion the upstream received last. */
function lastAssertion(stack: Stack): string {
  const value = stack.upstream!.seenHeaders.at(-1)!['x-mcp-auth-assertion'];
  expect(typeof value).toBe('string');
  return value as string;
}

async function jwks(stack: Stack): Promise<{ status: number; cacheControl: string | null; keys: JWK[] }> {
  const res = await fetch(`${stack.proxyUrl}${JWKS_PATH}`);
  const body = (await res.json()) as { keys: JWK[] };
  return { status: res.status, cacheControl: res.headers.get('cache-control'), keys: body.keys };
}

/** A request straight to the upstream (as anyone on its network could send), with this assertion. */
async function straightToUpstream(stack: Stack, assertion: string | undefined): Promise<number> {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  if (assertion !== undefined) headers['x-mcp-auth-assertion'] = assertion;
  const res = await fetch(stack.upstream!.url, { method: 'POST', headers, body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' });
  await res.arrayBuffer();
  return res.status;
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

describe('caller assertion, verified by the reference upstream', () => {
  let stack: Stack;
  let settings: ReturnType<typeof requireAssertions>;
  let oauth: { token: string; clientId: string };

  beforeAll(async () => {
    stack = await startStack({ config: { upstream: { assertion: true, assertionLifetimeSeconds: LIFETIME_S } } });
    settings = requireAssertions(stack);
    oauth = await stack.issueOAuthToken();
  });
  afterAll(() => stack?.close());

  it('an MCP session through the sidecar is verified on every request; the claims name the caller', async () => {
    const client = await connect(stack, oauth.token);
    const result = await client.callTool({ name: 'echo', arguments: { text: 'signed' } });
    expect((result.content as Array<{ text: string }>)[0]!.text).toBe('signed');
    await client.close();
    const { verified, refused } = stack.upstream!.assertions;
    expect(refused).toEqual([]);
    expect(verified).toBeGreaterThanOrEqual(3); // initialize, initialized, tools/call (and the DELETE)

    const assertion = lastAssertion(stack);
    const header = decodeProtectedHeader(assertion);
    expect(header).toEqual({ alg: 'ES256', kid: stack.sidecar.assertions!.keys.current().kid, typ: 'JWT' });
    const claims = decodeJwt(assertion);
    expect(claims).toEqual({
      iss: settings.issuer,
      aud: settings.audience,
      sub: oauth.clientId,
      mcp_kind: 'oauth',
      client_id: oauth.clientId,
      iat: Math.floor(stack.clock.now() / 1000),
      exp: Math.floor(stack.clock.now() / 1000) + LIFETIME_S,
      jti: expect.stringMatching(/^[A-Za-z0-9_-]{22}$/),
    });
  });

  it('scope, groups and email are stated when the token has them; a user-grade token is kind user', async () => {
    const now = stack.clock.now();
    const { hashToken, generateToken } = await import('../../src/model/credentials.ts');
    const raw = generateToken();
    await stack.store.putUserToken({
      tokenHash: hashToken(raw),
      subject: 'alice',
      issuer: 'https://idp.example',
      createdAt: now,
      expiresAt: now + 3_600_000,
      email: 'alice@example.com',
      groups: ['eng', 'ops'],
    });
    expect((await postMcp(stack.mcpUrl, raw)).status).not.toBe(401);
    const claims = decodeJwt(lastAssertion(stack));
    expect(claims).toMatchObject({ sub: 'alice', mcp_kind: 'user', email: 'alice@example.com', groups: ['eng', 'ops'] });
    expect(claims.client_id).toBeUndefined();

    const created = await stack.admin('createClient', { clientName: 'scoped', scope: 'mcp:read mcp:write' });
    const issued = await stack.admin('createAccessToken', { clientId: created.body.clientId, lifetimeSeconds: 600, scope: 'mcp:read' });
    await postMcp(stack.mcpUrl, issued.body.accessToken);
    expect(decodeJwt(lastAssertion(stack))).toMatchObject({ sub: created.body.clientId, scope: 'mcp:read' });

    await postMcp(stack.mcpUrl, stack.masterToken);
    expect(decodeJwt(lastAssertion(stack))).toMatchObject({ sub: 'master', mcp_kind: 'master' });
    expect(stack.upstream!.assertions.refused).toEqual([]);
  });

  it('GET /.well-known/jwks.json: no token, cacheable, the public key only', async () => {
    const answer = await jwks(stack);
    expect(answer.status).toBe(200);
    expect(answer.cacheControl).toBe('public, max-age=60');
    const current = stack.sidecar.assertions!.keys.current();
    expect(answer.keys).toEqual([current.publicJwk]);
    expect(answer.keys[0]).toEqual({
      kty: 'EC',
      crv: 'P-256',
      x: expect.any(String),
      y: expect.any(String),
      kid: current.kid,
      alg: 'ES256',
      use: 'sig',
    });
    const head = await fetch(`${stack.proxyUrl}${JWKS_PATH}`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect((await fetch(`${stack.proxyUrl}${JWKS_PATH}`, { method: 'POST' })).status).toBe(405);
  });

  it('an assertion is reused for the same principal while more than half its life is left, then signed anew', async () => {
    await postMcp(stack.mcpUrl, oauth.token);
    const first = lastAssertion(stack);
    stack.clock.advance((LIFETIME_S / 2) * 1000 - 1000);
    await postMcp(stack.mcpUrl, oauth.token);
    expect(lastAssertion(stack)).toBe(first);
    stack.clock.advance(1000);
    await postMcp(stack.mcpUrl, oauth.token);
    const second = lastAssertion(stack);
    expect(second).not.toBe(first);
    expect(decodeJwt(second).iat).toBe(Math.floor(stack.clock.now() / 1000));
    // Another principal never gets this one.
    const other = await stack.issueOAuthToken();
    await postMcp(stack.mcpUrl, other.token);
    expect(decodeJwt(lastAssertion(stack)).sub).toBe(other.clientId);
  });

  describe('refused by the reference upstream, straight to it', () => {
    let realKey: KeyObject;
    let kid: string;
    const now = () => Math.floor(stack.clock.now() / 1000);
    const claims = () => ({
      iss: settings.issuer,
      aud: settings.audience,
      sub: 'mallory',
      mcp_kind: 'master',
      iat: now(),
      exp: now() + 60,
      jti: 'x',
    });

    beforeAll(() => {
      ({ privateKey: realKey, kid } = stack.sidecar.assertions!.keys.current());
    });

    const cases: Array<[string, () => Promise<string | undefined>]> = [
      ['no assertion', async () => undefined],
      ['an empty one', async () => ''],
      [
        'an expired one (signed with the real key, exp 10 minutes ago)',
        () => new SignJWT({ ...claims(), iat: now() - 660, exp: now() - 600 }).setProtectedHeader({ alg: 'ES256', kid }).sign(realKey),
      ],
      [
        'a forged one (another key, the real kid)',
        () =>
          new SignJWT(claims())
            .setProtectedHeader({ alg: 'ES256', kid })
            .sign(generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey),
      ],
      [
        'a wrong audience (signed with the real key)',
        () => new SignJWT({ ...claims(), aud: 'http://another-upstream:3000' }).setProtectedHeader({ alg: 'ES256', kid }).sign(realKey),
      ],
      [
        'a wrong issuer (signed with the real key)',
        () => new SignJWT({ ...claims(), iss: 'https://evil.example' }).setProtectedHeader({ alg: 'ES256', kid }).sign(realKey),
      ],
      ['alg none', async () => `${b64({ alg: 'none', kid })}.${b64(claims())}.`],
      [
        'a real assertion with its payload swapped',
        async () => {
          await postMcp(stack.mcpUrl, oauth.token);
          const [h, , s] = lastAssertion(stack).split('.');
          return `${h}.${b64(claims())}.${s}`;
        },
      ],
    ];

    it.each(cases)('%s: 401, nothing served', async (_name, make) => {
      const before = stack.upstream!.assertions.refused.length;
      expect(await straightToUpstream(stack, await make())).toBe(401);
      expect(stack.upstream!.assertions.refused.length).toBe(before + 1);
    });

    it('while a real, fresh assertion straight to the upstream is served (the cases above fail for their reason)', async () => {
      const assertion = await new SignJWT(claims()).setProtectedHeader({ alg: 'ES256', kid }).sign(realKey);
      expect(await straightToUpstream(stack, assertion)).not.toBe(401);
    });
  });

  it('the private key is nowhere in Redis or the logs', async () => {
    const { d } = stack.sidecar.assertions!.keys.current().privateKey.export({ format: 'jwk' });
    expect(d).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const pem = stack.sidecar.assertions!.keys.current().privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
    const pemBody = pem.split('\n')[1]!;
    const raw = await rawRedis();
    try {
      const keys = await keysUnder(raw, stack.prefix);
      expect(keys).toContain(`${stack.prefix}assertionKeys`);
      for (const key of keys) {
        expect(key).not.toContain(d);
        const type = await raw.type(key);
        const dump =
          type === 'hash'
            ? JSON.stringify(await raw.hgetall(key))
            : type === 'string'
              ? String(await raw.get(key))
              : type === 'set'
                ? JSON.stringify(await raw.smembers(key))
                : type === 'stream'
                  ? JSON.stringify(await raw.xrange(key, '-', '+'))
                  : JSON.stringify(await raw.dump(key));
        expect(dump, key).not.toContain(d);
        expect(dump, key).not.toContain(pemBody);
      }
    } finally {
      await raw.quit();
    }
    const logs = stack.logs.join('\n');
    expect(logs).toContain('assertion signing key published');
    expect(logs).not.toContain(d);
    expect(logs).not.toContain(pemBody);
  });
});

describe('a client-sent X-MCP-Auth-Assertion never reaches the upstream', () => {
  let on: EchoStack;
  let off: EchoStack;

  beforeAll(async () => {
    [on, off] = await Promise.all([startEchoStack({ config: { upstream: { assertion: true } } }), startEchoStack()]);
  });
  afterAll(async () => {
    await Promise.all([on?.close(), off?.close()]);
  });

  const SPELLINGS: Array<[string, string]> = [
    ['X-MCP-Auth-Assertion', 'forged-1'],
    ['x-mcp-auth-assertion', 'forged-2'],
    ['X-Mcp-Auth-ASSERTION', 'forged-3'],
    ['x_mcp_auth_assertion', 'forged-4'],
    ['X_MCP_AUTH_ASSERTION', 'forged-5'],
    ['X-MCP_Auth-Assertion', 'forged-6'],
  ];

  function rawRequest(s: EchoStack): string {
    const lines = [
      'POST /mcp HTTP/1.1',
      `Host: ${s.host}`,
      `Authorization: Bearer ${s.token}`,
      'Content-Type: application/json',
      'Content-Length: 2',
      'Connection: close',
    ];
    for (const [name, value] of SPELLINGS) lines.push(`${name}: ${value}`);
    return `${lines.join('\r\n')}\r\n\r\n{}`;
  }

  /** Every header the upstream got that a CGI gateway would read as X-MCP-Auth-Assertion. */
  function assertionHeaders(s: EchoStack): string[] {
    const raw = s.echo.seen.at(-1)!.rawHeaders;
    const out: string[] = [];
    for (let i = 0; i < raw.length; i += 2)
      if (raw[i]!.toUpperCase().replaceAll('-', '_') === 'X_MCP_AUTH_ASSERTION') out.push(raw[i + 1]!);
    return out;
  }

  it("assertions on: the upstream sees one, the sidecar's, in every spelling the client tried", async () => {
    const { responses } = await exchange(on.port, rawRequest(on));
    expect(responses[0]?.status).toBe(200);
    const seen = assertionHeaders(on);
    expect(seen).toHaveLength(1);
    expect(decodeProtectedHeader(seen[0]!).kid).toBe(on.stack.sidecar.assertions!.keys.current().kid);
    expect(decodeJwt(seen[0]!).sub).toBe(on.clientId);
  });

  it('assertions off: the upstream sees none', async () => {
    const { responses } = await exchange(off.port, rawRequest(off));
    expect(responses[0]?.status).toBe(200);
    expect(assertionHeaders(off)).toEqual([]);
    expect(off.stack.sidecar.assertions).toBeUndefined();
    expect((await fetch(`${off.stack.proxyUrl}${JWKS_PATH}`)).status).toBe(404);
  });
});

describe('key rotation', () => {
  let stack: Stack | undefined;
  afterEach(async () => {
    await stack?.close();
    stack = undefined;
  });

  it('the next key is listed ANNOUNCE_MS before it signs, the old one until its last assertion expired: no verification fails', async () => {
    const ROTATION_MS = 600_000;
    stack = await startStack({
      config: { upstream: { assertion: true, assertionLifetimeSeconds: LIFETIME_S, assertionKeyRotationSeconds: ROTATION_MS / 1000 } },
    });
    // The upstream refetches the set for every verification: what it accepts is exactly what is listed then.
    requireAssertions(stack, { cacheMaxAge: 0, cooldownDuration: 0 });
    const { token } = await stack.issueOAuthToken();
    const keys = stack.sidecar.assertions!.keys;
    const kidsListed = async () => (await jwks(stack!)).keys.map((k) => k.kid);
    const signedWith = () => decodeProtectedHeader(lastAssertion(stack!)).kid;
    const started = stack.clock.now();
    const first = keys.current().kid;

    await postMcp(stack.mcpUrl, token);
    expect(signedWith()).toBe(first);
    expect(await kidsListed()).toEqual([first]);

    // The next key: listed, not yet signing.
    stack.clock.set(started + ROTATION_MS - ANNOUNCE_MS);
    await keys.tick();
    const listed = await kidsListed();
    expect(listed).toHaveLength(2);
    const next = listed.find((kid) => kid !== first)!;
    expect(keys.current().kid).toBe(first);

    // Just before the rotation: a fresh assertion from the old key.
    stack.clock.set(started + ROTATION_MS - 1000);
    await keys.tick();
    await postMcp(stack.mcpUrl, token);
    const lastOfOld = lastAssertion(stack);
    expect(signedWith()).toBe(first);

    stack.clock.set(started + ROTATION_MS);
    await keys.tick();
    expect(keys.current().kid).toBe(next);
    await postMcp(stack.mcpUrl, token);
    expect(signedWith()).toBe(next); // a cached assertion of the old key is not reused after a rotation
    // The old key's last assertion still verifies until it expires.
    expect(await straightToUpstream(stack, lastOfOld)).not.toBe(401);
    const lastExpiry = (decodeJwt(lastOfOld).exp as number) * 1000;
    stack.clock.set(lastExpiry - 1000);
    await keys.tick();
    expect(await kidsListed()).toContain(first);
    expect(await straightToUpstream(stack, lastOfOld)).not.toBe(401);

    // Gone once no assertion it signed can be accepted any more (exp + the verifiers' leeway).
    stack.clock.set(started + ROTATION_MS + LIFETIME_S * 1000 + 60_000 + 2 * HEARTBEAT_MS + 1);
    await keys.tick();
    expect(await kidsListed()).toEqual([next]);
    expect(stack.upstream!.assertions.refused).toEqual([]);
  });

  it('a next key whose listing could not be stored is not used', async () => {
    const ROTATION_MS = 600_000;
    let failPublish = false;
    stack = await startStack({
      config: { upstream: { assertion: true, assertionKeyRotationSeconds: ROTATION_MS / 1000 } },
      wrapStore: (store) =>
        new Proxy(store, {
          get(target, prop) {
            if (prop === 'publishSigningKey')
              return (...args: Parameters<typeof store.publishSigningKey>) =>
                failPublish ? Promise.reject(new Error('store down')) : target.publishSigningKey(...args);
            const value = Reflect.get(target, prop, target) as unknown;
            return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
          },
        }),
    });
    const keys = stack.sidecar.assertions!.keys;
    const first = keys.current().kid;
    const started = stack.clock.now();
    failPublish = true;
    stack.clock.set(started + ROTATION_MS - ANNOUNCE_MS);
    await keys.tick();
    stack.clock.set(started + ROTATION_MS + 1);
    await keys.tick();
    expect(keys.current().kid).toBe(first);
    expect(stack.logs.some((l) => l.includes('could not renew their listing'))).toBe(true);
    // Back: announced now, used ANNOUNCE_MS later, not before.
    failPublish = false;
    await keys.tick();
    expect(keys.current().kid).toBe(first);
    expect((await jwks(stack)).keys).toHaveLength(2);
    stack.clock.advance(ANNOUNCE_MS - 1);
    await keys.tick();
    expect(keys.current().kid).toBe(first);
    stack.clock.advance(1);
    await keys.tick();
    expect(keys.current().kid).not.toBe(first);
  });
});

describe('the JWKS when the store cannot answer', () => {
  it('503 temporarily_unavailable (not cached), never a partial set', async () => {
    const { StoreUnavailableError } = await import('../../src/store/shared.ts');
    let down = false;
    const stack = await startStack({
      config: { upstream: { assertion: true } },
      wrapStore: (store) =>
        new Proxy(store, {
          get(target, prop) {
            if (prop === 'listSigningKeys')
              return (now: number) => (down ? Promise.reject(new StoreUnavailableError('down')) : target.listSigningKeys(now));
            const value = Reflect.get(target, prop, target) as unknown;
            return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
          },
        }),
    });
    try {
      expect((await jwks(stack)).status).toBe(200);
      down = true;
      const res = await fetch(`${stack.proxyUrl}${JWKS_PATH}`);
      expect(res.status).toBe(503);
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(await res.json()).toMatchObject({ error: 'temporarily_unavailable' });
    } finally {
      await stack.close();
    }
  });
});

describe('caller assertion on the memory store (the demo)', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ store: 'memory', config: { upstream: { assertion: true } } });
    requireAssertions(stack);
  });
  afterAll(() => stack?.close());

  it('the JWKS lists the key and the upstream verifies', async () => {
    const { token } = await stack.issueOAuthToken();
    const { initializeStatus } = await import('../support/http.ts');
    expect(await initializeStatus(stack, token)).toBe(200);
    expect(stack.upstream!.assertions).toMatchObject({ verified: 1, refused: [] });
    expect((await jwks(stack)).keys.map((k) => k.kid)).toEqual([stack.sidecar.assertions!.keys.current().kid]);
  });
});

describe('a pinned key (upstream.assertionKey)', () => {
  let stack: Stack;
  const given = generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey;
  beforeAll(async () => {
    stack = await startStack({
      config: {
        upstream: {
          assertion: true,
          assertionKey: given.export({ format: 'pem', type: 'pkcs8' }).toString(),
          assertionKeyRotationSeconds: 600,
        },
      },
    });
    requireAssertions(stack);
  });
  afterAll(() => stack?.close());

  it('signs with the given key (kid: its RFC 7638 thumbprint), listed in the JWKS, never rotated', async () => {
    const { calculateJwkThumbprint, jwtVerify } = await import('jose');
    const { kty, crv, x, y } = given.export({ format: 'jwk' });
    const kid = await calculateJwkThumbprint({ kty: kty!, crv: crv!, x: x!, y: y! });
    const { token } = await stack.issueOAuthToken();
    await postMcp(stack.mcpUrl, token);
    const assertion = lastAssertion(stack);
    expect(decodeProtectedHeader(assertion).kid).toBe(kid);
    await jwtVerify(assertion, createPublicKey(given), { currentDate: new Date(stack.clock.now()) });
    expect((await jwks(stack)).keys.map((k) => k.kid)).toEqual([kid]);
    stack.clock.advance(10 * 600_000);
    await stack.sidecar.assertions!.keys.tick();
    expect(stack.sidecar.assertions!.keys.current().kid).toBe(kid);
    expect((await jwks(stack)).keys.map((k) => k.kid)).toEqual([kid]);
    expect(stack.upstream!.assertions.refused).toEqual([]);
  });
});
