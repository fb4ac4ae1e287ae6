// /mcp: a request for the upstream. Admitted (Host, token), its session checked against its principal,
// the user's upstream credential looked up, per-tool policy decided, its task ids checked, its headers
// rewritten, then streamed to the upstream. Nothing reaches the upstream before the decision. A user
// without a usable credential gets through the handshake and the lists (with the service token, or
// none); a request that needs it is answered with the link to connect, in the form the session's
// client declared it reads.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Principal } from '../model/credentials.ts';
import { HttpError, invalidBearerToken, payloadTooLarge, writeJson, writeJsonText } from '../http/errors.ts';
import { pathOf } from '../http/serve.ts';
import { writePolicyAnswer } from './policy-gate.ts';
import { readBody } from '../http/body.ts';
import { checkBodyHeaders, parseClientMessages, type ClientBody } from '../policy/jsonrpc.ts';
import { credentialRequired, MISSING, needsUserCredential, urlElicitationRequired } from '../upstream-credentials/delivery.ts';
import { addAssertion, admit, credentialFor, setCredential, traceparentOf } from './authenticate.ts';
import { resourceMetadataUrl } from '../oauth/resource-metadata.ts';
import type { ProxyContext, UpstreamCredentialsOnProxy } from './context.ts';
import type { DecidedOptions } from './forwarder.ts';
import type { PresentedSession, SessionRead } from './handle-guard.ts';
import { rewriteHeaders } from './identity-headers.ts';
import type { ProxyRequest } from './request.ts';

/** The /mcp handler; `path` is the request's path without its query (`/mcp`). */
export async function handleMcp(ctx: ProxyContext, req: ProxyRequest, res: ServerResponse, path: string): Promise<void> {
  req.trace = ctx.tracing?.startRequest(req.method ?? '', '/mcp', traceparentOf(req));
  refuseAmbiguousFraming(req);
  // The presented session's record is read beside the token lookup: both leave in one write.
  const sessionRead = ctx.handles.readSession(req);
  const principal = await admit(ctx, req, { method: req.method ?? '', path: pathOf(req.url), host: req.headers.host });
  await forwardAdmitted(ctx, req, res, principal, sessionRead, (req.url ?? '/').slice(path.length), false);
}

/**
 * An admitted request, from its session check on: /mcp's, or the one an ingress hands to
 * /authz-connect for a user /authz found without a usable upstream credential (`knownMissing`: not
 * looked up again, and never the user's credential on that path). `query`: appended to the upstream
 * path.
 */
export async function forwardAdmitted(
  ctx: ProxyContext,
  req: ProxyRequest,
  res: ServerResponse,
  principal: Principal,
  sessionRead: SessionRead | undefined,
  query: string,
  knownMissing: boolean,
): Promise<void> {
  const { config, handles, metrics } = ctx;
  checkBodyLimit(req, config.proxy.maxBodyBytes);
  // A session id recorded for another principal: refused as unknown before its body is even read.
  const session = sessionRead === undefined ? undefined : await handles.checkSession(sessionRead, principal);
  // The user's upstream credential is looked up before any quota is taken: a request answered for
  // want of it reaches nothing and counts against nothing.
  const credentials = ctx.upstreamCredentials;
  const credential = credentials === undefined ? undefined : knownMissing ? MISSING : await credentialFor(credentials, principal);
  const missing = credential === MISSING;
  // With a policy, the body is read and every call in it decided before anything is forwarded, a body
  // on another method is refused, and a GET stream's answer is filtered (a resumption with
  // Last-Event-ID replays earlier list answers there).
  let gated;
  if (ctx.policyGate !== undefined) {
    const deciding = performance.now();
    gated = await ctx.policyGate.decide(req, principal, missing ? needsCredential : undefined, session);
    req.trace?.step('policy decision', deciding);
  } else if (missing && req.method === 'POST') {
    gated = await readWithoutCredential(ctx, req);
  }
  // A denial no scope would lift is answered here (200, a tool error): nothing is forwarded.
  if (gated !== undefined && 'answer' in gated) {
    if (gated.by === 'policy') metrics.policyAnswered.inc();
    return writePolicyAnswer(req, res, gated.answer);
  }
  let decided = gated;
  if (req.method === 'POST') {
    const tasks = await handles.checkTasks(req, principal, decided, ctx.bodyInterest);
    if (tasks.refusal !== undefined) {
      writeJsonText(res, 200, tasks.refusal);
      return;
    }
    decided = tasks.options;
    // Read here, without a policy (which tells the trace itself): the body's trace context is continued.
    if (ctx.policyGate === undefined && req.trace !== undefined && decided?.parsed !== undefined) traceBody(req, decided.parsed);
  }
  decided = handles.watchResponse(req, principal, session, decided);
  rewriteHeaders(req, principal, ctx.addresses);
  if (credentials !== undefined) {
    if (missing) {
      // Only a body that needs the user's credential is answered; the handshake and the lists go on without it.
      if (req.method === 'POST') {
        if (decided?.parsed === undefined || needsCredential(decided.parsed))
          return answerMissingCredential(ctx, res, principal, credentials, decided?.parsed, session);
      } else if (!bodilessStreamOrEnd(req)) {
        // A body on another method was never decided: an upstream that ignores the method would run it.
        refuseWithoutCredential(ctx);
      }
      setCredential(req.headers, credentials, credentials.delivery.serviceHeader());
    } else {
      setCredential(req.headers, credentials, credential!);
    }
  }
  const signing = addAssertion(ctx, principal, req.headers);
  if (signing !== undefined) await signing;
  // The client left during the lookup (or while its body was read): its response is already closed
  // (and logged), so forwarding would hold an upstream request nobody reads and an in-flight slot.
  if (res.destroyed) return;
  metrics.forwarded.inc();
  // The upstream continues the trace from the sidecar's span of its request.
  if (req.trace !== undefined) req.headers.traceparent = req.trace.upstream(req.method ?? '', ctx.upstreamUrl);
  ctx.forwarder.forward(req, res, query, decided);
}

