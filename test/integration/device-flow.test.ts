// Device sign-in (RFC 8628) over real HTTP: the sidecar on real Redis, a real OpenID provider
// (oidc-provider, in this process, auto-login), a cookie-keeping user agent for the user's browser,
// and fetch for the client's device authorization and polls. Time moves with the stack's ManualClock.

import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DEMO_USER } from '../../demo/idp.ts';
import { DEVICE_ENTRIES_PER_MINUTE_PER_ADDRESS } from '../../src/oauth/authorize.ts';
import { normaliseUserCode, USER_CODE_ALPHABET } from '../../src/oauth/device.ts';
import { deviceAuthorizationRequest, decide, DEVICE_GRANT, enterCode, poll, registerDeviceClient, startDevice } from '../support/device.ts';
import { registerPublicClient, startSignInStack, type SignInStack } from '../support/sign-in.ts';
import { rawRedis } from '../support/redis.ts';
import { startStack } from '../support/stack.ts';
import { hashToken } from '../../src/model/credentials.ts';
import { UserAgent } from '../support/user-agent.ts';

let s: SignInStack;
let base: string;
let clientId: string;

beforeAll(async () => {
  s = await startSignInStack();
  base = s.base;
  clientId = await registerDeviceClient(base);
});
afterAll(async () => {
  await s?.close();
});
// Each test starts in a fresh rate-limit minute (the entry limits are per address, and all tests come from 127.0.0.1).
beforeEach(() => {
  s.stack.clock.advance(60_000);
});

async function mcpSubject(token: string): Promise<number> {
  const res = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
    }),
  });
  await res.text();
  return res.status;
}

describe('device authorization: discovery and registration', () => {
  it('metadata names the device authorization endpoint and lists the grant; a client registers with it and no redirect URI', async () => {
    const meta = (await (await fetch(`${base}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
    expect(meta.device_authorization_endpoint).toBe(`${base}/device_authorization`);
    expect(meta.grant_types_supported).toContain(DEVICE_GRANT);
    const res = await fetch(`${base}/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'cli', grant_types: [DEVICE_GRANT, 'refresh_token'], token_endpoint_auth_method: 'none' }),
    });
    expect(res.status).toBe(201);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body.grant_types).toEqual([DEVICE_GRANT, 'refresh_token']);
    expect(body.redirect_uris).toEqual([]);
    expect(body.response_types).toBeUndefined();
  });

  it('without browser sign-in: no endpoint, no grant in metadata, and registering for the grant is refused', async () => {
    const plain = await startStack();
    try {
      const publicUrl = plain.sidecar.publicUrl();
      const meta = (await (await fetch(`${publicUrl}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
      expect(meta.device_authorization_endpoint).toBeUndefined();
      expect(meta.grant_types_supported).not.toContain(DEVICE_GRANT);
      expect((await deviceAuthorizationRequest(publicUrl, { client_id: 'any' })).status).toBe(404);
      const res = await fetch(`${publicUrl}/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ grant_types: [DEVICE_GRANT], token_endpoint_auth_method: 'none' }),
      });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error_description: string }).error_description).toMatch(
        /device sign-in is not configured on this server \(it needs browser sign-in\)/,
      );
    } finally {
      await plain.close();
    }
  });
});

