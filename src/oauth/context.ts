// What the OAuth endpoints share: the store, the clock, the master token, the IdP verifier and the
// public URL that names this sidecar's resource. Built once in app.ts; handlers take it as their first argument.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Form } from '../http/body.ts';
import type { Clock } from '../model/clock.ts';
import type { Config } from '../config/load.ts';
import { parseAuthorization, type MasterToken } from '../model/credentials.ts';
import type { Audit } from '../observability/audit.ts';
import type { Logger } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import type {
  AccountSessionStorage,
  ApprovalStorage,
  AuthorizationCodeStorage,
  DeviceAuthorizationStorage,
  DirectoryStorage,
  ClientStorage,
  ConsentStorage,
  CounterStorage,
  OneTimeValueStorage,
  ProfileStorage,
  RefreshTokenStorage,
  SubjectCutoffStorage,
  SubjectStorage,
  TokenStorage,
  UpstreamCredentialStorage,
} from '../store/types.ts';
import type { SignedInUser } from '../model/records.ts';
import { WindowLimit, type FailedAuthLimiter } from '../http/rate-limits.ts';
import type { IdJagVerifier, IdpVerifier } from './idp.ts';
import type { IdpSignIn, IdpTokens } from './oidc-client.ts';
import type { CimdResolver, ResolveOptions } from './cimd.ts';
import type { AuthenticatedClient, PresentedClient } from './client-auth.ts';
import type { DpopVerifier } from './dpop.ts';
import type { ClientAddresses } from '../http/client-address.ts';
import type { DirectoryGate } from './directory-gate.ts';

/** The parts of the store the OAuth endpoints use (no audit stream: that goes through Audit). */
export type OAuthStore = TokenStorage &
  ClientStorage &
  RefreshTokenStorage &
  AuthorizationCodeStorage &
  DeviceAuthorizationStorage &
  ConsentStorage &
  ProfileStorage &
  CounterStorage &
  OneTimeValueStorage &
  SubjectStorage &
  SubjectCutoffStorage &
  AccountSessionStorage &
  UpstreamCredentialStorage &
  DirectoryStorage &
  ApprovalStorage;

export interface OAuthContext {
  readonly config: Config;
  readonly store: OAuthStore;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Tokens issued and revoked, by kind. */
  readonly metrics: Metrics;
  /** One event per issuance, revocation and registration (src/observability/audit.ts). */
  readonly audit: Audit;
  readonly masterToken: MasterToken;
  /** undefined when no IdP is configured: the token exchange is then off. */
  readonly idp: IdpVerifier | undefined;
  /** undefined unless identity assertion grants (ID-JAG) are on: the jwt-bearer grant is then off. */
  readonly idJag?: IdJagVerifier | undefined;
  /** undefined when browser sign-in is not configured: /authorize then answers with an error. */
  readonly signIn: IdpSignIn | undefined;
  /** Keeps the IdP's tokens of a user who just signed in (upstream credentials); undefined: they are dropped. */
  readonly keepIdpTokens?: ((user: SignedInUser, tokens: IdpTokens) => Promise<void>) | undefined;
  /** The directory's refusals of people it made inactive (SCIM); undefined while SCIM is off. */
  readonly directory?: DirectoryGate | undefined;
  /** Resolves `client_id` URLs (Client ID Metadata Documents); undefined when they are turned off. */
  readonly cimd?: CimdResolver | undefined;
  /** Checks DPoP proofs (RFC 9449) sent to /token. */
  readonly dpop: DpopVerifier;
  /** The proxy's per-address failure limit, which the OAuth endpoints count towards too; undefined: off. */
  readonly authFailures?: FailedAuthLimiter | undefined;
  /** The client's address behind the trusted proxies: what every per-address limit counts under. */
  readonly addresses: ClientAddresses;
  publicUrl(): string;
}

/**
 * Counts a request that named a token not the caller's to act on (unknown, inactive, another
 * client's) as a failed authentication of its address. The answer does not say so, but /revoke and
 * /introspect cannot be used to guess tokens past the limit /mcp enforces: from an address over it,
 * it throws the bare 429 that answers such a request instead. Handlers await it before answering,
 * so the caller's next request already meets the count.
 */
export type CountMiss = () => Promise<void>;

/** A request to an endpoint that takes a form body (/token, /revoke, /introspect), its body read once. */
export interface FormRequest {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly form: Form;
  /** The client credentials it presents, read once (authenticated by the handler that needs them). */
  readonly presented: PresentedClient;
  readonly countMiss: CountMiss;
  /** /token: counts the request towards the per-client limit once its client authenticated (null: none named). */
  readonly countClient?: (client: AuthenticatedClient | null) => Promise<void>;
  /** How a fetch of its client's document or key set is admitted: see `fetchAdmission`. */
  readonly fetches?: ResolveOptions;
}

/**
 * The admission of outbound fetches (metadata documents, key sets) made for a client address, the same
 * at every endpoint: an address over the failed-authentication limit causes none (it gets the bare 429
 * its failures get), and the others count towards one per-address budget a minute, across replicas,
 * taken before the fetch goes out (a cached document or key set costs nothing). The address also names
 * the share of the concurrent fetch slots the fetch takes.
 */
export function fetchAdmission(ctx: OAuthContext, description: string): (address: string) => ResolveOptions {
  const limit = new WindowLimit(ctx.store, ctx.clock, 'cimdfetch', ctx.config.oauth.clientMetadataDocuments.fetchesPerMinutePerAddress);
  return (address) => ({
    address,
    beforeFetch: async () => {
      const refused = ctx.authFailures?.refusal(address);
      if (refused) throw refused;
      await limit.take(address, description);
    },
  });
}

/** The resource every token of this sidecar is for (RFC 8707 / RFC 9728 `resource`). */
export function resourceOf(ctx: OAuthContext): string {
  return `${ctx.publicUrl()}/mcp`;
}

/** RFC 8707: a `resource` (or RFC 8693 `audience`) must name this sidecar's /mcp, or its base URL. */
export function namesThisResource(ctx: OAuthContext, value: string): boolean {
  const base = ctx.publicUrl();
  const trimmed = value.endsWith('/') ? value.slice(0, -1) : value;
  return trimmed === `${base}/mcp` || trimmed === base;
}

/** True when the request carries `Authorization: Bearer <master token>`. */
export function callerIsMaster(ctx: OAuthContext, req: IncomingMessage): boolean {
  const parsed = parseAuthorization(req.rawHeaders);
  return parsed.kind === 'token' && parsed.scheme === 'bearer' && ctx.masterToken.matches(parsed.token);
}
