// A request on the proxy listener together with what the sidecar learnt while answering it: who it
// authenticated or why it refused, the target as the client sent it, what the upstream answered.
// The access log reads it when the response closes.

import { IncomingMessage } from 'node:http';
import type { DenialReason, Principal } from '../model/credentials.ts';
import type { DpopRefusal } from '../oauth/dpop.ts';
import type { RequestOutcome } from '../observability/metrics.ts';
import type { RequestTrace } from '../observability/tracing.ts';

/**
 * The proxy listener's IncomingMessage class: Node builds one per request, so the state is typed
 * fields on an object that exists anyway, not a second object or symbol-keyed properties. Its `url`
 * stays as the client sent it (the forwarder names the upstream's path apart), and the log reads it.
 */
export class ProxyRequest extends IncomingMessage {
  /** performance.now() when the request's headers had been read. */
  readonly started = performance.now();
  principal: Principal | undefined = undefined;
  denial: DenialReason | undefined = undefined;
  /** Which rule a refused DPoP proof broke (logged; the client is told only invalid_dpop_proof). */
  dpopRefusal: DpopRefusal | undefined = undefined;
  /** The upstream's status, or `error` when it could not be reached; undefined when not forwarded. */
  upstreamStatus: number | 'error' | undefined = undefined;
  /** Set when the sidecar ended this SSE stream because its token was revoked or expired. */
  endedBy: 'revoked' | 'expired' | undefined = undefined;
  /** An allowed forward-auth check with proxy.forwardAuthLogAllowed off: no access log line (the ingress writes its own). */
  unlogged = false;
  /** Its outcome has been counted (mcp_auth_requests_total): once, by the decision or by the listener's answer. */
  counted = false;
  /** The outcome it was counted under, and the reason (both labels of mcp_auth_requests_total), for the access log. */
  outcome: RequestOutcome | undefined = undefined;
  reason: string | undefined = undefined;
  /** Its trace, when tracing is on. */
  trace: RequestTrace | undefined = undefined;
}
