// Where this sidecar's Protected Resource Metadata (RFC 9728) is served: the one spelling that the
// route, every WWW-Authenticate challenge and the policy gate's refusals share.

/** The metadata of the resource `/mcp` (RFC 9728 §3.1: the resource's path after the well-known name). */
export const RESOURCE_METADATA_PATH = '/.well-known/oauth-protected-resource/mcp';

export function resourceMetadataUrl(publicUrl: string): string {
  return `${publicUrl}${RESOURCE_METADATA_PATH}`;
}
