// Upstream credentials (mode idp) through real ingresses: nginx and Caddy run from examples/nginx/mcp.conf
// and examples/caddy/Caddyfile, the sidecar (with the in-process OpenID provider as its IdP) as their
// authorization service, the reference MCP server behind them. Each user's request reaches the MCP
// server with that user's own credential and never another's, also with two users at once; a
// credential the client sends itself never gets through, in any spelling; a user with none gets
// through the handshake (the ingress hands it to the sidecar's /mcp, which forwards it without a
// credential), then the MCP error -32042 with the link to connect for a call, which is never
// forwarded. Both with the credential in
// Authorization (the examples as they stand) and in a header of another name (the examples edited as
// their comments say). A DPoP client with none gets -32042 as well, its proof still spent once (the
// ingress hands the request to /authz-connect with the ticket /authz answered, not the proof again).
// Every page of the sidecar is routed to it by both ingresses.
// The users' kept IdP tokens are written into the store as sign-in would keep them (encrypted under the
// configured key): what is tested here is the ingress's part, the carrying of the header.
// Skipped where the ingress is not installed, unless REQUIRE_INGRESS is set (.ci/run sets it).

import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateToken, hashToken } from '../../src/model/credentials.ts';
import { CredentialCipher } from '../../src/upstream-credentials/cipher.ts';
import { URL_ELICITATION_REQUIRED } from '../../src/policy/enforce.ts';
import { CredentialVault } from '../../src/upstream-credentials/vault.ts';
import { Client as Client1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as Transport1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UrlElicitationRequiredError as UrlElicitationRequired1 } from '@modelcontextprotocol/sdk/types.js';
import {
  Client as Client2,
  StreamableHTTPClientTransport as Transport2,
  UrlElicitationRequiredError as UrlElicitationRequired2,
} from '@modelcontextprotocol/client';
import { DpopKey } from '../support/dpop.ts';
import { RecordingProvider2 } from '../support/sdk2-oauth.ts';
import { freePort, ingressAvailable, startIngress, type Ingress, type IngressKind } from '../support/ingress.ts';
import { initializeRequest } from '../support/http.ts';
import { startSignInStack, type SignInStack } from '../support/sign-in.ts';

const KEY = randomBytes(32).toString('hex');

/**
 * The credential header: Authorization (the default; the examples as they stand) or another name, with
 * the examples edited as their comments say (read and set that header, keep removing Authorization, and
 * in Caddy remove the client's spellings of it first).
 */
const OTHER_HEADER: Record<IngressKind, (text: string) => string> = {
  nginx: (text) =>
    replaced(
      replaced(text, '$upstream_http_authorization;', '$upstream_http_x_upstream_token;'),
      'proxy_set_header Authorization $mcp_upstream_credential;',
      'proxy_set_header Authorization "";\n    proxy_set_header X-Upstream-Token $mcp_upstream_credential;',
    ),
  caddy: (text) =>
    replaced(
      replaced(
        text,
        '@credential not vars {rp.header.Authorization} "" "<nil>"\n\t\t\t\trequest_header @credential Authorization {rp.header.Authorization}\n\t\t\t\t@no_credential vars {rp.header.Authorization} "" "<nil>"\n\t\t\t\trequest_header @no_credential -Authorization',
        '@credential not vars {rp.header.X-Upstream-Token} "" "<nil>"\n\t\t\t\trequest_header @credential X-Upstream-Token {rp.header.X-Upstream-Token}\n\t\t\t\trequest_header -Authorization',
      ),
      '\trequest_header -X-MCP-Auth-*\n',
      '\trequest_header -X-MCP-Auth-*\n\trequest_header -X-Upstream-Token*\n\trequest_header -X-Upstream_Token*\n\trequest_header -X_Upstream-Token*\n\trequest_header -X_Upstream_Token*\n',
    ),
};

/** `text` with `from` replaced by `to`; `from` must be there (an edited example would test nothing). */
function replaced(text: string, from: string, to: string): string {
  if (!text.includes(from)) throw new Error(`the example no longer holds ${JSON.stringify(from)}`);
  return text.replace(from, to);
}

const CASES = (['nginx', 'caddy'] as const).flatMap((kind) => [
  { kind, header: 'authorization' },
  { kind, header: 'x-upstream-token' },
]);

