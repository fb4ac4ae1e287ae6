// The one decision about a request for the upstream, on /mcp, /authz and /authz-connect alike,
// returned as a value (decision.ts) and counted when it is made: the handlers only render it. The
// steps keep the order that matters: nothing reaches the upstream before the decision, the session is
// checked before its body is read, the upstream credential is looked up before any quota is taken,
// and a client that left while it was decided is not forwarded.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Principal } from '../model/credentials.ts';
import { HttpError, invalidBearerToken, payloadTooLarge } from '../http/errors.ts';
import { readBody } from '../http/body.ts';
import { pathOf } from '../http/serve.ts';
import { OverQuota, type PolicyAnswer } from './policy-gate.ts';
import { checkBodyHeaders, parseClientMessages, type ClientBody } from '../policy/jsonrpc.ts';
import {
  credentialRequired,
  MISSING,
  needsUserCredential,
  urlElicitationRequired,
  type CredentialHeader,
} from '../upstream-credentials/delivery.ts';
import { CredentialRefreshUnavailable } from '../upstream-credentials/idp-mode.ts';
import { resourceMetadataUrl } from '../oauth/resource-metadata.ts';
import { admit } from './authenticate.ts';
import type { ProxyContext, RequestTarget, UpstreamCredentialsOnProxy } from './context.ts';
import { isDecision, refusal, settle, type Counted, type Decision } from './decision.ts';
import type { DecidedOptions } from './forwarder.ts';
import { presentedSession, type PresentedSession, type SessionRead } from './handle-guard.ts';
import { handleDigest } from './handles.ts';
import type { ProxyRequest } from './request.ts';

/** How a request whose body the sidecar holds is admitted: by its token (/mcp), or by a ticket (/authz-connect). */
export type Admission = (ctx: ProxyContext, req: ProxyRequest, session: SessionRead | undefined) => Promise<Principal | Counted>;

/** A request the sidecar forwards itself, admitted by `admission` (`knownMissing`: see decide). */
export interface Forwarding {
  readonly admission: Admission;
  readonly knownMissing: boolean;
}

/**
 * What is asked: a request the sidecar forwards itself (Forwarding; `knownMissing`: the user is known
 * to lack a usable upstream credential, not looked up again), or, at /authz, the request an ingress
 * holds and asks about (its target; its body unseen).
 */
export type Asked = Forwarding | RequestTarget;

const GONE: Decision = Object.freeze({ outcome: 'gone', principal: undefined });

/** The decision about `req`, counted. Throws only what is no decision: a store that failed, a bug. */
export function decide(ctx: ProxyContext, req: ProxyRequest, res: ServerResponse, asked: Asked): Promise<Decision> {
  return 'admission' in asked ? decideForwarded(ctx, req, res, asked.admission, asked.knownMissing) : decideChecked(ctx, req, asked);
}

