// Eight agent processes share one credentials file (what Claude Code or an MCP CLI keeps on disk):
// each loaded the same tokens at start, and when the access token expires, each official SDK client
// refreshes with the same refresh token, in any order within the minute. All must stay signed in,
// converging on one pair that the file then holds; a thief replaying the rotated token after the
// grace window still revokes the family.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_USER } from '../../demo/idp.ts';
import { decide, DEVICE_GRANT, enterCode, poll, registerDeviceClient, startDevice } from '../support/device.ts';
import { startSignInStack, tokenRequest, type SignInStack } from '../support/sign-in.ts';
import { UserAgent } from '../support/user-agent.ts';

interface CredentialsFile {
  client: OAuthClientInformationMixed;
  tokens: OAuthTokens;
}

/**
 * One process's view of the shared file: read once when the process starts (as CLIs do), written
 * whenever the SDK saves new tokens.
 */
class FileProvider implements OAuthClientProvider {
  readonly #path: string;
  #loaded: CredentialsFile;
  // The SDK refreshes only for a provider with a redirect URL (without one it runs the
  // client_credentials path), so the agent names a loopback URL it never uses (redirectToAuthorization throws).
  readonly redirectUrl = 'http://127.0.0.1:9/never-used';
  readonly clientMetadata: OAuthClientMetadata = {
    client_name: 'agent',
    redirect_uris: [],
    grant_types: [DEVICE_GRANT, 'refresh_token'],
    token_endpoint_auth_method: 'none',
  };
  constructor(path: string) {
    this.#path = path;
    this.#loaded = JSON.parse(readFileSync(path, 'utf8')) as CredentialsFile;
  }
  clientInformation() {
    return this.#loaded.client;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.#loaded = { ...this.#loaded, client: info };
  }
  tokens() {
    return this.#loaded.tokens;
  }
  saveTokens(tokens: OAuthTokens) {
    this.#loaded = { ...this.#loaded, tokens };
    writeFileSync(this.#path, JSON.stringify(this.#loaded));
  }
  redirectToAuthorization(): void {
    throw new Error('a signed-in agent must never be sent to sign in again');
  }
  saveCodeVerifier(): void {}
  codeVerifier(): string {
    throw new Error('no code flow here');
  }
}

let s: SignInStack;
let dir: string;

beforeAll(async () => {
  s = await startSignInStack();
  dir = mkdtempSync(join(tmpdir(), 'mcp-credentials-'));
});
afterAll(async () => {
  await s?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function callHeaders(provider: FileProvider): Promise<Record<string, string>> {
  const client = new Client({ name: 'agent', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${s.base}/mcp`), { authProvider: provider }));
  try {
    const result = (await client.callTool({ name: 'headers', arguments: {} })) as { content: Array<{ text: string }> };
    return JSON.parse(result.content[0]!.text) as Record<string, string>;
  } finally {
    await client.close();
  }
}

describe('parallel sessions on one refresh token', () => {
  it('eight SDK clients refresh with the same token within the minute, in turn: all stay signed in on one pair; a replay after the window revokes it', async () => {
    // Signed in once, by the device flow, as a CLI agent would be.
    const clientId = await registerDeviceClient(s.base);
    const d = await startDevice(s.base, clientId);
    const agent = new UserAgent();
    await decide(agent, s.base, await enterCode(agent, s.base, d.user_code), 'approve');
    const signedIn = await poll(s.base, clientId, d.device_code);
    expect(signedIn.status).toBe(200);
    const file = join(dir, 'credentials.json');
    const first = {
      access_token: signedIn.body.access_token as string,
      token_type: 'Bearer',
      refresh_token: signedIn.body.refresh_token as string,
    };
    writeFileSync(file, JSON.stringify({ client: { client_id: clientId }, tokens: first }));
    const processes = Array.from({ length: 8 }, () => new FileProvider(file));

    // The access token expires; each process refreshes on its next call, 7 s apart (56 s in all).
    s.stack.clock.advance(((signedIn.body.expires_in as number) + 1) * 1000);
    for (const [i, p] of processes.entries()) {
      const seen = await callHeaders(p).catch((err: unknown) => {
        throw new Error(
          `process ${i}: ${String(err)}\n${s.stack.logs
            .filter((l) => l.includes('token'))
            .slice(-5)
            .join('\n')}`,
        );
      });
      expect(seen['x-mcp-auth-subject']).toBe(DEMO_USER.sub);
      s.stack.clock.advance(7_000);
    }
    const held = processes.map((p) => p.tokens());
    expect(new Set(held.map((t) => t.refresh_token)).size).toBe(1);
    expect(held[0]!.refresh_token).not.toBe(first.refresh_token);
    expect((JSON.parse(readFileSync(file, 'utf8')) as CredentialsFile).tokens.refresh_token).toBe(held[0]!.refresh_token);
    // Still signed in, every one of them.
    for (const p of processes) expect((await callHeaders(p))['x-mcp-auth-client-id']).toBe(clientId);

    // A thief replays the rotated token after the grace window: the family is revoked, for all.
    s.stack.clock.advance(s.stack.sidecar.config.oauth.refreshReuseGraceSeconds * 1000);
    const theft = await tokenRequest(s.base, { grant_type: 'refresh_token', client_id: clientId, refresh_token: first.refresh_token });
    expect([theft.status, theft.body.error]).toEqual([400, 'invalid_grant']);
    const after = await fetch(`${s.base}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${held[0]!.access_token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
      }),
    });
    await after.text();
    expect(after.status).toBe(401);
    const refreshAfter = await tokenRequest(s.base, {
      grant_type: 'refresh_token',
      client_id: clientId,
      refresh_token: held[0]!.refresh_token!,
    });
    expect(refreshAfter.body.error).toBe('invalid_grant');
  });
});
