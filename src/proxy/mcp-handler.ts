// /mcp: a request for the upstream, decided (decide.ts: admitted, its session checked against its
// principal, the user's upstream credential looked up, per-tool policy decided, its task ids checked),
// then rendered: forwarded with its headers rewritten, or answered here. Nothing reaches the upstream
// before the decision. A user without a usable credential gets through the handshake and the lists
// (with the service token, or none); a request that needs it is answered with the link to connect, in
// the form the session's client declared it reads.

import type { ServerResponse } from 'node:http';
import { writeJsonText } from '../http/errors.ts';
import { writePolicyAnswer } from './policy-gate.ts';
import { traceparentOf } from './authenticate.ts';
import type { ProxyContext } from './context.ts';
import { admitByToken, decide, type Forwarding } from './decide.ts';
import { setDecidedHeaders, type Decision } from './decision.ts';
import { rewriteHeaders } from './identity-headers.ts';
import type { ProxyRequest } from './request.ts';

const BY_TOKEN: Forwarding = { admission: admitByToken, knownMissing: false };
const NO_STORE = { 'cache-control': 'no-store' } as const;

/** The /mcp handler; `path` is the request's path without its query (`/mcp`). */
export async function handleMcp(ctx: ProxyContext, req: ProxyRequest, res: ServerResponse, path: string): Promise<void> {
  req.trace = ctx.tracing?.startRequest(req.method ?? '', '/mcp', traceparentOf(req));
  renderForwarded(ctx, req, res, await decide(ctx, req, res, BY_TOKEN), (req.url ?? '/').slice(path.length));
}

/**
 * A decision rendered by forwarding (/mcp, /authz-connect): refused (thrown to the listener's error
 * writer), answered, or sent to the upstream. `query`: appended to the upstream path.
 */
export function renderForwarded(ctx: ProxyContext, req: ProxyRequest, res: ServerResponse, decision: Decision, query: string): void {
  switch (decision.outcome) {
    case 'refuse':
      throw decision.error!;
    case 'gone':
      return;
    case 'answer':
      if (decision.answerForm === 'policy') return writePolicyAnswer(req, res, { body: decision.answer! });
      return writeJsonText(res, 200, decision.answer!, decision.answerForm === 'link' ? NO_STORE : undefined);
    case 'forward':
      rewriteHeaders(req, decision.principal!, ctx.addresses);
      setDecidedHeaders(req.headers, decision);
      // The upstream continues the trace from the sidecar's span of its request.
      if (req.trace !== undefined) req.headers.traceparent = req.trace.upstream(req.method ?? '', ctx.upstreamUrl);
      ctx.forwarder.forward(req, res, query, decision.plan);
  }
}
