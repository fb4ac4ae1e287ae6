// The sidecar and the demo as real processes, started the way production and the README start them:
// the Dockerfile's CMD (what a container runs) against real Redis, SIGTERM while a GET stream is open and
// a streamed tools/call is in flight; and `npm run demo`'s entry point, whose printed token must work.

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startUpstream, type RunningUpstream } from '../../examples/upstream/server.ts';
import {
  approveAndSignIn,
  authorizeUrl,
  CLIENT_REDIRECT,
  clientReceived,
  pkce,
  registerPublicClient,
  standardParams,
  tokenRequest,
} from '../support/sign-in.ts';
import { loginFormAction, UserAgent } from '../support/user-agent.ts';
import { decide, enterCode, poll, registerDeviceClient, startDevice } from '../support/device.ts';
import { keysUnder, rawRedis } from '../support/redis.ts';
import { rawSession } from '../support/sse.ts';
import { sigtermDuringCall, startProcess, startSidecarProcess, type SidecarProcess } from '../support/process.ts';
import { nodeTs, RUN_TS } from '../support/node-ts.ts';

/** The Dockerfile's CMD, exec form: what a container runs (the last stage's, the default target). */
function dockerCmd(): string[] {
  const line = readFileSync('Dockerfile', 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('CMD '))
    .at(-1);
  expect(line, 'Dockerfile has a CMD').toBeDefined();
  const argv = JSON.parse(line!.slice(4)) as string[];
  expect(argv[0]).toBe('node');
  return [process.execPath, ...RUN_TS, ...argv.slice(1)];
}

function baseEnv(extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, ...extra };
  return env;
}

describe('the container entry command as a plain process, against real Redis', () => {
  let upstream: RunningUpstream;
  let prefix: string;
  let sidecar: SidecarProcess;
  let proxyUrl: string;

  beforeAll(async () => {
    upstream = await startUpstream({ host: '127.0.0.1', port: 0 });
    // Only what the environment cannot say goes in the file: the test's own key prefix (and the
    // master token, by reference to the environment).
    sidecar = await startSidecarProcess(
      'process',
      dockerCmd(),
      baseEnv({ UPSTREAM_URL: upstream.url, HOST: '127.0.0.1', PORT: '0', ADMIN_PORT: '0', LOG_LEVEL: 'info' }),
      ['masterToken: ${BEARER_SECRET_MASTER}'],
    );
    ({ prefix, proxyUrl } = sidecar);
  });

  afterAll(async () => {
    await sidecar?.cleanup();
    await upstream?.close();
  });

  it('serves MCP with an issued token, then on SIGTERM lets the in-flight call finish, ends the GET stream and exits 0', async () => {
    const admin = async (op: string, body: Record<string, unknown>) => {
      const answer = await sidecar.admin(op, body);
      expect(answer.status).toBe(201);
      return answer.body;
    };
    const { clientId } = await admin('createClient', { clientName: 'process-test' });
    const { accessToken } = await admin('createAccessToken', { clientId, lifetimeSeconds: 600 });
    const raw = await rawRedis();
    expect((await keysUnder(raw, prefix)).length).toBeGreaterThan(0); // it wrote under the configured prefix
    await raw.quit();

    const mcpUrl = `${proxyUrl}/mcp`;
    const session = await rawSession(mcpUrl, { authorization: `Bearer ${accessToken}` });
    const get = await fetch(mcpUrl, { headers: session.headers() });
    expect(get.status).toBe(200);
    const getEnded = get.body!.pipeTo(new WritableStream()).then(
      () => 'ended',
      () => 'reset',
    );

    const all = await sigtermDuringCall(sidecar, mcpUrl, session.headers());
    expect(all.map((e) => JSON.parse(e.data).method ?? 'result')).toEqual([...Array(4).fill('notifications/progress'), 'result']);

    expect(await getEnded).toBe('ended'); // ended cleanly (the client may resume elsewhere), not reset
    expect(await sidecar.exit).toBe(0);
    expect(sidecar.output()).toMatch(/"msg":"shut down"/);
    await expect(fetch(mcpUrl)).rejects.toThrow();
  });
});

