// Upstream credentials (mode idp) through real ingresses: nginx and Caddy run from examples/nginx/mcp.conf
// and examples/caddy/Caddyfile, the sidecar (with the in-process OpenID provider as its IdP) as their
// authorization service, the reference MCP server behind them. Each user's request reaches the MCP
// server with that user's own credential and never another's, also with two users at once; a
// credential the client sends itself never gets through, in any spelling; a user with none gets the
// MCP error -32042 with the link to connect, and nothing is forwarded.
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

const KINDS: IngressKind[] = ['nginx', 'caddy'];
const KEY = randomBytes(32).toString('hex');

interface User {
  subject: string;
  /** The user's token at the sidecar. */
  token: string;
  /** The user's own credential for the MCP server (undefined: none kept). */
  credential: string | undefined;
}

describe.each(KINDS)('%s in front, with upstream credentials (mode idp)', (kind) => {
  const available = ingressAvailable(kind);
  let s: SignInStack;
  let ingress: Ingress;
  let alice: User;
  let bob: User;
  let carol: User;

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
        upstream: { credentials: { mode: 'idp', key: KEY } },
      },
    });
    ingress = await startIngress(kind, { port, sidecar: s.stack.proxyUrl, upstream: s.stack.upstream!.url });
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
      for (const h of theirs) expect(h.authorization).toBe(`Bearer ${u.credential}`);
    }
    // The sidecar's own tokens never reach the MCP server.
    expect(seen.some((h) => h.authorization === `Bearer ${alice.token}` || h.authorization === `Bearer ${bob.token}`)).toBe(false);
  });

  it.skipIf(!available)('a credential the client sends itself never gets through, in any spelling', async () => {
    const forged = `forged-${randomBytes(8).toString('hex')}`;
    const from = s.stack.upstream!.seenHeaders.length;
    // The carrier Caddy copies the credential in, and the underscore spellings a CGI/WSGI stack reads
    // as the same name.
    const res = await post(alice.token, initializeRequest('forger'), {
      'X-MCP-Auth-Upstream-Credential': `Bearer ${forged}`,
      'x-mcp-auth-upstream-credential': `Bearer ${forged}`,
      X_MCP_Auth_Upstream_Credential: `Bearer ${forged}`,
      'x_mcp_auth-upstream_credential': `Bearer ${forged}`,
    });
    const text = await res.text();
    expect(text).not.toContain(forged);
    const seen = seenSince(from);
    if (kind === 'nginx') {
      // nginx drops the underscore spellings and cannot remove X-MCP-Auth-* by pattern: the sidecar's
      // /authz sees the dash spellings and refuses the request.
      expect(res.status).toBe(400);
      expect(seen).toEqual([]);
    } else {
      expect(res.status).toBe(200);
      expect(seen).toHaveLength(1);
      expect(seen[0]!.authorization).toBe(`Bearer ${alice.credential}`);
      expect(seen[0]!.names.filter((n) => n.replaceAll('_', '-').startsWith('x-mcp-auth-upstream'))).toEqual([]);
    }
    expect(JSON.stringify(s.stack.upstream!.seenHeaders.slice(from))).not.toContain(forged);

    // Authorization itself, in another case: the client's value (its token at the sidecar) is replaced.
    const before = s.stack.upstream!.seenHeaders.length;
    const cased = await fetch(`${ingress.url}/mcp`, {
      method: 'POST',
      headers: { AUTHORIZATION: `Bearer ${bob.token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify(initializeRequest('cased')),
    });
    expect(cased.status).toBe(200);
    await cased.text();
    expect(seenSince(before).map((h) => h.authorization)).toEqual([`Bearer ${bob.credential}`]);
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

    // A token the sidecar does not know is still the plain challenge, once, and never reaches the sidecar's /mcp.
    const unknown = await post(generateToken(), initializeRequest('unknown'));
    await unknown.text();
    expect(unknown.status).toBe(401);
    expect(unknown.headers.get('www-authenticate')).toMatch(
      /^Bearer realm="mcp", resource_metadata="[^"]+", error="invalid_token", error_description="[^"]+"$/,
    );
    expect(unknown.headers.get('x-mcp-auth-connect')).toBeNull();
    expect(s.stack.upstream!.seenHeaders.length).toBe(from);
  });
});
