// Upstream credentials (mode idp) through real ingresses: nginx and Caddy run from examples/nginx/mcp.conf
// and examples/caddy/Caddyfile, the sidecar (with the in-process OpenID provider as its IdP) as their
// authorization service, the reference MCP server behind them. Each user's request reaches the MCP
// server with that user's own credential and never another's, also with two users at once; a
// credential the client sends itself never gets through, in any spelling; a user with none gets
// through the handshake (the ingress hands it to the sidecar's /mcp, which forwards it without a
// credential), then the MCP error -32042 with the link to connect for a call, which is never
// forwarded. Both with the credential in
// Authorization (the examples as they stand) and in a header of another name (the examples edited as
// their comments say).
// The users' kept IdP tokens are written into the store as sign-in would keep them (encrypted under the
// configured key): what is tested here is the ingress's part, the carrying of the header.
// Skipped where the ingress is not installed, unless REQUIRE_INGRESS is set (.ci/run sets it).

import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateToken, hashToken } from '../../src/model/credentials.ts';
import { CredentialCipher } from '../../src/upstream-credentials/cipher.ts';
import { URL_ELICITATION_REQUIRED } from '../../src/upstream-credentials/delivery.ts';
import { CredentialVault } from '../../src/upstream-credentials/vault.ts';
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

  /** A user-grade token for a user of their own, with `credential` kept as sign-in keeps the IdP's token. */
  async function user(name: string, withCredential: boolean): Promise<User> {
    const subject = `${name}-${randomBytes(4).toString('hex')}`;
    const token = generateToken();
    const now = s.stack.clock.now();
    await s.stack.store.putUserToken({
      tokenHash: hashToken(token),
      subject,
      issuer: s.idp.issuer,
      createdAt: now,
      expiresAt: now + 3_600_000,
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

  it.skipIf(!available)(
    'a user with no credential gets through the handshake, then -32042 with the link to connect; no call is forwarded',
    async () => {
      let from = s.stack.upstream!.seenHeaders.length;
      // MCP 2025-11-25: the client declares URL-mode elicitation at initialize.
      const hello = initializeRequest('carol');
      (hello.params as { capabilities: unknown }).capabilities = { elicitation: { url: {} } };
      const initialized = await post(carol.token, hello);
      expect(initialized.status, ingress.log()).toBe(200);
      await initialized.text();
      const session = initialized.headers.get('mcp-session-id')!;
      expect(session).toBeTruthy();
      // Forwarded by the sidecar's /mcp (the ingress handed it the marked 401), with no credential header.
      expect(seenSince(from)).toHaveLength(1);
      expect(seenSince(from)[0]!.credential).toBeUndefined();
      expect(seenSince(from)[0]!.authorization).toBeUndefined();
      from = s.stack.upstream!.seenHeaders.length;
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

      // A token the sidecar does not know is still the plain challenge, once, and never reaches the sidecar's /mcp.
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
});
