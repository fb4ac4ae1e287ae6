// The storage an interactive MCP client (Claude, VS Code, the Inspector) keeps for the SDK's OAuth
// flow, with the "open a browser" step recorded for a test to drive.

import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { CLIENT_REDIRECT } from './sign-in.ts';

export class RecordingProvider implements OAuthClientProvider {
  #client: OAuthClientInformationMixed | undefined;
  #tokens: OAuthTokens | undefined;
  #verifier = '';
  authorizationUrl: URL | undefined;
  constructor(readonly redirectUrl: string = CLIENT_REDIRECT) {}
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
