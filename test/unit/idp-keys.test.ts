// The IdP's JWKS is fetched once for the token exchange and ID-JAG verifiers of one configuration: both
// read the same cached key set (a test IdP counts its /jwks fetches).

import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateToken } from '../../src/model/credentials.ts';
import { buildConfig } from '../../src/config/load.ts';
import { createIdJagVerifier, createIdpVerifier, ID_JAG_TYPE } from '../../src/oauth/idp.ts';
import { startTestIdp, type TestIdp } from '../support/test-idp.ts';

const AS = 'https://mcp.example.com';
let idp: TestIdp;
beforeAll(async () => {
  idp = await startTestIdp();
});
afterAll(async () => {
  await idp?.close();
});

it('one configuration: the exchange and the ID-JAG verifiers share one fetch of the IdP keys', async () => {
  const config = buildConfig(
    { idp: { issuer: idp.issuer, audience: 'mcp-sidecar', jwksUrl: idp.jwksUrl, idJag: true } },
    { BEARER_SECRET_MASTER: generateToken() },
  );
  const exchange = createIdpVerifier(config.idp)!;
  const idJag = createIdJagVerifier(config.idp)!;
  const now = Date.now();
  const seconds = Math.floor(now / 1000);
  const idToken = await idp.sign({ iss: idp.issuer, aud: 'mcp-sidecar', sub: 'ann', iat: seconds, exp: seconds + 300 });
  const grant = await idp.sign(
    { iss: idp.issuer, aud: AS, sub: 'ann', client_id: 'c1', jti: 'j1', iat: seconds, exp: seconds + 300 },
    { typ: ID_JAG_TYPE },
  );
  expect((await exchange.verify(idToken, now)).subject).toBe('ann');
  expect((await idJag.verify(grant, AS, now)).subject).toBe('ann');
  expect(idp.jwksFetches).toBe(1);
});