/** /mcp and /authz-connect: admitted, the session checked, the credential looked up, the body decided. */
async function decideForwarded(
  ctx: ProxyContext,
  req: ProxyRequest,
  res: ServerResponse,
  admission: Admission,
  knownMissing: boolean,
): Promise<Decision> {
  const { handles, policyGate } = ctx;
  let principal: Principal | undefined;
  try {
    refuseAmbiguousFraming(req);
    // The presented session's record is read beside the token lookup: both leave in one write.
    const sessionRead = handles.readSession(req);
    const admitted = await admission(ctx, req, sessionRead);
    if (isDecision(admitted)) return settle(ctx.metrics, req, admitted);
    principal = admitted;
    checkBodyLimit(req, ctx.config.proxy.maxBodyBytes);
    // A session id recorded for another principal: refused as unknown before its body is even read.
    const session = sessionRead === undefined ? undefined : await handles.checkSession(sessionRead, principal);
    if (session instanceof HttpError) return settle(ctx.metrics, req, foreignHandle(principal, session));
    // The user's upstream credential is looked up before any quota is taken: a request answered for
    // want of it reaches nothing and counts against nothing.
    const credentials = ctx.upstreamCredentials;
    const credential = credentials === undefined ? undefined : knownMissing ? MISSING : await credentialFor(credentials, principal);
    if (credential instanceof HttpError) return settle(ctx.metrics, req, refusal(principal, credential, 'refused', credential.code));
    const missing = credential === MISSING;
    // With a policy, the body is read and every call in it decided before anything is forwarded, a body
    // on another method is refused, and a GET stream's answer is filtered (a resumption with
    // Last-Event-ID replays earlier list answers there).
    let gated: DecidedOptions | PolicyAnswer | Counted | undefined;
    if (policyGate !== undefined) {
      const deciding = performance.now();
      gated = await policyGate.decide(req, principal, missing ? needsCredential : undefined, session);
      req.trace?.step('policy decision', deciding);
    } else if (missing && req.method === 'POST') {
      gated = await readWithoutCredential(ctx, req, principal);
    }
    if (gated !== undefined && isDecision(gated)) return settle(ctx.metrics, req, gated);
    // A denial no scope would lift is answered here (200, a tool error): nothing is forwarded.
    if (gated !== undefined && 'answer' in gated) return settle(ctx.metrics, req, policyAnswered(principal, gated));
    let plan = gated;
    if (req.method === 'POST') {
      const tasks = await handles.checkTasks(req, principal, plan, ctx.bodyInterest);
      // Another caller's task: answered as an unknown one, counted as a foreign handle.
      if (tasks.refusal !== undefined)
        return settle(ctx.metrics, req, {
          outcome: 'answer',
          principal,
          answer: tasks.refusal,
          answerForm: 'jsonrpc',
          counted: 'refused',
          reason: 'foreign_handle',
        });
      plan = tasks.options;
      // Read here, without a policy (which tells the trace itself): the body's trace context is continued.
      if (policyGate === undefined && req.trace !== undefined && plan?.parsed !== undefined) traceBody(req, plan.parsed);
    }
    const watched = handles.watchResponse(req, principal, session, plan);
    let header: CredentialHeader | null | undefined;
    if (credentials !== undefined) {
      if (!missing) header = credential!;
      // Only a body that needs the user's credential is answered; the handshake and the lists go on without it.
      else if (req.method === 'POST') {
        if (watched.parsed === undefined || needsCredential(watched.parsed))
          return settle(ctx.metrics, req, await answerMissingCredential(ctx, principal, credentials, watched.parsed, session));
        header = credentials.delivery.serviceHeader();
      } else if (!bodilessStreamOrEnd(req)) {
        // A body on another method was never decided: an upstream that ignores the method would run it.
        return settle(ctx.metrics, req, withoutCredential(ctx, principal));
      } else header = credentials.delivery.serviceHeader();
    }
    // The signed caller assertion (upstream.assertion): usually a cached one; a new one is waited for.
    const signed = ctx.assertions?.assertionFor(principal);
    const assertion = typeof signed === 'object' ? await signed : signed;
    // The client left during the lookup (or while its body was read): its response is already closed
    // (and logged), so forwarding would hold an upstream request nobody reads and an in-flight slot.
    if (res.destroyed) return GONE;
    return settle(ctx.metrics, req, {
      outcome: 'forward',
      principal,
      counted: 'forwarded',
      credential: header,
      removeHeader: credentials?.delivery.header,
      assertion,
      plan: watched,
    });
  } catch (err) {
    return settle(ctx.metrics, req, thrown(err, principal));
  }
}

/**
 * /authz: the same steps as /mcp up to the decision, per-tool policy decided from the Mcp-Method /
 * Mcp-Name headers (the body stays with the ingress). Allowed is `forward` (the ingress forwards), with
 * the headers for it to copy; a user without a usable upstream credential is refused with the 401
 * challenge and a ticket that stands for the token and the request (counted as handed on: what
 * becomes of the request is counted where it is decided, at /authz-connect).
 */
