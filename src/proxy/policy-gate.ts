// The per-tool policy at the proxy listener: for a POST /mcp with a policy configured, the body is read
// within its bound, every call in it is decided, a denial is audited, counted and answered (the 403
// step-up challenge when a scope would lift it, else a tool error or JSON-RPC error at 200: see
// policy/enforce.ts), and an allowed body is handed to the forwarder together with the rewriting of
// its list answers. A GET stream's list answers (a resumption replays earlier answers) are filtered too.
// Forward-auth decides the same way from the Mcp-Method / Mcp-Name headers, the body being unseen.
// Only POST carries a body: any other method with one is refused, since an upstream that ignores the
// method (Go's encoding/json reads a GET's body as readily as a POST's) would run a call never decided.
// Quotas (policy.quotas) are taken after the policy allowed a body, before anything is forwarded: one
// store script per rule and caller the body's requests fall under; over a quota, a tools/call gets a
// tool error at 200 and anything else a 429 with Retry-After (see quotaAnswer). A store that cannot
// answer fails the request closed (503). A body the listener answers itself for want of the user's
// upstream credential is decided by the policy but takes no quota: nothing of it reaches the upstream.
// Without a policy or quotas this module is never built and bodies stream unparsed.

import type { ServerResponse } from 'node:http';
import type { Audit } from '../observability/audit.ts';
import { readBody } from '../http/body.ts';
import type { Principal } from '../model/credentials.ts';
import { HttpError, insufficientScope } from '../http/errors.ts';
import type { Metrics } from '../observability/metrics.ts';
import type { BodyRewriter, DecidedOptions, ForwardOptions } from './forwarder.ts';
import type { ProxyRequest } from './request.ts';
import type { Clock } from '../model/clock.ts';
import type { QuotaStorage } from '../store/types.ts';
import type { ApprovalHold } from '../policy/approval-hold.ts';
import { denialAnswer, enforceCall, enforcePolicy, type BodyRequest, type PolicyDenial } from '../policy/enforce.ts';
import {
  quotaAnswer,
  quotaCounterName,
  quotaFor,
  type QuotaCaller,
  type QuotaMatch,
  type QuotaRefusal,
  type Quotas,
} from '../policy/quotas.ts';
import { checkBodyHeaders, type ClientBody, type JsonRpcLimits } from '../policy/jsonrpc.ts';
import { filterMessages, SseListRewriter, type ListAnswers } from '../policy/list-filter.ts';
import { callFromHeaders } from '../policy/mirror-headers.ts';
import type { Policy, PolicyPrincipal } from '../policy/rules.ts';

/** Bound on a plain JSON list answer held while it is filtered. */
const MAX_LIST_ANSWER_BYTES = 8 * 1024 * 1024;

export interface PolicyGateOptions {
  policy: Policy;
  limits: JsonRpcLimits;
  maxBodyBytes: number;
  metrics: Metrics;
  audit: Audit;
  resourceMetadataUrl(): string;
  /** Per-caller quotas, when `policy.quotas` is configured. */
  quotas?: QuotaCounting | undefined;
  /** Calls an `approve` rule holds, when a rule does. */
  approvals?: ApprovalHold | undefined;
}

/** What the session says of its client: it declared URL-mode elicitation when it was initialized. */
export interface SessionFacts {
  readonly urlElicitation: boolean;
}

/** What counting quotas needs besides the rules. */
export interface QuotaCounting {
  quotas: Quotas;
  store: QuotaStorage;
  clock: Clock;
  /** The client's address as per-address limits count it (trusted proxies and the IPv6 network applied). */
  addressOf(req: ProxyRequest): string;
  /** The IDP_* provider's issuer (per-subject counters name its people by subject alone). */
  defaultIssuer?: string | undefined;
}

/** A denial answered by the sidecar with a 200 (a tool error, a JSON-RPC error): nothing is forwarded. */
export interface PolicyAnswer {
  readonly answer: { readonly body: string };
  /** Why: the policy refused (or a person denied the held call), a quota did, or the call waits for approval. */
  readonly by: 'policy' | 'quota' | 'approval';
}

