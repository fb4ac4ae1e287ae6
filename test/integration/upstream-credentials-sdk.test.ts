// A user without a connected account (mode `oauth`), through the official MCP TypeScript SDK clients of
// both lines (@modelcontextprotocol/sdk 1.x, @modelcontextprotocol/client 2.x) against an SDK server
// behind the sidecar, once on each SDK line (test/support/upstream-sdk1.ts, examples/upstream/server.ts):
// the client connects and lists tools (the handshake and the lists go through without the user's
// credential), then its first tool call gets the link. A client that declared URL-mode elicitation
// (ClientCapabilities.elicitation.url, MCP 2025-11-25) gets the SDK's UrlElicitationRequiredError
// (-32042); one that did not gets a tool result with isError and the link in its text. Nothing
// needing the user's credential reaches the upstream.

import { randomBytes } from 'node:crypto';
import { Client as Client1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as Transport1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UrlElicitationRequiredError as UrlElicitationRequired1 } from '@modelcontextprotocol/sdk/types.js';
import {
  Client as Client2,
  StreamableHTTPClientTransport as Transport2,
  UrlElicitationRequiredError as UrlElicitationRequired2,
} from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { URL_ELICITATION_REQUIRED } from '../../src/policy/enforce.ts';
import { startUpstream as startSdk1Upstream, type RunningUpstream } from '../support/upstream-sdk1.ts';
import { startSignInStack, type SignInStack } from '../support/sign-in.ts';
import { storeUserToken } from '../support/user-tokens.ts';

const KEY = randomBytes(32).toString('hex');
/** Never contacted: no user follows a link here. */
const PROVIDER = 'https://provider.example';

/** What each SDK line's client is asked to do, the same way. */
interface SdkClient {
  listTools(): Promise<string[]>;
  callTool(name: string, args: Record<string, unknown>): Promise<{ isError?: boolean; content: Array<{ type: string; text?: string }> }>;
  close(): Promise<void>;
}

async function connect1(base: string, token: string, urlElicitation: boolean): Promise<SdkClient> {
  const client = new Client1({ name: 'sdk1', version: '1' }, { capabilities: urlElicitation ? { elicitation: { url: {} } } : {} });
  await client.connect(new Transport1(new URL(`${base}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  return {
    listTools: async () => (await client.listTools()).tools.map((t) => t.name),
    callTool: async (name, args) => (await client.callTool({ name, arguments: args })) as Awaited<ReturnType<SdkClient['callTool']>>,
    close: () => client.close(),
  };
}

async function connect2(base: string, token: string, urlElicitation: boolean): Promise<SdkClient> {
  const client = new Client2({ name: 'sdk2', version: '1' }, { capabilities: urlElicitation ? { elicitation: { url: {} } } : {} });
  await client.connect(new Transport2(new URL(`${base}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  return {
    listTools: async () => (await client.listTools()).tools.map((t) => t.name),
    callTool: async (name, args) => (await client.callTool({ name, arguments: args })) as Awaited<ReturnType<SdkClient['callTool']>>,
    close: () => client.close(),
  };
}

const CLIENTS = [
  { line: '1.x', connect: connect1, UrlElicitationRequired: UrlElicitationRequired1 },
  { line: '2.x', connect: connect2, UrlElicitationRequired: UrlElicitationRequired2 },
] as const;

for (const upstreamLine of ['1.x', '2.x'] as const) {
  describe(`a user without a connected account, SDK clients in front of an SDK ${upstreamLine} server`, () => {
    let s: SignInStack;
    let sdk1: RunningUpstream | undefined;
    const clients: SdkClient[] = [];
    const what = `connect your ${new URL(PROVIDER).host} account`;

    /** A user-grade token of a new user, who has connected nothing. */
    function freshUser(): Promise<string> {
      return storeUserToken(s.stack, `user-${randomBytes(4).toString('hex')}`, { issuer: s.idp.issuer, lifetimeMs: 3_600_000 });
    }

    /** The headers of the latest requests the upstream received. */
    function upstreamHeaders(): Array<Record<string, string | string[] | undefined>> {
      return (sdk1 ?? s.stack.upstream!).seenHeaders;
    }

    beforeAll(async () => {
      if (upstreamLine === '1.x') sdk1 = await startSdk1Upstream({ host: '127.0.0.1', port: 0 });
      s = await startSignInStack({
        ...(sdk1 ? { upstreamUrl: sdk1.url } : {}),
        config: {
          upstream: {
            credentials: {
              mode: 'oauth',
              key: KEY,
              provider: {
                authorizationEndpoint: `${PROVIDER}/authorize`,
                tokenEndpoint: `${PROVIDER}/token`,
                clientId: 'third-party-app',
                clientSecret: 'provider-secret',
                scopes: 'repo',
              },
            },
          },
        },
      });
    });
    afterAll(async () => {
      await Promise.allSettled(clients.map((c) => c.close()));
      await s?.close();
      await sdk1?.close();
    });

    for (const { line, connect, UrlElicitationRequired } of CLIENTS) {
      it(`SDK ${line} client declaring URL elicitation: connects, lists tools, then its tool call throws UrlElicitationRequiredError with the link`, async () => {
        const token = await freshUser();
        const client = await connect(s.base, token, true);
        clients.push(client);
        expect(await client.listTools()).toContain('echo');
        const err = await client.callTool('echo', { text: 'hi' }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(UrlElicitationRequired);
        const elicitation = err as InstanceType<typeof UrlElicitationRequired>;
        expect(elicitation.code).toBe(URL_ELICITATION_REQUIRED);
        const [only] = elicitation.elicitations;
        expect(only).toMatchObject({ mode: 'url', url: expect.stringMatching(new RegExp(`^${s.base}/connect/`)) });
        expect(elicitation.message).toContain(`${what}: open ${only!.url} in a browser, then retry`);
        // No tool call reached the upstream, and no request carried an Authorization (no service token here).
        expect(s.stack.upstream?.toolCalls ?? []).toEqual([]);
        for (const headers of upstreamHeaders()) expect(headers.authorization).toBeUndefined();
      });

      it(`SDK ${line} client without URL elicitation: connects, lists tools, then its tool call returns a tool error whose text names the link`, async () => {
        const token = await freshUser();
        const client = await connect(s.base, token, false);
        clients.push(client);
        expect(await client.listTools()).toContain('echo');
        const result = await client.callTool('echo', { text: 'hi' });
        expect(result.isError).toBe(true);
        expect(result.content).toHaveLength(1);
        expect(result.content[0]!.type).toBe('text');
        expect(result.content[0]!.text).toMatch(new RegExp(`^${what}: open ${s.base}/connect/\\S+ in a browser, then retry$`));
        expect(s.stack.upstream?.toolCalls ?? []).toEqual([]);
        for (const headers of upstreamHeaders()) expect(headers.authorization).toBeUndefined();
      });
    }
  });
}
