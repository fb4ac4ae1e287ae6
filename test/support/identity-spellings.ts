// Client-forged identity headers in every spelling a stack may read as X-MCP-Auth-*: CGI and WSGI
// servers (RFC 3875 §4.1.18, PEP 3333) turn both `-` and `_` into `_` in HTTP_* variables and ignore
// case, so `X_Mcp-Auth_Scope` is HTTP_X_MCP_AUTH_SCOPE to the application.

/** The identity headers the sidecar itself sets (src/proxy/server.ts identityHeaders, and the assertion). */
export const SIDECAR_IDENTITY_HEADERS = [
  'X-MCP-Auth-Kind',
  'X-MCP-Auth-Subject',
  'X-MCP-Auth-Client-Id',
  'X-MCP-Auth-Scope',
  'X-MCP-Auth-Assertion',
] as const;

/** Names in the same family the sidecar never sets: an upstream may still read them. */
export const UNSET_IDENTITY_HEADERS = ['X-MCP-Auth-Email', 'X_MCP_AUTH_ROLE', 'x-Mcp_aUTH-Groups', 'X-MCP-AUTH-'] as const;

/** Every `-`/`_` choice at each separator of `name` (2^separators spellings), the case kept. */
export function separatorSpellings(name: string): string[] {
  const parts = name.split(/[-_]/);
  const out: string[] = [];
  for (let mask = 0; mask < 1 << (parts.length - 1); mask++) {
    out.push(parts.reduce((acc, part, i) => (i === 0 ? part : `${acc}${mask & (1 << (i - 1)) ? '_' : '-'}${part}`)));
  }
  return out;
}

/** A case-mixed form (every other letter upper case), which an ingress matching names exactly would miss. */
export function mixedCase(name: string): string {
  let upper = false;
  return [...name.toLowerCase()].map((c) => (/[a-z]/.test(c) ? ((upper = !upper) ? c.toUpperCase() : c) : c)).join('');
}

/** Every spelling a test sends: all separator choices of each name the sidecar sets, each also case-mixed, and unset names. */
export function forgedIdentityHeaderNames(): string[] {
  const names = new Set<string>();
  for (const name of SIDECAR_IDENTITY_HEADERS) {
    for (const spelling of separatorSpellings(name)) {
      names.add(spelling);
      names.add(mixedCase(spelling));
    }
  }
  for (const name of UNSET_IDENTITY_HEADERS) names.add(name);
  names.add(mixedCase('x_mcp-auth_email'));
  return [...names];
}

/** Whether `name` reads as an identity header to a CGI/WSGI application. */
export function readsAsIdentityHeader(name: string): boolean {
  return name.replaceAll('-', '_').toUpperCase().startsWith('X_MCP_AUTH_');
}