export interface PolicyGate {
  readonly policy: Policy;
  /**
   * The proxy listener: the forwarding options for a request of any method. A POST's body is decided
   * (check), a GET's answer filtered (replayed); any other request must carry no body. Throws the
   * HttpError to answer with otherwise. `unforwarded`: see check.
   */
  decide(
    req: ProxyRequest,
    principal: Principal,
    unforwarded?: Unforwarded,
    session?: SessionFacts,
  ): Promise<DecidedOptions | PolicyAnswer | undefined>;
  /**
   * The forwarding options for an allowed body (with its parsed messages), or the 200 answer to a
   * denial no scope would lift; throws the HttpError to answer with otherwise (the 403 step-up
   * challenge, a bad body). An allowed body `unforwarded` says the listener answers itself takes no quota.
   */
  check(req: ProxyRequest, principal: Principal, unforwarded?: Unforwarded, session?: SessionFacts): Promise<DecidedOptions | PolicyAnswer>;
  /**
   * The forwarding options for a GET (the stream): its answer is filtered as a replay, since a client
   * resuming with Last-Event-ID gets earlier POSTs' answers there again.
   */
  replayed(principal: Principal): ForwardOptions;
  /**
   * Forward-auth: decides the call the request's Mcp-Method / Mcp-Name headers announce (its body is
   * never read); throws the HttpError to answer with, a 400 when the headers cannot decide it.
   * `counted` false: no quota is taken.
   */
  checkHeaders(req: ProxyRequest, principal: Principal, counted?: boolean): Promise<void>;
  /**
   * Forward-auth, for a request of any method: a POST is decided by checkHeaders. Any other must show
   * no body, and only GET (the stream) and DELETE (ending a session) are allowed: ingresses do not pass
   * a body's framing headers to the check (see refuseForwardAuthMethod). `counted` false: the policy
   * decides, no quota is taken (a request the check refuses for another reason right after).
   */
  checkForwardAuth(req: ProxyRequest, principal: Principal, method: string, counted?: boolean): Promise<void>;
  /** A graceful stop: resolves once the approval notices already sent are delivered or failed. */
  settled(): Promise<void>;
}

/** Whether the listener will answer an allowed body itself, never forwarding it (a user without their upstream credential). */
export type Unforwarded = (body: ClientBody) => boolean;

export function createPolicyGate(options: PolicyGateOptions): PolicyGate {
  const { policy, limits } = options;
  const gate: PolicyGate = {
    policy,
    async settled() {
      await options.approvals?.deliveriesSettled();
    },
    async decide(req, principal, unforwarded, session) {
      if (req.method === 'POST') return gate.check(req, principal, unforwarded, session);
      refuseBody(req.method ?? '', req.headers);
      return req.method === 'GET' ? gate.replayed(principal) : undefined;
    },
    async check(req, principal, unforwarded, session) {
      checkBodyHeaders(req.headers['content-type'], req.headers['content-encoding']);
      const body = await readBody(req, options.maxBodyBytes);
      const who: PolicyPrincipal = principal;
      const outcome = enforcePolicy(policy, who, body, { method: header(req, 'mcp-method'), name: header(req, 'mcp-name') }, limits);
      if (outcome.trace !== undefined) req.trace?.body(outcome.trace.call, outcome.trace.traceparent);
      if (outcome.denied) return { answer: { body: refuse(options, outcome, principal) }, by: 'policy' };
      let decided = outcome.body;
      const counted = unforwarded === undefined || !unforwarded(outcome.parsed);
      // A body the listener answers itself (the user's upstream credential is missing) is not held:
      // an approval asked or used for it would be spent on a call that never runs.
      if (outcome.held !== undefined && counted) {
        // Held for approval: answered here (and not counted against a quota) until approved; then the
        // approval is used and the call goes on as any other.
        const caller = {
          principal,
          protocolVersion: header(req, 'mcp-protocol-version'),
          urlElicitation: session?.urlElicitation === true,
        };
        const held = await options.approvals!.hold(outcome.held, caller, outcome.body);
        // A call a person denied is answered as every denial no scope lifts.
        if ('answer' in held) return { answer: { body: held.answer }, by: held.denied ? 'policy' : 'approval' };
        decided = held.forward;
      }
      const over = counted ? await takeQuotas(options.quotas, req, principal, outcome.requests, outcome.batch) : undefined;
      if (over !== undefined) return { answer: { body: refuseOverQuota(options, over, principal) }, by: 'quota' };
      const { lists, parsed } = outcome;
      return lists === undefined
        ? { body: decided, parsed }
        : { body: decided, parsed, rewriteResponse: (contentType) => listRewriter(policy, who, lists, contentType) };
    },
    replayed(principal) {
      const who: PolicyPrincipal = principal;
      return { rewriteResponse: (contentType) => listRewriter(policy, who, 'replayed', contentType) };
    },
    async checkHeaders(req, principal, counted = true) {
      const call = callFromHeaders(req);
      const outcome = enforceCall(policy, principal, call);
      if (outcome.denied) refuse(options, outcome, principal);
      if (!counted) return;
      // The request's id is unseen and an ingress cannot carry a tool error: over a quota is a 429.
      const over = await takeQuotas(options.quotas, req, principal, [{ id: null, call }], false);
      if (over !== undefined) refuseOverQuota(options, { ...over, requestIds: [] }, principal);
    },
    async checkForwardAuth(req, principal, method, counted) {
      const upper = method.toUpperCase();
      if (upper === 'POST') return gate.checkHeaders(req, principal, counted);
      refuseBody(upper, req.headers);
      refuseForwardAuthMethod(upper);
    },
  };
  return gate;
}

