// `npm run demo`: one process, no external service. The reference MCP upstream, the sidecar in front
// of it on the in-memory store, a generated master token, a freshly issued token ready to paste, and
// browser and device sign-in through a DEMO-ONLY OpenID provider (demo/idp.ts: one test user) so
// that OAuth clients such as the MCP Inspector sign in with no setup.
// It takes the same flags, config file and environment as `npm start` where they make sense for the
// demo (demo/config.ts).

import { randomBytes } from 'node:crypto';
import { ConfigError, type Config } from '../src/config/load.ts';
import { demoConfig, DEMO_USAGE as USAGE } from './config.ts';
import { createSidecar } from '../src/app.ts';
import { createLogger } from '../src/observability/logger.ts';
import { adminOperations } from '../src/admin/operations.ts';
import { systemClock } from '../src/model/clock.ts';
import { startUpstream } from '../examples/upstream/server.ts';
import { DEMO_USER, startDemoIdp, type DemoIdp } from './idp.ts';

const IDP_CLIENT_ID = 'mcp-bearer-proxy-demo';

/** The demo IdP, or why there is none (it needs the oidc-provider dev dependency). */
async function demoIdp(clientSecret: string, publicUrl: () => string): Promise<DemoIdp | string> {
  try {
    return await startDemoIdp({
      host: '127.0.0.1',
      port: Number(process.env.IDP_PORT ?? 0),
      clientId: IDP_CLIENT_ID,
      clientSecret,
      redirectUri: () => `${publicUrl()}/oauth/callback`,
    });
  } catch (err) {
    return (err as Error).message;
  }
}

async function main(): Promise<void> {
  const upstream = await startUpstream({ host: '127.0.0.1', port: Number(process.env.UPSTREAM_PORT ?? 0) });
  let sidecarUrl = '';
  const idpSecret = randomBytes(32).toString('hex');
  const idp = await demoIdp(idpSecret, () => sidecarUrl);
  let config: Config | 'help';
  try {
    config = demoConfig({
      argv: process.argv.slice(2),
      env: process.env,
      upstreamUrl: upstream.url,
      ...(typeof idp === 'string' ? {} : { idp: { issuer: idp.issuer, clientId: IDP_CLIENT_ID, clientSecret: idpSecret } }),
      generatedMasterToken: randomBytes(32).toString('hex'),
    });
  } catch (err) {
    await upstream.close();
    if (typeof idp !== 'string') await idp.close();
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(
      `the demo's configuration is invalid, fix these and start again:\n${err.problems.map((p) => `  - ${p}`).join('\n')}\n${USAGE}\n`,
    );
    process.exit(2);
  }
  if (config === 'help') {
    process.stdout.write(`${USAGE}\n`);
    await upstream.close();
    if (typeof idp !== 'string') await idp.close();
    process.exit(0);
  }
  const masterToken = config.masterToken;
  const logger = createLogger(config.logLevel, undefined, config.logFormat);
  const sidecar = await createSidecar({ config, logger });
  const { proxyUrl, adminUrl } = await sidecar.listen();
  sidecarUrl = sidecar.publicUrl();

  // Issue through the same admin operations an admin would call over HTTP.
  const ctx = { store: sidecar.store, clock: systemClock, metrics: sidecar.metrics, profileLifetimes: config.oauth.profiles };
  await adminOperations.seedDefaultProfiles!(ctx, {});
  const client = (await adminOperations.createClient!(ctx, { clientName: 'demo client' })).body as { clientId: string };
  const issued = (await adminOperations.createAccessToken!(ctx, { clientId: client.clientId, lifetimeSeconds: 86400 })).body as {
    accessToken: string;
  };
  const mcpUrl = `${sidecar.publicUrl()}/mcp`;
  const clientConfig = {
    mcpServers: { 'mcp-bearer-proxy-demo': { type: 'http', url: mcpUrl, headers: { Authorization: `Bearer ${issued.accessToken}` } } },
  };
  process.stdout.write(
    [
      `upstream listening on ${upstream.url}`,
      `proxy listening on ${proxyUrl}`,
      `admin listening on ${adminUrl}`,
      '',
      `MCP URL:        ${mcpUrl}`,
      `Authorization:  Bearer ${issued.accessToken}`,
      `  (an OAuth access token for client ${client.clientId}, valid 24 h, in the in-memory store)`,
      `Master token:   ${masterToken}`,
      `  (${process.env.BEARER_SECRET_MASTER ? 'from BEARER_SECRET_MASTER' : 'generated for this demo run only'}; admin operations: POST ${adminUrl}/oauth/<operation>)`,
      '',
      'MCP client config (type: http):',
      JSON.stringify(clientConfig, null, 2),
      '',
      'Your first tool call (bash or zsh; paste the lines between the rules):',
      ...firstToolCall(mcpUrl, issued.accessToken),
      '',
      ...signInHelp(idp, mcpUrl),
      'Ctrl-C stops everything.',
      '',
    ].join('\n'),
  );

  const stop = () => {
    void sidecar
      .shutdown(2000)
      .then(() => upstream.close())
      .then(() => (typeof idp === 'string' ? undefined : idp.close()))
      .then(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

/**
 * A session as an MCP client runs it, in curl: initialize (the upstream's answer names the session),
 * notifications/initialized, then tools/call of the reference upstream's echo tool.
 */
export function firstToolCall(mcpUrl: string, token: string): string[] {
  const version = "-H 'MCP-Protocol-Version: 2025-06-18'";
  return [
    '-----',
    `MCP=${mcpUrl}`,
    `H=(-H 'Authorization: Bearer ${token}' -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')`,
    `SID=$(curl -s -D - -o /dev/null "$MCP" "\${H[@]}" -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}' | tr -d '\\r' | awk -F': ' 'tolower($1) == "mcp-session-id" { print $2 }')`,
    `curl -s "$MCP" "\${H[@]}" -H "Mcp-Session-Id: $SID" ${version} -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'`,
    `curl -s "$MCP" "\${H[@]}" -H "Mcp-Session-Id: $SID" ${version} -d '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello through the sidecar"}}}'`,
    '-----',
  ];
}

function signInHelp(idp: DemoIdp | string, mcpUrl: string): string[] {
  if (typeof idp === 'string') return [`Browser sign-in: off (${idp})`, ''];
  return [
    `Browser sign-in through a DEMO identity provider at ${idp.issuer}`,
    `  (DEMO ONLY, not for production: one test user, ${DEMO_USER.username} / ${DEMO_USER.password}, keys in memory)`,
    '  MCP Inspector (2.12): npx @modelcontextprotocol/inspector',
    `    Add Servers -> Add manually -> transport streamable-http, URL ${mcpUrl}, no Authorization header, then Connect:`,
    `    approve on this sidecar's consent page, then sign in as ${DEMO_USER.username} / ${DEMO_USER.password}.`,
    "  Any MCP client with OAuth (Claude Code, VS Code, the MCP SDK's auth()): configure only the URL.",
    `  Device sign-in (RFC 8628, for agents without a browser): POST ${mcpUrl.slice(0, -4)}/device_authorization, then`,
    `    enter the code at ${mcpUrl.slice(0, -4)}/device (docs/device-flow.md).`,
    '  Short-lived tokens to try refresh: npm run demo -- --oauth.profiles.interactive.accessTokenLifetimeSeconds 60',
    '',
  ];
}

main().catch((err: unknown) => {
  process.stderr.write(`demo failed to start: ${(err as Error).message}\n`);
  process.exit(1);
});
