// Introspection as a stranger: anyone may register a confidential client (open DCR) and authenticate
// at /introspect. Holding a stranger's token (a user-grade one from the IdP exchange, or another
// client's) must not tell it whose token it is or when it ends: only the token's own client, the
// master token, or a client the operator lists in oauth.introspectionClients sees `active: true`.

import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashToken, TTL_7_DAYS } from '../../src/model/credentials.ts';
import { startStack, type Stack } from '../support/stack.ts';

const basic = (id: string, secret: string) => ({ authorization: `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}` });

async function introspect(stack: Stack, token: string, headers: Record<string, string>) {
  const res = await fetch(`${stack.proxyUrl}/introspect`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams({ token }).toString(),
  });
  return (await res.json()) as Record<string, unknown>;
}

describe('/introspect: a token is active only to its own client, the master token and listed clients', () => {
  let stack: Stack;
  let allowedStack: Stack;
  let stranger: { clientId: string; clientSecret: string };
  let resourceServer: { clientId: string; clientSecret: string };
  let userToken: string;
  let oauthToken: string;

  beforeAll(async () => {
    stack = await startStack();
    // A self-registered confidential client: what any attacker can make.
    const registered = await fetch(`${stack.proxyUrl}/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'stranger', token_endpoint_auth_method: 'client_secret_basic' }),
    });
    const body = (await registered.json()) as { client_id: string; client_secret: string };
    expect([registered.status, typeof body.client_secret]).toEqual([201, 'string']);
    stranger = { clientId: body.client_id, clientSecret: body.client_secret };
    resourceServer = (await stack.admin('createClient', { clientName: 'resource-server' })).body;
    // The operator lists the resource server; a second replica on the same Redis carries that setting.
    allowedStack = await startStack({ prefix: stack.prefix, config: { oauth: { introspectionClients: [resourceServer.clientId] } } });
    userToken = randomBytes(32).toString('hex');
    const now = stack.clock.now();
    await stack.store.putUserToken({
      tokenHash: hashToken(userToken),
      subject: 'alice',
      issuer: 'https://idp.example',
      createdAt: now,
      expiresAt: now + TTL_7_DAYS,
    });
    ({ token: oauthToken } = await stack.issueOAuthToken());
  });
  afterAll(async () => {
    await allowedStack?.close();
    await stack?.close();
  });

  it("a self-registered client learns nothing of a stranger's user-grade token or another client's token", async () => {
    expect(await introspect(stack, userToken, basic(stranger.clientId, stranger.clientSecret))).toEqual({ active: false });
    expect(await introspect(stack, oauthToken, basic(stranger.clientId, stranger.clientSecret))).toEqual({ active: false });
  });

  it('an admin-created client not listed: the same', async () => {
    expect(await introspect(stack, userToken, basic(resourceServer.clientId, resourceServer.clientSecret))).toEqual({ active: false });
  });

  it('the master token, and a client listed in oauth.introspectionClients, see them active', async () => {
    expect(await introspect(stack, userToken, { authorization: `Bearer ${stack.masterToken}` })).toMatchObject({
      active: true,
      sub: 'alice',
      auth_kind: 'user',
    });
    expect(await introspect(allowedStack, userToken, basic(resourceServer.clientId, resourceServer.clientSecret))).toMatchObject({
      active: true,
      sub: 'alice',
      auth_kind: 'user',
    });
    expect(await introspect(allowedStack, oauthToken, basic(resourceServer.clientId, resourceServer.clientSecret))).toMatchObject({
      active: true,
      auth_kind: 'oauth',
    });
    // The listing is per client: the stranger stays blind on that replica too.
    expect(await introspect(allowedStack, userToken, basic(stranger.clientId, stranger.clientSecret))).toEqual({ active: false });
  });
});
