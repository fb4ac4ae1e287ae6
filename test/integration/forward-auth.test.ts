// /authz, the forward-auth endpoint, as each ingress calls it, over real sockets with a real Redis.
// The request shapes come from each ingress's documentation of its protocol:
// - nginx auth_request: a GET subrequest without body; the original request only in the headers the
//   configuration sets (X-Original-Method, X-Original-URI), the client's headers passed along
//   (nginx.org/en/docs/http/ngx_http_auth_request_module.html); examples/nginx/.
// - Traefik ForwardAuth: the original method, proto, host, URI and client address in X-Forwarded-Method,
//   -Proto, -Host, -Uri, -For, every client header copied (doc.traefik.io, middlewares/http/forwardauth).
// - Caddy forward_auth: the same X-Forwarded-* set, with Host rewritten to the auth service's
//   (caddyserver.com/docs/caddyfile/directives/forward_auth).
// - Envoy HTTP ext_authz: the original method kept, the original path appended to `path_prefix`, and
//   only Host, :method, :path, Content-Length, Authorization plus `allowed_headers` sent
//   (envoyproxy.io, ext_authz filter, HttpService / AuthorizationRequest).
// Caddy and nginx are also run for real in test/e2e/ingress.test.ts.

import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { hashToken, TTL_7_DAYS } from '../../src/model/credentials.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { startEchoUpstream, type FakeUpstream } from '../support/fake-upstreams.ts';
import { exchange } from '../hostile/raw-http.ts';
import { forgedIdentityHeaderNames } from '../support/identity-spellings.ts';

const POLICY = {
  default: 'deny',
  rules: [
    { name: 'everyone-echo', effect: 'allow', requests: { methods: ['tools/call'], names: ['echo', 'héllo'] } },
    { name: 'math', effect: 'allow', principals: { scopes: ['mcp:math'] }, requests: { methods: ['tools/call'], names: ['add'] } },
  ],
};

const MIRROR_REVISION = '2026-07-28';

interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

