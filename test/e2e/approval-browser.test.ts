// Approval end to end in a real browser: the official MCP SDK clients of both lines (on 2025-11-25,
// declaring URL elicitation) call a tool an `approve` rule holds, through one sidecar; each gets the
// SDK's UrlElicitationRequiredError; the 2.x client pinned to 2026-07-28 gets `input_required`, its
// elicitation handler does the approving and the SDK retries with the signed requestState. Debian's chromium (playwright-core, JavaScript off: the page needs
// none) opens the link on the other sidecar (two sidecars, one Redis, one PUBLIC_URL, as two replicas
// behind a load balancer), signs in at a real OpenID provider (oidc-provider, in this process), sees the
// call and approves it; the client's retry then runs once on the upstream.

import { Client as Client1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as Transport1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UrlElicitationRequiredError as UrlElicitationRequired1 } from '@modelcontextprotocol/sdk/types.js';
import {
  Client as Client2,
  StreamableHTTPClientTransport as Transport2,
  UrlElicitationRequiredError as UrlElicitationRequired2,
} from '@modelcontextprotocol/client';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_USER } from '../../demo/idp.ts';
import { launchChromium } from '../support/chromium.ts';
import {
  authorizeUrl,
  CLIENT_REDIRECT,
  clientReceived,
  pkce,
  registerPublicClient,
  standardParams,
  startSignInStack,
  tokenRequest,
  type SignInStack,
} from '../support/sign-in.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { consentRequestId, UserAgent } from '../support/user-agent.ts';

const POLICY = {
  default: 'allow',
  rules: [
    {
      name: 'loud-echo-confirmed-by-the-user',
      effect: 'approve',
      requests: { methods: ['tools/call'], names: ['echo'] },
      arguments: [{ path: '/text', prefix: 'LOUD' }],
      approval: { approvers: 'self' },
    },
  ],
};

let browser: Browser;
let s: SignInStack;
let replica: Stack;
let token: string;

/** A sign-in of the demo user through a public client, the code redeemed: its access token. */
async function signIn(): Promise<string> {
  const clientId = await registerPublicClient(s.base, { client_name: 'Approval e2e' });
  const agent = new UserAgent();
  const p = pkce();
  const pageHop = await agent.request(authorizeUrl(s.base, standardParams(s.base, clientId, p)));
  const hop = await agent.follow(
    await agent.request(`${s.base}/authorize/consent`, { form: { request: consentRequestId(pageHop.body), decision: 'approve' } }),
    CLIENT_REDIRECT,
  );
  const tokens = await tokenRequest(s.base, {
    grant_type: 'authorization_code',
    code: clientReceived(hop).get('code')!,
    redirect_uri: CLIENT_REDIRECT,
    client_id: clientId,
    code_verifier: p.verifier,
  });
  return tokens.body.access_token as string;
}

beforeAll(async () => {
  browser = await launchChromium();
  s = await startSignInStack({ config: { policy: POLICY } });
  // The second sidecar: same Redis and key prefix, same PUBLIC_URL and IdP, the same upstream.
  replica = await startStack({
    upstreamUrl: s.stack.upstream!.url,
    prefix: s.stack.prefix,
    config: { policy: POLICY, proxy: { publicUrl: s.base }, idp: s.stack.sidecar.config.idp },
  });
  token = await signIn();
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await replica?.close();
  await s?.close();
});

/** Chromium opens `url` (signing in at the IdP on the way), checks the call is shown, and approves it. */
async function approveInBrowser(url: string, text: string): Promise<void> {
  const context = await browser.newContext({ javaScriptEnabled: false });
  try {
    const page = await context.newPage();
    await page.goto(url);
    await page.getByRole('button', { name: 'Approve' }).waitFor();
    expect(await page.locator('pre').textContent()).toContain(JSON.stringify(text).slice(1, -1));
    expect(await page.content()).not.toContain('<b>bold</b>');
    expect(await page.textContent('body')).toContain(DEMO_USER.sub);
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.getByText(`approved by ${DEMO_USER.email}`).waitFor();
  } finally {
    await context.close();
  }
}

const LINES = [
  {
    line: '1.x',
    connect: async (url: string) => {
      const client = new Client1({ name: 'sdk1', version: '1' }, { capabilities: { elicitation: { url: {} } } });
      await client.connect(new Transport1(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
      return client;
    },
    Elicitation: UrlElicitationRequired1,
  },
  {
    line: '2.x',
    connect: async (url: string) => {
      const client = new Client2({ name: 'sdk2', version: '1' }, { capabilities: { elicitation: { url: {} } } });
      await client.connect(new Transport2(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
      return client;
    },
    Elicitation: UrlElicitationRequired2,
  },
] as const;

describe('approval in a browser, SDK clients of both lines, two sidecars', () => {
  for (const { line, connect, Elicitation } of LINES) {
    it(`SDK ${line}: held (-32042), approved in chromium on the other sidecar, the retry runs once`, async () => {
      const client = await connect(replica.mcpUrl);
      const text = `LOUD from the ${line} client <b>bold</b>`;
      try {
        const err = await client.callTool({ name: 'echo', arguments: { text } }).then(
          () => expect.unreachable(),
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(Elicitation);
        const { url } = (err as InstanceType<typeof Elicitation>).elicitations[0]!;
        expect(url.startsWith(`${s.base}/approve/`)).toBe(true);
        await approveInBrowser(url, text);
        const before = s.stack.upstream!.toolCalls.length;
        expect(await client.callTool({ name: 'echo', arguments: { text } })).toMatchObject({ content: [{ text }] });
        expect(s.stack.upstream!.toolCalls.length).toBe(before + 1);
        await expect(client.callTool({ name: 'echo', arguments: { text } })).rejects.toBeInstanceOf(Elicitation);
      } finally {
        await client.close();
      }
    });
  }

  it('SDK 2.x pinned to 2026-07-28: input_required; its elicitation handler approves in chromium; the SDK retries with the requestState and the call runs once', async () => {
    const client = new Client2(
      { name: 'sdk2-modern', version: '1' },
      { capabilities: { elicitation: { url: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    const text = 'LOUD from the 2026-07-28 client <b>bold</b>';
    const asked: string[] = [];
    client.setRequestHandler('elicitation/create', async (request) => {
      const params = request.params as { mode?: string; url?: string };
      expect(params.mode).toBe('url');
      asked.push(params.url!);
      await approveInBrowser(params.url!, text);
      return { action: 'accept' };
    });
    await client.connect(new Transport2(new URL(replica.mcpUrl), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    try {
      const before = s.stack.upstream!.toolCalls.length;
      expect(await client.callTool({ name: 'echo', arguments: { text } })).toMatchObject({ content: [{ text }] });
      expect(asked).toHaveLength(1);
      expect(asked[0]!.startsWith(`${s.base}/approve/`)).toBe(true);
      expect(s.stack.upstream!.toolCalls.length).toBe(before + 1);
    } finally {
      await client.close();
    }
  });
});
