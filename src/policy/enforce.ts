// Enforcement of the policy on one POST /mcp body: every JSON-RPC call in it is decided (a batch with
// one denied call is denied whole), the 2026-07-28 mirror headers are checked against the body, and the
// ids of list requests are returned so their answers can be filtered. A denial carries what the answer
// needs: the step-up scope for `WWW-Authenticate: Bearer error="insufficient_scope"` and a JSON-RPC
// error body that names no more than the request itself did.

import { checkMirrorHeaders, parseClientMessages, type ClientMessage, type JsonRpcLimits } from './jsonrpc.ts';
import type { ListRequests } from './list-filter.ts';
import { decideCall, isAlwaysAllowed, LIST_METHODS, stepUpScope, type Policy, type PolicyPrincipal, type PolicyRequest } from './rules.ts';

/** JSON-RPC error code of a call refused by policy (server-defined range, as MCP servers use for auth). */
export const POLICY_DENIED_CODE = -32003;

export interface PolicyDenial {
  readonly denied: true;
  /** The rule that refused (or `default`): for the audit trail and the metric label, never the client. */
  readonly rule: string;
  readonly call: PolicyRequest;
  /** What to offer in the challenge (held scopes plus the missing one); undefined when no scope helps. */
  readonly scope: string | undefined;
  /** The JSON-RPC error answer: one per request of the body (a batch is answered as a batch). */
  readonly body: string;
}

export interface PolicyAllowance {
  readonly denied: false;
  /** What to forward: the decided messages re-serialised (see parseClientMessages). */
  readonly body: Buffer;
  /** List requests in the body by id (their answers are filtered), or undefined when there is none. */
  readonly lists: ListRequests | undefined;
}

export function enforcePolicy(
  policy: Policy,
  principal: PolicyPrincipal,
  body: Buffer,
  mirror: { method: string | undefined; name: string | undefined },
  limits: JsonRpcLimits,
): PolicyAllowance | PolicyDenial {
  const { messages, batch, canonical } = parseClientMessages(body, limits);
  checkMirrorHeaders(mirror.method, mirror.name, messages);
  let lists: Map<string | number, string> | undefined;
  for (const message of messages) {
    const call = message.call;
    if (call === undefined) continue;
    if (LIST_METHODS.has(call.method) && message.id !== undefined && message.id !== null) {
      (lists ??= new Map()).set(message.id, call.method);
    }
    if (isAlwaysAllowed(call.method)) continue;
    const decision = decideCall(policy, principal, call);
    if (decision.effect === 'deny') {
      return { denied: true, rule: decision.rule, call, scope: stepUpScope(policy, principal, call), body: denialBody(messages, batch, call) };
    }
  }
  return { denied: false, body: canonical, lists };
}

/** Each request of the body gets the same error; the message names the method and target the client sent. */
function denialBody(messages: readonly ClientMessage[], batch: boolean, denied: PolicyRequest): string {
  const message = denied.name === undefined ? `${denied.method} is not allowed for this token` : `${denied.method} ${denied.name} is not allowed for this token`;
  const answers = messages
    .filter((m) => m.call !== undefined && m.id !== undefined)
    .map((m) => ({ jsonrpc: '2.0', id: m.id, error: { code: POLICY_DENIED_CODE, message } }));
  if (answers.length === 0) return JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: POLICY_DENIED_CODE, message } });
  return JSON.stringify(batch ? answers : answers[0]);
}

/**
 * The decision for one call known from its headers alone (forward-auth): the same rules, the same
 * step-up scope; the denial body answers id null, the request's id being unseen.
 */
export function enforceCall(policy: Policy, principal: PolicyPrincipal, call: PolicyRequest): { readonly denied: false } | PolicyDenial {
  if (isAlwaysAllowed(call.method)) return { denied: false };
  const decision = decideCall(policy, principal, call);
  if (decision.effect === 'allow') return { denied: false };
  return { denied: true, rule: decision.rule, call, scope: stepUpScope(policy, principal, call), body: denialBody([], false, call) };
}