interface User {
  subject: string;
  /** The user's token at the sidecar. */
  token: string;
  /** The user's own credential for the MCP server (undefined: none kept). */
  credential: string | undefined;
}

describe.each(CASES)('$kind in front, with upstream credentials (mode idp) in $header', ({ kind, header }) => {
  const available = ingressAvailable(kind);
  let s: SignInStack;
  let ingress: Ingress;
  let alice: User;
  let bob: User;
  let carol: User;
  /** What the MCP server should receive for `u`. */
  const expected = (u: User) => (header === 'authorization' ? `Bearer ${u.credential}` : u.credential);

  /**
   * A user-grade token for a user of their own, with `credential` kept as sign-in keeps the IdP's token;
   * with `dpop`, bound to that key or thumbprint (as /token binds a token exchanged with a proof).
   */
  async function user(name: string, withCredential: boolean, dpop?: DpopKey | string): Promise<User> {
    const subject = `${name}-${randomBytes(4).toString('hex')}`;
    const token = generateToken();
    const now = s.stack.clock.now();
    await s.stack.store.putUserToken({
      tokenHash: hashToken(token),
      subject,
      issuer: s.idp.issuer,
      createdAt: now,
      expiresAt: now + 3_600_000,
      ...(dpop !== undefined ? { dpopJkt: typeof dpop === 'string' ? dpop : await dpop.thumbprint() } : {}),
    });
    let credential: string | undefined;
    if (withCredential) {
      credential = `idp-access-${name}-${randomBytes(16).toString('hex')}`;
      const vault = new CredentialVault({
        store: s.stack.store,
        cipher: new CredentialCipher(Buffer.from(KEY, 'hex')),
        clock: s.stack.clock,
      });
      await vault.save({ subject, issuer: s.idp.issuer, provider: 'idp' }, { accessToken: credential, expiresAt: now + 3_600_000 });
    }
    return { subject, token, credential };
  }

  function post(token: string, body: unknown, extra: Record<string, string> = {}) {
    return fetch(`${ingress.url}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...extra,
      },
      body: JSON.stringify(body),
    });
  }

  /** What the MCP server received since `from`, as (subject, authorization, every header name). */
  function seenSince(from: number) {
    return s.stack.upstream!.seenHeaders.slice(from).map((h) => ({
      subject: h['x-mcp-auth-subject'],
      credential: h[header],
      authorization: h.authorization,
      names: Object.keys(h),
    }));
  }

  /** The sidecar's counts of requests without the user's credential, by where they went. */
  async function counts() {
    const text = await (await fetch(`${s.stack.adminUrl}/metrics`)).text();
    const value = (series: string) => {
      const line = text.split('\n').find((l) => l.startsWith(`${series} `));
      return line === undefined ? 0 : Number(line.slice(series.length + 1));
    };
    return {
      missing: value('mcp_auth_upstream_credentials_missing_total'),
      refused: value('mcp_auth_requests_total{outcome="refused",reason="upstream_credential_missing"}'),
      connect: value('mcp_auth_requests_total{outcome="connect",reason=""}'),
      forwarded: value('mcp_auth_requests_total{outcome="forwarded",reason=""}'),
    };
  }
  const delta = (after: Awaited<ReturnType<typeof counts>>, before: Awaited<ReturnType<typeof counts>>) => ({
    missing: after.missing - before.missing,
    refused: after.refused - before.refused,
    connect: after.connect - before.connect,
    forwarded: after.forwarded - before.forwarded,
  });

  beforeAll(async () => {
    if (!available) return;
    const port = await freePort();
    s = await startSignInStack({
      config: {
        proxy: { forwardAuth: true, trustedProxies: ['127.0.0.1'], publicUrl: `http://127.0.0.1:${port}` },
        upstream: { credentials: { mode: 'idp', key: KEY, header } },
        // Sixteen requests at once on a loaded machine: a Redis reply later than the suite's 500 ms is a
        // 503 that says nothing about the ingress.
        redis: { commandTimeoutMs: 1500 },
      },
    });
    ingress = await startIngress(kind, {
      port,
      sidecar: s.stack.proxyUrl,
      upstream: s.stack.upstream!.url,
      ...(header === 'authorization' ? {} : { edit: OTHER_HEADER[kind] }),
    });
    alice = await user('alice', true);
    bob = await user('bob', true);
    carol = await user('carol', false);
  });
  afterAll(async () => {
    await ingress?.stop();
    await s?.close();
  });

  it.skipIf(!available)("two users at once: each request carries its user's credential and never the other's", async () => {
    const from = s.stack.upstream!.seenHeaders.length;
    const rounds = 8;
    const answers = await Promise.all(
      Array.from({ length: rounds }, (_, i) => [alice, bob].map((u) => post(u.token, initializeRequest(`${u.subject}-${i}`, i)))).flat(),
    );
    const results = await Promise.all(answers.map(async (res) => ({ status: res.status, body: await res.text() })));
    expect(
      results.filter((r) => r.status !== 200),
      ingress.log(),
    ).toEqual([]);
    const seen = seenSince(from);
    expect(seen).toHaveLength(2 * rounds);
    for (const u of [alice, bob]) {
      const theirs = seen.filter((h) => h.subject === u.subject);
      expect(theirs).toHaveLength(rounds);
      for (const h of theirs) expect(h.credential).toBe(expected(u));
    }
    if (header !== 'authorization') expect(seen.filter((h) => h.authorization !== undefined)).toEqual([]);
    // The sidecar's own tokens never reach the MCP server.
    expect(seen.some((h) => h.authorization === `Bearer ${alice.token}` || h.authorization === `Bearer ${bob.token}`)).toBe(false);
  });

  // Authorization has no `-` to spell as `_`; its case is the next test.
  if (header !== 'authorization')
    it.skipIf(!available)('a credential the client sends itself never gets through, in any spelling', async () => {
      const forged = `forged-${randomBytes(8).toString('hex')}`;
      const from = s.stack.upstream!.seenHeaders.length;
      // The header's name in another case, and with `_` for `-` (which a CGI/WSGI stack reads as the same name).
      const res = await post(alice.token, initializeRequest('forger'), {
        'X-UPSTREAM-TOKEN': forged,
        x_upstream_token: forged,
        'X_Upstream-Token': forged,
        'x-upstream_token': forged,
      });
      expect(res.status, ingress.log()).toBe(200);
      await res.text();
      const seen = seenSince(from);
      expect(seen).toHaveLength(1);
      expect(seen[0]!.credential).toBe(alice.credential);
      expect(seen[0]!.authorization).toBeUndefined();
      expect(seen[0]!.names.filter((n) => n.replaceAll('_', '-') === header && n !== header)).toEqual([]);
      expect(JSON.stringify(s.stack.upstream!.seenHeaders.slice(from))).not.toContain(forged);

      // Bob's token with Alice's credential header: Bob's credential, never Alice's.
      const before = s.stack.upstream!.seenHeaders.length;
      const crossed = await post(bob.token, initializeRequest('crossed'), { 'X-Upstream-Token': alice.credential! });
      expect(crossed.status).toBe(200);
      await crossed.text();
      expect(seenSince(before).map((h) => h.credential)).toEqual([bob.credential]);
    });

  it.skipIf(!available)("the client's own Authorization (its token at the sidecar) is replaced, in any case", async () => {
    const before = s.stack.upstream!.seenHeaders.length;
    const cased = await fetch(`${ingress.url}/mcp`, {
      method: 'POST',
      headers: { AUTHORIZATION: `Bearer ${bob.token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify(initializeRequest('cased')),
    });
    expect(cased.status).toBe(200);
    await cased.text();
    const seen = seenSince(before);
    expect(seen.map((h) => h.credential)).toEqual([expected(bob)]);
    expect(seen[0]!.authorization).toBe(header === 'authorization' ? expected(bob) : undefined);
  });

  it.skipIf(!available)(
    'a user with no credential gets through the handshake, then -32042 with the link to connect; no call is forwarded',
    async () => {
      let from = s.stack.upstream!.seenHeaders.length;
      // MCP 2025-11-25: the client declares URL-mode elicitation at initialize.
      const hello = initializeRequest('carol');
      (hello.params as { capabilities: unknown }).capabilities = { elicitation: { url: {} } };
      let counted = await counts();
      const initialized = await post(carol.token, hello);
      expect(initialized.status, ingress.log()).toBe(200);
      await initialized.text();
      // One client request, counted once: /authz's marked 401 as `connect`, /authz-connect's forward.
      expect(delta(await counts(), counted)).toEqual({ missing: 0, refused: 0, connect: 1, forwarded: 1 });
      const session = initialized.headers.get('mcp-session-id')!;
      expect(session).toBeTruthy();
      // Forwarded by the sidecar itself (the ingress handed it to /authz-connect on the marked 401), as
      // carol, with no credential header, and neither the ticket nor carol's token.
      const handshake = seenSince(from);
      expect(handshake).toHaveLength(1);
      expect(handshake[0]!.subject).toBe(carol.subject);
      expect(handshake[0]!.credential).toBeUndefined();
      expect(handshake[0]!.authorization).toBeUndefined();
      expect(handshake[0]!.names.filter((n) => n.startsWith('x-mcp-auth-connect'))).toEqual([]);
      expect(JSON.stringify(s.stack.upstream!.seenHeaders.slice(from))).not.toContain(carol.token);
      from = s.stack.upstream!.seenHeaders.length;
      counted = await counts();
      const res = await post(
        carol.token,
        { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'echo', arguments: {} } },
        { 'mcp-session-id': session },
      );
      expect(res.status, ingress.log()).toBe(200);
      const body = (await res.json()) as {
        id: number;
        error: { code: number; data: { elicitations: Array<{ mode: string; url: string }> } };
      };
      expect(body.id).toBe(7);
      expect(body.error.code).toBe(URL_ELICITATION_REQUIRED);
      // Counted once as missing the credential (at /authz-connect, where the answer is decided), not again at /authz.
      expect(delta(await counts(), counted)).toEqual({ missing: 1, refused: 1, connect: 1, forwarded: 0 });
      expect(body.error.data.elicitations[0]).toMatchObject({
        mode: 'url',
        url: expect.stringMatching(new RegExp(`^${ingress.url}/connect/`)),
      });
      // A batch of calls cannot carry one link: the 401 challenge.
      const call = { jsonrpc: '2.0', method: 'tools/call', params: { name: 'echo', arguments: {} } };
      const batch = await post(carol.token, [
        { ...call, id: 8 },
        { ...call, id: 9 },
      ]);
      await batch.text();
      expect(batch.status).toBe(401);
      expect(batch.headers.get('www-authenticate')).toMatch(/^Bearer realm="mcp", resource_metadata=/);
      expect(s.stack.upstream!.seenHeaders.length).toBe(from);

      // A token the sidecar does not know is still the plain challenge, once, and never reaches /authz-connect.
      const unknown = await post(generateToken(), initializeRequest('unknown'));
      await unknown.text();
      expect(unknown.status).toBe(401);
      expect(unknown.headers.get('www-authenticate')).toMatch(
        /^Bearer realm="mcp", resource_metadata="[^"]+", error="invalid_token", error_description="[^"]+"$/,
      );
      expect(unknown.headers.get('x-mcp-auth-connect')).toBeNull();
      expect(s.stack.upstream!.seenHeaders.length).toBe(from);
    },
  );

  it.skipIf(!available)(
    'a DPoP client with no credential gets through the handshake, then -32042 with the link; each proof works once',
    async () => {
      const key = await DpopKey.generate('ES256');
      const dave = await user('dave', false, key);
      const proofFor = () =>
        key.proof({ htm: 'POST', htu: `${ingress.url}/mcp`, accessToken: dave.token, iat: Math.floor(s.stack.clock.now() / 1000) });
      const hello = initializeRequest('dave');
      (hello.params as { capabilities: unknown }).capabilities = { elicitation: { url: {} } };
      const helloProof = await proofFor();
      const initialized = await post(dave.token, hello, { authorization: `DPoP ${dave.token}`, dpop: helloProof });
      expect(initialized.status, ingress.log()).toBe(200);
      await initialized.text();
      const session = initialized.headers.get('mcp-session-id')!;
      expect(session).toBeTruthy();
      // The handshake's proof again: a replay, refused at /authz; nothing reaches the MCP server.
      const from = s.stack.upstream!.seenHeaders.length;
      const again = await post(dave.token, hello, { authorization: `DPoP ${dave.token}`, dpop: helloProof });
      await again.text();
      expect(again.status).toBe(401);
      expect(again.headers.get('www-authenticate')).toContain('error="invalid_dpop_proof"');
      const proof = await proofFor();
      const call = { jsonrpc: '2.0', id: 'dpop-1', method: 'tools/call', params: { name: 'echo', arguments: {} } };
      const res = await post(dave.token, call, { authorization: `DPoP ${dave.token}`, dpop: proof, 'mcp-session-id': session });
      const text = await res.text();
      expect(res.status, `${text}\n${ingress.log()}`).toBe(200);
      const body = JSON.parse(text) as { id: string; error: { code: number; data: { elicitations: Array<{ url: string }> } } };
      expect(body.id).toBe('dpop-1');
      expect(body.error.code).toBe(URL_ELICITATION_REQUIRED);
      expect(body.error.data.elicitations[0]!.url).toMatch(new RegExp(`^${ingress.url}/connect/`));
      // The same proof again: a replay, refused at /authz, never answered with a link.
      const replay = await post(dave.token, call, { authorization: `DPoP ${dave.token}`, dpop: proof, 'mcp-session-id': session });
      await replay.text();
      expect(replay.status).toBe(401);
      expect(replay.headers.get('www-authenticate')).toContain('error="invalid_dpop_proof"');
      expect(s.stack.upstream!.seenHeaders.length).toBe(from);
    },
  );

  // The official SDK clients, as an MCP host runs them, for a user who has connected nothing: the
  // handshake, the notification, the GET stream and tools/list all go through /authz's marked 401 to
  // /authz-connect, which forwards them; the tool call gets the link in the form the client declared.
  const SDK_CASES = [
    { client: 'SDK 1.x, Bearer, declaring URL elicitation', line: '1.x', dpop: false, urlElicitation: true },
    { client: 'SDK 1.x, Bearer, declaring nothing', line: '1.x', dpop: false, urlElicitation: false },
    { client: 'SDK 2.x, DPoP, declaring URL elicitation', line: '2.x', dpop: true, urlElicitation: true },
  ] as const;
  it.skipIf(!available).each(SDK_CASES)(
    '$client: connects and lists tools without a credential, then its tool call gets the link',
    async ({ line, dpop, urlElicitation }) => {
      const calls = s.stack.upstream!.toolCalls.length;
      const from = s.stack.upstream!.seenHeaders.length;
      const capabilities = urlElicitation ? { elicitation: { url: {} } } : {};
      const endpoint = new URL(`${ingress.url}/mcp`);
      let client: { close(): Promise<void> };
      let listTools: () => Promise<string[]>;
      let callEcho: () => Promise<unknown>;
      let who: User;
      if (line === '1.x') {
        who = await user('sdk1', false);
        const c = new Client1({ name: 'ingress-sdk1', version: '1' }, { capabilities });
        await c.connect(new Transport1(endpoint, { requestInit: { headers: { authorization: `Bearer ${who.token}` } } }));
        [client, listTools, callEcho] = [
          c,
          async () => (await c.listTools()).tools.map((t) => t.name),
          () => c.callTool({ name: 'echo', arguments: { text: 'hi' } }),
        ];
      } else {
        // The 2.x client signs every request with its DpopSession's key, the token bound to it.
        const provider = new RecordingProvider2({ dpop: dpop });
        who = await user('sdk2', false, (await provider.dpop()!).thumbprint);
        provider.saveTokens({ access_token: who.token, token_type: 'DPoP' });
        const c = new Client2({ name: 'ingress-sdk2', version: '1' }, { capabilities });
        await c.connect(new Transport2(endpoint, { authProvider: provider }));
        [client, listTools, callEcho] = [
          c,
          async () => (await c.listTools()).tools.map((t) => t.name),
          () => c.callTool({ name: 'echo', arguments: { text: 'hi' } }),
        ];
      }
      try {
        expect(await listTools()).toContain('echo');
        const outcome = await callEcho().then(
          (result) => result,
          (err: unknown) => err,
        );
        const link = new RegExp(`^${ingress.url}/connect/\\S+$`);
        if (urlElicitation) {
          expect(outcome, ingress.log()).toBeInstanceOf(line === '1.x' ? UrlElicitationRequired1 : UrlElicitationRequired2);
          const [only] = (outcome as UrlElicitationRequired1).elicitations;
          expect(only).toMatchObject({ mode: 'url', url: expect.stringMatching(link) });
        } else {
          const result = outcome as { isError?: boolean; content: Array<{ type: string; text: string }> };
          expect(result.isError, ingress.log()).toBe(true);
          expect(result.content[0]!.text).toMatch(new RegExp(`open ${ingress.url}/connect/\\S+ in a browser`));
        }
      } finally {
        await client.close();
      }
      // The tool never ran; what reached the MCP server came as this user, with no credential and no
      // token of the sidecar's.
      expect(s.stack.upstream!.toolCalls.length).toBe(calls);
      const seen = seenSince(from).filter((h) => h.subject === who.subject);
      expect(seen.length).toBeGreaterThanOrEqual(3);
      for (const h of seen) {
        expect(h.credential).toBeUndefined();
        expect(h.authorization).toBeUndefined();
        expect(h.names.filter((n) => n.startsWith('x-mcp-auth-connect') || n === 'dpop')).toEqual([]);
      }
    },
    60_000,
  );

  it.skipIf(!available)("the sidecar's /authz-connect is for the ingress only: not reachable through it", async () => {
    const direct = await fetch(`${s.stack.proxyUrl}/authz-connect`, { method: 'POST', body: '{}' });
    await direct.text();
    expect(direct.status).toBe(401);
    expect(direct.headers.get('www-authenticate')).not.toBeNull();
    const via = await fetch(`${ingress.url}/authz-connect`, { method: 'POST', body: '{}' });
    await via.text();
    expect(via.status).toBe(404);
    expect(via.headers.get('www-authenticate')).toBeNull();
  });

  // Each page the sidecar serves, asked through the ingress: the sidecar's own answer (the status it
  // gives when asked directly, its no-store Cache-Control, its JSON or its page), never the ingress's 404.
  // /approve/<id> is routed ahead of the page it will be.
  if (header === 'authorization')
    it.skipIf(!available).each([
      ['GET', '/.well-known/oauth-authorization-server'],
      ['GET', '/.well-known/oauth-protected-resource/mcp'],
      ['GET', '/authorize'],
      ['POST', '/authorize/consent'],
      ['GET', '/oauth/callback'],
      ['POST', '/token'],
      ['POST', '/register'],
      ['POST', '/revoke'],
      ['POST', '/introspect'],
      ['POST', '/device_authorization'],
      ['GET', '/device'],
      ['GET', '/account'],
      ['POST', '/account/sign-out'],
      ['GET', '/connect/not-a-link'],
      ['GET', '/connect/callback'],
      ['GET', '/approve/some-id'],
      ['GET', '/health'],
    ])('%s %s is answered by the sidecar', async (method, path) => {
      const ask = async (origin: string, extra: Record<string, string> = {}) => {
        const res = await fetch(`${origin}${path}`, {
          method,
          redirect: 'manual',
          headers: method === 'POST' ? { 'content-type': 'application/x-www-form-urlencoded', ...extra } : extra,
          ...(method === 'POST' ? { body: '' } : {}),
        });
        const location = res.headers.get('location');
        return {
          status: res.status,
          type: res.headers.get('content-type'),
          cache: res.headers.get('cache-control'),
          // Where a redirect goes, without its query (a fresh state each time).
          redirect: location === null ? null : new URL(location, origin).href.split('?')[0]!,
          text: await res.text(),
        };
      };
      const via = await ask(ingress.url);
      // Asked directly, for the host the ingress names (this test's address is a trusted proxy).
      const direct = await ask(s.stack.proxyUrl, { 'x-forwarded-host': new URL(ingress.url).host });
      expect({ status: via.status, type: via.type, redirect: via.redirect }, via.text).toEqual({
        status: direct.status,
        type: direct.type,
        redirect: direct.redirect,
      });
      expect(via.cache).toContain('no-store');
      if (via.redirect !== null) expect(via.redirect.startsWith(s.idp.issuer)).toBe(true);
      else if (via.type?.startsWith('application/json')) expect(JSON.parse(via.text)).toEqual(expect.any(Object));
      else expect(via.type).toBe('text/html; charset=utf-8');
    });
});