async function decideChecked(ctx: ProxyContext, req: ProxyRequest, original: RequestTarget): Promise<Decision> {
  if (original.path !== '/mcp')
    return settle(ctx.metrics, req, { outcome: 'refuse', principal: undefined, error: new HttpError('not_found'), counted: 'not_found' });
  let principal: Principal | undefined;
  try {
    const admitted = await admit(ctx, req, original);
    if (isDecision(admitted)) return settle(ctx.metrics, req, admitted);
    principal = admitted;
    // Looked up before any quota is taken: a request refused for want of it counts against nothing here
    // (the sidecar's /authz-connect, deciding it afresh, counts what it forwards).
    const credentials = ctx.upstreamCredentials;
    const credential = credentials === undefined ? undefined : await credentialFor(credentials, principal);
    if (credential instanceof HttpError) return settle(ctx.metrics, req, refusal(principal, credential, 'refused', credential.code));
    if (ctx.policyGate !== undefined) {
      const deciding = performance.now();
      await ctx.policyGate.checkForwardAuth(req, principal, original.method, credential !== MISSING);
      req.trace?.step('policy decision', deciding);
    }
    const binding = ctx.handles.bindPresentedSession(req, principal);
    const foreign = binding === undefined ? undefined : await binding;
    if (foreign !== undefined) return settle(ctx.metrics, req, foreignHandle(principal, foreign));
    if (credential === MISSING) {
      const session = presentedSession(req);
      const ticket = await credentials!.links.ticket(principal, {
        method: original.method,
        session: session === undefined ? undefined : handleDigest(session),
      });
      const error = invalidBearerToken(resourceMetadataUrl(ctx.publicUrl()));
      return settle(ctx.metrics, req, { outcome: 'refuse', principal, error, ticket, counted: 'connect' });
    }
    // The signed caller assertion (upstream.assertion): usually a cached one; a new one is waited for.
    const signed = ctx.assertions?.assertionFor(principal);
    const assertion = typeof signed === 'object' ? await signed : signed;
    return settle(ctx.metrics, req, {
      outcome: 'forward',
      principal,
      counted: 'allowed',
      credential,
      removeHeader: credentials?.delivery.header,
      assertion,
      // The ingress writes the access log line of the request it holds (and can log these identity
      // headers): the sidecar's own line of an allowed check is written only when asked for.
      unlogged: !ctx.config.proxy.forwardAuthLogAllowed,
    });
  } catch (err) {
    return settle(ctx.metrics, req, thrown(err, principal));
  }
}

/** /mcp's admission: the Host it names, then its token. */
export const admitByToken: Admission = (ctx, req) =>
  admit(ctx, req, { method: req.method ?? '', path: pathOf(req.url), host: req.headers.host });

/**
 * An HttpError a step threw: the refusal, counted with its code (an answer over a quota as
 * quota_exceeded). Anything else is no decision (a store that failed, a bug): the listener answers it.
 */
function thrown(err: unknown, principal: Principal | undefined): Counted {
  if (!(err instanceof HttpError)) throw err;
  return refusal(principal, err, 'refused', err instanceof OverQuota ? 'quota_exceeded' : err.code);
}

/** The reason each kind of policy answer is counted under (`refused`). */
const POLICY_ANSWERED = { policy: 'insufficient_authorization', quota: 'quota_exceeded', approval: 'approval_required' } as const;

/** A policy's 200 answer: a denial, a quota's, or a call held for approval; each counted as refused, for its reason. */
function policyAnswered(principal: Principal, gated: PolicyAnswer): Counted {
  const reason = POLICY_ANSWERED[gated.by];
  return { outcome: 'answer', principal, answer: gated.answer.body, answerForm: 'policy', counted: 'refused', reason };
}