describe('npm run demo (demo/main.ts) as a process', () => {
  it('prints an MCP URL and a token that the SDK client can use, and exits 0 on SIGTERM', async () => {
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> };
    // The script's own command, run with this test's Node: on a Node below 22.18 its --import gives
    // the sources tsx's loader, on a newer one it changes nothing.
    const [node, ...args] = pkg.scripts.demo!.split(' ');
    expect([node, args.at(-1)]).toEqual(['node', 'demo/main.ts']);
    const demo = await startProcess([process.execPath, ...args], baseEnv({ PORT: '0', ADMIN_PORT: '0', UPSTREAM_PORT: '0' }), [
      /MCP URL:\s+(\S+)/,
      /Authorization:\s+Bearer ([0-9a-f]{64})/,
      /Ctrl-C stops everything/,
    ]);
    try {
      const mcpUrl = /MCP URL:\s+(\S+)/.exec(demo.output())![1]!;
      const token = /Authorization:\s+Bearer ([0-9a-f]{64})/.exec(demo.output())![1]!;
      const out = demo.output();
      const configStart = out.indexOf('MCP client config (type: http):\n') + 'MCP client config (type: http):\n'.length;
      const printed = JSON.parse(out.slice(configStart, out.indexOf('\n\n', configStart)));
      expect(printed.mcpServers['mcp-bearer-proxy-demo']).toEqual({
        type: 'http',
        url: mcpUrl,
        headers: { Authorization: `Bearer ${token}` },
      });

      const client = new Client({ name: 'demo-test', version: '1.0.0' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
      );
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).toContain('echo');
      await client.close();

      // The first tool call it prints, pasted into bash as a newcomer would: the echo comes back.
      const pasted = /-----\n([\s\S]*?)\n-----/.exec(out)![1]!;
      const ran = spawnSync('bash', ['-c', pasted], { encoding: 'utf8', timeout: 20_000 });
      expect(ran.status).toBe(0);
      expect(ran.stdout).toContain('"text":"hello through the sidecar"');

      const refused = await fetch(mcpUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      expect(refused.status).toBe(401);

      // Browser sign-in through the demo's own (demo-only) OpenID provider, as its output describes.
      expect(out).toMatch(/DEMO ONLY, not for production: one test user, demo \/ demo/);
      const base = mcpUrl.slice(0, -'/mcp'.length);
      const clientId = await registerPublicClient(base);
      const p = pkce();
      const agent = new UserAgent();
      const atIdp = await approveAndSignIn(agent, base, authorizeUrl(base, standardParams(base, clientId, p)));
      expect(atIdp.body).toContain('DEMO identity provider');
      const signedIn = await agent.request(loginFormAction(atIdp.body, atIdp.url), {
        form: { username: 'demo', password: 'demo', action: 'login' },
      });
      const code = clientReceived(await agent.follow(signedIn, CLIENT_REDIRECT)).get('code')!;
      const tokens = await tokenRequest(base, {
        grant_type: 'authorization_code',
        code,
        redirect_uri: CLIENT_REDIRECT,
        client_id: clientId,
        code_verifier: p.verifier,
      });
      expect(tokens.status).toBe(200);
      const signedInClient = new Client({ name: 'demo-sign-in', version: '1.0.0' });
      await signedInClient.connect(
        new StreamableHTTPClientTransport(new URL(mcpUrl), {
          requestInit: { headers: { authorization: `Bearer ${tokens.body.access_token as string}` } },
        }),
      );
      expect((await signedInClient.listTools()).tools.length).toBeGreaterThan(0);
      await signedInClient.close();
    } finally {
      demo.child.kill('SIGTERM');
    }
    expect(await demo.exit).toBe(0);
  });

  it("takes npm start's flags: short-lived tokens and the device flow, tried on the demo; a bad flag exits 2 with the reason", async () => {
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> };
    const [, ...args] = pkg.scripts.demo!.split(' ');
    const demo = await startProcess(
      [process.execPath, ...args, '--oauth.profiles.interactive.accessTokenLifetimeSeconds', '120', '--proxy.port', '0', '--admin.port=0'],
      baseEnv({ UPSTREAM_PORT: '0' }),
      [/MCP URL:\s+(\S+)/, /Ctrl-C stops everything/],
    );
    try {
      const out = demo.output();
      expect(out).toContain('/device_authorization');
      const base = /MCP URL:\s+(\S+)/.exec(out)![1]!.slice(0, -'/mcp'.length);
      // The device flow as an agent takes it, the user signing in at the demo's identity provider.
      const clientId = await registerDeviceClient(base);
      const d = await startDevice(base, clientId);
      const agent = new UserAgent();
      const atIdp = await decide(agent, base, await enterCode(agent, base, d.user_code), 'approve');
      const signedIn = await agent.request(loginFormAction(atIdp.body, atIdp.url), {
        form: { username: 'demo', password: 'demo', action: 'login' },
      });
      expect((await agent.follow(signedIn)).body).toContain('Device signed in');
      const tokens = await poll(base, clientId, d.device_code);
      expect(tokens.status).toBe(200);
      // The flag took effect: the interactive profile's access tokens live 120 s on this demo.
      expect(tokens.body.expires_in).toBe(120);
    } finally {
      demo.child.kill('SIGTERM');
    }
    expect(await demo.exit).toBe(0);

    const bad = await startProcess(
      [process.execPath, ...args, '--store', 'redis', '--proxy.port', '0', '--admin.port', '0'],
      baseEnv({ UPSTREAM_PORT: '0' }),
      [],
    );
    expect(await bad.exit).toBe(2);
    expect(bad.output()).toContain('--store: the demo uses its own store');
  });
});
