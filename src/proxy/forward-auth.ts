// Forward-auth: which request an ingress asks `/authz` about, and the answer. nginx's auth_request
// names it in X-Original-Method / X-Original-URI (set in its configuration), Traefik's ForwardAuth and
// Caddy's forward_auth in X-Forwarded-Method / X-Forwarded-Uri / X-Forwarded-Host, Envoy's HTTP
// ext_authz by appending the original path to the check request's (`/authz/mcp?...`) and keeping its
// method. Several statements of the request must agree: a client-sent X-Forwarded-Uri passed on by an
// nginx that sets X-Original-URI must not decide what was asked. A check request carrying a
// client-sent identity header (X-MCP-Auth-*, in any spelling) is refused: not every ingress can
// remove those. A user refused for want of an upstream credential is taken on at /authz-connect, where
// the ingress hands the request with the ticket /authz gave it: the sidecar forwards what needs no
// credential itself and answers the rest with the link to connect.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpError, invalidBearerToken } from '../http/errors.ts';
import { pathOf } from '../http/serve.ts';
import { decideToken, type DenialReason, type Principal } from '../model/credentials.ts';
import { ConnectLinkRefused } from '../upstream-credentials/connect-links.ts';
import { traceparentOf } from './authenticate.ts';
import { resourceMetadataUrl } from '../oauth/resource-metadata.ts';
import type { ClientAddresses } from '../http/client-address.ts';
import type { ProxyContext } from './context.ts';
import { decide, type Forwarding } from './decide.ts';
import { denied, setDecidedHeaders, type Counted } from './decision.ts';
import { setIdentityHeaders } from './identity-headers.ts';
import { handleDigest } from './handles.ts';
import type { SessionRead } from './handle-guard.ts';
import { renderForwarded } from './mcp-handler.ts';
import type { ProxyRequest } from './request.ts';

/** The path the forward-auth endpoint answers on; Envoy appends the original path to it. */
export const AUTHZ_PATH = '/authz';

/**
 * On /authz's 401 for a user without a usable upstream credential (and on no other answer): the
 * ingress may hand the request to CONNECT_ANSWER_PATH, which takes it on as /mcp would.
 */
export const CONNECT_REQUIRED_HEADER = 'x-mcp-auth-connect';

/**
 * Beside the mark: a ticket that stands for the token /authz admitted and the request it was asked
 * about (single use, a minute), for the ingress to hand, with the request, to CONNECT_ANSWER_PATH.
 */
export const CONNECT_TICKET_HEADER = 'x-mcp-auth-connect-ticket';

/**
 * Where the ingress hands a request whose check was the marked 401: the sidecar takes it on from its
 * body and the ticket (forwards the handshake and the lists itself, answers a call that needs the
 * credential with the link), without authenticating it again. A DPoP proof works once and /authz has
 * spent it, so the request itself would be refused as a replay.
 */
export const CONNECT_ANSWER_PATH = '/authz-connect';

/**
 * The /authz handler: may the request the ingress holds go to the upstream? Decided as /mcp decides
 * (decide.ts), per-tool policy from the Mcp-Method / Mcp-Name headers (the body stays with the
 * ingress), then answered. Allowed: 200, no body, the identity headers for the ingress to copy onto the
 * request it forwards (the upstream credential among them). Otherwise it throws the HttpError /mcp
 * would answer, for the ingress to pass to the client. A user without a usable upstream credential
 * gets the 401 challenge, marked, with a ticket, so that an ingress which knows the mark hands the
 * request (with its body, which /authz never sees) and the ticket to CONNECT_ANSWER_PATH, which decides
 * it from its body: the handshake and the lists go on without the user's credential, a call that needs
 * it gets the link. An ingress that does not know the mark passes the 401 on (the ticket with it, to
 * the client it stands for: it can take on that client's request, nothing more).
 * `path` is the request's path without its query (`/authz`, or `/authz/...` from Envoy).
 */
export async function handleAuthz(ctx: ProxyContext, req: ProxyRequest, res: ServerResponse, path: string): Promise<void> {
  req.trace = ctx.tracing?.startRequest(req.method ?? '', AUTHZ_PATH, traceparentOf(req));
  const decision = await decide(ctx, req, res, originalRequest(req, path, ctx.addresses));
  if (decision.outcome !== 'forward') {
    const challenge = decision.error!;
    if (decision.ticket === undefined) throw challenge;
    throw new HttpError('invalid_token', challenge.description, {
      headers: { ...challenge.headers, [CONNECT_REQUIRED_HEADER]: '1', [CONNECT_TICKET_HEADER]: decision.ticket },
    });
  }
  const headers = setIdentityHeaders({ 'cache-control': 'no-store', 'content-length': '0' }, decision.principal!);
  setDecidedHeaders(headers, decision);
  res.writeHead(200, headers);
  res.end();
}