describe('device authorization request (RFC 8628 §3.1, §3.2)', () => {
  it('answers a 64-hex device code, an XXXX-XXXX user code from the unambiguous alphabet, the verification URIs, expires_in and interval', async () => {
    const res = await deviceAuthorizationRequest(base, { client_id: clientId, resource: `${base}/mcp` });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const d = res.body;
    expect(d.device_code).toMatch(/^[0-9a-f]{64}$/);
    expect(d.user_code).toMatch(new RegExp(`^[${USER_CODE_ALPHABET}]{4}-[${USER_CODE_ALPHABET}]{4}$`));
    expect(d.verification_uri).toBe(`${base}/device`);
    expect(d.verification_uri_complete).toBe(`${base}/device?user_code=${d.user_code as string}`);
    expect(d.expires_in).toBe(600);
    expect(d.interval).toBe(5);
    // Stored hashed only: neither code appears in Redis, as key or as value.
    const raw = await rawRedis();
    try {
      const keys = await raw.keys(`${s.stack.prefix}*oauthDevice*`);
      expect(keys.length).toBeGreaterThan(0);
      const dump = JSON.stringify([keys, ...(await Promise.all(keys.map((k) => raw.hgetall(k))))]);
      expect(dump).toContain(hashToken(d.device_code as string));
      expect(dump).not.toContain(d.device_code as string);
      expect(dump).not.toContain((d.user_code as string).replace('-', ''));
    } finally {
      raw.disconnect();
    }
  });

  it('refuses a resource other than this /mcp, an unknown client, a client without the grant, a secret for a public client', async () => {
    const wrongResource = await deviceAuthorizationRequest(base, { client_id: clientId, resource: 'https://elsewhere.example/mcp' });
    expect([wrongResource.status, wrongResource.body.error]).toEqual([400, 'invalid_target']);
    const unknown = await deviceAuthorizationRequest(base, { client_id: 'mcp_nobody' });
    expect([unknown.status, unknown.body.error]).toEqual([401, 'invalid_client']);
    const none = await deviceAuthorizationRequest(base, {});
    expect([none.status, none.body.error]).toEqual([401, 'invalid_client']);
    const codeOnly = await registerPublicClient(base);
    const noGrant = await deviceAuthorizationRequest(base, { client_id: codeOnly });
    expect([noGrant.status, noGrant.body.error]).toEqual([400, 'unauthorized_client']);
    const withSecret = await deviceAuthorizationRequest(base, { client_id: clientId, client_secret: 'guess' });
    expect([withSecret.status, withSecret.body.error]).toEqual([401, 'invalid_client']);
  });

  it('pending device authorizations are bounded per address: past the bound a 429 with Retry-After, nothing stored', async () => {
    const bounded = await startSignInStack({ config: { rateLimits: { pendingSignInsPerAddress: 2 } } });
    try {
      const id = await registerDeviceClient(bounded.base);
      await startDevice(bounded.base, id);
      await startDevice(bounded.base, id);
      const refused = await deviceAuthorizationRequest(bounded.base, { client_id: id });
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(refused.body.error_description).toMatch(/too many device sign-ins in progress/);
      // Once the oldest expires, a slot is free again.
      bounded.stack.clock.advance(600_000);
      await startDevice(bounded.base, id);
    } finally {
      await bounded.close();
    }
  });
});

