// Forward-auth end to end with real ingresses: nginx (auth_request) and Caddy (forward_auth) run from
// examples/nginx/mcp.conf and examples/caddy/Caddyfile, the sidecar as their authorization service and
// authorization server, the reference MCP server behind them, the official SDK client in front:
// the 401 challenge, sign-in metadata discovery and the whole browser sign-in through the ingress, the
// identity headers at the MCP server (client-sent ones removed or refused in every spelling, also
// before a WSGI application, which reads X_Mcp-Auth_Scope as X-MCP-Auth-Scope), revocation from the
// next request, the 403 step-up challenge and a lockout's 429 as the client sees them.
// Skipped where the ingress is not installed, unless REQUIRE_INGRESS is set (.ci/run sets it).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { randomBytes } from 'node:crypto';
import { DEMO_USER } from '../../demo/idp.ts';
import { freePort, ingressAvailable, startIngress, type Ingress, type IngressKind } from '../support/ingress.ts';
import { approveAndSignIn, clientReceived, startSignInStack, type SignInStack } from '../support/sign-in.ts';
import { connectedClient, firstConnection, RecordingProvider } from '../support/sdk-oauth.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { initializeRequest } from '../support/http.ts';
import { UserAgent } from '../support/user-agent.ts';
import { exchange } from '../hostile/raw-http.ts';
import { forgedIdentityHeaderNames } from '../support/identity-spellings.ts';
import { startWsgiUpstream, type WsgiUpstream } from '../support/wsgi-upstream.ts';
import { startUpstream, type RunningUpstream } from '../../examples/upstream/server.ts';
import { storeUserToken } from '../support/user-tokens.ts';

const KINDS: IngressKind[] = ['nginx', 'caddy'];

function textOf(result: object): string {
  return ((result as { content: Array<{ text?: string }> }).content[0]?.text ?? '') as string;
}

/** The proxy settings of a sidecar behind an ingress on `port` of loopback. */
function behindIngress(port: number) {
  return { forwardAuth: true, trustedProxies: ['127.0.0.1'], publicUrl: `http://127.0.0.1:${port}` };
}