/**
 * The request an ingress hands over on the marked 401 of /authz, with the ticket /authz gave it: taken
 * on as /mcp takes on a request of a user without a usable upstream credential (the principal is the
 * ticket's token's, looked up again; the ticket is used up here). Its body decides: the handshake and
 * the lists are forwarded to UPSTREAM_URL with the service token or none, the session's answer
 * recorded with what its client declared; a call that needs the credential gets the link (-32042 to
 * a client that declared URL elicitation). A missing, forged, expired or used ticket, one /authz gave
 * for another request (method, session), or a token revoked or expired since, is the 401 challenge.
 */
export async function handleConnectAnswer(ctx: ProxyContext, req: ProxyRequest, res: ServerResponse): Promise<void> {
  req.trace = ctx.tracing?.startRequest(req.method ?? '', CONNECT_ANSWER_PATH, traceparentOf(req));
  const decision = await decide(ctx, req, res, BY_TICKET);
  renderForwarded(ctx, req, res, decision, (req.url ?? '/').slice(CONNECT_ANSWER_PATH.length));
}

/**
 * The principal a request's connect ticket stands for, or the 401 challenge. The ticket is used up
 * first, so that a request it was not given for spends it too.
 */
async function ticketPrincipal(ctx: ProxyContext, req: ProxyRequest, sessionRead: SessionRead | undefined): Promise<Principal | Counted> {
  const refuse = (reason: DenialReason): Counted => denied(invalidBearerToken(resourceMetadataUrl(ctx.publicUrl())), reason, reason);
  const value = req.headers[CONNECT_TICKET_HEADER];
  let ticket;
  try {
    if (ctx.upstreamCredentials === undefined || typeof value !== 'string') throw new ConnectLinkRefused('no ticket');
    ticket = await ctx.upstreamCredentials.links.redeemTicket(value);
  } catch (err) {
    if (!(err instanceof ConnectLinkRefused)) throw err;
    return refuse('unknown');
  }
  // The request /authz was asked about, not another the ticket was put on.
  if (sessionRead?.refused !== undefined) throw sessionRead.refused;
  const session = sessionRead === undefined ? undefined : handleDigest(sessionRead.id);
  if (ticket.method !== req.method?.toUpperCase() || ticket.session !== session) return refuse('unknown');
  // The token as it stands now: revoked or expired in the minute since /authz, it is refused here too.
  const started = performance.now();
  const decision = decideToken(ticket.tokenHash, await ctx.store.lookupToken(ticket.tokenHash), ctx.clock.now(), ctx.config.idp.issuer);
  req.trace?.step('token lookup', started, { 'mcp_auth.outcome': decision.ok ? 'valid' : decision.reason });
  if (!decision.ok) return refuse(decision.reason);
  const principal = decision.principal;
  if (principal.kind !== ticket.kind || principal.subject !== ticket.subject || principal.clientId !== ticket.clientId)
    return refuse('unknown');
  return (req.principal = principal);
}

const BY_TICKET: Forwarding = { admission: ticketPrincipal, knownMissing: true };

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
 * X-MCP-Auth-* once `_`, `.` or any other character but a letter or digit is taken for `-` (CGI/WSGI
 * stacks make `-` and `_` both `_` in HTTP_* variables, PHP makes `.` one too, Apache httpd 2.2 made
 * every such character one: see identity-headers.ts) and case is ignored, is refused. An ingress forwards the request itself and cannot always
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

/**
 * Whether `name`, with any character but a letter or digit read as `-` (`_`, `.`, ...) and case
 * ignored, starts with `x-mcp-auth-` (compared in place, no copy).
 */
export function isIdentityHeaderName(name: string): boolean {
  if (name.length < IDENTITY_PREFIX.length) return false;
  for (let i = 0; i < IDENTITY_PREFIX.length; i++) {
    const want = IDENTITY_PREFIX.charCodeAt(i);
    const c = name.charCodeAt(i);
    if (want === 0x2d) {
      if (isLetterOrDigit(c)) return false;
    } else if ((c | 0x20) !== want) return false;
  }
  return true;
}

function isLetterOrDigit(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || ((c | 0x20) >= 0x61 && (c | 0x20) <= 0x7a);
}

/** The one value every statement and `also` give; undefined when none does. */
function agreed(statement: Statement, also: string | undefined): string | undefined {
  if (statement.conflict || (also !== undefined && statement.value !== undefined && statement.value !== also))
    throw new HttpError('invalid_request', 'the original request is stated twice, differently');
  return statement.value ?? also;
}
