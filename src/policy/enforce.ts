// Enforcement of the policy on one POST /mcp body: every JSON-RPC call in it is decided (a batch with
// one denied call is denied whole), the 2026-07-28 mirror headers are checked against the body, and the
// ids of list requests are returned so their answers can be filtered. A denial carries what its answer
// needs (denialAnswer), and that answer names no more than the request itself did:
// - a scope would lift it: 403 with the step-up scope for `WWW-Authenticate: Bearer
//   error="insufficient_scope"` and a JSON-RPC error, so the client can re-authorize with it;
// - nothing would (the policy refuses this call to this principal whatever it holds), and the body was
//   one request: HTTP 200, a tool error for a `tools/call` (the model reads it and moves on instead of
//   the client re-authorizing), a JSON-RPC error for any other method; both carry the authorization
//   context (reason, remediation `unavailable`, the audit event's id);
// - nothing would, in a batch or a notification: 403 without a scope, each request a JSON-RPC error
//   carrying that context.

import type { ApprovalSettings } from '../model/approvals.ts';
import { HttpError } from '../http/errors.ts';
import { checkMirrorHeaders, parseClientMessages, type ClientBody, type ClientMessage, type JsonRpcLimits } from './jsonrpc.ts';
import type { ListRequests } from './list-filter.ts';
import { decideCall, isAlwaysAllowed, LIST_METHODS, stepUpScope, type Policy, type PolicyPrincipal, type PolicyRequest } from './rules.ts';

/** JSON-RPC error code of a call refused by policy (server-defined range, as MCP servers use for auth). */
export const POLICY_DENIED_CODE = -32003;

/**
 * The MCP error code of "the user must visit a URL first" (MCP 2025-11-25, URL-mode elicitation): a call
 * held for approval, or a user without a usable upstream credential.
 */
export const URL_ELICITATION_REQUIRED = -32042;

/** Where the authorization context of a denial travels: `_meta` of a tool result, `data` of a JSON-RPC error. */
export const AUTHORIZATION_META_KEY = 'io.modelcontextprotocol/authorization';

export interface PolicyDenial {
  readonly denied: true;
  /** The rule that refused (or `default`): for the audit trail and the metric label, never the client. */
  readonly rule: string;
  readonly call: PolicyRequest;
  /** What to offer in the challenge (held scopes plus the missing one); undefined when no scope helps. */
  readonly scope: string | undefined;
  /** The ids of the body's requests, in order (notifications and responses have none). */
  readonly requestIds: readonly (string | number | null)[];
  /** The body was a JSON-RPC batch (answered as a batch). */
  readonly batch: boolean;
  /** What the body tells a trace; undefined when the body was unseen (forward-auth). */
  readonly trace?: BodyTrace;
}

/** A call the policy holds: the deciding rule, its settings, the call, and what its message carried. */
export interface HeldCall {
  readonly rule: string;
  readonly approval: ApprovalSettings;
  readonly call: PolicyRequest & { name: string };
  readonly id: string | number;
  /** The request declared URL-mode elicitation itself (the 2026-07-28 envelope). */
  readonly urlElicitation: boolean;
  /** `params.requestState` of a 2026-07-28 retry, as sent. */
  readonly requestState: string | undefined;
}

/** The answer to a denial: its status, and the JSON body (one message, or one per request of a batch). */
export interface DenialAnswer {
  readonly status: 200 | 403;
  readonly body: string;
}

export interface PolicyAllowance {
  readonly denied: false;
  /** What to forward: the decided messages re-serialised (see parseClientMessages). */
  readonly body: Buffer;
  /** List requests in the body by id (their answers are filtered), or undefined when there is none. */
  readonly lists: ListRequests | undefined;
  /** The body's JSON-RPC requests (not notifications or responses), in order: what quotas count. */
  readonly requests: readonly BodyRequest[];
  /** The body was a JSON-RPC batch. */
  readonly batch: boolean;
  /** What the body tells a trace (see BodyTrace). */
  readonly trace: BodyTrace;
  /** The body as parsed. */
  readonly parsed: ClientBody;
  /** The body's one call, when an `approve` rule holds it: not forwarded until approved. */
  readonly held?: HeldCall;
}

/** What a body tells a trace: its first call, and the `params._meta.traceparent` it carries. */
export interface BodyTrace {
  readonly call: PolicyRequest | undefined;
  readonly traceparent: string | undefined;
}

/** One JSON-RPC request of a body: its id and the call it makes. */
export interface BodyRequest {
  readonly id: string | number | null;
  readonly call: PolicyRequest;
}

