// /mcp: a request for the upstream. Admitted (Host, token), its session checked against its principal,
// per-tool policy decided, its task ids checked, its headers rewritten, then streamed to the upstream.
// Nothing reaches the upstream before the decision.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Principal } from '../model/credentials.ts';
import { HttpError, invalidBearerToken, payloadTooLarge, writeJson, writeJsonText } from '../http/errors.ts';
import { pathOf } from '../http/serve.ts';
import { writePolicyAnswer } from '../policy/gate.ts';
import { readBody } from '../http/body.ts';
import { parseClientMessages } from '../policy/jsonrpc.ts';
import { urlElicitationRequired } from '../upstream-credentials/delivery.ts';
import { addAssertion, addCredential, admit, resourceMetadataUrl, traceparentOf } from './authenticate.ts';
import type { ProxyContext, UpstreamCredentialsOnProxy } from './context.ts';
import { rewriteHeaders } from './identity-headers.ts';
import type { ProxyRequest } from './request.ts';

/** The /mcp handler; `path` is the request's path without its query (`/mcp`). */
export async function handleMcp(ctx: ProxyContext, req: ProxyRequest, res: ServerResponse, path: string): Promise<void> {
  const { config, handles, metrics } = ctx;
  req.trace = ctx.tracing?.startRequest(req.method ?? '', '/mcp', traceparentOf(req));
  refuseAmbiguousFraming(req);
  // The presented session's record is read beside the token lookup: both leave in one write.
  const sessionRead = handles.readSession(req);
  const principal = await admit(ctx, req, { method: req.method ?? '', path: pathOf(req.url), host: req.headers.host });
  checkBodyLimit(req, config.proxy.maxBodyBytes);
  // A session id recorded for another principal: refused as unknown before its body is even read.
  const session = sessionRead === undefined ? undefined : await handles.checkSession(sessionRead, principal);
  // With a policy, the body is read and every call in it decided before anything is forwarded, a body
  // on another method is refused, and a GET stream's answer is filtered (a resumption with
  // Last-Event-ID replays earlier list answers there).
  let gated;
  if (ctx.policyGate !== undefined) {
    const deciding = performance.now();
    gated = await ctx.policyGate.decide(req, principal);
    req.trace?.step('policy decision', deciding);
  }
  // A denial no scope would lift is answered here (200, a tool error): nothing is forwarded.
  if (gated !== undefined && 'answer' in gated) {
    if (gated.by === 'policy') metrics.policyAnswered.inc();
    return writePolicyAnswer(req, res, gated.answer);
  }
  let decided = gated;
  if (req.method === 'POST') {
    const tasks = await handles.checkTasks(req, principal, decided);
    if (tasks.refusal !== undefined) {
      writeJsonText(res, 200, tasks.refusal);
      return;
    }
    decided = tasks.options;
  }
  decided = handles.watchResponse(req, principal, session, decided);
  rewriteHeaders(req, principal, ctx.addresses);
  if (ctx.upstreamCredentials !== undefined) {
    const missing = await addCredential(ctx, principal, req.headers, ctx.upstreamCredentials);
    // The body may already have been read (a policy, or the task-id scan): its bytes are used then.
    if (missing) return answerMissingCredential(ctx, req, res, principal, ctx.upstreamCredentials, decided?.body ?? decided?.bodyAsSent);
  }
  const signing = addAssertion(ctx, principal, req.headers);
  if (signing !== undefined) await signing;
  // The client left during the lookup (or while its body was read): its response is already closed
  // (and logged), so forwarding would hold an upstream request nobody reads and an in-flight slot.
  if (res.destroyed) return;
  metrics.forwarded.inc();
  // The upstream continues the trace from the sidecar's span of its request.
  if (req.trace !== undefined) req.headers.traceparent = req.trace.upstream(req.method ?? '', ctx.upstreamUrl);
  ctx.forwarder.forward(req, res, (req.url ?? '/').slice(path.length), decided);
}

/**
 * A user without a usable credential. A JSON-RPC request gets, with HTTP 200, the MCP error -32042
 * whose URL elicitation sends the user to a single-use link bound to this principal; anything else
 * (a GET stream, a notification, a batch, a body that is not JSON-RPC) gets the 401 challenge.
 */
export async function answerMissingCredential(
  ctx: ProxyContext,
  req: ProxyRequest,
  res: ServerResponse,
  principal: Principal,
  credentials: UpstreamCredentialsOnProxy,
  decidedBody: Buffer | undefined,
): Promise<void> {
  const { policy } = ctx.config;
  let id: string | number | undefined;
  if (req.method === 'POST') {
    try {
      // A body consumed elsewhere and not handed here is never waited for: the 401 answers then.
      if (decidedBody === undefined && req.readableEnded) throw new Error('body already read');
      const body = decidedBody ?? (await readBody(req, policy.maxBodyBytes));
      const { messages, batch } = parseClientMessages(body, { maxDepth: policy.maxDepth, maxBatch: policy.maxBatch });
      const only = messages[0];
      if (!batch && only?.call !== undefined && only.id !== undefined && only.id !== null) id = only.id;
    } catch {
      id = undefined;
    }
  }
  if (id === undefined) {
    ctx.metrics.credentialMissing.inc();
    throw invalidBearerToken(resourceMetadataUrl(ctx.publicUrl()));
  }
  // Counted once the link is minted: a store that cannot mint it answers 503, counted as unavailable.
  const { link, linkId } = await credentials.links.mint(principal);
  ctx.metrics.credentialMissing.inc();
  writeJson(res, 200, urlElicitationRequired(id, `${ctx.publicUrl()}/connect/${link}`, linkId, credentials.what), {
    'cache-control': 'no-store',
  });
}

/** `max` 0 is no cap. */
function checkBodyLimit(req: IncomingMessage, max: number): void {
  if (max === 0) return;
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > max) throw payloadTooLarge(max);
  // A declared length is exact (Node reads no more). Chunked bodies are counted by the forwarder as
  // they stream (src/proxy/forwarder.ts, maxBodyBytes).
}

/**
 * Node accepts any coding list that ends in chunked ("gzip, chunked", or two headers merged into
 * "identity, chunked") and would pass it on verbatim: an upstream that reads it differently desyncs
 * (request smuggling). Only plain chunked framing is forwarded.
 */
function refuseAmbiguousFraming(req: IncomingMessage): void {
  const te = req.headers['transfer-encoding'];
  if (te !== undefined && te.toLowerCase() !== 'chunked') throw new HttpError('invalid_request', 'unsupported Transfer-Encoding');
}
