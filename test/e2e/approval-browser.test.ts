// Approval end to end in a real browser: the official MCP SDK clients of both lines (on 2025-11-25,
// declaring URL elicitation) call a tool an `approve` rule holds, through one sidecar; each gets the
// SDK's UrlElicitationRequiredError; the 2.x client pinned to 2026-07-28 gets `input_required`, its
// elicitation handler does the approving and the SDK retries with the signed requestState. Debian's chromium (playwright-core, JavaScript off: the page needs
// none) opens the link on the other sidecar (two sidecar PROCESSES started as production starts them,
// bin/mcp-bearer-proxy.js, on one Redis with one PUBLIC_URL, as two replicas behind a load balancer),
// signs in at a real OpenID provider (oidc-provider, in this process), sees the call and approves it;
// the client's retry then runs once on the reference upstream.

import { Client as Client1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as Transport1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UrlElicitationRequiredError as UrlElicitationRequired1 } from '@modelcontextprotocol/sdk/types.js';
import {
  Client as Client2,
  StreamableHTTPClientTransport as Transport2,
  UrlElicitationRequiredError as UrlElicitationRequired2,
} from '@modelcontextprotocol/client';
import { randomBytes } from 'node:crypto';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startUpstream, type RunningUpstream } from '../../examples/upstream/server.ts';
import { DEMO_USER, startDemoIdp, type DemoIdp } from '../../demo/idp.ts';
import { launchChromium } from '../support/chromium.ts';
import { freePort } from '../support/ports.ts';
import { startSidecarProcess, type SidecarProcess } from '../support/process.ts';
import {
  authorizeUrl,
  CLIENT_REDIRECT,
  clientReceived,
  pkce,
  registerPublicClient,
  standardParams,
  tokenRequest,
} from '../support/sign-in.ts';
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
let idp: DemoIdp;
let upstream: RunningUpstream;
/** The sidecar whose address is PUBLIC_URL (the pages, sign-in), and a second one on the same Redis. */
let a: SidecarProcess;
let b: SidecarProcess;
let base: string;
let token: string;

/** A sign-in of the demo user through a public client, the code redeemed: its access token. */
async function signIn(): Promise<string> {
  const clientId = await registerPublicClient(base, { client_name: 'Approval e2e' });
  const agent = new UserAgent();
  const p = pkce();
  const pageHop = await agent.request(authorizeUrl(base, standardParams(base, clientId, p)));
  const hop = await agent.follow(
    await agent.request(`${base}/authorize/consent`, { form: { request: consentRequestId(pageHop.body), decision: 'approve' } }),
    CLIENT_REDIRECT,
  );
  const tokens = await tokenRequest(base, {
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
  const port = await freePort();
  base = `http://localhost:${port}`;
  const clientSecret = randomBytes(32).toString('hex');
  idp = await startDemoIdp({ clientId: 'mcp-bearer-proxy', clientSecret, redirectUri: () => `${base}/oauth/callback`, autoLogin: true });
  upstream = await startUpstream({ host: '127.0.0.1', port: 0 });
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    HOST: '127.0.0.1',
    ADMIN_PORT: '0',
    LOG_LEVEL: 'warn',
    UPSTREAM_URL: upstream.url,
    PUBLIC_URL: base,
    IDP_ISSUER: idp.issuer,
    IDP_CLIENT_ID: 'mcp-bearer-proxy',
    IDP_CLIENT_SECRET: clientSecret,
  };
  const argv = [process.execPath, 'bin/mcp-bearer-proxy.js'];
  const config = [`policy: ${JSON.stringify(POLICY)}`];
  a = await startSidecarProcess('approval-a', argv, { ...env, PORT: String(port) }, config);
  b = await startSidecarProcess('approval-b', argv, { ...env, PORT: '0' }, config, a);
  token = await signIn();
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await b?.cleanup();
  await a?.cleanup();
  await upstream?.close();
  await idp?.close();
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
      const client = await connect(`${b.proxyUrl}/mcp`);
      const text = `LOUD from the ${line} client <b>bold</b>`;
      try {
        const err = await client.callTool({ name: 'echo', arguments: { text } }).then(
          () => expect.unreachable(),
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(Elicitation);
        const { url } = (err as InstanceType<typeof Elicitation>).elicitations[0]!;
        expect(url.startsWith(`${base}/approve/`)).toBe(true);
        await approveInBrowser(url, text);
        const before = upstream.toolCalls.length;
        expect(await client.callTool({ name: 'echo', arguments: { text } })).toMatchObject({ content: [{ text }] });
        expect(upstream.toolCalls.length).toBe(before + 1);
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
    await client.connect(new Transport2(new URL(`${b.proxyUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    try {
      const before = upstream.toolCalls.length;
      expect(await client.callTool({ name: 'echo', arguments: { text } })).toMatchObject({ content: [{ text }] });
      expect(asked).toHaveLength(1);
      expect(asked[0]!.startsWith(`${base}/approve/`)).toBe(true);
      expect(upstream.toolCalls.length).toBe(before + 1);
    } finally {
      await client.close();
    }
  });
});