async function ask(url: string, headers: Record<string, string>, method = 'GET'): Promise<Answer> {
  const res = await fetch(url, { method, headers });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/** The identity headers of an answer, by lowercase name. */
function identity(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  headers.forEach((value, name) => {
    if (name.startsWith('x-mcp-auth-')) out[name] = value;
  });
  return out;
}

describe('/authz: forward-auth', () => {
  let echo: FakeUpstream;
  let stack: Stack;
  let token: string;
  let clientId: string;
  let math: string;
  let authz: string;

  /** nginx's auth_request subrequest: GET, the original request in X-Original-*, the client's headers. */
  const nginx = (uri: string, method: string, headers: Record<string, string> = {}) =>
    ask(authz, { 'x-original-uri': uri, 'x-original-method': method, ...headers });

  beforeAll(async () => {
    echo = await startEchoUpstream();
    stack = await startStack({ upstreamUrl: echo.url, config: { proxy: { forwardAuth: true }, policy: POLICY } });
    ({ token, clientId } = await stack.issueOAuthToken());
    const issued = await stack.admin('createAccessToken', { clientId, lifetimeSeconds: 600, scope: 'mcp:math' });
    math = issued.body.accessToken;
    authz = `${stack.proxyUrl}/authz`;
  });
  afterAll(async () => {
    await stack.close();
    await echo.close();
  });

  it('allows a request for /mcp with a valid token: 200, no body, the identity headers; nothing forwarded', async () => {
    const before = echo.seen.length;
    const answer = await nginx('/mcp?x=1', 'GET', { authorization: `Bearer ${token}` });
    expect(answer.status).toBe(200);
    expect(answer.text).toBe('');
    expect(answer.headers.get('cache-control')).toBe('no-store');
    expect(identity(answer.headers)).toEqual({
      'x-mcp-auth-kind': 'oauth',
      'x-mcp-auth-subject': clientId,
      'x-mcp-auth-client-id': clientId,
    });
    expect(echo.seen.length).toBe(before);
  });

  it('logs a denied check but not an allowed one (proxy.forwardAuthLogAllowed off: the ingress logs the request)', async () => {
    const marker = `/mcp?log=${randomBytes(4).toString('hex')}`;
    const lines = () =>
      stack.logs
        .filter((line) => line.includes('"msg":"request"') && line.includes('"path":"/authz"'))
        .map((line) => JSON.parse(line) as { status: number; denial?: string });
    const before = lines().length;
    expect((await nginx(marker, 'GET', { authorization: `Bearer ${token}` })).status).toBe(200);
    expect((await nginx(marker, 'GET', { authorization: `Bearer ${randomBytes(32).toString('hex')}` })).status).toBe(401);
    // The denial's line is written when its response closes: wait for it, then no line of the 200 came before it.
    await vi.waitFor(() => expect(lines().length).toBeGreaterThan(before), { timeout: 5000, interval: 20 });
    expect(lines().slice(before)).toEqual([expect.objectContaining({ status: 401, denial: 'unknown' })]);
  });

  it('answers what /mcp answers without a token, with a bad one, and for the master token', async () => {
    const missing = await nginx('/mcp', 'POST');
    const direct = await fetch(stack.mcpUrl, { method: 'POST' });
    expect(missing.status).toBe(401);
    expect(missing.headers.get('www-authenticate')).toBe(direct.headers.get('www-authenticate'));
    expect(missing.text).toBe(await direct.text());

    const bad = await nginx('/mcp', 'GET', { authorization: `Bearer ${randomBytes(32).toString('hex')}` });
    expect(bad.status).toBe(401);
    expect(bad.headers.get('www-authenticate')).toContain('error="invalid_token"');
    expect(identity(bad.headers)).toEqual({});

    const master = await nginx('/mcp', 'GET', { authorization: `Bearer ${stack.masterToken}` });
    expect(identity(master.headers)).toEqual({ 'x-mcp-auth-kind': 'master', 'x-mcp-auth-subject': 'master' });
  });

  it('a user-grade token revoked by hand in Redis is refused from the next request on', async () => {
    const user = randomBytes(32).toString('hex');
    const now = stack.clock.now();
    await stack.store.putUserToken({
      tokenHash: hashToken(user),
      subject: 'alice',
      issuer: 'https://idp.example',
      createdAt: now,
      expiresAt: now + TTL_7_DAYS,
    });
    const first = await nginx('/mcp', 'GET', { authorization: `Bearer ${user}` });
    expect(first.status).toBe(200);
    expect(identity(first.headers)).toEqual({
      'x-mcp-auth-kind': 'user',
      'x-mcp-auth-subject': 'alice',
      'x-mcp-auth-issuer': 'https://idp.example',
    });
    await stack.store.revokeUserToken(hashToken(user));
    expect((await nginx('/mcp', 'GET', { authorization: `Bearer ${user}` })).status).toBe(401);
  });

  it('only /mcp can be allowed: another original path is 404 even with a valid token', async () => {
    for (const uri of ['/health', '/mcp/', '/mcpx', '/MCP', '/foo/../mcp', '//mcp', '/authz', '/.well-known/oauth-protected-resource']) {
      const answer = await nginx(uri, 'GET', { authorization: `Bearer ${token}` });
      expect(answer.status, uri).toBe(404);
      expect(identity(answer.headers), uri).toEqual({});
    }
  });

  it('refuses a request that does not say what it asks about, or says it twice differently', async () => {
    const auth = { authorization: `Bearer ${token}` };
    // nginx asks with GET: without X-Original-Method a POST would be decided as a GET.
    expect((await ask(authz, { ...auth, 'x-original-uri': '/mcp' })).status).toBe(400);
    expect((await ask(authz, { ...auth, 'x-original-method': 'GET' })).status).toBe(400);
    // A client-sent X-Forwarded-Uri passed on by nginx beside the X-Original-URI it sets.
    const twice = await ask(authz, { ...auth, 'x-original-method': 'GET', 'x-original-uri': '/admin', 'x-forwarded-uri': '/mcp' });
    expect(twice.status).toBe(400);
    expect(identity(twice.headers)).toEqual({});
    expect((await ask(authz, { ...auth, 'x-original-method': 'GET', 'x-forwarded-method': 'POST', 'x-original-uri': '/mcp' })).status).toBe(
      400,
    );
    // Envoy's appended path and a header naming another one.
    expect((await ask(`${authz}/mcp`, { ...auth, 'x-original-uri': '/other' })).status).toBe(400);
  });

  it('refuses a check request carrying a client-sent X-MCP-Auth-* header, in any spelling, set by the sidecar or not', async () => {
    // Written raw: fetch lower-cases names, and an ingress passes the client's spelling on as it came.
    const check: Array<[string, string]> = [
      ['Authorization', `Bearer ${token}`],
      ['X-Original-URI', '/mcp'],
      ['X-Original-Method', 'GET'],
    ];
    expect(await rawAsk(stack.proxyUrl, check)).toMatch(/^HTTP\/1\.1 200 /);
    for (const name of forgedIdentityHeaderNames()) {
      const raw = await rawAsk(stack.proxyUrl, [...check, [name, 'victim']]);
      expect(raw, name).toMatch(/^HTTP\/1\.1 400 /);
      expect(raw, name).toContain('only the authorization service sets those');
      expect(raw.toLowerCase(), name).not.toContain('x-mcp-auth-kind:');
    }
    // Names that only look alike are not identity headers.
    expect(await rawAsk(stack.proxyUrl, [...check, ['X-MCP-Authority', 'x'], ['X-MCPAuth-Kind', 'x']])).toMatch(/^HTTP\/1\.1 200 /);
  });

  it('Traefik and Caddy: X-Forwarded-Method / -Uri / -Host', async () => {
    const answer = await ask(authz, {
      authorization: `Bearer ${token}`,
      'x-forwarded-method': 'DELETE',
      'x-forwarded-uri': '/mcp',
      'x-forwarded-proto': 'https',
      'x-forwarded-for': '203.0.113.9',
    });
    expect(answer.status).toBe(200);
    expect(identity(answer.headers)['x-mcp-auth-kind']).toBe('oauth');
  });

  it('Envoy: the original path appended to /authz, the method kept', async () => {
    const ok = await ask(`${authz}/mcp?session=1`, { authorization: `Bearer ${token}` }, 'DELETE');
    expect(ok.status).toBe(200);
    expect(identity(ok.headers)['x-mcp-auth-client-id']).toBe(clientId);
    expect((await ask(`${authz}/health`, { authorization: `Bearer ${token}` })).status).toBe(404);
    // Envoy keeps the POST: the policy applies, decided from the mirror headers it was told to send.
    const denied = await ask(
      `${authz}/mcp`,
      { authorization: `Bearer ${token}`, 'mcp-protocol-version': MIRROR_REVISION, 'mcp-method': 'tools/call', 'mcp-name': 'add' },
      'POST',
    );
    expect(denied.status).toBe(403);
  });

  describe('per-tool policy from Mcp-Method / Mcp-Name', () => {
    const post = (t: string, headers: Record<string, string>) =>
      nginx('/mcp', 'POST', { authorization: `Bearer ${t}`, 'mcp-protocol-version': MIRROR_REVISION, ...headers });

    it('allows what the policy allows and answers 403 with the step-up challenge otherwise', async () => {
      expect((await post(token, { 'mcp-method': 'tools/call', 'mcp-name': 'echo' })).status).toBe(200);
      // Always allowed, as on /mcp (lists cannot be filtered here: they pass whole).
      expect((await post(token, { 'mcp-method': 'tools/list' })).status).toBe(200);
      expect((await post(token, { 'mcp-method': 'initialize' })).status).toBe(200);
      const denied = await post(token, { 'mcp-method': 'tools/call', 'mcp-name': 'add' });
      expect(denied.status).toBe(403);
      expect(denied.headers.get('www-authenticate')).toBe(
        `Bearer error="insufficient_scope", scope="mcp:math", resource_metadata="${stack.proxyUrl.replace('127.0.0.1', 'localhost')}/.well-known/oauth-protected-resource/mcp"`,
      );
      expect(JSON.parse(denied.text)).toEqual({
        jsonrpc: '2.0',
        id: null,
        error: { code: -32003, message: 'tools/call add is not allowed for this token' },
      });
      expect(identity(denied.headers)).toEqual({});
      expect((await post(math, { 'mcp-method': 'tools/call', 'mcp-name': 'add' })).status).toBe(200);
    });

    it('decodes a non-ASCII name from the =?base64?...?= form, and never percent-decodes', async () => {
      const b64 = `=?base64?${Buffer.from('héllo', 'utf8').toString('base64')}?=`;
      expect((await post(token, { 'mcp-method': 'tools/call', 'mcp-name': b64 })).status).toBe(200);
      // `%65cho` is a tool of that name to the upstream, not `echo`.
      expect((await post(token, { 'mcp-method': 'tools/call', 'mcp-name': '%65cho' })).status).toBe(403);
      // Unpadded: not the one encoding of its bytes. A value outside the form is a plain name (denied here).
      expect((await post(token, { 'mcp-method': 'tools/call', 'mcp-name': '=?base64?ZWNobw?=' })).status).toBe(400);
      expect((await post(token, { 'mcp-method': 'tools/call', 'mcp-name': '=?base64?ZWNobw==?= ' })).status).toBe(200);
      expect((await post(token, { 'mcp-method': 'tools/call', 'mcp-name': '=?BASE64?ZWNobw==?=' })).status).toBe(403);
      expect(
        (await post(token, { 'mcp-method': 'tools/call', 'mcp-name': `=?base64?${Buffer.from([0xff, 0xfe]).toString('base64')}?=` }))
          .status,
      ).toBe(400);
    });

    it('a POST that cannot be decided from its headers is refused, never allowed undecided', async () => {
      const cases: Array<[string, Record<string, string>]> = [
        ['no Mcp-Method', {}],
        ['no Mcp-Name on tools/call', { 'mcp-method': 'tools/call' }],
        ['an older revision', { 'mcp-protocol-version': '2025-11-25', 'mcp-method': 'tools/call', 'mcp-name': 'echo' }],
        ['no revision', { 'mcp-protocol-version': '', 'mcp-method': 'tools/call', 'mcp-name': 'echo' }],
        ['a revision that is no date', { 'mcp-protocol-version': 'latest', 'mcp-method': 'tools/call', 'mcp-name': 'echo' }],
        ['Mcp-Name on a method without a target', { 'mcp-method': 'ping', 'mcp-name': 'echo' }],
      ];
      for (const [what, headers] of cases) {
        const answer = await post(token, headers);
        expect(answer.status, what).toBe(400);
        expect(identity(answer.headers), what).toEqual({});
      }
      // Without any MCP-Protocol-Version at all (a client of a revision before the header existed).
      expect(
        (await nginx('/mcp', 'POST', { authorization: `Bearer ${token}`, 'mcp-method': 'tools/call', 'mcp-name': 'echo' })).status,
      ).toBe(400);
      // GET and DELETE carry no call: decided on the token alone, as on /mcp.
      expect((await nginx('/mcp', 'GET', { authorization: `Bearer ${token}` })).status).toBe(200);
    });

    it('a mirror header sent twice is refused (two readers could take different ones)', async () => {
      const raw = await rawAsk(stack.proxyUrl, [
        ['Authorization', `Bearer ${token}`],
        ['X-Original-URI', '/mcp'],
        ['X-Original-Method', 'POST'],
        ['MCP-Protocol-Version', MIRROR_REVISION],
        ['Mcp-Method', 'tools/call'],
        ['Mcp-Name', 'echo'],
        ['Mcp-Name', 'add'],
      ]);
      expect(raw).toMatch(/^HTTP\/1\.1 400 /);
    });

    it('a denial is audited and counted by rule, an allowed request counted as allowed', async () => {
      await post(token, { 'mcp-method': 'tools/call', 'mcp-name': 'add' });
      const metrics = await (await fetch(`${stack.adminUrl}/metrics`)).text();
      expect(metrics).toMatch(/mcp_auth_policy_denials_total\{rule="default"\} [1-9]/);
      expect(metrics).toMatch(/mcp_auth_requests_total\{outcome="allowed",reason=""\} [1-9]/);
      expect(stack.logs.some((line) => line.includes('"action":"policy.deny"') && line.includes('"name":"add"'))).toBe(true);
    });
  });

  it('checks the Host the client asked for: X-Forwarded-Host only from a trusted proxy', async () => {
    const auth = { authorization: `Bearer ${token}` };
    const port = Number(new URL(stack.proxyUrl).port);
    const withHost = async (host: string) => {
      const { responses } = await exchange(
        port,
        `GET /authz HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${token}\r\nX-Original-URI: /mcp\r\nX-Original-Method: GET\r\nConnection: close\r\n\r\n`,
      );
      return responses[0]?.status;
    };
    expect(await withHost('evil.example')).toBe(421);
    expect(await withHost(new URL(stack.proxyUrl).host)).toBe(200);
    // Not a trusted proxy: its X-Forwarded-Host is not believed (the check request's own Host is checked).
    expect((await nginx('/mcp', 'GET', { ...auth, 'x-forwarded-host': 'evil.example' })).status).toBe(200);
    expect((await nginx('/mcp', 'GET', { ...auth, origin: 'https://evil.example' })).status).toBe(403);
  });
});

describe('/authz behind a trusted ingress', () => {
  let stack: Stack;
  let token: string;

  beforeAll(async () => {
    stack = await startStack({
      config: {
        proxy: { forwardAuth: true, trustedProxies: ['127.0.0.1'], publicUrl: 'https://mcp.example' },
        rateLimits: { failedAuthPerMinute: 2 },
      },
    });
    ({ token } = await stack.issueOAuthToken());
  });
  afterAll(() => stack.close());

  const caddy = (headers: Record<string, string>) =>
    ask(`${stack.proxyUrl}/authz`, { 'x-forwarded-method': 'GET', 'x-forwarded-uri': '/mcp', 'x-forwarded-proto': 'https', ...headers });

  it('checks the X-Forwarded-Host it states (Caddy sends the auth service its own Host)', async () => {
    expect(
      (await caddy({ authorization: `Bearer ${token}`, 'x-forwarded-host': 'mcp.example', 'x-forwarded-for': '198.51.100.1' })).status,
    ).toBe(200);
    expect(
      (await caddy({ authorization: `Bearer ${token}`, 'x-forwarded-host': 'evil.example', 'x-forwarded-for': '198.51.100.1' })).status,
    ).toBe(421);
  });

  it('refuses the failures of the client address the ingress names, not of the ingress; valid tokens pass', async () => {
    const bad = { authorization: `Bearer ${randomBytes(32).toString('hex')}`, 'x-forwarded-host': 'mcp.example' };
    // The proxy does not wait for the count to land: the refusal comes at the third failure or soon after.
    const statuses: number[] = [];
    let locked: Answer | undefined;
    while (locked === undefined && statuses.length < 10) {
      const answer = await caddy({ ...bad, 'x-forwarded-for': '198.51.100.7' });
      if (answer.status === 429) locked = answer;
      else statuses.push(answer.status);
    }
    expect(statuses.length).toBeGreaterThanOrEqual(3);
    expect(new Set(statuses)).toEqual(new Set([401]));
    expect(Number(locked?.headers.get('retry-after'))).toBeGreaterThan(0);
    // Its further failures are refused; a valid token from that address, and another client behind
    // the same ingress, pass.
    expect((await caddy({ ...bad, 'x-forwarded-for': '198.51.100.7' })).status).toBe(429);
    expect((await caddy({ ...bad, 'x-forwarded-for': '198.51.100.8' })).status).toBe(401);
    expect(
      (await caddy({ authorization: `Bearer ${token}`, 'x-forwarded-host': 'mcp.example', 'x-forwarded-for': '198.51.100.7' })).status,
    ).toBe(200);
    expect(
      (await caddy({ authorization: `Bearer ${token}`, 'x-forwarded-host': 'mcp.example', 'x-forwarded-for': '198.51.100.8' })).status,
    ).toBe(200);
  });
});

describe('/authz with the signed caller assertion on', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ config: { proxy: { forwardAuth: true }, upstream: { assertion: true } } });
  });
  afterAll(() => stack.close());

  it('a 200 carries X-MCP-Auth-Assertion for the ingress to copy, naming the caller', async () => {
    const { token, clientId } = await stack.issueOAuthToken();
    const answer = await ask(`${stack.proxyUrl}/authz`, {
      authorization: `Bearer ${token}`,
      'x-original-uri': '/mcp',
      'x-original-method': 'GET',
    });
    expect(answer.status).toBe(200);
    const jws = answer.headers.get('x-mcp-auth-assertion') ?? '';
    expect(jws.split('.')).toHaveLength(3);
    const claims = JSON.parse(Buffer.from(jws.split('.')[1]!, 'base64url').toString('utf8'));
    expect(claims).toMatchObject({ sub: clientId, mcp_kind: 'oauth', client_id: clientId });
    const refused = await ask(`${stack.proxyUrl}/authz`, {
      authorization: `Bearer ${guessToken()}`,
      'x-original-uri': '/mcp',
      'x-original-method': 'GET',
    });
    expect(refused.headers.get('x-mcp-auth-assertion')).toBeNull();
  });
});

function guessToken(): string {
  return randomBytes(32).toString('hex');
}

describe('/authz while forward-auth is off', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(() => stack.close());

  it('is not found', async () => {
    const { token } = await stack.issueOAuthToken();
    expect(
      (await ask(`${stack.proxyUrl}/authz`, { authorization: `Bearer ${token}`, 'x-original-uri': '/mcp', 'x-original-method': 'GET' }))
        .status,
    ).toBe(404);
    expect((await ask(`${stack.proxyUrl}/authz/mcp`, { authorization: `Bearer ${token}` })).status).toBe(404);
  });
});

/** One request with exactly these header lines (fetch merges repeated names); answers the raw status line. */
async function rawAsk(proxyUrl: string, headers: Array<[string, string]>): Promise<string> {
  const url = new URL(proxyUrl);
  const { raw } = await exchange(
    Number(url.port),
    `GET /authz HTTP/1.1\r\nHost: ${url.host}\r\nConnection: close\r\n${headers.map(([n, v]) => `${n}: ${v}\r\n`).join('')}\r\n`,
  );
  return raw;
}
