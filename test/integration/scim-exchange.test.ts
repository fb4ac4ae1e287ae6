// The directory at the doors that take an IdP JWT instead of a browser: the token exchange (RFC 8693)
// and the identity assertion grant (ID-JAG), with `scim.match: email`: the SCIM userName is the
// person's email, matched (ignoring case) against the email the IdP verified, never an unverified one
// (as the claim rules treat it: test/hostile/unverified-email.test.ts). A real sidecar on real Redis;
// the IdP is a JWKS on loopback signing each JWT as the test asks (test/support/test-idp.ts).

import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initializeStatus } from '../support/http.ts';
import { JWT_BEARER, presentIdJag } from '../support/id-jag-client.ts';
import { directoryClient, PATCH_OP, USER_SCHEMA } from '../support/scim.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { startTestIdp, type TestIdp } from '../support/test-idp.ts';

const PUBLIC_URL = 'https://mcp.directory.test';
const EXCHANGE_AUDIENCE = 'mcp-directory-exchange';
const SCIM_TOKEN = randomBytes(32).toString('hex');
let idp: TestIdp;
let stack: Stack;
let scim: ReturnType<typeof directoryClient>;
let agent: { id: string; secret: string };

beforeAll(async () => {
  idp = await startTestIdp({ alg: 'RS256' });
  stack = await startStack({
    config: {
      proxy: { publicUrl: PUBLIC_URL },
      idp: { issuer: idp.issuer, jwksUrl: idp.jwksUrl, audience: EXCHANGE_AUDIENCE, idJag: true },
      scim: { token: SCIM_TOKEN, match: 'email' },
    },
  });
  const client = directoryClient(stack.adminUrl, SCIM_TOKEN);
  scim = (...args) => {
    stack.clock.advance(1000);
    return client(...args);
  };
  const created = await stack.admin('createClient', { clientName: 'agent', grantTypes: [JWT_BEARER], profile: 'service' });
  agent = { id: created.body.clientId, secret: created.body.clientSecret };
});
afterAll(async () => {
  await stack?.close();
  await idp?.close();
});

const now = () => Math.floor(stack.clock.now() / 1000);

/** The IdP's JWT for the exchange: `sub`, and an email verified or not. */
function idToken(sub: string, email: string, verified: unknown = true): Promise<string> {
  return idp.sign(
    { iss: idp.issuer, aud: EXCHANGE_AUDIENCE, sub, iat: now(), exp: now() + 300, email, email_verified: verified },
    { typ: 'JWT' },
  );
}

async function exchange(jwt: string): Promise<{ status: number; body: Record<string, any> }> {
  const res = await fetch(`${stack.proxyUrl}/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
      subject_token: jwt,
      subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
    }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

function idJag(sub: string, email: string): Promise<string> {
  return idp.sign(
    {
      iss: idp.issuer,
      aud: PUBLIC_URL,
      sub,
      client_id: agent.id,
      jti: randomUUID(),
      iat: now(),
      exp: now() + 300,
      email,
      email_verified: true,
    },
    { typ: 'oauth-id-jag+jwt' },
  );
}

const mcpStatus = (token: string) => initializeStatus({ mcpUrl: `${stack.proxyUrl}/mcp` }, token);
const active = (value: boolean) => ({ schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: value } }] });

describe('scim.match: email at the token exchange and ID-JAG', () => {
  it('deactivating the email revokes the tokens of everyone seen with it; both doors refuse it until reactivated', async () => {
    const created = await scim('POST', '/Users', { schemas: [USER_SCHEMA], userName: 'Ann@Example.com', active: true });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    // Signed in before the deactivation, at both doors, with the email in another case.
    const user = await exchange(await idToken('sub-ann', 'ann@example.COM'));
    expect(user.status).toBe(200);
    const assertion = await presentIdJag(`${stack.proxyUrl}/token`, agent, await idJag('sub-ann-2', 'ANN@example.com'));
    expect(assertion.status).toBe(200);
    const access = ((await assertion.json()) as { access_token: string }).access_token;
    expect(await mcpStatus(user.body.access_token)).toBe(200);
    expect(await mcpStatus(access)).toBe(200);

    const deactivated = await scim('PATCH', `/Users/${id}`, active(false));
    expect(deactivated.status).toBe(200);
    expect(await mcpStatus(user.body.access_token)).toBe(401);
    expect(await mcpStatus(access)).toBe(401);

    const refused = await exchange(await idToken('sub-ann', 'ann@example.com'));
    expect(refused).toEqual({
      status: 400,
      body: { error: 'invalid_grant', error_description: 'the account is deactivated by the directory' },
    });
    const refusedJag = await presentIdJag(`${stack.proxyUrl}/token`, agent, await idJag('sub-ann-2', 'ann@example.com'));
    expect(refusedJag.status).toBe(400);
    expect(await refusedJag.json()).toEqual({ error: 'invalid_grant', error_description: 'the account is deactivated by the directory' });
    // Another subject with the same verified email is the same person to the directory.
    expect((await exchange(await idToken('sub-ann-3', 'ann@example.com'))).status).toBe(400);

    await scim('PATCH', `/Users/${id}`, active(true));
    const back = await exchange(await idToken('sub-ann', 'ann@example.com'));
    expect(back.status).toBe(200);
    expect(await mcpStatus(back.body.access_token)).toBe(200);
  });

  it('an email the IdP did not verify matches no one: not refused, and not linked to the person', async () => {
    const created = await scim('POST', '/Users', { schemas: [USER_SCHEMA], userName: 'bob@example.com', active: false });
    expect(created.status).toBe(201);
    expect((await exchange(await idToken('sub-bob', 'bob@example.com'))).status).toBe(400);
    const unverified = await exchange(await idToken('sub-mallory', 'bob@example.com', false));
    expect(unverified.status).toBe(200);
    // The deactivation's revocation does not reach the unverified claimant either.
    await scim('PATCH', `/Users/${created.body.id}`, active(true));
    await scim('PATCH', `/Users/${created.body.id}`, active(false));
    expect(await mcpStatus(unverified.body.access_token)).toBe(200);
  });
});
