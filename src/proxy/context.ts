// What the proxy listener's request handlers depend on, passed to them explicitly: the sidecar's
// services (ProxyDeps, built by the app) and what is derived from the configuration once, at start
// (ProxyContext), so that a request does no parsing of it. A test builds one and calls a handler
// directly, with no listener.

import type { Clock } from '../model/clock.ts';
import type { Config } from '../config/load.ts';
import type { LastUseRecorder } from './last-use.ts';
import type { MasterToken } from '../model/credentials.ts';
import type { Route } from '../http/serve.ts';
import type { Logger } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import type { StoreHealth, TokenStorage } from '../store/types.ts';
import type { FailedAuthLimiter } from '../http/rate-limits.ts';
import type { ClientAddresses } from '../http/client-address.ts';
import type { PolicyGate } from './policy-gate.ts';
import type { Forwarder } from './forwarder.ts';
import type { BodyInterest, HandleGuard } from './handle-guard.ts';
import { createHostCheck, type HostCheck } from './host-check.ts';
import type { AssertionSigner } from '../assertion/signer.ts';
import type { DpopVerifier } from '../oauth/dpop.ts';
import type { Tracing } from '../observability/tracing.ts';
import type { ConnectLinks } from '../upstream-credentials/connect-links.ts';
import type { UpstreamCredentialDelivery } from '../upstream-credentials/delivery.ts';

export interface ProxyDeps {
  config: Config;
  store: TokenStorage & StoreHealth;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  masterToken: MasterToken;
  forwarder: Forwarder;
  /** The external base URL ({base_url}); known only after the listener is bound when PORT=0. */
  publicUrl(): string;
  /** The client's address behind the trusted proxies: what every per-address decision keys on. */
  addresses: ClientAddresses;
  /** More routes on the proxy listener (the OAuth metadata and endpoints). */
  routes?: readonly Route[];
  /** Checks the DPoP proofs (RFC 9449) that come with DPoP-bound tokens. */
  dpop: DpopVerifier;
  /** Counts failed authentications per client address (shared through the store). */
  authFailures?: FailedAuthLimiter;
  /** Per-tool policy on POST /mcp; undefined when none is configured (bodies stream unparsed). */
  policyGate?: PolicyGate;
  /** Signs the caller assertion each forwarded request carries (upstream.assertion); undefined when off. */
  assertions?: AssertionSigner;
  /** OpenTelemetry tracing; undefined when off. */
  tracing?: Tracing | undefined;
  /** Keeps session and task handles to the principal that received them. */
  handles: HandleGuard;
  /** Notes when each token was last presented (written coarsely, off the request path); undefined: not kept. */
  lastUse?: LastUseRecorder;
  /** The user's own upstream credential (upstream.credentials); undefined while the mode is none (no work at all). */
  upstreamCredentials?: UpstreamCredentialsOnProxy;
}

/** What the proxy needs of upstream credentials: the header for a principal, and a link for a user who has none. */
export interface UpstreamCredentialsOnProxy {
  delivery: UpstreamCredentialDelivery;
  links: ConnectLinks;
  /** What the user is asked to do, for a person (e.g. "connect your GitHub account"). */
  what: string;
}

/** The dependencies and what is derived from the configuration once: what every handler is given. */
export interface ProxyContext extends ProxyDeps {
  /** upstream.url, parsed once. */
  upstreamUrl: URL;
  /** The DNS rebinding check of Host and Origin. */
  checkHost: HostCheck;
  /** Which POST bodies read without a policy are parsed for more than task ids; undefined: none. */
  bodyInterest: BodyInterest | undefined;
}

export function proxyContext(deps: ProxyDeps): ProxyContext {
  const { config } = deps;
  return {
    ...deps,
    upstreamUrl: new URL(config.upstream.url),
    checkHost: createHostCheck({
      publicUrl: config.proxy.publicUrl,
      listenHost: config.proxy.host,
      allowedHosts: config.proxy.allowedHosts,
      allowedOrigins: config.proxy.allowedOrigins,
    }),
    bodyInterest: bodyInterest(deps),
  };
}

const ELICITATION = Buffer.from('"elicitation"');
const TRACEPARENT = Buffer.from('"traceparent"');

/**
 * Without a policy, the bodies read for their task ids that are parsed for more: one that may declare
 * URL elicitation (a session's record keeps it, with upstream credentials on), one that may carry
 * `params._meta.traceparent` (with tracing on). A key spelt with escapes is missed: the client then
 * gets the answers of a client that declared nothing, and a new trace. Neither on: no byte looked at.
 */
function bodyInterest(deps: ProxyDeps): BodyInterest | undefined {
  const elicitation = deps.upstreamCredentials !== undefined;
  const tracing = deps.tracing !== undefined;
  if (!elicitation && !tracing) return undefined;
  return (body) => (elicitation && body.includes(ELICITATION)) || (tracing && body.includes(TRACEPARENT));
}

/** The request a token is presented for: its method, path (no query) and Host; for /authz, the ingress's original request. */
export interface RequestTarget {
  method: string;
  path: string;
  host: string | undefined;
}
