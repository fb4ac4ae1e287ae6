// Upstream credentials (mode idp) through real ingresses: nginx and Caddy run from examples/nginx/mcp.conf
// and examples/caddy/Caddyfile, the sidecar (with the in-process OpenID provider as its IdP) as their
// authorization service, the reference MCP server behind them. Each user's request reaches the MCP
// server with that user's own credential and never another's, also with two users at once; a
// credential the client sends itself never gets through, in any spelling; a user with none gets the
// MCP error -32042 with the link to connect, and nothing is forwarded. Both with the credential in
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
import { URL_ELICITATION_REQUIRED } from '../../src/upstream-credentials/delivery.ts';
import { CredentialVault } from '../../src/upstream-credentials/vault.ts';
import { DpopKey } from '../support/dpop.ts';
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
   * with `dpop`, bound to that key (as /token binds a token exchanged with a proof).
   */
  async function user(name: string, withCredential: boolean, dpop?: DpopKey): Promise<User> {
    const subject = `${name}-${randomBytes(4).toString('hex')}`;
    const token = generateToken();
    const now = s.stack.clock.now();
    await s.stack.store.putUserToken({
      tokenHash: hashToken(token),
      subject,
      issuer: s.idp.issuer,
      createdAt: now,
      expiresAt: now + 3_600_000,
      ...(dpop !== undefined ? { dpopJkt: await dpop.thumbprint() } : {}),
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

  it.skipIf(!available)('a user with no credential gets -32042 with the link to connect, and nothing is forwarded', async () => {
    const from = s.stack.upstream!.seenHeaders.length;
    const res = await post(carol.token, { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'echo', arguments: {} } });
    expect(res.status, ingress.log()).toBe(200);
    const body = (await res.json()) as {
      id: number;
      error: { code: number; data: { elicitations: Array<{ mode: string; url: string }> } };
    };
    expect(body.id).toBe(7);
    expect(body.error.code).toBe(URL_ELICITATION_REQUIRED);
    expect(body.error.data.elicitations[0]).toMatchObject({
      mode: 'url',
      url: expect.stringMatching(new RegExp(`^${ingress.url}/connect/`)),
    });
    // A GET stream cannot carry a JSON-RPC answer: the 401 challenge.
    const stream = await fetch(`${ingress.url}/mcp`, { headers: { authorization: `Bearer ${carol.token}`, accept: 'text/event-stream' } });
    await stream.text();
    expect(stream.status).toBe(401);
    expect(stream.headers.get('www-authenticate')).toMatch(/^Bearer realm="mcp", resource_metadata=/);
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
  });

  it.skipIf(!available)('a DPoP client with no credential gets -32042 with the link too, and its proof works once', async () => {
    const key = await DpopKey.generate('ES256');
    const dave = await user('dave', false, key);
    const from = s.stack.upstream!.seenHeaders.length;
    const proof = await key.proof({
      htm: 'POST',
      htu: `${ingress.url}/mcp`,
      accessToken: dave.token,
      iat: Math.floor(s.stack.clock.now() / 1000),
    });
    const call = { jsonrpc: '2.0', id: 'dpop-1', method: 'tools/call', params: { name: 'echo', arguments: {} } };
    const res = await post(dave.token, call, { authorization: `DPoP ${dave.token}`, dpop: proof });
    const text = await res.text();
    expect(res.status, `${text}\n${ingress.log()}`).toBe(200);
    const body = JSON.parse(text) as { id: string; error: { code: number; data: { elicitations: Array<{ url: string }> } } };
    expect(body.id).toBe('dpop-1');
    expect(body.error.code).toBe(URL_ELICITATION_REQUIRED);
    expect(body.error.data.elicitations[0]!.url).toMatch(new RegExp(`^${ingress.url}/connect/`));
    // The same proof again: a replay, refused at /authz, never answered with a link.
    const replay = await post(dave.token, call, { authorization: `DPoP ${dave.token}`, dpop: proof });
    await replay.text();
    expect(replay.status).toBe(401);
    expect(replay.headers.get('www-authenticate')).toContain('error="invalid_dpop_proof"');
    expect(s.stack.upstream!.seenHeaders.length).toBe(from);
  });

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
