// Discovery documents: RFC 9728 protected-resource metadata for /mcp, which the 401 challenge points
// at, and RFC 8414 authorization-server metadata. Every URL is built from PUBLIC_URL, never from the
// request's Host header.

import { GRANT_CLIENT_CREDENTIALS, GRANT_REFRESH_TOKEN, GRANT_TOKEN_EXCHANGE } from '../profiles.ts';

export function protectedResourceMetadata(publicUrl: string): Record<string, unknown> {
  return {
    resource: `${publicUrl}/mcp`,
    authorization_servers: [publicUrl],
    bearer_methods_supported: ['header'],
    resource_name: 'MCP server (behind mcp-bearer-proxy)',
  };
}

const CLIENT_AUTH_METHODS = ['client_secret_basic', 'client_secret_post'];

export function authorizationServerMetadata(publicUrl: string, options: { tokenExchange: boolean }): Record<string, unknown> {
  const grants = [GRANT_CLIENT_CREDENTIALS, GRANT_REFRESH_TOKEN];
  if (options.tokenExchange) grants.push(GRANT_TOKEN_EXCHANGE);
  return {
    issuer: publicUrl,
    token_endpoint: `${publicUrl}/token`,
    registration_endpoint: `${publicUrl}/register`,
    revocation_endpoint: `${publicUrl}/revoke`,
    introspection_endpoint: `${publicUrl}/introspect`,
    grant_types_supported: grants,
    // No authorization endpoint: tokens come from client credentials, refresh or an IdP JWT exchange.
    response_types_supported: [],
    token_endpoint_auth_methods_supported: [...CLIENT_AUTH_METHODS, 'none'],
    revocation_endpoint_auth_methods_supported: [...CLIENT_AUTH_METHODS, 'none'],
    introspection_endpoint_auth_methods_supported: [...CLIENT_AUTH_METHODS],
    protected_resources: [`${publicUrl}/mcp`],
  };
}
