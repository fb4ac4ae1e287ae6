// GET /.well-known/jwks.json on the proxy listener: the public keys caller assertions are verified
// with, for every replica. No token: the keys are public, and an upstream fetches them unauthenticated.

import type { Route } from '../http/serve.ts';
import { JWKS_MAX_AGE_SECONDS, type SigningKeys } from './keys.ts';

export const JWKS_PATH = '/.well-known/jwks.json';

export function jwksRoute(keys: Pick<SigningKeys, 'jwks'>): Route {
  return {
    path: JWKS_PATH,
    methods: ['GET'],
    async handler(_req, res) {
      // A store that cannot answer rejects: 503 (no-store), never a partial set.
      const body = JSON.stringify({ keys: await keys.jwks() });
      res.writeHead(200, {
        'content-type': 'application/json',
        'cache-control': `public, max-age=${JWKS_MAX_AGE_SECONDS}`,
        'content-length': Buffer.byteLength(body),
      });
      res.end(body);
    },
  };
}
