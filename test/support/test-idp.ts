// A test identity provider on loopback: signing keys generated at test time (rotatable), its JWKS at
// /jwks, and JWTs signed with any of its keys or with a key it never published.

import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTPayload } from 'jose';

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
