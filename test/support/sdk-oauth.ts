// The storage an interactive MCP client (Claude, VS Code, the Inspector) keeps for the SDK's OAuth
// flow, with the "open a browser" step recorded for a test to drive.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { CLIENT_REDIRECT } from './sign-in.ts';

export class RecordingProvider implements OAuthClientProvider {
  #client: OAuthClientInformationMixed | undefined;
  #tokens: OAuthTokens | undefined;
  #verifier = '';
  authorizationUrl: URL | undefined;
  readonly redirectUrl: string;
  constructor(redirectUrl: string = CLIENT_REDIRECT) {
    this.redirectUrl = redirectUrl;
  }
  readonly clientMetadata: OAuthClientMetadata = {
    client_name: 'SDK sign-in e2e',
    redirect_uris: [CLIENT_REDIRECT],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  };
  clientInformation() {
    return this.#client;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.#client = info;
  }
  tokens() {
    return this.#tokens;
  }
  saveTokens(tokens: OAuthTokens) {
    this.#tokens = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string) {
    this.#verifier = verifier;
  }
  codeVerifier() {
    return this.#verifier;
  }
}

/**
 * The SDK client's first connection: the sidecar's 401, discovery, registration, and the authorization
 * URL the client would open in a browser. The transport is the one to call finishAuth(code) on.
 */
export async function firstConnection(
  base: string,
  provider: RecordingProvider,
): Promise<{ transport: StreamableHTTPClientTransport; authorizationUrl: URL }> {
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { authProvider: provider });
  const refused = await new Client({ name: 'sign-in-test', version: '1' }).connect(transport).then(
    () => new Error('the first connection was not refused'),
    (err: unknown) => err,
  );
  if (!(refused instanceof UnauthorizedError)) throw refused;
  if (!provider.authorizationUrl) throw new Error('the SDK opened no authorization URL');
  return { transport, authorizationUrl: provider.authorizationUrl };
}

/** Connects an SDK client that uses the provider's (signed-in) tokens. */
export async function connectedClient(base: string, provider: RecordingProvider): Promise<Client> {
  const client = new Client({ name: 'sign-in-test', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { authProvider: provider }));
  return client;
}
