// What a forwarded request carries as the user's own upstream credential: the header it goes in, the
// token for a user (from the mode's source), the service token for callers without a user, which
// requests need it at all, and the MCP answer for a user who has none usable yet (-32042, URL
// elicitation required, to a client that declared it; a tool error or JSON-RPC error naming the link
// to any other).

import type { Principal } from '../model/credentials.ts';
import { URL_ELICITATION_REQUIRED } from '../policy/enforce.ts';
import type { UpstreamTokens } from './vault.ts';

/** Where a user's usable tokens come from, per mode; `who` names the user (the source adds its provider). */
export interface CredentialSource {
  usable(who: { subject: string; issuer: string }): Promise<UpstreamTokens | undefined>;
}

/** A header to set on the forwarded request (lowercase name). */
export interface CredentialHeader {
  name: string;
  value: string;
}

/** No usable credential for this user: the caller answers with a link for the user to act on. */
export const MISSING = 'missing' as const;

/**
 * The requests a session needs before it can do anything as the user: the handshake and the lists of
 * what the server offers. A client must get through them to show its user anything, so they go on
 * without the user's credential (the service token, or none); every other request needs it.
 */
const WITHOUT_USER_CREDENTIAL: ReadonlySet<string> = new Set([
  'initialize',
  // The 2026-07-28 protocol's handshake, which has no initialize.
  'server/discover',
  'ping',
  'tools/list',
  'prompts/list',
  'resources/list',
  'resources/templates/list',
  'logging/setLevel',
]);

/** Whether a JSON-RPC request of `method` is forwarded only with the user's credential (notifications never are). */
export function needsUserCredential(method: string): boolean {
  return !WITHOUT_USER_CREDENTIAL.has(method) && !method.startsWith('notifications/');
}

/**
 * Whether a principal acts for a person: a user-grade token, or an OAuth token from sign-in (its
 * subject is the IdP `sub`; a client_credentials token's subject is its client id). Master, admin-made
 * and client_credentials tokens carry no user.
 */
export function actsForUser(principal: Principal): boolean {
  if (principal.kind === 'user') return true;
  return principal.kind === 'oauth' && principal.clientId !== undefined && principal.subject !== principal.clientId;
}

/** Visible ASCII only: a token with a control character would split or smuggle headers. */
const HEADER_SAFE_TOKEN = /^[\x21-\x7e]+$/;

export interface DeliveryOptions {
  /** Lowercase header name; `authorization` gets `Bearer <token>`, any other the raw token. */
  header: string;
  serviceToken?: string | undefined;
  /** The issuer users are known by (IDP_ISSUER): with the IdP `sub`, the owner of a kept credential. */
  issuer: string;
  source: CredentialSource;
}

export class UpstreamCredentialDelivery {
  readonly header: string;
  readonly #o: DeliveryOptions;

  constructor(options: DeliveryOptions) {
    this.#o = options;
    this.header = options.header;
  }

  /**
   * The header for `principal`'s forwarded request: the user's token, the service token for a caller
   * without a user (or null when none is configured), or MISSING when the user has none usable.
   */
  async headerFor(principal: Principal): Promise<CredentialHeader | null | typeof MISSING> {
    if (!actsForUser(principal)) return this.serviceHeader();
    // The person's own: the same `sub` at another provider is another person, with other credentials.
    const tokens = await this.#o.source.usable({ subject: principal.subject, issuer: principal.issuer ?? this.#o.issuer });
    if (tokens === undefined || !HEADER_SAFE_TOKEN.test(tokens.accessToken)) return MISSING;
    return this.#format(tokens.accessToken);
  }

  /**
   * The header of a request that goes on without a user's credential: a caller without a user, or a
   * user without one on a request that needs none (the handshake, the lists). The service token, or
   * null when none is configured.
   */
  serviceHeader(): CredentialHeader | null {
    return this.#o.serviceToken === undefined ? null : this.#format(this.#o.serviceToken);
  }

  #format(token: string): CredentialHeader {
    return { name: this.#o.header, value: this.#o.header === 'authorization' ? `Bearer ${token}` : token };
  }
}

/**
 * The JSON-RPC error answer of a call whose user must first authorize at `url` (MCP 2025-11-25:
 * `UrlElicitationRequiredError`, `data.elicitations` of URL-mode elicitation parameters); the message
 * names the URL too, for clients that do not handle URL elicitation.
 */
export function urlElicitationRequired(id: string | number, url: string, elicitationId: string, what: string): unknown {
  const message = connectMessage(url, what);
  return {
    jsonrpc: '2.0',
    id,
    error: { code: URL_ELICITATION_REQUIRED, message, data: { elicitations: [{ mode: 'url', elicitationId, url, message }] } },
  };
}

/**
 * JSON-RPC error code of a request (other than `tools/call`) refused for want of the user's credential,
 * to a client that did not declare URL elicitation: in the server-defined range, apart from -32042,
 * which MCP reserves for clients that did.
 */
export const CREDENTIAL_REQUIRED = -32004;

/**
 * The same need, to a client that did not declare URL elicitation (MCP forbids sending it URL-mode
 * elicitations): a `tools/call` gets a tool error, which the client shows its user or model, any
 * other request a JSON-RPC error; both name the link in their text.
 */
export function credentialRequired(id: string | number, method: string, url: string, what: string): unknown {
  const message = connectMessage(url, what);
  if (method === 'tools/call') return { jsonrpc: '2.0', id, result: { isError: true, content: [{ type: 'text', text: message }] } };
  return { jsonrpc: '2.0', id, error: { code: CREDENTIAL_REQUIRED, message, data: { url } } };
}

function connectMessage(url: string, what: string): string {
  return `${what}: open ${url} in a browser, then retry`;
}
