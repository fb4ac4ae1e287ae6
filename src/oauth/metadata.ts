// Discovery documents: RFC 9728 protected-resource metadata for /mcp, which the 401 challenge points
// at, and RFC 8414 authorization-server metadata. Every URL is built from PUBLIC_URL, never from the
// request's Host header.

import { ASSERTION_ALGORITHMS } from './client-auth.ts';
import { DPOP_ALGORITHMS } from './dpop.ts';

/**
 * `scopes`: every scope the per-tool policy names, always published (an empty list without one), so
 * that a client sees which scopes mean something here instead of guessing.
 */
export function protectedResourceMetadata(publicUrl: string, scopes: readonly string[] = [], requireDpop = false): Record<string, unknown> {
  return {
    resource: `${publicUrl}/mcp`,
    authorization_servers: [publicUrl],
    bearer_methods_supported: ['header'],
    resource_name: 'MCP server (behind mcp-bearer-proxy)',
    scopes_supported: [...scopes],
    // RFC 9449 §5.1 / RFC 9728: the algorithms DPoP proofs may use here, and whether only bound tokens are taken.
    dpop_signing_alg_values_supported: [...DPOP_ALGORITHMS],
    dpop_bound_access_tokens_required: requireDpop,
  };
}

/** Client authentication of /token, /revoke and /introspect (src/oauth/client-auth.ts). */
const CLIENT_AUTH_METHODS = ['client_secret_basic', 'client_secret_post', 'private_key_jwt'];

/**
 * `authorization_endpoint` is always advertised, because RFC 8414 clients (the MCP SDK among them)
 * refuse metadata without one, even for client_credentials. Without browser sign-in it answers with
 * an error, and `response_types_supported` is empty so that interactive clients stop before opening
 * a browser. `grantTypes`: the grants this server's configuration enables (from the grant list);
 * `grantProfiles`: their profiles (`authorization_grant_profiles_supported`).
 */
export function authorizationServerMetadata(
  publicUrl: string,
  options: {
    grantTypes: readonly string[];
    grantProfiles?: readonly string[];
    signIn: boolean;
    clientMetadataDocuments: boolean;
    scopes?: readonly string[];
  },
): Record<string, unknown> {
  const profiles = options.grantProfiles ?? [];
  return {
    issuer: publicUrl,
    authorization_endpoint: `${publicUrl}/authorize`,
    token_endpoint: `${publicUrl}/token`,
    registration_endpoint: `${publicUrl}/register`,
    revocation_endpoint: `${publicUrl}/revoke`,
    introspection_endpoint: `${publicUrl}/introspect`,
    // RFC 8628 §4: device sign-in is on with browser sign-in.
    ...(options.signIn ? { device_authorization_endpoint: `${publicUrl}/device_authorization` } : {}),
    grant_types_supported: [...options.grantTypes],
    // Listed only when a grant has a profile here (ID-JAG: enterprise-managed authorization).
    ...(profiles.length > 0 ? { authorization_grant_profiles_supported: [...profiles] } : {}),
    response_types_supported: options.signIn ? ['code'] : [],
    response_modes_supported: ['query'],
    code_challenge_methods_supported: ['S256'],
    authorization_response_iss_parameter_supported: true,
    client_id_metadata_document_supported: options.clientMetadataDocuments,
    token_endpoint_auth_methods_supported: [...CLIENT_AUTH_METHODS, 'none'],
    token_endpoint_auth_signing_alg_values_supported: [...ASSERTION_ALGORITHMS],
    revocation_endpoint_auth_methods_supported: [...CLIENT_AUTH_METHODS, 'none'],
    revocation_endpoint_auth_signing_alg_values_supported: [...ASSERTION_ALGORITHMS],
    introspection_endpoint_auth_methods_supported: [...CLIENT_AUTH_METHODS],
    introspection_endpoint_auth_signing_alg_values_supported: [...ASSERTION_ALGORITHMS],
    protected_resources: [`${publicUrl}/mcp`],
    dpop_signing_alg_values_supported: [...DPOP_ALGORITHMS],
    scopes_supported: [...(options.scopes ?? [])],
  };
}