/** A session id bound to another caller: refused as an unknown one (`unknown`), counted as a foreign handle. */
function foreignHandle(principal: Principal, unknown: HttpError): Counted {
  return refusal(principal, unknown, 'refused', 'foreign_handle');
}

/**
 * The principal's upstream credential header: the user's, the service token (null: none) for a
 * caller without a user, or MISSING. An unreachable provider with no valid token left is a 503,
 * returned (counted as refused, under its code).
 */
async function credentialFor(
  credentials: UpstreamCredentialsOnProxy,
  principal: Principal,
): Promise<CredentialHeader | null | typeof MISSING | HttpError> {
  try {
    return await credentials.delivery.headerFor(principal);
  } catch (err) {
    if (err instanceof CredentialRefreshUnavailable)
      return new HttpError('temporarily_unavailable', 'the provider of your upstream credential cannot be reached; retry shortly', {
        headers: { 'retry-after': '5' },
        cause: err,
      });
    throw err;
  }
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
async function readWithoutCredential(ctx: ProxyContext, req: ProxyRequest, principal: Principal): Promise<DecidedOptions | Counted> {
  const { policy } = ctx.config;
  let body: Buffer;
  try {
    checkBodyHeaders(req.headers['content-type'], req.headers['content-encoding']);
    body = await readBody(req, policy.maxBodyBytes);
  } catch (err) {
    if (err instanceof HttpError && err.code === 'invalid_request') return withoutCredential(ctx, principal);
    throw err;
  }
  let parsed: ClientBody;
  try {
    parsed = parseClientMessages(body, { maxDepth: policy.maxDepth, maxBatch: policy.maxBatch });
  } catch {
    return withoutCredential(ctx, principal);
  }
  return { body: parsed.canonical, parsed };
}

/** The 401 challenge of a request without the user's credential that cannot be answered with the link. */
function withoutCredential(ctx: ProxyContext, principal: Principal): Counted {
  return refusal(principal, invalidBearerToken(resourceMetadataUrl(ctx.publicUrl())), 'refused', 'upstream_credential_missing');
}

function traceBody(req: ProxyRequest, body: ClientBody): void {
  req.trace!.body(body.messages.find((m) => m.call !== undefined)?.call, body.traceparent);
}

/**
 * A user without a usable credential, for a body that needs it. A single JSON-RPC request gets, with
 * HTTP 200, a link bound to this principal: as the MCP error -32042 (URL elicitation) when the
 * client declared URL elicitation (for its session, or on this request), else as a tool error
 * (tools/call) or a JSON-RPC error whose text names it. Anything else (a notification, a batch, a body
 * that is not JSON-RPC) gets the 401 challenge. Counted once the link is minted: a store that cannot
 * mint it answers 503, counted as unavailable.
 */
async function answerMissingCredential(
  ctx: ProxyContext,
  principal: Principal,
  credentials: UpstreamCredentialsOnProxy,
  body: ClientBody | undefined,
  session: PresentedSession | undefined,
): Promise<Counted> {
  const only = body !== undefined && !body.batch ? body.messages[0] : undefined;
  const id = only?.call !== undefined && only.id !== undefined && only.id !== null ? only.id : undefined;
  if (id === undefined) return withoutCredential(ctx, principal);
  const { link, linkId } = await credentials.links.mint(principal);
  const url = `${ctx.publicUrl()}/connect/${link}`;
  // Declared when the session was initialized, or on the request itself (a protocol without sessions).
  const answer =
    session?.urlElicitation === true || only!.urlElicitation === true
      ? urlElicitationRequired(id, url, linkId, credentials.what)
      : credentialRequired(id, only!.call!.method, url, credentials.what);
  return {
    outcome: 'answer',
    principal,
    answer: JSON.stringify(answer),
    answerForm: 'link',
    counted: 'refused',
    reason: 'upstream_credential_missing',
  };
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
