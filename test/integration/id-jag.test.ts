// Enterprise-managed authorization over real HTTP on real Redis: a test IdP that signs users in and
// exchanges their ID tokens for ID-JAGs (RFC 8693, test/support/test-idp.ts), an MCP client running the
// whole flow (test/support/id-jag-client.ts, written against the MCP extension's text: the Python MCP
// SDK, which ships such a client, cannot be installed here), the sidecar, and the reference upstream,
// which sees the assertion's user. Replay is tested across two sidecar processes on one Redis, as two
// replicas run. The refusal rows of every check are in test/unit/token-endpoint.test.ts.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startUpstream, type RunningUpstream } from '../../examples/upstream/server.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { serveIdJagIssuance, startTestIdp, type TestIdp } from '../support/test-idp.ts';
import {
  connectWithToken,
  discover,
  JWT_BEARER,
  obtainIdJag,
  presentIdJag,
  runIdJagFlow,
  type IdJagClientOptions,
} from '../support/id-jag-client.ts';
import { startSidecarProcess, type SidecarProcess } from '../support/process.ts';
import { nodeTs } from '../support/node-ts.ts';

const USERS = { ann: { password: 'ann-pw', email: 'ann@example.com', emailVerified: true, groups: ['staff'] } };

async function headersSeenUpstream(client: Awaited<ReturnType<typeof connectWithToken>>): Promise<Record<string, string>> {
  const result = (await client.callTool({ name: 'headers', arguments: {} })) as { content: Array<{ type: string; text: string }> };
  return JSON.parse(result.content[0]!.text) as Record<string, string>;
}

describe('one sidecar', () => {
  let idp: TestIdp;
  let stack: Stack;
  let options: IdJagClientOptions;

  beforeAll(async () => {
    idp = await startTestIdp({ alg: 'RS256' });
    stack = await startStack({ config: { idp: { issuer: idp.issuer, jwksUrl: idp.jwksUrl, idJag: true, jwksCooldownMs: 0 } } });
    const created = await stack.admin('createClient', {
      clientName: 'enterprise agent',
      grantTypes: [JWT_BEARER],
      profile: 'service',
      scope: 'read write',
    });
    expect(created.status).toBe(201);
    const { issuer } = await discover(stack.mcpUrl);
    serveIdJagIssuance(
      idp,
      {
        'agent-at-idp': { secret: 'idp-secret', connections: { [issuer]: { clientId: created.body.clientId, scopes: ['read', 'admin'] } } },
      },
      USERS,
    );
    options = {
      mcpUrl: stack.mcpUrl,
      idpTokenUrl: `${idp.url}/token`,
      idpClient: { id: 'agent-at-idp', secret: 'idp-secret' },
      user: { name: 'ann', password: 'ann-pw' },
      asClient: { id: created.body.clientId, secret: created.body.clientSecret },
      scope: 'read write admin',
    };
  });
  afterAll(async () => {
    await stack?.close();
    await idp?.close();
  });

  it("the whole flow: the token works on /mcp through the official SDK client and the upstream sees the assertion's sub", async () => {
    const { token, client } = await runIdJagFlow(options);
    try {
      // The IdP allowed read and admin of what was asked; the client was registered with read and write.
      expect(token).toMatchObject({ token_type: 'Bearer', scope: 'read' });
      expect(token.refresh_token).toBeUndefined();
      const seen = await headersSeenUpstream(client);
      expect(seen['x-mcp-auth-subject']).toBe('sub-ann');
      expect(seen['x-mcp-auth-client-id']).toBe(options.asClient.id);
    } finally {
      await client.close();
    }
  });

  it('the same ID-JAG a second time is invalid_grant (its jti is kept in Redis)', async () => {
    const discovered = await discover(stack.mcpUrl);
    const idJag = await obtainIdJag(options, discovered);
    expect((await presentIdJag(discovered.tokenEndpoint, options.asClient, idJag)).status).toBe(200);
    const again = await presentIdJag(discovered.tokenEndpoint, options.asClient, idJag);
    expect([again.status, ((await again.json()) as { error: string }).error]).toEqual([400, 'invalid_grant']);
  });

  it('an ID-JAG signed with a key the IdP rotated in after the sidecar read its keys works', async () => {
    await idp.rotate('RS256');
    const { client } = await runIdJagFlow(options);
    try {
      expect((await headersSeenUpstream(client))['x-mcp-auth-subject']).toBe('sub-ann');
    } finally {
      await client.close();
    }
  });
});

