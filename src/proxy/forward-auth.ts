// Forward-auth: which request an ingress asks `/authz` about. nginx's auth_request names it in
// X-Original-Method / X-Original-URI (set in its configuration), Traefik's ForwardAuth and Caddy's
// forward_auth in X-Forwarded-Method / X-Forwarded-Uri / X-Forwarded-Host, Envoy's HTTP ext_authz by
// appending the original path to the check request's (`/authz/mcp?...`) and keeping its method.
// Several statements of the request must agree: a client-sent X-Forwarded-Uri passed on by an nginx
// that sets X-Original-URI must not decide what was asked. A check request carrying a client-sent
// identity header (X-MCP-Auth-*, in any spelling) is refused: not every ingress can remove those.

import type { IncomingMessage } from 'node:http';
import { HttpError } from '../http/errors.ts';
import { pathOf } from '../http/serve.ts';
import type { ClientAddresses } from './client-address.ts';

/** The path the forward-auth endpoint answers on; Envoy appends the original path to it. */
export const AUTHZ_PATH = '/authz';

export interface OriginalRequest {
  method: string;
  /** The original request's path, without its query. */
  path: string;
  /** The Host the client asked for: X-Forwarded-Host from a trusted proxy, else the check request's Host. */
  host: string | undefined;
}

export function originalRequest(req: IncomingMessage, path: string, addresses: ClientAddresses): OriginalRequest {
  refuseClientIdentityHeaders(req);
  // Envoy: `/authz/mcp?x` asks about `/mcp?x`.
  const appended = path.length > AUTHZ_PATH.length ? (req.url ?? '').slice(AUTHZ_PATH.length) : undefined;
  const target = agreed(req, ['x-original-uri', 'x-forwarded-uri'], appended);
  if (target === undefined) {
    throw new HttpError(
      'invalid_request',
      'the ingress did not say which request it asks about (X-Original-URI, X-Forwarded-Uri, or the path after /authz)',
    );
  }
  // nginx asks with GET whatever the original method was: the method must be stated, except by Envoy,
  // whose check request keeps the original's.
  const method = agreed(req, ['x-original-method', 'x-forwarded-method'], appended === undefined ? undefined : req.method);
  if (method === undefined)
    throw new HttpError(
      'invalid_request',
      'the ingress did not say which method the request has (X-Original-Method or X-Forwarded-Method)',
    );
  const trusted = addresses.trusts(addresses.peer(req));
  const forwardedHost = trusted ? agreed(req, ['x-forwarded-host'], undefined) : undefined;
  return { method, path: pathOf(target), host: forwardedHost ?? req.headers.host };
}

/**
 * Identity headers are the sidecar's to state; a client sending one, under any name that reads as
 * X-MCP-Auth-* once `_` is taken for `-` (what CGI/WSGI stacks do: both become `_` in HTTP_*
 * variables) and case is ignored, is refused. An ingress forwards the request itself and cannot always
 * remove them (nginx cannot remove a header by pattern, nor Caddy an underscore spelling in every case),
 * but it passes the client's headers to this check: refusing here keeps an unknown name
 * (X-MCP-Auth-Email) or an odd spelling (x_Mcp-AUTH_scope) from reaching an upstream that trusts them.
 */
function refuseClientIdentityHeaders(req: IncomingMessage): void {
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    if (isIdentityHeaderName(raw[i]!)) {
      throw new HttpError('invalid_request', 'the request carries an X-MCP-Auth-* header: only the authorization service sets those');
    }
  }
}

/** Whether `name`, with `_` read as `-` and case ignored, starts with `x-mcp-auth-`. */
function isIdentityHeaderName(name: string): boolean {
  return name.replaceAll('_', '-').toLowerCase().startsWith('x-mcp-auth-');
}

/** The one value every statement (each occurrence of each named header, and `also`) gives; undefined when none does. */
function agreed(req: IncomingMessage, lowerNames: readonly string[], also: string | undefined): string | undefined {
  let value = also;
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    if (!lowerNames.includes(raw[i]!.toLowerCase())) continue;
    const stated = raw[i + 1]!.trim();
    if (value !== undefined && value !== stated)
      throw new HttpError('invalid_request', 'the original request is stated twice, differently');
    value = stated;
  }
  return value;
}
