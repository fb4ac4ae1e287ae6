// The MCP SDK's own OAuth client (auth(), OAuthClientProvider, ClientCredentialsProvider) running the
// whole flow from the sidecar's first 401 to tools/list on the reference upstream: with browser
// sign-in through a real OpenID provider, and without an IdP on the client_credentials path.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { auth } from '@modelcontextprotocol/sdk/client/auth.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { DEMO_USER } from '../../demo/idp.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { approveAndSignIn, CLIENT_REDIRECT, clientReceived, startSignInStack, type SignInStack } from '../support/sign-in.ts';
import { connectedClient, firstConnection, RecordingProvider } from '../support/sdk-oauth.ts';
import { UserAgent } from '../support/user-agent.ts';

function textOf(result: object): string {
  return ((result as { content: Array<{ text?: string }> }).content[0]?.text ?? '') as string;
}

describe('browser sign-in with the SDK OAuth client', () => {
  let s: SignInStack;
  beforeAll(async () => {
    s = await startSignInStack();
  });
  afterAll(async () => {
    await s?.close();
  });

  it('401 -> discovery -> DCR -> /authorize -> consent -> IdP -> code -> tokens -> tools/list, as the IdP user', async () => {
    const provider = new RecordingProvider();
    const { transport: first, authorizationUrl } = await firstConnection(s.base, provider);
    expect(authorizationUrl.origin).toBe(new URL(s.base).origin);
    expect(authorizationUrl.searchParams.get('code_challenge_method')).toBe('S256');
    expect(authorizationUrl.searchParams.get('resource')).toBe(`${s.base}/mcp`);

    const hop = await approveAndSignIn(new UserAgent(), s.base, authorizationUrl.href);
    const code = clientReceived(hop).get('code');
    expect(code).toMatch(/^[0-9a-f]{64}$/);
    await first.finishAuth(code!);
    expect(provider.tokens()?.refresh_token).toMatch(/^[0-9a-f]{64}$/);

    const client = await connectedClient(s.base, provider);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toContain('headers');
    const seen = JSON.parse(textOf(await client.callTool({ name: 'headers', arguments: {} }))) as Record<string, string>;
    expect(seen['x-mcp-auth-kind']).toBe('oauth');
    expect(seen['x-mcp-auth-subject']).toBe(DEMO_USER.sub);
    expect(seen['x-mcp-auth-client-id']).toBe(provider.clientInformation()?.client_id);
    await client.close();
  });
});

describe("per-tool policy sees the signed-in user's groups", () => {
  let s: SignInStack;
  beforeAll(async () => {
    s = await startSignInStack({
      config: {
        policy: {
          default: 'deny',
          rules: [
            {
              name: 'users-echo',
              effect: 'allow',
              principals: { groups: ['mcp-users'] },
              requests: { methods: ['tools/call'], names: ['echo'] },
            },
            {
              name: 'admins-add',
              effect: 'allow',
              principals: { groups: ['admins'] },
              requests: { methods: ['tools/call'], names: ['add'] },
            },
          ],
        },
      },
    });
  });
  afterAll(async () => {
    await s?.close();
  });

  it('a tool allowed for a group the IdP put the user in works; one for another group is denied', async () => {
    const provider = new RecordingProvider();
    const { transport, authorizationUrl } = await firstConnection(s.base, provider);
    const hop = await approveAndSignIn(new UserAgent(), s.base, authorizationUrl.href);
    await transport.finishAuth(clientReceived(hop).get('code')!);
    const client = await connectedClient(s.base, provider);
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['echo']);
    expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'hi' } }))).toBe('hi');
    // No scope would allow add for this user: a tool error, not a 403 the client would answer by
    // starting a new authorization.
    provider.authorizationUrl = undefined;
    const denied = await client.callTool({ name: 'add', arguments: { a: 1, b: 2 } });
    expect(denied).toMatchObject({
      isError: true,
      _meta: { 'io.modelcontextprotocol/authorization': { reason: 'insufficient_authorization', remediation: 'unavailable' } },
    });
    expect(provider.authorizationUrl).toBeUndefined();
    await client.close();
  });
});

describe('without an IdP: the SDK still reads the metadata, and client_credentials works through auth()', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack();
    expect((await stack.admin('seedDefaultProfiles')).status).toBe(200);
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('ClientCredentialsProvider + auth() gets a token, and the SDK client lists tools with it', async () => {
    const created = await stack.admin('createClient', { clientName: 'machine' });
    const base = stack.sidecar.publicUrl();
    const provider = new ClientCredentialsProvider({
      clientId: created.body.clientId,
      clientSecret: created.body.clientSecret,
      expectedIssuer: base,
    });
    expect(await auth(provider, { serverUrl: new URL(`${base}/mcp`) })).toBe('AUTHORIZED');
    const client = new Client({ name: 'cc', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { authProvider: provider }));
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
    await client.close();
  });

  it('an interactive client is told that browser sign-in is not configured, before any browser opens', async () => {
    const provider = new RecordingProvider();
    await expect(auth(provider, { serverUrl: new URL(`${stack.sidecar.publicUrl()}/mcp`) })).rejects.toThrow(/not configured/);
    expect(provider.authorizationUrl).toBeUndefined();
  });

  it('/authorize answers a known client with unsupported_response_type, state and iss', async () => {
    const created = await stack.admin('createClient', { redirectUris: [CLIENT_REDIRECT], grantTypes: ['authorization_code'] });
    const url = new URL(`${stack.proxyUrl}/authorize`);
    url.search = new URLSearchParams({
      response_type: 'code',
      client_id: created.body.clientId,
      redirect_uri: CLIENT_REDIRECT,
      state: 's1',
    }).toString();
    const res = await fetch(url, { redirect: 'manual' });
    expect(res.status).toBe(302);
    const back = new URL(res.headers.get('location')!);
    expect(back.searchParams.get('error')).toBe('unsupported_response_type');
    expect(back.searchParams.get('state')).toBe('s1');
    expect(back.searchParams.get('iss')).toBe(stack.sidecar.publicUrl());
  });
});
