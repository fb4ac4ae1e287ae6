// Client ID Metadata Documents as real MCP clients publish them. Each is kept as published; a test
// host changes only what it must: `client_id` becomes the URL the test serves it at (a document must
// name its own URL), https redirect URIs on the client's own site point at the test's loopback
// receiver (same path), and ChatGPT's `jwks_uri` points at the test's key set (the test holds the
// private key). Loopback redirect URIs stay as published: they match any port (RFC 8252 §7.3).
//
// Cursor: no published metadata document was found (Cursor registers by DCR), so there is no fixture.

export interface ClientDocumentFixture {
  name: string;
  /** Where the shape comes from. */
  source: string;
  /** The document as published. */
  published: Record<string, unknown>;
  /** The redirect URI the client uses when it signs in (one of the published ones). */
  signInRedirect: string;
  /** How the client authenticates at the token endpoint. */
  tokenAuth: 'none' | 'private_key_jwt';
}

export const CLIENT_DOCUMENTS: ClientDocumentFixture[] = [
  {
    name: 'VS Code',
    source: 'https://vscode.dev/oauth/client-metadata.json, as quoted in stacklok/toolhive#6290 and better-auth/better-auth#9734',
    published: {
      client_name: 'Visual Studio Code',
      grant_types: ['authorization_code', 'refresh_token', 'urn:ietf:params:oauth:grant-type:device_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      application_type: 'native',
      client_id: 'https://vscode.dev/oauth/client-metadata.json',
      client_uri: 'https://vscode.dev/product',
      redirect_uris: ['http://127.0.0.1:33418/', 'https://vscode.dev/redirect'],
    },
    signInRedirect: 'http://127.0.0.1:33418/',
    tokenAuth: 'none',
  },
  {
    name: 'ChatGPT',
    source: 'https://chatgpt.com/oauth/<id>/client.json, as quoted in Altinity/altinity-mcp#118',
    published: {
      client_id: 'https://chatgpt.com/oauth/kDmjx77UnKOM/client.json',
      client_uri: 'https://chatgpt.com/',
      redirect_uris: ['https://chatgpt.com/connector/oauth/kDmjx77UnKOM'],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      client_name: 'ChatGPT',
      token_endpoint_auth_method: 'private_key_jwt',
      token_endpoint_auth_signing_alg: 'RS256',
      jwks_uri: 'https://chatgpt.com/oauth/jwks.json',
    },
    signInRedirect: 'https://chatgpt.com/connector/oauth/kDmjx77UnKOM',
    tokenAuth: 'private_key_jwt',
  },
  {
    name: 'ChatGPT (with token_endpoint_auth_methods_supported)',
    // The quote breaks off inside jwks_uri; its start and the other shape say chatgpt.com/oauth/jwks.json.
    source: 'https://chatgpt.com/oauth/IbUR3zxyNQ16/client.json, as quoted in cloudflare/workers-oauth-provider#293',
    published: {
      client_id: 'https://chatgpt.com/oauth/IbUR3zxyNQ16/client.json',
      client_uri: 'https://chatgpt.com/',
      redirect_uris: ['https://chatgpt.com/connector/oauth/IbUR3zxyNQ16'],
      token_endpoint_auth_method: 'private_key_jwt',
      token_endpoint_auth_methods_supported: ['none', 'private_key_jwt'],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      client_name: 'ChatGPT',
      token_endpoint_auth_signing_alg: 'RS256',
      jwks_uri: 'https://chatgpt.com/oauth/jwks.json',
    },
    signInRedirect: 'https://chatgpt.com/connector/oauth/IbUR3zxyNQ16',
    tokenAuth: 'private_key_jwt',
  },
  {
    name: 'Claude',
    source:
      'https://claude.ai/oauth/mcp-oauth-client-metadata, as fetched and quoted in anthropics/claude-ai-mcp#487 and django-oauth/django-oauth-toolkit#1856 (jwt-bearer grant listed)',
    published: {
      client_id: 'https://claude.ai/oauth/mcp-oauth-client-metadata',
      client_name: 'Claude',
      client_uri: 'https://claude.ai',
      redirect_uris: ['https://claude.ai/api/mcp/auth_callback'],
      grant_types: ['authorization_code', 'refresh_token', 'urn:ietf:params:oauth:grant-type:jwt-bearer'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    },
    signInRedirect: 'https://claude.ai/api/mcp/auth_callback',
    tokenAuth: 'none',
  },
  {
    name: 'Claude Code',
    source:
      'https://claude.ai/oauth/claude-code-client-metadata, as quoted in anthropics/claude-code#44429 and openstatusHQ/openstatus#2733',
    published: {
      client_id: 'https://claude.ai/oauth/claude-code-client-metadata',
      client_name: 'Claude Code',
      redirect_uris: ['http://localhost/callback', 'http://127.0.0.1/callback'],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    },
    signInRedirect: 'http://127.0.0.1/callback',
    tokenAuth: 'none',
  },
  {
    name: 'opencode',
    source: 'https://opencode.ai/oauth/opencode/client.json, as published in anomalyco/opencode#47737',
    published: {
      client_id: 'https://opencode.ai/oauth/opencode/client.json',
      client_name: 'opencode',
      client_uri: 'https://opencode.ai',
      logo_uri: 'https://opencode.ai/web-app-manifest-512x512.png',
      application_type: 'native',
      redirect_uris: ['http://127.0.0.1/callback', 'http://localhost/callback'],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      token_endpoint_auth_methods_supported: ['none'],
    },
    signInRedirect: 'http://127.0.0.1/callback',
    tokenAuth: 'none',
  },
];

/** The path a fixture is served at on the test host: its published URL's path. */
export function documentPath(f: ClientDocumentFixture): string {
  return new URL(f.published.client_id as string).pathname;
}

/**
 * The document as the test host serves it: `client_id` at `docsOrigin`, https redirect URIs on the
 * client's site moved to `receiverOrigin` (same path), `jwks_uri` at `docsOrigin` (same path).
 */
export function forTestHost(f: ClientDocumentFixture, docsOrigin: string, receiverOrigin: string): Record<string, unknown> {
  const doc: Record<string, unknown> = structuredClone(f.published);
  doc.client_id = `${docsOrigin}${documentPath(f)}`;
  doc.redirect_uris = (f.published.redirect_uris as string[]).map((u) => testRedirect(u, receiverOrigin));
  if (typeof f.published.jwks_uri === 'string') doc.jwks_uri = `${docsOrigin}${new URL(f.published.jwks_uri).pathname}`;
  return doc;
}

/** Where a published redirect URI lands on the test host: loopback ones unchanged, https ones at the receiver. */
export function testRedirect(uri: string, receiverOrigin: string): string {
  const url = new URL(uri);
  return url.protocol === 'https:' ? `${receiverOrigin}${url.pathname}${url.search}` : uri;
}