export function enforcePolicy(
  policy: Policy,
  principal: PolicyPrincipal,
  body: Buffer,
  mirror: { method: string | undefined; name: string | undefined },
  limits: JsonRpcLimits,
): PolicyAllowance | PolicyDenial {
  const parsed = parseClientMessages(body, limits);
  const { messages, batch, canonical, traceparent } = parsed;
  const trace: BodyTrace = { call: messages.find((m) => m.call !== undefined)?.call, traceparent };
  checkMirrorHeaders(mirror.method, mirror.name, messages);
  let lists: Map<string | number, string> | undefined;
  let held: HeldCall | undefined;
  for (const message of messages) {
    const call = message.call;
    if (call === undefined) continue;
    if (LIST_METHODS.has(call.method) && message.id !== undefined && message.id !== null) {
      (lists ??= new Map()).set(message.id, call.method);
    }
    if (isAlwaysAllowed(call.method)) continue;
    const decision = decideCall(policy, principal, call);
    if (decision.effect === 'approve') {
      held ??= heldCall(decision.rule, decision.approval!, call, message);
      continue;
    }
    if (decision.effect === 'deny') {
      return {
        denied: true,
        rule: decision.rule,
        call,
        scope: stepUpScope(policy, principal, call),
        requestIds: requestIdsOf(messages),
        batch,
        trace,
      };
    }
  }
  if (held !== undefined && (batch || messages.length !== 1))
    throw new HttpError('invalid_request', 'a call that needs approval must be sent alone, not in a batch');
  const allowed = { denied: false as const, body: canonical, lists, requests: requestsOf(messages), batch, trace, parsed };
  return held === undefined ? allowed : { ...allowed, held };
}

function heldCall(
  rule: string,
  approval: NonNullable<ReturnType<typeof decideCall>['approval']>,
  call: PolicyRequest,
  message: ClientMessage,
): HeldCall {
  const id = message.id;
  if (id === undefined || id === null) throw new HttpError('invalid_request', 'a call that needs approval must be a request with an id');
  return {
    rule,
    approval,
    call: call as PolicyRequest & { name: string },
    id,
    urlElicitation: message.urlElicitation === true,
    requestState: message.requestState,
  };
}

function requestsOf(messages: readonly ClientMessage[]): BodyRequest[] {
  return messages
    .filter((m) => m.call !== undefined && m.id !== undefined)
    .map((m) => ({ id: m.id as string | number | null, call: m.call! }));
}

function requestIdsOf(messages: readonly ClientMessage[]): (string | number | null)[] {
  return messages.filter((m) => m.call !== undefined && m.id !== undefined).map((m) => m.id as string | number | null);
}

/**
 * The answer to `denial` (see the module comment); `contextId` is the id of the audit event that
 * recorded it. The messages name the method and target the client sent, never the rule.
 */
export function denialAnswer(denial: PolicyDenial, contextId: string): DenialAnswer {
  const { call, scope, requestIds, batch } = denial;
  const target = call.name === undefined ? call.method : `${call.method} ${call.name}`;
  if (scope !== undefined)
    return {
      status: 403,
      body: errors(requestIds, batch, { code: POLICY_DENIED_CODE, message: `${target} is not allowed for this token` }),
    };
  const context = {
    [AUTHORIZATION_META_KEY]: { reason: 'insufficient_authorization', remediation: 'unavailable', authorizationContextId: contextId },
  };
  const message = `${target} is not allowed for this token, and no other authorization would allow it`;
  const id = requestIds[0];
  if (batch || requestIds.length !== 1 || id === null || id === undefined)
    return { status: 403, body: errors(requestIds, batch, { code: POLICY_DENIED_CODE, message, data: context }) };
  if (call.method !== 'tools/call')
    return { status: 200, body: JSON.stringify({ jsonrpc: '2.0', id, error: { code: POLICY_DENIED_CODE, message, data: context } }) };
  const text = `The tool "${call.name}" is not available to you: this server's access policy does not allow it for your account, whatever you are granted. Do not retry it; continue without it. (Reference: ${contextId})`;
  return {
    status: 200,
    body: JSON.stringify({ jsonrpc: '2.0', id, result: { isError: true, content: [{ type: 'text', text }], _meta: context } }),
  };
}

/** The same JSON-RPC error for each request (id null when the body held none). */
function errors(requestIds: readonly (string | number | null)[], batch: boolean, error: Record<string, unknown>): string {
  const answers = requestIds.map((id) => ({ jsonrpc: '2.0', id, error }));
  if (answers.length === 0) return JSON.stringify({ jsonrpc: '2.0', id: null, error });
  return JSON.stringify(batch ? answers : answers[0]);
}

/**
 * The decision for one call known from its headers alone (forward-auth): the same rules, the same
 * step-up scope; the denial answers 403 with id null, the request's id being unseen (and an ingress
 * takes a 2xx from its check as "allowed": it cannot carry a tool error to the client).
 */
export function enforceCall(policy: Policy, principal: PolicyPrincipal, call: PolicyRequest): { readonly denied: false } | PolicyDenial {
  if (isAlwaysAllowed(call.method)) return { denied: false };
  const decision = decideCall(policy, principal, call);
  if (decision.effect === 'allow') return { denied: false };
  return { denied: true, rule: decision.rule, call, scope: stepUpScope(policy, principal, call), requestIds: [], batch: false };
}
