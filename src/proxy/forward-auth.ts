// Forward-auth: which request an ingress asks `/authz` about, and the answer. nginx's auth_request
// names it in X-Original-Method / X-Original-URI (set in its configuration), Traefik's ForwardAuth and
// Caddy's forward_auth in X-Forwarded-Method / X-Forwarded-Uri / X-Forwarded-Host, Envoy's HTTP
// ext_authz by appending the original path to the check request's (`/authz/mcp?...`) and keeping its
// method. Several statements of the request must agree: a client-sent X-Forwarded-Uri passed on by an
// nginx that sets X-Original-URI must not decide what was asked. A check request carrying a
// client-sent identity header (X-MCP-Auth-*, in any spelling) is refused: not every ingress can
// remove those.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpError, invalidBearerToken } from '../http/errors.ts';
import { pathOf } from '../http/serve.ts';
import { MISSING } from '../upstream-credentials/delivery.ts';
import { addAssertion, admit, credentialFor, resourceMetadataUrl, setCredential, traceparentOf } from './authenticate.ts';
import type { ClientAddresses } from './client-address.ts';
import type { ProxyContext } from './context.ts';
import { setIdentityHeaders } from './identity-headers.ts';
import type { ProxyRequest } from './request.ts';

/** The path the forward-auth endpoint answers on; Envoy appends the original path to it. */
export const AUTHZ_PATH = '/authz';

/**
 * On /authz's 401 for a user without a usable upstream credential (and on no other answer): the
 * ingress may hand the request to the sidecar's /mcp, which answers a JSON-RPC request with -32042.
 */
export const CONNECT_REQUIRED_HEADER = 'x-mcp-auth-connect';

/**
 * The /authz handler: may the request the ingress holds go to the upstream? The same steps as /mcp up
 * to the decision, per-tool policy decided from the Mcp-Method / Mcp-Name headers (the body stays with
 * the ingress). Allowed: 200, no body, the identity headers for the ingress to copy onto the request it
 * forwards. Otherwise it throws the HttpError /mcp would answer, for the ingress to pass to the client.
 * `path` is the request's path without its query (`/authz`, or `/authz/...` from Envoy).
 */
export async function handleAuthz(ctx: ProxyContext, req: ProxyRequest, res: ServerResponse, path: string): Promise<void> {
  req.trace = ctx.tracing?.startRequest(req.method ?? '', AUTHZ_PATH, traceparentOf(req));
  const original = originalRequest(req, path, ctx.addresses);
  if (original.path !== '/mcp') {
    ctx.metrics.notFound.inc();
    throw new HttpError('not_found');
  }
  const principal = await admit(ctx, req, original);
  // Looked up before any quota is taken: a request refused for want of it counts against nothing here
  // (the sidecar's /mcp, deciding it afresh, counts what it forwards).
  const credentials = ctx.upstreamCredentials;
  const credential = credentials === undefined ? undefined : await credentialFor(credentials, principal);
  if (ctx.policyGate !== undefined) {
    const deciding = performance.now();
    await ctx.policyGate.checkForwardAuth(req, principal, original.method, credential !== MISSING);
    req.trace?.step('policy decision', deciding);
  }
  const binding = ctx.handles.bindPresentedSession(req, principal);
  if (binding !== undefined) await binding;
  const headers = setIdentityHeaders({ 'cache-control': 'no-store', 'content-length': '0' }, principal);
  // The ingress copies the credential header like the identity headers. A user without one gets the
  // 401 challenge, marked so that an ingress which knows it hands the request (with its body, which
  // /authz never sees) to the sidecar's /mcp: that decides afresh from the body, forwards what needs
  // no credential and answers the rest with the link. An ingress that does not know the mark passes
  // the 401 on.
  if (credentials !== undefined) setCredential(headers, credentials, credential === MISSING ? null : credential!);
  if (credential === MISSING) {
    ctx.metrics.upstreamCredentialsMissing.inc();
    ctx.metrics.credentialMissing.inc();
    const challenge = invalidBearerToken(resourceMetadataUrl(ctx.publicUrl()));
    throw new HttpError('invalid_token', challenge.description, { headers: { ...challenge.headers, [CONNECT_REQUIRED_HEADER]: '1' } });
  }
  const signing = addAssertion(ctx, principal, headers);
  if (signing !== undefined) await signing;
  ctx.metrics.allowed.inc();
  // The ingress writes the access log line of the request it holds (and can log these identity
  // headers): the sidecar's own line of an allowed check is written only when asked for.
  if (!ctx.config.proxy.forwardAuthLogAllowed) req.unlogged = true;
  res.writeHead(200, headers);
  res.end();
}

