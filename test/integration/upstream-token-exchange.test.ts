// The RFC 8693 request the sidecar sends in mode token-exchange (src/upstream-credentials/
// token-exchange.ts), against a small token endpoint on a real socket: oidc-provider (the test IdP)
// ships no token exchange, so this endpoint checks the request as RFC 8693 §2.1 and §2.2 define it
// (the form parameters, the client's Basic authentication) and answers like Keycloak does. The whole
// mode against a real OpenID provider with an exchange grant is upstream-token-exchange-provider.test.ts.

import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/model/clock.ts';
import { providerConfiguration } from '../../src/upstream-credentials/connect-flow.ts';
import { exchangeAtIdp } from '../../src/upstream-credentials/token-exchange.ts';

let server: Server;
let base: string;
const received: Array<{ form: URLSearchParams; authorization: string | undefined }> = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      const form = new URLSearchParams(body);
      received.push({ form, authorization: req.headers.authorization });
      res.writeHead(form.get('audience') === 'forbidden' ? 400 : 200, { 'content-type': 'application/json' });
      res.end(
        form.get('audience') === 'forbidden'
          ? JSON.stringify({ error: 'invalid_target' })
          : JSON.stringify({
              access_token: `exchanged-for-${form.get('audience')}`,
              issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
              token_type: 'Bearer',
              expires_in: 300,
            }),
      );
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise<void>((r) => server.close(() => r()));
});

describe('RFC 8693 exchange at the IdP', () => {
  const clock = new ManualClock(Date.now());
  const configuration = () =>
    providerConfiguration({
      authorizationEndpoint: `${base}/authorize`,
      tokenEndpoint: `${base}/token`,
      clientId: 'sidecar',
      clientSecret: 's3cret',
      timeoutMs: 2000,
    });

  it('sends the user token as subject_token with the audience, authenticated as the client; keeps the answer and its expiry', async () => {
    const tokens = await exchangeAtIdp(configuration(), 'user-idp-token', 'https://api.internal', clock);
    expect(tokens).toEqual({ accessToken: 'exchanged-for-https://api.internal', expiresAt: clock.now() + 300_000 });
    const { form, authorization } = received.at(-1)!;
    expect(Object.fromEntries(form)).toEqual({
      grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
      subject_token: 'user-idp-token',
      subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      requested_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      audience: 'https://api.internal',
    });
    expect(authorization).toBe(`Basic ${Buffer.from('sidecar:s3cret').toString('base64')}`);
  });

  it('a refusal (invalid_target) rejects, and is not mistaken for an outage', async () => {
    const { providerUnavailable } = await import('../../src/upstream-credentials/connect-flow.ts');
    const err = await exchangeAtIdp(configuration(), 'user-idp-token', 'forbidden', clock).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect(providerUnavailable(err)).toBe(false);
  });
});
