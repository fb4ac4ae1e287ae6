// A test identity provider on loopback: signing keys generated at test time (rotatable), its JWKS at
// /jwks, and JWTs signed with any of its keys or with a key it never published; optionally a token
// endpoint issuing Identity Assertion JWT Authorization Grants (serveIdJagIssuance).

import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { createLocalJWKSet, exportJWK, generateKeyPair, jwtVerify, SignJWT, type CryptoKey, type JWK, type JWTPayload } from 'jose';

export type IdpAlg = 'RS256' | 'ES256' | 'ES384' | 'PS256';

export interface IdpKey {
  kid: string;
  alg: IdpAlg;
  privateKey: CryptoKey;
  jwk: JWK;
}

export async function idpKey(alg: IdpAlg, kid: string): Promise<IdpKey> {
  const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true });
  return { kid, alg, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' } };
}

export interface TestIdp {
  /** The base URL, which is also its issuer unless one is given. */
  url: string;
  issuer: string;
  jwksUrl: string;
  /** The key it signs with now. */
  key: IdpKey;
  /** The public keys it publishes now. */
  publishedKeys(): JWK[];
  /** JWKS fetches so far. */
  readonly jwksFetches: number;
  /** Publishes a new key and signs with it from now on (the old one stays published). */
  rotate(alg?: IdpAlg): Promise<IdpKey>;
  /** Publishes a new key without signing with it by default (sign with it by passing it to sign). */
  publish(alg: IdpAlg): Promise<IdpKey>;
  sign(claims: JWTPayload, header?: Record<string, unknown>, key?: IdpKey): Promise<string>;
  /** Extra routes (path to handler), e.g. a token endpoint. */
  route(path: string, handler: (req: IncomingMessage, res: ServerResponse) => void | Promise<void>): void;
  close(): Promise<void>;
}

