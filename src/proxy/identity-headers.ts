// Who the sidecar authenticated, as headers for the upstream (the one place they are written), and
// the rewrite of a forwarded request's headers: what a client could spoof is stripped first.

import type { IncomingMessage } from 'node:http';
import type { Principal } from '../model/credentials.ts';
import type { ClientAddresses } from '../http/client-address.ts';
import { removeHopByHop } from './hop-by-hop.ts';
import { identityHeaderValue } from './identity-value.ts';

/** Headers that state the client's address or the original request: only a trusted proxy may send them. */
const CLIENT_ADDRESS_HEADERS = new Set([
  'forwarded',
  'x-real-ip',
  'true-client-ip',
  'x-client-ip',
  'x-cluster-client-ip',
  'client-ip',
  'cf-connecting-ip',
  'fastly-client-ip',
]);

function isClientAddressHeader(name: string): boolean {
  return name.startsWith('x-forwarded-') || CLIENT_ADDRESS_HEADERS.has(name);
}

/** Headers whose meaning the sidecar sets or removes (identity, addresses, credentials), by canonical name. */
function isOwnedHeader(canonical: string): boolean {
  return (
    canonical.startsWith('x-mcp-auth-') ||
    isClientAddressHeader(canonical) ||
    canonical === 'authorization' ||
    canonical === 'proxy-authorization'
  );
}

const HEADER_SAFE = /^[\x20-\x7e]*$/;

/**
 * Characters of a header name that some stack reads as the `-` between its words: CGI and WSGI
 * (RFC 3875 §4.1.18, PEP 3333) turn `-` and `_` alike into `_` in HTTP_* variables, so
 * `x_mcp_auth_kind` is HTTP_X_MCP_AUTH_KIND; PHP then turns `.` (and space) into `_` in every
 * variable it registers, $_SERVER under PHP-FPM included (php_register_variable_ex), so
 * `X.MCP.Auth.Kind` is too; Apache httpd 2.2's CGI environment turned every character but a letter
 * or digit into `_`. A name that holds any of them is read with each as `-` (names arrive lower-cased).
 */
const OTHER_SEPARATOR = /[^a-z0-9-]/;
const OTHER_SEPARATORS = /[^a-z0-9-]/g;

/** Strips what a client could spoof, then states who the sidecar authenticated. */
export function rewriteHeaders(req: IncomingMessage, principal: Principal, addresses: ClientAddresses): void {
  const headers = req.headers;
  const remote = addresses.peer(req);
  const fromTrustedProxy = addresses.trusts(remote);
  // First: a header the client names in `Connection` must not outlive the ones the sidecar sets below.
  removeHopByHop(headers);
  for (const name in headers) {
    if (name.startsWith('x-mcp-auth-')) delete headers[name];
    else if (!fromTrustedProxy && isClientAddressHeader(name)) delete headers[name];
    // Another spelling of a header the sidecar owns is never legitimate, whoever the peer is.
    else if (OTHER_SEPARATOR.test(name) && isOwnedHeader(name.replace(OTHER_SEPARATORS, '-'))) delete headers[name];
  }
  delete headers.authorization;
  // A DPoP proof is for this sidecar's check (spent here); the upstream is no audience of it.
  delete headers.dpop;
  // Meant for this hop (RFC 9110 §11.7.2), never for the upstream.
  delete headers['proxy-authorization'];
  // Node has already answered `Expect: 100-continue`; the upstream must not wait for a second one.
  delete headers.expect;
  setIdentityHeaders(headers, principal);
  const priorFor = fromTrustedProxy ? headers['x-forwarded-for'] : undefined;
  headers['x-forwarded-for'] = priorFor ? `${String(priorFor)}, ${remote}` : remote;
  if (!fromTrustedProxy || headers['x-forwarded-proto'] === undefined) {
    headers['x-forwarded-proto'] = (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http';
  }
  if (!fromTrustedProxy || headers['x-forwarded-host'] === undefined) {
    if (headers.host !== undefined) headers['x-forwarded-host'] = headers.host;
  }
}

/**
 * Who the sidecar authenticated, as headers for the upstream: set on every request /mcp forwards, and
 * answered by /authz for the ingress to copy.
 */
export function identityHeaders(principal: Principal): Record<string, string> {
  return setIdentityHeaders({}, principal);
}

/** Sets the identity headers on `headers` (any others it holds are kept) and returns it. The one place they are written. */
export function setIdentityHeaders<H extends Record<string, string | string[] | undefined>>(headers: H, principal: Principal): H {
  const out = headers as Record<string, string | string[] | undefined>;
  out['x-mcp-auth-kind'] = principal.kind;
  out['x-mcp-auth-subject'] = identityHeaderValue(principal.subject);
  // The person is the subject at this issuer: the same `sub` from another provider is someone else.
  if (principal.issuer !== undefined) out['x-mcp-auth-issuer'] = identityHeaderValue(principal.issuer);
  if (principal.clientId !== undefined) out['x-mcp-auth-client-id'] = identityHeaderValue(principal.clientId);
  // The token's granted scope (RFC 6749 §3.3 tokens are printable ASCII): the upstream decides what it allows.
  if (principal.scope !== undefined && HEADER_SAFE.test(principal.scope)) out['x-mcp-auth-scope'] = principal.scope;
  return headers;
}