/**
 * Takes the body's requests from the quotas that count them: requests under one rule and caller are
 * taken together (all or nothing), one store script each, in the order they first appear. The first
 * that does not fit is the refusal; what earlier groups took stays taken.
 */
async function takeQuotas(
  counting: QuotaCounting | undefined,
  req: ProxyRequest,
  principal: Principal,
  requests: readonly BodyRequest[],
  batch: boolean,
): Promise<QuotaRefusal | undefined> {
  if (counting === undefined || requests.length === 0) return undefined;
  const caller: QuotaCaller = { principal, address: counting.addressOf(req), defaultIssuer: counting.defaultIssuer };
  const groups = new Map<string, { match: QuotaMatch; cost: number; first: BodyRequest }>();
  for (const request of requests) {
    const match = quotaFor(counting.quotas, caller, request.call);
    if (match === undefined) continue;
    const name = quotaCounterName(match);
    const group = groups.get(name);
    if (group === undefined) groups.set(name, { match, cost: 1, first: request });
    else group.cost++;
  }
  for (const [name, { match, cost, first }] of groups) {
    const { rule } = match;
    const taking = performance.now();
    const outcome = await counting.store.takeQuota(name, cost, rule.limit, rule.windowSeconds * 1000, counting.clock.now());
    req.trace?.step('quota', taking, { 'mcp_auth.quota.rule': rule.label, 'mcp_auth.quota.allowed': outcome.allowed });
    if (!outcome.allowed) return { rule, call: first.call, resetAt: outcome.resetAt, requestIds: requests.map((r) => r.id), batch };
  }
  return undefined;
}

/**
 * A request over a quota: counted by rule and audited (aggregated like denials); a tools/call's tool
 * error returned, anything else's 429 thrown (its outcome is counted where the request is decided).
 */
function refuseOverQuota(options: PolicyGateOptions, refusal: QuotaRefusal, principal: Principal): string {
  const { metrics, audit } = options;
  metrics.quotaRefusals.labels(refusal.rule.label).inc();
  const eventId = audit.recordRepeated(
    {
      who: principal.kind === 'master' ? 'master' : principal.clientId !== undefined ? `client:${principal.clientId}` : 'user',
      action: 'quota.refuse',
      result: 'quota_exceeded',
      ...(principal.clientId !== undefined ? { clientId: principal.clientId } : {}),
      subject: principal.subject,
      detail: {
        method: refusal.call.method,
        ...(refusal.call.name !== undefined ? { name: refusal.call.name } : {}),
        rule: refusal.rule.label,
      },
    },
    'warn',
  );
  const answer = quotaAnswer(refusal, eventId, options.quotas!.clock.now());
  if (answer.status === 429) throw new OverQuota(answer.retryAfterSeconds, answer.description);
  return answer.body;
}

/** The 429 of a request over a quota: a type of its own, so that its outcome is counted as the quota's. */
export class OverQuota extends HttpError {
  constructor(retryAfterSeconds: number, description: string) {
    super('too_many_requests', description, { headers: { 'retry-after': String(Math.max(1, retryAfterSeconds)) } });
  }
}

/**
 * A denial: counted by rule and audited; a 403 (the step-up challenge, with a scope when one would lift
 * it) is thrown, a 200 answer's body returned. The audit event's id is the answer's authorization
 * context, so what the client quotes finds the event.
 */
