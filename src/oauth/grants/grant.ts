// What every grant of the token endpoint is (RFC 6749 §4 and the extension grants): one module per
// grant in this folder, each exporting a Grant, listed once in ./index.ts. The token endpoint, the
// discovery document, client provisioning and the audit all read that one list.

import type { IncomingMessage } from 'node:http';
import type { AuditInput } from '../../observability/audit.ts';
import type { Form } from '../../http/body.ts';
import { HttpError } from '../../http/errors.ts';
import { describe } from '../../observability/logger.ts';
import { clientRefused, type AuthenticatedClient, type PresentedClient } from '../client-auth.ts';
import type { OAuthContext } from '../context.ts';
import { idpKeysUnavailable } from '../idp.ts';

export interface TokenRequest {
  readonly req: IncomingMessage;
  readonly form: Form;
  /** What the request presented to identify its client (for the Basic challenge of a refusal). */
  readonly presented: PresentedClient;
  /** The client, authenticated before the grant runs; null when the request named none. */
  readonly client: AuthenticatedClient | null;
  /** The thumbprint of the key of the request's DPoP proof (checked, its jti spent); undefined: none sent. */
  readonly dpopJkt?: string | undefined;
}

/** A successful grant: the token response (RFC 6749 §5.1) and the audit event that records it. */
export interface Issued {
  readonly body: Record<string, unknown>;
  readonly event: AuditInput;
}

export interface Grant {
  /** The `grant_type` value it answers, as listed in `grant_types_supported`. */
  readonly grantType: string;
  /** Profiles of it this server implements, listed in `authorization_grant_profiles_supported` while it is enabled. */
  readonly grantProfiles?: readonly string[];
  /** The audit action of its requests, successful or refused. */
  readonly action: string;
  /** Whether this server's configuration offers it; when not, it is `unsupported_grant_type`. */
  enabled(ctx: OAuthContext): boolean;
  /** Why it is off, for the `unsupported_grant_type` answer and a registration that asks for it. */
  readonly disabledDescription: string;
  /**
   * Who may give a client this grant: `admin` (the admin `createClient` only), or `dynamic` (also
   * `POST /register`, while `enabled`). See `registrationRefusal` in ./index.ts.
   */
  readonly registration: 'admin' | 'dynamic';
  /**
   * The form parameters it reads, beyond those the token endpoint reads for every grant
   * (TOKEN_PARAMETERS). The form refuses a parameter sent twice and treats one sent without a value
   * as omitted (RFC 6749 §3.2), for every grant alike; a parameter no grant reads is ignored (ibid.).
   */
  readonly parameters: readonly string[];
  handle(ctx: OAuthContext, request: TokenRequest): Promise<Issued>;
}

/**
 * The parameters the token endpoint reads for every grant: the grant's name, the target (RFC 8707
 * `resource`, RFC 8693 `audience`) and the client's authentication (RFC 6749 §2.3.1, RFC 7523 §2.2).
 */
export const TOKEN_PARAMETERS: readonly string[] = [
  'grant_type',
  'resource',
  'audience',
  'client_id',
  'client_secret',
  'client_assertion',
  'client_assertion_type',
];

/**
 * What the tokens of a request with a DPoP proof are bound to (RFC 9449 §5): the access token always;
 * the refresh token only for a public client (a confidential client's is bound by its authentication).
 */
export function dpopBinding(request: TokenRequest): DpopBinding | undefined {
  if (request.dpopJkt === undefined) return undefined;
  return { jkt: request.dpopJkt, bindRefresh: request.client?.confidential !== true };
}

export interface DpopBinding {
  jkt: string;
  bindRefresh: boolean;
}

/** What a grant asks of the client of its requests; by default an authenticated client, public or confidential. */
export interface ClientRule {
  /**
   * A request without client authentication goes on, without a client (null): the grant's own
   * credential is enough. A client that does authenticate must still hold the grant.
   */
  readonly optional?: boolean;
  /**
   * Only a confidential client may use it; what a public client gets: `invalid_client` (as a request
   * without client authentication), or `unauthorized_client` (the client is known, the grant not its).
   */
  readonly confidential?: 'invalid_client' | 'unauthorized_client';
}

/**
 * The client of a request for `grantType`, checked against the grant's `rule`: the one place that
 * asks whether the client holds the grant (`unauthorized_client` when it does not).
 */
export function requireClient(request: TokenRequest, grantType: string, rule: ClientRule & { optional: true }): AuthenticatedClient | null;
export function requireClient(request: TokenRequest, grantType: string, rule?: ClientRule): AuthenticatedClient;
export function requireClient(request: TokenRequest, grantType: string, rule: ClientRule = {}): AuthenticatedClient | null {
  const authenticated = request.client;
  if (!authenticated) {
    if (rule.optional === true) return null;
    throw clientRefused(request.presented);
  }
  if (rule.confidential !== undefined && !authenticated.confidential) {
    if (rule.confidential === 'invalid_client') throw clientRefused(request.presented);
    throw new HttpError('unauthorized_client', `the ${grantType} grant needs a confidential client`);
  }
  if (!authenticated.client.grantTypes.includes(grantType)) {
    throw new HttpError('unauthorized_client', `this client may not use the ${grantType} grant`);
  }
  return authenticated;
}

const REFUSAL_EVENTS = new WeakMap<object, { event: AuditInput; level: 'info' | 'warn' }>();

/**
 * A refusal that is an event of its own (a refresh token or code presented again, which revokes what
 * it issued): the token endpoint audits it with this event instead of the anonymous refusal.
 */
export function refusalWithEvent(err: HttpError, event: AuditInput, level: 'info' | 'warn' = 'warn'): HttpError {
  REFUSAL_EVENTS.set(err, { event, level });
  return err;
}

export function refusalEventOf(err: unknown): { event: AuditInput; level: 'info' | 'warn' } | undefined {
  return typeof err === 'object' && err !== null ? REFUSAL_EVENTS.get(err) : undefined;
}

/**
 * The answer when verifying an IdP-signed JWT failed because the IdP's keys are out of reach: our
 * outage, a 503 with Retry-After (logged), not a bad token. Undefined when the JWT itself was refused.
 */
export function idpOutage(ctx: OAuthContext, err: unknown, grant: string): HttpError | undefined {
  if (!idpKeysUnavailable(err)) return undefined;
  ctx.logger.warn({ err: describe(err) }, `identity provider keys unavailable: ${grant} answered 503`);
  return new HttpError('temporarily_unavailable', 'the identity provider cannot be reached', {
    headers: { 'retry-after': '5' },
    cause: err,
  });
}