export interface OriginalRequest {
  method: string;
  /** The original request's path, without its query. */
  path: string;
  /** The Host the client asked for: X-Forwarded-Host from a trusted proxy, else the check request's Host. */
  host: string | undefined;
}

export function originalRequest(req: IncomingMessage, path: string, addresses: ClientAddresses): OriginalRequest {
  const stated = statements(req);
  // Envoy: `/authz/mcp?x` asks about `/mcp?x`.
  const appended = path.length > AUTHZ_PATH.length ? (req.url ?? '').slice(AUTHZ_PATH.length) : undefined;
  const target = agreed(stated.uri, appended);
  if (target === undefined) {
    throw new HttpError(
      'invalid_request',
      'the ingress did not say which request it asks about (X-Original-URI, X-Forwarded-Uri, or the path after /authz)',
    );
  }
  // nginx asks with GET whatever the original method was: the method must be stated, except by Envoy,
  // whose check request keeps the original's.
  const method = agreed(stated.method, appended === undefined ? undefined : req.method);
  if (method === undefined)
    throw new HttpError(
      'invalid_request',
      'the ingress did not say which method the request has (X-Original-Method or X-Forwarded-Method)',
    );
  const trusted = addresses.trusts(addresses.peer(req));
  const forwardedHost = trusted ? agreed(stated.host, undefined) : undefined;
  return { method, path: pathOf(target), host: forwardedHost ?? req.headers.host };
}

/** What the check request's headers state of one part of the original request: the one value, or `conflict`. */
interface Statement {
  value: string | undefined;
  conflict: boolean;
}

/**
 * One pass over the check request's headers: the statements of the original URI, method and Host
 * (each occurrence of each header naming it, trimmed), and the refusal of a client's identity header.
 *
 * Identity headers are the sidecar's to state; a client sending one, under any name that reads as
 * X-MCP-Auth-* once `_` is taken for `-` (what CGI/WSGI stacks do: both become `_` in HTTP_*
 * variables) and case is ignored, is refused. An ingress forwards the request itself and cannot always
 * remove them (nginx cannot remove a header by pattern, nor Caddy an underscore spelling in every case),
 * but it passes the client's headers to this check: refusing here keeps an unknown name
 * (X-MCP-Auth-Email) or an odd spelling (x_Mcp-AUTH_scope) from reaching an upstream that trusts them.
 */
function statements(req: IncomingMessage): { uri: Statement; method: Statement; host: Statement } {
  const uri: Statement = { value: undefined, conflict: false };
  const method: Statement = { value: undefined, conflict: false };
  const host: Statement = { value: undefined, conflict: false };
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    // Every name read here starts with `x` and is at least as long as `x-mcp-auth-` (11): the others
    // are passed over without a copy.
    if (name.length < 11 || (name.charCodeAt(0) | 0x20) !== 0x78) continue;
    if (isIdentityHeaderName(name)) {
      throw new HttpError('invalid_request', 'the request carries an X-MCP-Auth-* header: only the authorization service sets those');
    }
    const lower = name.toLowerCase();
    const statement =
      lower === 'x-original-uri' || lower === 'x-forwarded-uri'
        ? uri
        : lower === 'x-original-method' || lower === 'x-forwarded-method'
          ? method
          : lower === 'x-forwarded-host'
            ? host
            : undefined;
    if (statement === undefined) continue;
    const value = raw[i + 1]!.trim();
    if (statement.value !== undefined && statement.value !== value) statement.conflict = true;
    statement.value = value;
  }
  return { uri, method, host };
}

const IDENTITY_PREFIX = 'x-mcp-auth-';

/** Whether `name`, with `_` read as `-` and case ignored, starts with `x-mcp-auth-` (compared in place, no copy). */
export function isIdentityHeaderName(name: string): boolean {
  if (name.length < IDENTITY_PREFIX.length) return false;
  for (let i = 0; i < IDENTITY_PREFIX.length; i++) {
    const want = IDENTITY_PREFIX.charCodeAt(i);
    const c = name.charCodeAt(i);
    if (want === 0x2d) {
      if (c !== 0x2d && c !== 0x5f) return false;
    } else if ((c | 0x20) !== want) return false;
  }
  return true;
}

/** The one value every statement and `also` give; undefined when none does. */
function agreed(statement: Statement, also: string | undefined): string | undefined {
  if (statement.conflict || (also !== undefined && statement.value !== undefined && statement.value !== also))
    throw new HttpError('invalid_request', 'the original request is stated twice, differently');
  return statement.value ?? also;
}
