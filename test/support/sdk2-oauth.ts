// The MCP TypeScript SDK's 2.x client (@modelcontextprotocol/client) as an interactive MCP client
// runs it: the provider storage its OAuth flow reads and writes, the "open a browser" step recorded
// for a test to drive, and, when asked for, a DpopSession (RFC 9449) that the SDK signs its token
// requests and every request to the MCP server with. test/support/sdk-oauth.ts is the same for 1.x.

import {
  Client,
  DpopSession,
  StreamableHTTPClientTransport,
  UnauthorizedError,
  type OAuthClientProvider,
} from '@modelcontextprotocol/client';
import { CLIENT_REDIRECT } from './sign-in.ts';

type Provider2 = Required<Pick<OAuthClientProvider, 'saveClientInformation'>> & OAuthClientProvider;
type ClientInformation = Awaited<ReturnType<OAuthClientProvider['clientInformation']>>;
type Tokens = Awaited<ReturnType<OAuthClientProvider['tokens']>>;
type DiscoveryState = Parameters<NonNullable<OAuthClientProvider['saveDiscoveryState']>>[0];

export class RecordingProvider2 implements Provider2 {
  #client: ClientInformation;
  #tokens: Tokens;
  #verifier = '';
  #discovery: DiscoveryState | undefined;
  readonly #dpop: Promise<DpopSession> | undefined;
  authorizationUrl: URL | undefined;
  readonly redirectUrl = CLIENT_REDIRECT;
  readonly clientMetadata = {
    client_name: 'SDK 2.x sign-in e2e',
    redirect_uris: [CLIENT_REDIRECT],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  };

  /** `dpop`: the SDK binds tokens to a key of its own and presents them with proofs (one session, one key). */
  constructor(options: { dpop?: boolean } = {}) {
    this.#dpop = options.dpop ? DpopSession.create() : undefined;
  }
  dpop(): Promise<DpopSession> | undefined {
    return this.#dpop;
  }
  clientInformation() {
    return this.#client;
  }
  saveClientInformation(info: NonNullable<ClientInformation>) {
    this.#client = info;
  }
  tokens() {
    return this.#tokens;
  }
  saveTokens(tokens: NonNullable<Tokens>) {
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
  // Kept with the verifier, so that the 2.x client can check the code came from the server it sent the user to.
  saveDiscoveryState(state: DiscoveryState) {
    this.#discovery = state;
  }
  discoveryState() {
    return this.#discovery;
  }
}

/**
 * The 2.x client's first connection: the sidecar's 401, discovery, registration, and the authorization
 * URL the client would open in a browser. The transport is the one to call finishAuth(code) on.
 */
export async function firstConnection2(
  base: string,
  provider: RecordingProvider2,
): Promise<{ transport: StreamableHTTPClientTransport; authorizationUrl: URL }> {
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { authProvider: provider });
  const refused = await new Client({ name: 'sign-in-test-2x', version: '1' }).connect(transport).then(
    () => new Error('the first connection was not refused'),
    (err: unknown) => err,
  );
  if (!(refused instanceof UnauthorizedError)) throw refused;
  if (!provider.authorizationUrl) throw new Error('the SDK opened no authorization URL');
  return { transport, authorizationUrl: provider.authorizationUrl };
}

/** Connects a 2.x client that uses the provider's (signed-in) tokens. */
export async function connectedClient2(base: string, provider: RecordingProvider2): Promise<Client> {
  const client = new Client({ name: 'sign-in-test-2x', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { authProvider: provider }));
  return client;
}
