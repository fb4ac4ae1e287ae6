// The steps every request for the upstream takes first, on /mcp, /health and /authz alike: the Host it
// names (DNS rebinding), then its token: parse the Authorization header -> a DPoP proof checked (DPoP
// scheme) -> master check or SHA-256 -> one store round trip -> decide (credentials policy) -> the
// token's DPoP binding. A refused token is a decision (decision.ts), returned. Nothing is forwarded
// from here; a store that cannot answer rejects (503, fail closed).

import type { IncomingMessage } from 'node:http';
import {
  decideToken,
  hashToken,
  parseAuthorization,
  type AuthorizationScheme,
  type DenialReason,
  type Principal,
} from '../model/credentials.ts';
import { bearerTokenRequired, dpopChallenge, invalidBearerToken } from '../http/errors.ts';
import { DPOP_ALGS_PARAMETER, dpopHeader, DpopProofError, sameValue, type CheckedProof } from '../oauth/dpop.ts';
import { resourceMetadataUrl } from '../oauth/resource-metadata.ts';
import type { ProxyContext, RequestTarget } from './context.ts';
import { denied, isDecision, type Counted } from './decision.ts';
import type { ProxyRequest } from './request.ts';

const MASTER: Principal = Object.freeze({ kind: 'master', subject: 'master' }) as Principal;

/**
 * Returns the principal (also set on `req`), or the refusal of its token; throws the HttpError of a
 * Host it may not name.
 */
export function admit(ctx: ProxyContext, req: ProxyRequest, target: RequestTarget): Promise<Principal | Counted> {
  ctx.checkHost(req, target.host);
  return authenticate(ctx, req, target);
}

/** Returns the principal (also set on `req`), or the refusal of its token. Never forwards anything. */
async function authenticate(ctx: ProxyContext, req: ProxyRequest, target: RequestTarget): Promise<Principal | Counted> {
  const { config, metrics, store, clock } = ctx;
  const parsed = parseAuthorization(req.rawHeaders);
  if (parsed.kind === 'missing') {
    const metadata = resourceMetadataUrl(ctx.publicUrl());
    const challenge = config.oauth.requireDpop ? dpopChallenge(undefined, metadata, DPOP_ALGS_PARAMETER) : bearerTokenRequired(metadata);
    return denied(challenge, 'missing', undefined);
  }
  if (parsed.kind === 'malformed') return deny(ctx, req, 'malformed', 'bearer');
  const { scheme } = parsed;
  // RFC 9449 §7.1: the proof first (no store round trip for a bad one); its key is compared below.
  const proof = scheme === 'dpop' ? await checkedProof(ctx, req, parsed.token, target) : undefined;
  if (proof !== undefined && isDecision(proof)) return proof;
  // One SHA-256 a request: the store key, and what the master token is compared with (constant time).
  const tokenHash = hashToken(parsed.token);
  if (ctx.masterToken.matchesHash(tokenHash)) {
    // The master token is never bound to a key: presented as DPoP it is refused, as any unbound token is.
    if (proof !== undefined) return deny(ctx, req, 'dpop_binding', scheme);
    return (req.principal = MASTER);
  }
  const started = performance.now();
  // One store round trip. A store that cannot answer rejects (StoreUnavailableError): 503, fail closed.
  const found = await store.lookupToken(tokenHash);
  const now = clock.now();
  const decision = decideToken(tokenHash, found, now, config.idp.issuer);
  metrics.validationSeconds.observe((performance.now() - started) / 1000);
  req.trace?.step('token lookup', started, { 'mcp_auth.outcome': decision.ok ? 'valid' : decision.reason });
  if (!decision.ok) return deny(ctx, req, decision.reason, scheme);
  const principal = decision.principal;
  // A bound token only with a proof of its key; an unbound one never as DPoP, nor as Bearer where DPoP is required.
  if (principal.dpopJkt !== undefined) {
    if (proof === undefined || !sameValue(proof.jkt, principal.dpopJkt)) return deny(ctx, req, 'dpop_binding', scheme);
  } else if (proof !== undefined || config.oauth.requireDpop) {
    return deny(ctx, req, 'dpop_binding', scheme);
  }
  // Last, once the request is otherwise accepted: a proof is good for one request, on any replica.
  if (proof !== undefined && !(await ctx.dpop.spend(proof))) return deny(ctx, req, 'dpop_replay', scheme);
  ctx.lastUse?.seen(principal, now);
  return (req.principal = principal);
}

/**
 * The request's DPoP proof, checked against the request (method, URL, the token's hash), or a
 * refusal. The URL is the one the client used: PUBLIC_URL with the request's path, or the scheme
 * of PUBLIC_URL with the Host the request named (already checked against the allowed hosts).
 */
async function checkedProof(ctx: ProxyContext, req: ProxyRequest, token: string, target: RequestTarget): Promise<CheckedProof | Counted> {
  const header = dpopHeader(req.rawHeaders);
  if (header.kind !== 'proof') {
    req.dpopRefusal = header.kind;
    return deny(ctx, req, 'dpop_proof', 'dpop');
  }
  const publicUrl = ctx.publicUrl();
  const urls = [`${publicUrl}${target.path}`];
  if (target.host !== undefined) urls.push(`${new URL(publicUrl).protocol}//${target.host}${target.path}`);
  try {
    return await ctx.dpop.check(header.proof, { method: target.method, urls, accessToken: token });
  } catch (err) {
    if (!(err instanceof DpopProofError)) throw err;
    req.dpopRefusal = err.reason;
    return deny(ctx, req, 'dpop_proof', 'dpop', err.reason === 'nonce');
  }
}

/**
 * A token that fails. The limit is on failures, never on an address: a valid token is served
 * whatever others behind the same address sent. From an address over the limit a failure gets a bare
 * 429 (no challenge, counted as rate_limited); otherwise the 401 and a count, not waited for. The
 * challenge is of the scheme the token came with, or DPoP for a refusal of its binding (RFC 9449 §7.1).
 */
function deny(ctx: ProxyContext, req: ProxyRequest, reason: DenialReason, scheme: AuthorizationScheme, nonceMissing = false): Counted {
  const { authFailures } = ctx;
  const address = ctx.addresses.client(req);
  const refused = authFailures?.refusal(address);
  if (refused) return denied(refused, 'rate_limited', reason);
  void authFailures?.recordFailure(address);
  const metadata = resourceMetadataUrl(ctx.publicUrl());
  const challenge = nonceMissing
    ? dpopChallenge('use_dpop_nonce', metadata, DPOP_ALGS_PARAMETER, ctx.dpop.nonces?.current(ctx.clock.now()))
    : reason === 'dpop_proof' || reason === 'dpop_replay'
      ? dpopChallenge('invalid_dpop_proof', metadata, DPOP_ALGS_PARAMETER)
      : scheme === 'dpop' || reason === 'dpop_binding'
        ? dpopChallenge('invalid_token', metadata, DPOP_ALGS_PARAMETER)
        : invalidBearerToken(metadata);
  return denied(challenge, reason, reason);
}

/** The request's `traceparent` header when it was sent once (two are ignored, as malformed). */
export function traceparentOf(req: IncomingMessage): string | undefined {
  const value = req.headers.traceparent;
  return typeof value === 'string' ? value : undefined;
}