function refuse(options: PolicyGateOptions, outcome: PolicyDenial, principal: Principal): string {
  const { metrics, audit } = options;
  metrics.policyDenials.labels(outcome.rule).inc();
  const eventId = audit.recordRepeated(
    {
      who: principal.kind === 'master' ? 'master' : principal.clientId !== undefined ? `client:${principal.clientId}` : 'user',
      action: 'policy.deny',
      result: outcome.scope !== undefined ? 'insufficient_scope' : 'insufficient_authorization',
      ...(principal.clientId !== undefined ? { clientId: principal.clientId } : {}),
      subject: principal.subject,
      detail: {
        method: outcome.call.method,
        ...(outcome.call.name !== undefined ? { name: outcome.call.name } : {}),
        rule: outcome.rule,
      },
    },
    'warn',
  );
  const answer = denialAnswer(outcome, eventId);
  if (answer.status === 403) throw insufficientScope(options.resourceMetadataUrl(), outcome.scope, answer.body);
  return answer.body;
}

/**
 * With a policy, only a POST carries a body to the upstream: a request of another method that declares
 * one (`Content-Length` above 0, or any `Transfer-Encoding`) is refused. A GET with `Content-Length: 0`
 * has no body and passes. 400, not 405: GET and DELETE are methods /mcp answers; what is refused is the
 * body on them (the MCP transport carries JSON-RPC only in a POST's body), and nginx's auth_request
 * takes a 405 from the check as a failure (500), while the example configuration passes a 400 on.
 */
export function refuseBody(method: string, headers: ProxyRequest['headers']): void {
  const length = headers['content-length'];
  const declared = (length !== undefined && !/^0+$/.test(length.trim())) || headers['transfer-encoding'] !== undefined;
  if (declared)
    throw new HttpError('invalid_request', `with a per-tool policy only a POST carries a body on /mcp: a ${method} with a body is refused`);
}

/**
 * Forward-auth, any method but POST: the ingress forwards the body itself, and neither nginx's
 * auth_request nor Caddy's forward_auth passes the client's `Content-Length` / `Transfer-Encoding` to
 * the check, so a body is not always visible here. What MCP uses passes: GET (the server's stream) and
 * DELETE (ending a session); every other method is refused, body or not.
 */
function refuseForwardAuthMethod(method: string): void {
  if (method === 'GET' || method === 'DELETE') return;
  throw new HttpError(
    'invalid_request',
    `with a per-tool policy /mcp answers POST, GET and DELETE only behind an ingress: ${method} is refused`,
  );
}

/**
 * Writes a denial's 200 answer. As JSON, unless the request accepts only `text/event-stream` (a
 * Streamable HTTP client must accept both, and the SDK's takes a JSON answer to a POST): then as the one
 * SSE `message` event that answers it.
 */
export function writePolicyAnswer(req: ProxyRequest, res: ServerResponse, answer: PolicyAnswer['answer']): void {
  const sse = acceptsOnlyEventStream(req.headers.accept);
  const body = sse ? `event: message\ndata: ${answer.body}\n\n` : answer.body;
  res.writeHead(200, {
    'content-type': sse ? 'text/event-stream' : 'application/json',
    'cache-control': 'no-store',
    'content-length': String(Buffer.byteLength(body)),
  });
  res.end(body);
}

function acceptsOnlyEventStream(accept: string | undefined): boolean {
  if (accept === undefined) return false;
  const types = accept.split(',').map((t) => t.split(';')[0]!.trim().toLowerCase());
  return types.includes('text/event-stream') && !types.some((t) => t === 'application/json' || t === 'application/*' || t === '*/*');
}

function listRewriter(policy: Policy, who: PolicyPrincipal, lists: ListAnswers, contentType: string): BodyRewriter | undefined {
  if (contentType.startsWith('application/json')) {
    return {
      kind: 'whole',
      maxBytes: MAX_LIST_ANSWER_BYTES,
      rewrite(body) {
        const text = filterMessages(policy, who, lists, JSON.parse(body.toString('utf8')));
        return text ?? body;
      },
    };
  }
  if (contentType.startsWith('text/event-stream')) {
    const rewriter = new SseListRewriter(policy, who, lists);
    return { kind: 'stream', feed: (chunk) => rewriter.feed(chunk), end: () => rewriter.end() };
  }
  return undefined;
}

function header(req: ProxyRequest, name: string): string | undefined {
  const value = req.headers[name];
  return typeof value === 'string' ? value : undefined;
}
