// Discovery documents: RFC 9728 protected-resource metadata for /mcp, which the 401 challenge points
// at. Every URL is built from PUBLIC_URL, never from the request's Host header.

export function protectedResourceMetadata(publicUrl: string): Record<string, unknown> {
  return {
    resource: `${publicUrl}/mcp`,
    authorization_servers: [publicUrl],
    bearer_methods_supported: ['header'],
    resource_name: 'MCP server (behind mcp-bearer-proxy)',
  };
}