describe('two sidecar processes on one Redis', () => {
  const PUBLIC_URL = 'https://mcp.replicas.test';
  let idp: TestIdp;
  let upstream: RunningUpstream;
  let a: SidecarProcess;
  let b: SidecarProcess;
  let asClient: { id: string; secret: string };
  let options: IdJagClientOptions;
  const discovered = { resource: `${PUBLIC_URL}/mcp`, issuer: PUBLIC_URL, tokenEndpoint: `${PUBLIC_URL}/token` };

  beforeAll(async () => {
    idp = await startTestIdp({ alg: 'RS256' });
    upstream = await startUpstream({ host: '127.0.0.1', port: 0 });
    const env = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      HOST: '127.0.0.1',
      PORT: '0',
      ADMIN_PORT: '0',
      LOG_LEVEL: 'warn',
      LOG_FORMAT: 'json',
      UPSTREAM_URL: upstream.url,
      // Both replicas are one authorization server: one public URL, one issuer.
      PUBLIC_URL,
      IDP_ISSUER: idp.issuer,
      IDP_JWKS_URL: idp.jwksUrl,
      IDP_ID_JAG: 'true',
    };
    a = await startSidecarProcess('id-jag', nodeTs('src/entry/main.ts'), env);
    b = await startSidecarProcess('id-jag', nodeTs('src/entry/main.ts'), env, [], a);
    const created = await a.admin('createClient', { clientName: 'enterprise agent', grantTypes: [JWT_BEARER], profile: 'service' });
    expect(created.status).toBe(201);
    asClient = { id: created.body.clientId!, secret: created.body.clientSecret! };
    serveIdJagIssuance(
      idp,
      { 'agent-at-idp': { secret: 'idp-secret', connections: { [PUBLIC_URL]: { clientId: asClient.id, scopes: [] } } } },
      USERS,
    );
    options = {
      mcpUrl: `${a.proxyUrl}/mcp`,
      idpTokenUrl: `${idp.url}/token`,
      idpClient: { id: 'agent-at-idp', secret: 'idp-secret' },
      user: { name: 'ann', password: 'ann-pw' },
      asClient,
    };
  }, 60_000);
  afterAll(async () => {
    await a?.cleanup();
    await b?.cleanup();
    await upstream?.close();
    await idp?.close();
  });

  it('an ID-JAG redeemed at one replica is invalid_grant at the other', async () => {
    const idJag = await obtainIdJag(options, discovered);
    const first = await presentIdJag(`${a.proxyUrl}/token`, asClient, idJag);
    expect(first.status).toBe(200);
    const token = ((await first.json()) as { access_token: string }).access_token;
    const replay = await presentIdJag(`${b.proxyUrl}/token`, asClient, idJag);
    expect([replay.status, ((await replay.json()) as { error: string }).error]).toEqual([400, 'invalid_grant']);
    // The token of the first redemption works at either replica, and the upstream sees the user.
    const client = await connectWithToken(`${b.proxyUrl}/mcp`, token);
    try {
      expect((await headersSeenUpstream(client))['x-mcp-auth-subject']).toBe('sub-ann');
    } finally {
      await client.close();
    }
  });

  it('presented to both replicas at once: exactly one token', async () => {
    for (let round = 0; round < 5; round++) {
      const idJag = await obtainIdJag(options, discovered);
      const answers = await Promise.all([
        presentIdJag(`${a.proxyUrl}/token`, asClient, idJag),
        presentIdJag(`${b.proxyUrl}/token`, asClient, idJag),
      ]);
      expect(answers.map((r) => r.status).sort()).toEqual([200, 400]);
    }
  });
});

describe('an ID-JAG presented to the token exchange (RFC 8693)', () => {
  // The exchange's audience is this server's issuer, as an operator might set it with ID-JAG off (the
  // configuration refuses the two together): the IdP's ID-JAG for this server then carries the
  // exchange's `iss`, `aud` and keys, and only its `typ` (oauth-id-jag+jwt) tells it apart.
  const PUBLIC_URL = 'https://mcp.exchange.test';
  const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
  let idp: TestIdp;
  let stack: Stack;

  beforeAll(async () => {
    idp = await startTestIdp({ alg: 'RS256' });
    stack = await startStack({
      config: {
        proxy: { publicUrl: PUBLIC_URL },
        idp: { issuer: idp.issuer, jwksUrl: idp.jwksUrl, audience: PUBLIC_URL, jwksCooldownMs: 0 },
      },
    });
    serveIdJagIssuance(
      idp,
      { 'agent-at-idp': { secret: 'idp-secret', connections: { [PUBLIC_URL]: { clientId: 'mcp_agent', scopes: ['read'] } } } },
      USERS,
    );
  });
  afterAll(async () => {
    await stack?.close();
    await idp?.close();
  });

  const exchange = (subjectToken: string) =>
    fetch(`${stack.proxyUrl}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: EXCHANGE,
        subject_token: subjectToken,
        subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
      }),
    });

  it('is invalid_grant: no seven-day user token from a single-use grant bound to another client', async () => {
    const options: IdJagClientOptions = {
      mcpUrl: `${PUBLIC_URL}/mcp`,
      idpTokenUrl: `${idp.url}/token`,
      idpClient: { id: 'agent-at-idp', secret: 'idp-secret' },
      user: { name: 'ann', password: 'ann-pw' },
      asClient: { id: 'mcp_agent', secret: 'unused' },
    };
    const idJag = await obtainIdJag(options, { resource: `${PUBLIC_URL}/mcp`, issuer: PUBLIC_URL, tokenEndpoint: `${PUBLIC_URL}/token` });
    const res = await exchange(idJag);
    expect([res.status, ((await res.json()) as { error: string }).error]).toEqual([400, 'invalid_grant']);
    // The same IdP's JWT for that audience with an ID token's type is exchanged: the refusal is the type's.
    const now = Math.floor(stack.clock.now() / 1000);
    const idToken = await idp.sign({ iss: idp.issuer, aud: PUBLIC_URL, sub: 'sub-ann', iat: now, exp: now + 300 }, { typ: 'JWT' });
    expect((await exchange(idToken)).status).toBe(200);
  });
});
