// Client-forged identity headers in every spelling a stack may read as X-MCP-Auth-*: CGI and WSGI
// servers (RFC 3875 §4.1.18, PEP 3333) turn both `-` and `_` into `_` in HTTP_* variables and ignore
// case, so `X_Mcp-Auth_Scope` is HTTP_X_MCP_AUTH_SCOPE to the application. PHP turns `.` (and space)
// into `_` in every variable it registers, $_SERVER under PHP-FPM included (php_register_variable_ex
// in php-src main/php_variables.c), so `X.MCP.Auth.Kind` reaches a PHP application as
// HTTP_X_MCP_AUTH_KIND when the server in front passes the name on; Apache httpd 2.2's CGI
// environment (http2env in server/util_script.c) turned every character but a letter or digit into `_`.

/** The identity headers the sidecar itself sets (src/proxy/server.ts identityHeaders, and the assertion). */
export const SIDECAR_IDENTITY_HEADERS = [
  'X-MCP-Auth-Kind',
  'X-MCP-Auth-Subject',
  'X-MCP-Auth-Issuer',
  'X-MCP-Auth-Client-Id',
  'X-MCP-Auth-Scope',
  'X-MCP-Auth-Assertion',
] as const;

/** Names in the same family the sidecar never sets: an upstream may still read them. */
export const UNSET_IDENTITY_HEADERS = [
  'X-MCP-Auth-Email',
  'X_MCP_AUTH_ROLE',
  'x-Mcp_aUTH-Groups',
  'X-MCP-AUTH-',
  'X.MCP.Auth.Email',
  // Apache httpd 2.2 (any other token character as `_`).
  'X~MCP+Auth!Role',
] as const;

/** Every `-`/`_` choice at each separator of `name` (2^separators spellings), the case kept. */
export function separatorSpellings(name: string): string[] {
  const parts = name.split(/[-_]/);
  const out: string[] = [];
  for (let mask = 0; mask < 1 << (parts.length - 1); mask++) {
    out.push(parts.reduce((acc, part, i) => (i === 0 ? part : `${acc}${mask & (1 << (i - 1)) ? '_' : '-'}${part}`)));
  }
  return out;
}

/** Spellings with `.` (PHP's `_`): every separator a dot, and dots with the other two in turn. */
export function dotSpellings(name: string): string[] {
  const parts = name.split(/[-_]/);
  const cycle = ['.', '_', '-'];
  return [
    parts.join('.'),
    parts.reduce((acc, part, i) => (i === 0 ? part : `${acc}${cycle[(i - 1) % 3]}${part}`)),
    parts.reduce((acc, part, i) => (i === 0 ? part : `${acc}${cycle[i % 3]}${part}`)),
  ];
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
    for (const spelling of [...separatorSpellings(name), ...dotSpellings(name)]) {
      names.add(spelling);
      names.add(mixedCase(spelling));
    }
  }
  for (const name of UNSET_IDENTITY_HEADERS) names.add(name);
  names.add(mixedCase('x_mcp-auth_email'));
  return [...names];
}

/** Whether `name` reads as an identity header to a CGI/WSGI or PHP application. */
export function readsAsIdentityHeader(name: string): boolean {
  return name
    .replace(/[^A-Za-z0-9]/g, '_')
    .toUpperCase()
    .startsWith('X_MCP_AUTH_');
}
