// A decision about a request for the upstream, as a value (decide.ts makes it, on /mcp, /authz and
// /authz-connect alike): who asked, the outcome (forward, answer, refuse with its HttpError), the
// headers to set and the header to remove, and the forward plan or the answer to write. /mcp renders
// it by forwarding, /authz by answering the ingress. A decision is counted and its log fields set
// once, by settle: the one place a request's outcome is counted. Only a decision that says what it
// counts (Counted) can be settled: an answer the sidecar writes cannot go uncounted.

import type { DenialReason, Principal } from '../model/credentials.ts';
import type { ErrorCode, HttpError } from '../http/errors.ts';
import type { Metrics, RequestOutcome } from '../observability/metrics.ts';
import type { CredentialHeader } from '../upstream-credentials/delivery.ts';
import type { DecidedOptions } from './forwarder.ts';
import type { ProxyRequest } from './request.ts';

/** The `reason` label: a denial's reason, or a refusal's code (or the name of what refused it). */
export type CountedReason =
  | DenialReason
  | 'missing'
  | 'rate_limited'
  | ErrorCode
  | 'insufficient_authorization'
  | 'quota_exceeded'
  | 'upstream_credential_missing'
  | 'approval_required'
  | 'foreign_handle';

/** How an answer is written: a policy's (JSON, or one SSE event to a client that reads only that), a JSON-RPC body, the link to connect. */
export type AnswerForm = 'policy' | 'jsonrpc' | 'link';

export interface Decision {
  /** `gone`: the client left while it was decided; nothing to render, nothing counted. */
  readonly outcome: 'forward' | 'answer' | 'refuse' | 'gone';
  /** Who asked; undefined when refused before its token was accepted. */
  readonly principal: Principal | undefined;
  /** What it counts in `mcp_auth_requests_total{outcome}`; undefined only for `gone` (nothing answered). */
  readonly counted?: RequestOutcome | undefined;
  readonly reason?: CountedReason | undefined;
  /** Why its token was refused, for the access log. */
  readonly denial?: DenialReason | undefined;
  /** An allowed forward-auth check the ingress logs itself: no access log line here. */
  readonly unlogged?: boolean;
  /** `refuse`: the answer (thrown to the listener's error writer). */
  readonly error?: HttpError | undefined;
  /** `refuse` at /authz of a user without a usable upstream credential: the ticket the ingress hands on. */
  readonly ticket?: string | undefined;
  /** Header to set: the upstream credential (null: none); undefined while upstream credentials are off. */
  readonly credential?: CredentialHeader | null | undefined;
  /** Header to remove first: the upstream credential's name, whatever the client sent under it. */
  readonly removeHeader?: string | undefined;
  /** Header to set: the signed caller assertion (upstream.assertion). */
  readonly assertion?: string | undefined;
  /** `forward` at /mcp: the decided body and options the forwarder takes. */
  readonly plan?: DecidedOptions | undefined;
  /** `answer`: the body written with 200, and how. */
  readonly answer?: string | undefined;
  readonly answerForm?: AnswerForm | undefined;
}

/** A decision that says what it counts: the only kind settle takes. */
export type Counted = Decision & { readonly counted: RequestOutcome };

/** A refusal of a request that did not pass admission, or of what it asks. */
export function refusal(principal: Principal | undefined, error: HttpError, counted: RequestOutcome, reason?: CountedReason): Counted {
  return { outcome: 'refuse', principal, error, counted, reason };
}

/** A refused token: counted as denied (`reason`: why, or rate_limited), logged with why (`denial`). */
export function denied(error: HttpError, reason: CountedReason, denial: DenialReason | undefined): Counted {
  return { outcome: 'refuse', principal: undefined, error, counted: 'denied', reason, denial };
}

/** Whether a step returned its refusal (or answer) rather than what it looks up. */
export function isDecision<T extends object>(value: T | Decision): value is Decision {
  return (value as Decision).outcome !== undefined;
}

/** Records the decision: its count and its log fields. The one place a request's outcome is counted. */
export function settle(metrics: Metrics, req: ProxyRequest, decision: Counted): Counted {
  if (decision.denial !== undefined) req.denial = decision.denial;
  if (decision.unlogged === true) req.unlogged = true;
  countOutcome(metrics, req, decision.counted, decision.reason);
  return decision;
}

/**
 * Counts a request's outcome in `mcp_auth_requests_total`, once: the first count a request gets is
 * its outcome (the decision's, else the listener's answer to what was never decided), which its
 * access log line names too.
 */
export function countOutcome(metrics: Metrics, req: ProxyRequest, outcome: RequestOutcome, reason?: CountedReason): void {
  if (req.counted) return;
  req.counted = true;
  req.outcome = outcome;
  req.reason = reason;
  switch (outcome) {
    case 'forwarded':
      return metrics.forwarded.inc();
    case 'allowed':
      return metrics.allowed.inc();
    case 'connect':
      return metrics.connectHandoff.inc();
    case 'unavailable':
      return metrics.unavailable.inc();
    case 'not_found':
      return metrics.notFound.inc();
    case 'health':
      return metrics.health.inc();
    case 'oauth':
      return metrics.oauth.inc();
    case 'denied':
      return metrics.denied(reason as DenialReason | 'rate_limited');
    case 'refused':
      if (reason === 'insufficient_authorization') return metrics.policyAnswered.inc();
      if (reason === 'quota_exceeded') return metrics.quotaExceeded.inc();
      if (reason === 'upstream_credential_missing') {
        metrics.upstreamCredentialsMissing.inc();
        return metrics.credentialMissing.inc();
      }
      if (reason === 'approval_required') return metrics.approvalRequired.inc();
      if (reason === 'foreign_handle') return metrics.foreignHandle.inc();
      return metrics.refused(reason as ErrorCode);
  }
}

/** Sets the decided headers on `headers` (the forwarded request's, or /authz's answer): the credential, the assertion. */
export function setDecidedHeaders(headers: Record<string, string | string[] | undefined>, decision: Decision): void {
  if (decision.removeHeader !== undefined) delete headers[decision.removeHeader];
  const { credential, assertion } = decision;
  if (credential !== undefined && credential !== null) headers[credential.name] = credential.value;
  if (assertion !== undefined) headers['x-mcp-auth-assertion'] = assertion;
}