describe.each(KINDS)('%s in front, the sidecar as its authorization service', (kind) => {
  const available = ingressAvailable(kind);
  let s: SignInStack;
  let ingress: Ingress;
  let base: string;

  beforeAll(async () => {
    if (!available) return;
    const port = await freePort();
    s = await startSignInStack({ config: { proxy: behindIngress(port) } });
    ingress = await startIngress(kind, { port, sidecar: s.stack.proxyUrl, upstream: s.stack.upstream!.url });
    base = s.base;
  });
  afterAll(async () => {
    await ingress?.stop();
    await s?.close();
  });

  it.skipIf(!available)(
    '401 with the challenge, discovery, sign-in and tokens through the ingress; the identity at the MCP server',
    async () => {
      expect(base).toBe(ingress.url);
      const bare = await fetch(`${base}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      expect(bare.status).toBe(401);
      expect(bare.headers.get('www-authenticate')).toBe(
        `Bearer realm="mcp", resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`,
      );

      const provider = new RecordingProvider();
      const { transport, authorizationUrl } = await firstConnection(base, provider);
      expect(authorizationUrl.origin).toBe(base);
      expect(authorizationUrl.searchParams.get('resource')).toBe(`${base}/mcp`);
      const hop = await approveAndSignIn(new UserAgent(), base, authorizationUrl.href);
      await transport.finishAuth(clientReceived(hop).get('code')!);

      const client = await connectedClient(base, provider);
      const seen = JSON.parse(textOf(await client.callTool({ name: 'headers', arguments: {} }))) as Record<string, string>;
      expect(seen['x-mcp-auth-kind']).toBe('oauth');
      expect(seen['x-mcp-auth-subject']).toBe(DEMO_USER.sub);
      // The person is the subject at this provider: the same `sub` at another one is someone else.
      expect(seen['x-mcp-auth-issuer']).toBe(s.idp.issuer);
      expect(seen['x-mcp-auth-client-id']).toBe(provider.clientInformation()?.client_id);
      expect(seen.authorization).toBeUndefined();
      await client.close();
      // The sidecar logs no allowed /authz check by default: nginx's access log (the example's
      // mcp_auth format) is the record of who each forwarded request was allowed as.
      if (kind === 'nginx') {
        expect(ingress.accessLog()).toContain(
          `kind=oauth subject=${DEMO_USER.sub} issuer=${s.idp.issuer} client_id=${provider.clientInformation()?.client_id}`,
        );
        expect(ingress.accessLog()).not.toMatch(/Bearer|[0-9a-f]{64}/);
      }
    },
    60_000,
  );

  /** An MCP initialize through the ingress with `token` and these headers besides: its status. */
  const initialize = async (token: string, headers: Record<string, string>) => {
    const res = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...headers,
      },
      body: JSON.stringify(initializeRequest()),
    });
    await res.text();
    return res.status;
  };

  it.skipIf(!available)('client-sent identity headers never reach the MCP server, in any spelling', async () => {
    const { token } = await s.stack.issueOAuthToken();
    const before = s.stack.upstream!.seenHeaders.length;
    const status = await initialize(token, {
      'X-MCP-Auth-Kind': 'master',
      'x-mcp-auth-subject': 'admin',
      'X-Mcp-Auth-Client-Id': 'victim',
      'x-mcp-auth-scope': 'everything',
      'X-MCP-Auth-Assertion': 'forged',
      'X-MCP-Auth-Issuer': 'https://forged-idp.example',
      x_mcp_auth_kind: 'master',
      X_MCP_Auth_Subject: 'admin',
    });
    if (kind === 'nginx') {
      // nginx removes the underscore spellings but cannot remove X-MCP-Auth-* by pattern: the sidecar's
      // check sees the dash spellings and refuses the request.
      expect(status).toBe(400);
      expect(s.stack.upstream!.seenHeaders.length).toBe(before);
      return;
    }
    expect(status).toBe(200);
    const seen = s.stack.upstream!.seenHeaders.at(-1)!;
    expect(seen['x-mcp-auth-kind']).toBe('oauth');
    expect(seen['x-mcp-auth-subject']).not.toBe('admin');
    expect(seen['x-mcp-auth-client-id']).not.toBe('victim');
    expect(seen['x-mcp-auth-scope']).toBeUndefined();
    expect(seen['x-mcp-auth-assertion']).toBeUndefined();
    // A machine token acts for no person: no issuer at all.
    expect(seen['x-mcp-auth-issuer']).toBeUndefined();
    expect(Object.keys(seen).filter((name) => name.replaceAll('_', '-').startsWith('x-mcp-auth-') && name.includes('_'))).toEqual([]);
  });

  it.skipIf(!available)("a person's issuer reaches the MCP server; a client-sent X-MCP-Auth-Issuer never does", async () => {
    // A user-grade token of a person at a second provider: the sidecar answers its issuer at /authz.
    const person = await storeUserToken(s.stack, DEMO_USER.sub, { issuer: 'https://second-idp.example' });
    expect(await initialize(person, {})).toBe(200);
    const seen = s.stack.upstream!.seenHeaders.at(-1)!;
    expect(seen['x-mcp-auth-kind']).toBe('user');
    expect(seen['x-mcp-auth-subject']).toBe(DEMO_USER.sub);
    expect(seen['x-mcp-auth-issuer']).toBe('https://second-idp.example');

    const before = s.stack.upstream!.seenHeaders.length;
    const forged = await initialize(person, { 'X-MCP-Auth-Issuer': 'https://forged-idp.example' });
    if (kind === 'nginx') {
      // nginx cannot remove the name by pattern: the sidecar's check sees it and refuses the request.
      expect(forged).toBe(400);
      expect(s.stack.upstream!.seenHeaders.length).toBe(before);
      return;
    }
    // Caddy removes it by prefix: the MCP server sees the sidecar's issuer alone.
    expect(forged).toBe(200);
    expect(s.stack.upstream!.seenHeaders.at(-1)!['x-mcp-auth-issuer']).toBe('https://second-idp.example');
  });

  it.skipIf(!available)('a revoked token is refused from the next request on', async () => {
    const { token, clientId } = await s.stack.issueOAuthToken();
    const client = new Client({ name: 'ingress-revocation', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
    );
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
    expect((await s.stack.admin('deleteClient', { clientId })).status).toBe(200);
    await expect(client.listTools()).rejects.toThrow(/invalid_token|401/);
    await client.close().catch(() => undefined);
  });

  it.skipIf(!available)("the sidecar's /authz is not reachable through the ingress", async () => {
    const { token } = await s.stack.issueOAuthToken();
    const res = await fetch(`${base}/authz`, {
      headers: { authorization: `Bearer ${token}`, 'x-original-uri': '/mcp', 'x-original-method': 'GET' },
    });
    expect(res.status).toBe(404);
    expect(res.headers.get('x-mcp-auth-kind')).toBeNull();
  });
});

// Per-tool policy in forward-auth is decided from the Mcp-Method / Mcp-Name headers of MCP 2026-07-28.
// The SDK client here (1.x) speaks 2025-11-25 and sends neither (with a policy, its POSTs are refused),
// so these requests are written as a 2026-07-28 client sends them, to the SDK 2.x reference upstream.
describe.each(KINDS)('%s in front, with a per-tool policy', (kind) => {
  const available = ingressAvailable(kind);
  let stack: Stack;
  let ingress: Ingress;
  let token: string;
  let math: string;

  beforeAll(async () => {
    if (!available) return;
    const port = await freePort();
    stack = await startStack({
      config: {
        proxy: behindIngress(port),
        rateLimits: { failedAuthPerMinute: 3 },
        policy: {
          default: 'deny',
          rules: [
            { name: 'math', effect: 'allow', principals: { scopes: ['mcp:math'] }, requests: { methods: ['tools/call'], names: ['add'] } },
          ],
        },
      },
    });
    ingress = await startIngress(kind, { port, sidecar: stack.proxyUrl, upstream: stack.upstream!.url });
    let clientId: string;
    ({ token, clientId } = await stack.issueOAuthToken());
    math = (await stack.admin('createAccessToken', { clientId, lifetimeSeconds: 600, scope: 'mcp:math' })).body.accessToken;
  });
  afterAll(async () => {
    await ingress?.stop();
    await stack?.close();
  });

  const callAdd = (t: string) =>
    fetch(`${ingress.url}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${t}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'tools/call',
        'mcp-name': 'add',
      },
      // The per-request `_meta` envelope a 2026-07-28 request carries (the SDK 2.x server requires it).
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: {
          name: 'add',
          arguments: { a: 1, b: 2 },
          _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} },
        },
      }),
    });

  it.skipIf(!available)(
    'a denied call is 403 with the step-up challenge at the client; with the scope it reaches the MCP server',
    async () => {
      const before = stack.upstream!.seenHeaders.length;
      const denied = await callAdd(token);
      expect(denied.status).toBe(403);
      expect(denied.headers.get('www-authenticate')).toBe(
        `Bearer error="insufficient_scope", scope="mcp:math", resource_metadata="${ingress.url}/.well-known/oauth-protected-resource/mcp"`,
      );
      await denied.text();
      expect(stack.upstream!.seenHeaders.length).toBe(before);

      const allowed = await callAdd(math);
      const answer = await allowed.text();
      expect(allowed.status, answer).toBe(200);
      expect(JSON.parse(answer).result.content[0].text).toBe('3');
      const seen = stack.upstream!.seenHeaders.at(-1)!;
      expect(seen['mcp-name']).toBe('add');
      expect(seen['x-mcp-auth-scope']).toBe('mcp:math');
    },
  );

  it.skipIf(!available)('a POST from a client of an older revision is refused, not forwarded undecided', async () => {
    const before = stack.upstream!.seenHeaders.length;
    const res = await fetch(`${ingress.url}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${math}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify(initializeRequest()),
    });
    expect(res.status).toBe(400);
    await res.text();
    expect(stack.upstream!.seenHeaders.length).toBe(before);
  });

  it.skipIf(!available)('a locked-out address gets 429 with Retry-After at the client', async () => {
    const bad = randomBytes(32).toString('hex');
    let answer: Response | undefined;
    // The count lands after the 401 is sent: the refusal comes at the fourth failure or soon after.
    for (let i = 0; i < 12 && answer === undefined; i++) {
      const res = await callAdd(bad);
      await res.text();
      if (res.status === 429) answer = res;
      else expect(res.status).toBe(401);
    }
    expect(answer?.status).toBe(429);
    expect(Number(answer?.headers.get('retry-after'))).toBeGreaterThan(0);
  });
});

// A WSGI application behind the ingress reads headers from its environ, where a CGI-style server
// (PEP 3333) has turned `-` and `_` alike into `_` and upper-cased the name: X_Mcp-Auth_Scope and
// X-MCP-Auth-Scope are both HTTP_X_MCP_AUTH_SCOPE. Every spelling a client may forge must either be
// removed by the ingress (the request then reaches the app with only the sidecar's values) or refused.
describe.each(KINDS)('%s in front of a WSGI application: forged identity headers in any spelling', (kind) => {
  const available = ingressAvailable(kind);
  let wsgi: WsgiUpstream;
  let stack: Stack;
  let ingress: Ingress;
  let user: string;

  beforeAll(async () => {
    if (!available) return;
    const port = await freePort();
    wsgi = await startWsgiUpstream();
    stack = await startStack({ upstreamUrl: wsgi.url, config: { proxy: behindIngress(port) } });
    ingress = await startIngress(kind, { port, sidecar: stack.proxyUrl, upstream: wsgi.url });
    // A person's user-grade token without scope: the sidecar states X-MCP-Auth-Kind, -Subject and -Issuer for it.
    user = await storeUserToken(stack, 'alice', { issuer: 'https://idp.example' });
  });
  afterAll(async () => {
    await ingress?.stop();
    await stack?.close();
    await wsgi?.close();
  });

  /** What the application sees of the sidecar's identity for `user`, as its environ names it. */
  const SIDECAR_IDENTITY = {
    HTTP_X_MCP_AUTH_KIND: 'user',
    HTTP_X_MCP_AUTH_SUBJECT: 'alice',
    HTTP_X_MCP_AUTH_ISSUER: 'https://idp.example',
  };

  /** A GET /mcp through the ingress, written byte for byte so each name keeps its spelling. */
  const get = async (extra: Array<[string, string]>) => {
    const lines = [
      ['Host', `127.0.0.1:${ingress.port}`],
      ['Authorization', `Bearer ${user}`],
      ['Accept', 'application/json'],
      ...extra,
      ['Connection', 'close'],
    ];
    const { responses } = await exchange(ingress.port, `GET /mcp HTTP/1.1\r\n${lines.map(([n, v]) => `${n}: ${v}\r\n`).join('')}\r\n`);
    expect(responses, ingress.log()).toHaveLength(1);
    return responses[0]!;
  };

  /** The HTTP_X_MCP_AUTH_* variables the application saw. */
  const identityEnviron = (body: string) =>
    Object.fromEntries(Object.entries(JSON.parse(body) as Record<string, string>).filter(([k]) => k.startsWith('HTTP_X_MCP_AUTH_')));

  it.skipIf(!available)("without forged headers the application sees the sidecar's identity", async () => {
    const answer = await get([]);
    expect(answer.status).toBe(200);
    expect(identityEnviron(answer.body)).toEqual(SIDECAR_IDENTITY);
  });

  /**
   * Which forged names the ingress removes itself (the request then reaches the app): Caddy removes
   * every `-`/`_` spelling by prefix, but a name with another separator (`X.MCP.Auth.Kind`, which PHP
   * reads as HTTP_X_MCP_AUTH_KIND) passes it and reaches the sidecar's check, which refuses; nginx drops
   * every name holding a character other than a letter, digit or `-` (underscores_in_headers off,
   * ignore_invalid_headers on) but cannot remove a name by pattern, so the dash spellings reach the
   * sidecar's check, which refuses.
   */
  const plainSeparators = (name: string) => /^[A-Za-z0-9_-]*$/.test(name);
  const removedByIngress = (name: string) => (kind === 'caddy' ? plainSeparators(name) : name.includes('_') || !plainSeparators(name));

  it.skipIf(!available)('no HTTP_X_MCP_AUTH_* variable ever holds a client-sent value', async () => {
    for (const name of forgedIdentityHeaderNames()) {
      const answer = await get([[name, 'victim']]);
      if (removedByIngress(name)) {
        expect(answer.status, name).toBe(200);
        expect(identityEnviron(answer.body), name).toEqual(SIDECAR_IDENTITY);
      } else {
        expect(answer.status, name).toBe(400);
        expect(JSON.parse(answer.body).error, name).toBe('invalid_request');
      }
    }
    // All at once, as an attack would send them: each ingress lets some through to the check, which refuses.
    const all = await get(forgedIdentityHeaderNames().map((name): [string, string] => [name, 'admin']));
    expect(all.status).toBe(400);
    // Those Caddy removes, all at once: the request reaches the app with the sidecar's identity only.
    if (kind === 'caddy') {
      const removed = await get(
        forgedIdentityHeaderNames()
          .filter(plainSeparators)
          .map((name): [string, string] => [name, 'admin']),
      );
      expect(removed.status).toBe(200);
      expect(identityEnviron(removed.body)).toEqual(SIDECAR_IDENTITY);
    }
  });
});

// In forward-auth the sidecar decides a POST from its Mcp-Method / Mcp-Name headers and never sees the
// body, so a client can name an allowed tool in the headers and call a denied one in the body. The
// reference upstream (SDK 2.x) compares the two and refuses a mismatch before any tool runs; it also
// checks the Host it is sent (DNS-rebinding protection, 127.0.0.1 allowed), which the ingress must pass
// on as the client sent it. The requests are written as a 2026-07-28 client sends them (SEP-2243 headers;
// the per-request `_meta` envelope with protocolVersion and clientCapabilities that the SDK 2.x client
// sends and its server requires).
describe.each(KINDS)('%s in front of the SDK 2.x reference upstream: headers that disagree with the body', (kind) => {
  const available = ingressAvailable(kind);
  let upstream: RunningUpstream;
  let stack: Stack;
  let ingress: Ingress;
  let token: string;

  beforeAll(async () => {
    if (!available) return;
    const port = await freePort();
    upstream = await startUpstream({ host: '127.0.0.1', port: 0, allowedHosts: ['127.0.0.1'] });
    stack = await startStack({
      upstreamUrl: upstream.url,
      config: {
        proxy: behindIngress(port),
        policy: { default: 'deny', rules: [{ name: 'math', effect: 'allow', requests: { methods: ['tools/call'], names: ['add'] } }] },
      },
    });
    ingress = await startIngress(kind, { port, sidecar: stack.proxyUrl, upstream: upstream.url });
    ({ token } = await stack.issueOAuthToken());
  });
  afterAll(async () => {
    await ingress?.stop();
    await stack?.close();
    await upstream?.close();
  });

  const ENVELOPE = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
  const call = (id: number, name: string, args: Record<string, unknown>, envelope = true) => ({
    jsonrpc: '2.0',
    id,
    method: 'tools/call',
    params: { name, arguments: args, ...(envelope ? { _meta: ENVELOPE } : {}) },
  });
  const post = async (headers: Record<string, string>, body: unknown) => {
    const res = await fetch(`${ingress.url}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2026-07-28',
        ...headers,
      },
      body: JSON.stringify(body),
    });
    return { status: res.status, text: await res.text() };
  };

  it.skipIf(!available)('headers that agree with the body: the allowed tool runs, the MCP server seeing the public Host', async () => {
    const answer = await post({ 'mcp-method': 'tools/call', 'mcp-name': 'add' }, call(1, 'add', { a: 1, b: 2 }));
    expect(answer.status, answer.text).toBe(200);
    expect(JSON.parse(answer.text).result.content[0].text).toBe('3');
    expect(upstream.toolCalls.at(-1)).toBe('add');
    expect(String(upstream.seenHeaders.at(-1)?.host).split(':')[0]).toBe('127.0.0.1');
  });

  it.skipIf(!available)(
    'Mcp-Name naming the allowed tool while the body calls a denied one: refused by the MCP server, nothing run',
    async () => {
      const ran = upstream.toolCalls.length;
      const answer = await post({ 'mcp-method': 'tools/call', 'mcp-name': 'add' }, call(2, 'echo', { text: 'denied' }));
      expect(answer.status).toBe(400);
      expect(JSON.parse(answer.text).error.code).toBe(-32020);
      expect(upstream.toolCalls.length).toBe(ran);
      expect(upstream.toolCalls).not.toContain('echo');
    },
  );

  it.skipIf(!available)('Mcp-Method naming an always-allowed list while the body calls a denied tool: refused, nothing run', async () => {
    const ran = upstream.toolCalls.length;
    const answer = await post({ 'mcp-method': 'tools/list' }, call(3, 'echo', { text: 'denied' }));
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.text).error.code).toBe(-32020);
    expect(upstream.toolCalls.length).toBe(ran);
  });

  it.skipIf(!available)(
    'a 2025-era body (no envelope, or a batch) under 2026-07-28 headers: refused, nothing run, even in an open session',
    async () => {
      // A 2025-era session opened with the MCP server directly (as one opened through the sidecar's
      // proxy mode would be): its id must not let a batch, which the SDK routes to 2025-era serving where
      // the mirror headers are not compared, run under the 2026-07-28 headers the sidecar decided on (the
      // session transport refuses that protocol version).
      const init = await fetch(upstream.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify(initializeRequest()),
      });
      const session = init.headers.get('mcp-session-id');
      await init.text();
      expect(session).toBeTruthy();
      const ran = upstream.toolCalls.length;
      const headers = { 'mcp-method': 'tools/call', 'mcp-name': 'add' };
      const bare = await post(headers, call(4, 'echo', { text: 'denied' }, false));
      expect(bare.status).toBe(400);
      const batch = await post({ ...headers, 'mcp-session-id': session! }, [call(5, 'echo', { text: 'denied' }, false)]);
      expect(batch.status).toBe(400);
      expect(upstream.toolCalls.length).toBe(ran);
      expect(upstream.toolCalls).not.toContain('echo');
    },
  );
});
