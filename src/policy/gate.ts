// The per-tool policy at the proxy listener: for a POST /mcp with a policy configured, the body is read
// within its bound, every call in it is decided, a denial is answered 403 with the step-up challenge (and
// audited and counted), and an allowed body is handed to the forwarder together with the rewriting of
// its list answers. A GET stream's list answers (a resumption replays earlier answers) are filtered too.
// Forward-auth decides the same way from the Mcp-Method / Mcp-Name headers, the body being unseen.
// Without a policy this module is never built and bodies stream unparsed.

import type { Audit } from '../audit.ts';
import { readBody } from '../body.ts';
import type { Principal } from '../credentials.ts';
import { insufficientScope } from '../errors.ts';
import type { Metrics } from '../metrics.ts';
import type { BodyRewriter, ForwardOptions } from '../proxy/forwarder.ts';
import type { ProxyRequest } from '../proxy/request.ts';
import { enforceCall, enforcePolicy, type PolicyDenial } from './enforce.ts';
import { checkBodyHeaders, type JsonRpcLimits } from './jsonrpc.ts';
import { filterMessages, SseListRewriter, type ListAnswers } from './list-filter.ts';
import { callFromHeaders } from './mirror-headers.ts';
import type { Policy, PolicyPrincipal } from './rules.ts';

/** Bound on a plain JSON list answer held while it is filtered. */
const MAX_LIST_ANSWER_BYTES = 8 * 1024 * 1024;

export interface PolicyGateOptions {
  policy: Policy;
  limits: JsonRpcLimits;
  maxBodyBytes: number;
  metrics: Metrics;
  audit: Audit;
  resourceMetadataUrl(): string;
}

export interface PolicyGate {
  readonly policy: Policy;
  /** The forwarding options for an allowed body; throws the HttpError to answer with otherwise. */
  check(req: ProxyRequest, principal: Principal): Promise<ForwardOptions>;
  /**
   * The forwarding options for a GET (the stream): its answer is filtered as a replay, since a client
   * resuming with Last-Event-ID gets earlier POSTs' answers there again.
   */
  replayed(principal: Principal): ForwardOptions;
  /**
   * Forward-auth: decides the call the request's Mcp-Method / Mcp-Name headers announce (its body is
   * never read); throws the HttpError to answer with, a 400 when the headers cannot decide it.
   */
  checkHeaders(req: ProxyRequest, principal: Principal): void;
}

export function createPolicyGate(options: PolicyGateOptions): PolicyGate {
  const { policy, limits, metrics, audit } = options;
  return {
    policy,
    async check(req, principal) {
      checkBodyHeaders(req.headers['content-type'], req.headers['content-encoding']);
      const body = await readBody(req, options.maxBodyBytes);
      const who: PolicyPrincipal = principal;
      const outcome = enforcePolicy(policy, who, body, { method: header(req, 'mcp-method'), name: header(req, 'mcp-name') }, limits);
      if (outcome.denied) refuse(outcome, principal);
      const lists = outcome.lists;
      const decided = outcome.body;
      return lists === undefined ? { body: decided } : { body: decided, rewriteResponse: (contentType) => listRewriter(policy, who, lists, contentType) };
    },
    replayed(principal) {
      const who: PolicyPrincipal = principal;
      return { rewriteResponse: (contentType) => listRewriter(policy, who, 'replayed', contentType) };
    },
    checkHeaders(req, principal) {
      const outcome = enforceCall(policy, principal, callFromHeaders(req));
      if (outcome.denied) refuse(outcome, principal);
    },
  };

  /** A denial: counted by rule, audited, answered 403 with the step-up challenge. */
  function refuse(outcome: PolicyDenial, principal: Principal): never {
    metrics.policyDenials.labels(outcome.rule).inc();
    void audit.recordRepeated(
      {
        who: principal.kind === 'master' ? 'master' : principal.clientId !== undefined ? `client:${principal.clientId}` : 'user',
        action: 'policy.deny',
        result: 'insufficient_scope',
        ...(principal.clientId !== undefined ? { clientId: principal.clientId } : {}),
        subject: principal.subject,
        detail: { method: outcome.call.method, ...(outcome.call.name !== undefined ? { name: outcome.call.name } : {}), rule: outcome.rule },
      },
      'warn',
    );
    throw insufficientScope(options.resourceMetadataUrl(), outcome.scope, outcome.body);
  }
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