describe('the user approves on /device; the client polls', () => {
  it('pending until approved, then tokens acting for the IdP user, once; the consent page names a device and warns', async () => {
    const d = await startDevice(base, clientId);
    expect(await poll(base, clientId, d.device_code)).toMatchObject({ status: 400, body: { error: 'authorization_pending' } });

    const agent = new UserAgent();
    // verification_uri_complete prefills the form.
    const form = await agent.request(d.verification_uri_complete);
    expect(form.status).toBe(200);
    expect(form.body).toContain(`value="${d.user_code}"`);
    expect(form.headers.get('x-frame-options')).toBe('DENY');
    // Typed in lower case with a space instead of the dash: the same code.
    const consent = await enterCode(agent, base, d.user_code.toLowerCase().replace('-', ' '));
    expect(consent.status).toBe(200);
    expect(consent.body).toContain('Headless agent');
    expect(consent.body).toContain('a device');
    expect(consent.body).toContain('Approve only a code you started yourself');
    expect(consent.body).not.toContain('Remember this approval');
    expect(consent.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    const done = await decide(agent, base, consent, 'approve');
    expect(done.status).toBe(200);
    expect(done.body).toContain('Device signed in');

    s.stack.clock.advance(5_000);
    const issued = await poll(base, clientId, d.device_code);
    expect(issued.status).toBe(200);
    expect(issued.body.access_token).toMatch(/^[0-9a-f]{64}$/);
    expect(issued.body.refresh_token).toMatch(/^[0-9a-f]{64}$/);
    expect(issued.headers.get('cache-control')).toBe('no-store');
    expect(await mcpSubject(issued.body.access_token as string)).toBe(200);
    const stored = await s.stack.store.lookupToken(hashToken(issued.body.access_token as string));
    expect(stored.oauth).toMatchObject({ clientId, subject: DEMO_USER.sub });

    // The device code works once; the user code is spent too.
    s.stack.clock.advance(5_000);
    expect(await poll(base, clientId, d.device_code)).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    const again = await enterCode(new UserAgent(), base, d.user_code);
    expect(again.status).toBe(400);
    expect(again.body).toContain('That code is not valid');
  });

  it('slow_down when polled sooner than the interval, and the interval grows by 5 s for every later poll', async () => {
    const d = await startDevice(base, clientId);
    expect((await poll(base, clientId, d.device_code)).body.error).toBe('authorization_pending');
    s.stack.clock.advance(4_000);
    const slow = await poll(base, clientId, d.device_code);
    expect(slow.body.error).toBe('slow_down');
    expect(slow.body.error_description).toMatch(/wait 10 seconds/);
    // 9 s later is still too soon for the new 10 s interval.
    s.stack.clock.advance(9_000);
    expect((await poll(base, clientId, d.device_code)).body.error).toBe('slow_down');
    s.stack.clock.advance(15_000);
    expect((await poll(base, clientId, d.device_code)).body.error).toBe('authorization_pending');
  });

  it('Deny: the client is told access_denied, and gets no token', async () => {
    const d = await startDevice(base, clientId);
    const agent = new UserAgent();
    const denied = await decide(agent, base, await enterCode(agent, base, d.user_code), 'deny');
    expect(denied.body).toContain('You denied access');
    expect(await poll(base, clientId, d.device_code)).toMatchObject({ status: 400, body: { error: 'access_denied' } });
  });

  it('expired_token after expires_in; the code can no longer be entered', async () => {
    const d = await startDevice(base, clientId);
    s.stack.clock.advance(d.expires_in * 1000);
    expect(await poll(base, clientId, d.device_code)).toMatchObject({ status: 400, body: { error: 'expired_token' } });
    const late = await enterCode(new UserAgent(), base, d.user_code);
    expect(late.status).toBe(400);
  });

  it('approval that comes after expiry is refused on a page; the device is never signed in', async () => {
    const d = await startDevice(base, clientId);
    const agent = new UserAgent();
    const consent = await enterCode(agent, base, d.user_code);
    s.stack.clock.advance(d.expires_in * 1000);
    const done = await decide(agent, base, consent, 'approve');
    expect(done.status).toBe(400);
    expect(done.body).toContain('This code has expired');
    expect((await poll(base, clientId, d.device_code)).body.error).toBe('expired_token');
  });

  it('a device code is bound to its client, and a malformed or unknown one is invalid_grant; device_code is required', async () => {
    const d = await startDevice(base, clientId);
    const other = await registerDeviceClient(base);
    expect(await poll(base, other, d.device_code)).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    expect(await poll(base, clientId, 'not-a-code')).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    expect(await poll(base, clientId, 'ab'.repeat(32))).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    const missing = await fetch(`${base}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: DEVICE_GRANT, client_id: clientId }).toString(),
    });
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as { error: string }).error).toBe('invalid_request');
    // The other client's poll did not disturb the real one.
    expect((await poll(base, clientId, d.device_code)).body.error).toBe('authorization_pending');
  });

  it('a client without the grant cannot poll with it', async () => {
    const codeOnly = await registerPublicClient(base);
    expect(await poll(base, codeOnly, 'ab'.repeat(32))).toMatchObject({ status: 400, body: { error: 'unauthorized_client' } });
  });
});

describe('guessing user codes', () => {
  it('user codes are normalised: case, dashes and spaces; anything else is not a code', () => {
    expect(normaliseUserCode('bcdf-ghjk')).toBe('BCDFGHJK');
    expect(normaliseUserCode(' BCDF GHJK ')).toBe('BCDFGHJK');
    expect(normaliseUserCode('BCDFGHJ')).toBeUndefined();
    expect(normaliseUserCode('BCDF-GHJA')).toBeUndefined();
    expect(normaliseUserCode('B'.repeat(100))).toBeUndefined();
  });

  it(`a brute force from one address stops at ${DEVICE_ENTRIES_PER_MINUTE_PER_ADDRESS} entries a minute: then 429, even for the right code`, async () => {
    const d = await startDevice(base, clientId);
    const agent = new UserAgent();
    for (let i = 0; i < DEVICE_ENTRIES_PER_MINUTE_PER_ADDRESS; i++) {
      const wrong = await enterCode(agent, base, `BBBB-BB${USER_CODE_ALPHABET[i]}${USER_CODE_ALPHABET[i]}`);
      expect(wrong.status).toBe(400);
    }
    const refused = await enterCode(agent, base, d.user_code);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(refused.body).not.toContain('Approve');
    // The next minute, the right code works.
    s.stack.clock.advance(60_000);
    expect((await enterCode(agent, base, d.user_code)).body).toContain('Approve');
  });

  it('a code entry posted from another origin is refused before it counts', async () => {
    const res = await new UserAgent().request(`${base}/device`, {
      form: { user_code: 'BBBB-BBBB' },
      headers: { origin: 'https://evil.example' },
    });
    expect(res.status).toBe(403);
  });
});