/** A GET (the server's stream) or a DELETE (ending a session) that declares no body. */
function bodilessStreamOrEnd(req: ProxyRequest): boolean {
  if (req.method !== 'GET' && req.method !== 'DELETE') return false;
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] === undefined && (length === undefined || /^\s*0+\s*$/.test(length));
}

/** Whether any message of the body is a request or notification only the user's credential may carry. */
function needsCredential(body: ClientBody): boolean {
  return body.messages.some((m) => m.call !== undefined && needsUserCredential(m.call.method));
}

/**
 * Without a policy, the POST body of a user without a usable credential is read whole (within the
 * policy's bound) and parsed: what it asks decides whether it goes on. One that cannot be read as
 * JSON-RPC gets the 401 challenge.
 */
async function readWithoutCredential(ctx: ProxyContext, req: ProxyRequest): Promise<DecidedOptions> {
  const { policy } = ctx.config;
  let body: Buffer;
  try {
    checkBodyHeaders(req.headers['content-type'], req.headers['content-encoding']);
    body = await readBody(req, policy.maxBodyBytes);
  } catch (err) {
    if (err instanceof HttpError && err.code === 'invalid_request') refuseWithoutCredential(ctx);
    throw err;
  }
  let parsed: ClientBody;
  try {
    parsed = parseClientMessages(body, { maxDepth: policy.maxDepth, maxBatch: policy.maxBatch });
  } catch {
    refuseWithoutCredential(ctx);
  }
  return { body: parsed.canonical, parsed };
}

/** The 401 challenge of a request without the user's credential that cannot be answered with the link. */
function refuseWithoutCredential(ctx: ProxyContext): never {
  ctx.metrics.upstreamCredentialsMissing.inc();
  ctx.metrics.credentialMissing.inc();
  throw invalidBearerToken(resourceMetadataUrl(ctx.publicUrl()));
}

function traceBody(req: ProxyRequest, body: ClientBody): void {
  req.trace!.body(body.messages.find((m) => m.call !== undefined)?.call, body.traceparent);
}

/**
 * A user without a usable credential, for a body that needs it. A single JSON-RPC request gets, with
 * HTTP 200, a link bound to this principal: as the MCP error -32042 (URL elicitation) when the
 * client declared URL elicitation (for its session, or on this request), else as a tool error (tools/call) or a JSON-RPC error
 * whose text names it. Anything else (a notification, a batch, a body that is not JSON-RPC) gets the
 * 401 challenge.
 */
export async function answerMissingCredential(
  ctx: ProxyContext,
  res: ServerResponse,
  principal: Principal,
  credentials: UpstreamCredentialsOnProxy,
  body: ClientBody | undefined,
  session: PresentedSession | undefined,
): Promise<void> {
  const only = body !== undefined && !body.batch ? body.messages[0] : undefined;
  const id = only?.call !== undefined && only.id !== undefined && only.id !== null ? only.id : undefined;
  if (id === undefined) refuseWithoutCredential(ctx);
  // Counted once the link is minted: a store that cannot mint it answers 503, counted as unavailable.
  const { link, linkId } = await credentials.links.mint(principal);
  ctx.metrics.upstreamCredentialsMissing.inc();
  ctx.metrics.credentialMissing.inc();
  const url = `${ctx.publicUrl()}/connect/${link}`;
  // Declared when the session was initialized, or on the request itself (a protocol without sessions).
  const answer =
    session?.urlElicitation === true || only!.urlElicitation === true
      ? urlElicitationRequired(id, url, linkId, credentials.what)
      : credentialRequired(id, only!.call!.method, url, credentials.what);
  writeJson(res, 200, answer, { 'cache-control': 'no-store' });
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
export function refuseAmbiguousFraming(req: IncomingMessage): void {
  const te = req.headers['transfer-encoding'];
  if (te !== undefined && te.toLowerCase() !== 'chunked') throw new HttpError('invalid_request', 'unsupported Transfer-Encoding');
}