export async function startTestIdp(options: { issuer?: string; alg?: IdpAlg } = {}): Promise<TestIdp> {
  let key = await idpKey(options.alg ?? 'ES256', 'k1');
  const published: JWK[] = [key.jwk];
  const routes = new Map<string, (req: IncomingMessage, res: ServerResponse) => void | Promise<void>>();
  let fetches = 0;
  routes.set('/jwks', (_req, res) => {
    fetches++;
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ keys: published }));
  });
  const server: Server = createServer((req, res) => {
    const handler = routes.get(new URL(req.url ?? '/', 'http://x').pathname);
    if (!handler) {
      res.statusCode = 404;
      res.end();
      return;
    }
    Promise.resolve(handler(req, res)).catch(() => {
      res.statusCode = 500;
      res.end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const issuer = options.issuer ?? url;
  let rotations = 1;
  return {
    url,
    issuer,
    jwksUrl: `${url}/jwks`,
    get key() {
      return key;
    },
    publishedKeys: () => [...published],
    get jwksFetches() {
      return fetches;
    },
    async rotate(alg = key.alg) {
      key = await idpKey(alg, `k${++rotations}`);
      published.push(key.jwk);
      return key;
    },
    async publish(alg) {
      const extra = await idpKey(alg, `k${++rotations}`);
      published.push(extra.jwk);
      return extra;
    },
    sign(claims, header = {}, signer = key) {
      return new SignJWT(claims).setProtectedHeader({ alg: signer.alg, kid: signer.kid, ...header }).sign(signer.privateKey);
    },
    route(path, handler) {
      routes.set(path, handler);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** An IdP-side OpenID client (the MCP client's registration at the IdP) and its managed connections. */
export interface IdpClient {
  secret: string;
  /**
   * Managed connections, by the `audience` (a resource authorization server's issuer): the client id
   * this MCP client has at that authorization server, and the scopes the IdP's policy lets it have there.
   */
  connections: Record<string, { clientId: string; scopes: string[]; resource?: string }>;
}

export interface IdpUser {
  password: string;
  email: string;
  emailVerified: boolean;
  groups: string[];
}

export const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const TOKEN_TYPE_ID_TOKEN = 'urn:ietf:params:oauth:token-type:id_token';
export const TOKEN_TYPE_ID_JAG = 'urn:ietf:params:oauth:token-type:id-jag';

/**
 * Makes the test IdP an issuer of ID-JAGs at its `/token`, as draft-ietf-oauth-identity-assertion-authz-grant
 * §4.3 and the MCP Enterprise-Managed Authorization extension's §4 describe:
 *  - `grant_type=password` stands in for single sign-on: it returns an ID token for the user (the
 *    browser sign-in against a real OpenID provider is covered by the sign-in tests);
 *  - `grant_type=token-exchange` with `requested_token_type` id-jag and the ID token as `subject_token`
 *    (`subject_token_type` id_token), client authentication (client_secret_basic) required: the ID
 *    token must be this IdP's and issued to the authenticating client; the `audience` must be one of the
 *    client's managed connections (and `resource`, when the connection names one, that resource); the
 *    ID-JAG carries the client id at that authorization server and the asked scopes the policy allows.
 * Every refusal is an RFC 6749 §5.2 error. `issued` counts the ID-JAGs it issued.
 */
export function serveIdJagIssuance(
  idp: TestIdp,
  clients: Record<string, IdpClient>,
  users: Record<string, IdpUser>,
): { readonly issued: number } {
  let issued = 0;
  const reply = (res: ServerResponse, status: number, body: Record<string, unknown>) => {
    res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
    res.end(JSON.stringify(body));
  };
  idp.route('/token', async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
    const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? '');
    const [id, secret] = basic ? Buffer.from(basic[1]!, 'base64').toString('utf8').split(':').map(decodeURIComponent) : [];
    const client = id !== undefined ? clients[id] : undefined;
    if (!client || client.secret !== secret) return reply(res, 401, { error: 'invalid_client' });
    const now = Math.floor(Date.now() / 1000);
    const grantType = form.get('grant_type');
    if (grantType === 'password') {
      const name = form.get('username') ?? '';
      const user = users[name];
      if (!user || user.password !== form.get('password')) return reply(res, 400, { error: 'invalid_grant' });
      const idToken = await idp.sign({
        iss: idp.issuer,
        sub: `sub-${name}`,
        aud: id,
        iat: now,
        exp: now + 3600,
        email: user.email,
        email_verified: user.emailVerified,
        groups: user.groups,
      });
      return reply(res, 200, { id_token: idToken, access_token: randomBytes(16).toString('hex'), token_type: 'Bearer', scope: 'openid' });
    }
    if (grantType !== TOKEN_EXCHANGE) return reply(res, 400, { error: 'unsupported_grant_type' });
    if (form.get('requested_token_type') !== TOKEN_TYPE_ID_JAG || form.get('subject_token_type') !== TOKEN_TYPE_ID_TOKEN)
      return reply(res, 400, { error: 'invalid_request' });
    let subject: JWTPayload;
    try {
      ({ payload: subject } = await jwtVerify(form.get('subject_token') ?? '', createLocalJWKSet({ keys: idp.publishedKeys() }), {
        issuer: idp.issuer,
        audience: id!,
      }));
    } catch {
      return reply(res, 400, { error: 'invalid_grant' });
    }
    const audience = form.get('audience') ?? '';
    const connection = client.connections[audience];
    const resource = form.get('resource') ?? undefined;
    if (!connection || (connection.resource !== undefined && resource !== connection.resource))
      return reply(res, 400, { error: 'invalid_target' });
    const asked = (form.get('scope') ?? '').split(' ').filter(Boolean);
    const scope = asked.filter((s) => connection.scopes.includes(s)).join(' ');
    const idJag = await idp.sign(
      {
        iss: idp.issuer,
        sub: subject.sub,
        aud: audience,
        client_id: connection.clientId,
        jti: randomBytes(16).toString('hex'),
        iat: now,
        exp: now + 300,
        ...(resource !== undefined ? { resource } : {}),
        ...(scope !== '' ? { scope } : {}),
        email: subject.email,
        email_verified: subject.email_verified,
        groups: subject.groups,
      },
      { typ: 'oauth-id-jag+jwt' },
    );
    issued++;
    return reply(res, 200, {
      issued_token_type: TOKEN_TYPE_ID_JAG,
      access_token: idJag,
      token_type: 'N_A',
      ...(scope !== '' ? { scope } : {}),
      expires_in: 300,
    });
  });
  return {
    get issued() {
      return issued;
    },
  };
}
