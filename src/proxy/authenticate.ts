// The steps every request for the upstream takes first, on /mcp, /health and /authz alike: the Host it
// names (DNS rebinding), then its token: parse the Authorization header -> a DPoP proof checked (DPoP
// scheme) -> master check or SHA-256 -> one store round trip -> decide (credentials policy) -> the
// token's DPoP binding. Then what the upstream is told beside the identity headers: the user's own
// upstream credential and the signed caller assertion. Nothing is forwarded from here; a store that
// cannot answer rejects (503, fail closed).

import type { IncomingMessage } from 'node:http';
import {
  decideToken,
  hashToken,
  parseAuthorization,
  type AuthorizationScheme,
  type DenialReason,
  type Principal,
} from '../model/credentials.ts';
import { bearerTokenRequired, dpopChallenge, HttpError, invalidBearerToken } from '../http/errors.ts';
import { DPOP_ALGS_PARAMETER, dpopHeader, DpopProofError, sameValue, type CheckedProof } from '../oauth/dpop.ts';
import { MISSING, type CredentialHeader } from '../upstream-credentials/delivery.ts';
import { CredentialRefreshUnavailable } from '../upstream-credentials/idp-mode.ts';
import { resourceMetadataUrl } from '../oauth/resource-metadata.ts';
import type { ProxyContext, RequestTarget, UpstreamCredentialsOnProxy } from './context.ts';
import type { ProxyRequest } from './request.ts';

const MASTER: Principal = Object.freeze({ kind: 'master', subject: 'master' }) as Principal;

/** Returns the principal (also set on `req`), or throws the HttpError to answer with: the Host it names, then its token. */
export function admit(ctx: ProxyContext, req: ProxyRequest, target: RequestTarget): Promise<Principal> {
  ctx.checkHost(req, target.host);
  return authenticate(ctx, req, target);
}

/** Returns the principal (also set on `req`), or throws the HttpError to answer with. Never forwards anything. */
async function authenticate(ctx: ProxyContext, req: ProxyRequest, target: RequestTarget): Promise<Principal> {
  const { config, metrics, store, clock } = ctx;
  const parsed = parseAuthorization(req.rawHeaders);
  if (parsed.kind === 'missing') {
    metrics.denied('missing');
    const metadata = resourceMetadataUrl(ctx.publicUrl());
    throw config.oauth.requireDpop ? dpopChallenge(undefined, metadata, DPOP_ALGS_PARAMETER) : bearerTokenRequired(metadata);
  }
  if (parsed.kind === 'malformed') return deny(ctx, req, 'malformed', 'bearer');
  const { scheme } = parsed;
  // RFC 9449 §7.1: the proof first (no store round trip for a bad one); its key is compared below.
  const proof = scheme === 'dpop' ? await checkedProof(ctx, req, parsed.token, target) : undefined;
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
async function checkedProof(ctx: ProxyContext, req: ProxyRequest, token: string, target: RequestTarget): Promise<CheckedProof> {
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
 * 429 (no challenge, not counted again); otherwise the 401 and a count, not waited for. The challenge
 * is of the scheme the token came with, or DPoP for a refusal of its binding (RFC 9449 §7.1).
 */
function deny(ctx: ProxyContext, req: ProxyRequest, reason: DenialReason, scheme: AuthorizationScheme, nonceMissing = false): never {
  const { metrics, authFailures } = ctx;
  req.denial = reason;
  const address = ctx.addresses.client(req);
  const refused = authFailures?.refusal(address);
  if (refused) {
    metrics.denied('rate_limited');
    throw refused;
  }
  metrics.denied(reason);
  void authFailures?.recordFailure(address);
  const metadata = resourceMetadataUrl(ctx.publicUrl());
  if (nonceMissing) throw dpopChallenge('use_dpop_nonce', metadata, DPOP_ALGS_PARAMETER, ctx.dpop.nonces?.current(ctx.clock.now()));
  if (reason === 'dpop_proof' || reason === 'dpop_replay') throw dpopChallenge('invalid_dpop_proof', metadata, DPOP_ALGS_PARAMETER);
  if (scheme === 'dpop' || reason === 'dpop_binding') throw dpopChallenge('invalid_token', metadata, DPOP_ALGS_PARAMETER);
  throw invalidBearerToken(metadata);
}

/**
 * The principal's upstream credential header: the user's, the service token (null: none) for a
 * caller without a user, or MISSING. An unreachable provider with no valid token left is a 503.
 */
export async function credentialFor(
  credentials: UpstreamCredentialsOnProxy,
  principal: Principal,
): Promise<CredentialHeader | null | typeof MISSING> {
  try {
    return await credentials.delivery.headerFor(principal);
  } catch (err) {
    if (err instanceof CredentialRefreshUnavailable)
      throw new HttpError('temporarily_unavailable', 'the provider of your upstream credential cannot be reached; retry shortly', {
        headers: { 'retry-after': '5' },
        cause: err,
      });
    throw err;
  }
}

/** Puts `header` on the forwarded request's headers in place of any the client sent under the credential's name (null: none). */
export function setCredential(
  headers: Record<string, string | string[] | undefined>,
  credentials: UpstreamCredentialsOnProxy,
  header: CredentialHeader | null,
): void {
  delete headers[credentials.delivery.header];
  if (header !== null) headers[header.name] = header.value;
}

/**
 * The signed caller assertion (upstream.assertion) beside the identity headers, on /mcp's forwarded
 * request and in /authz's 200. Usually a cached one, set at once; a new one is signed asynchronously
 * (the promise to wait for).
 */
export function addAssertion(
  ctx: ProxyContext,
  principal: Principal,
  headers: Record<string, string | string[] | undefined>,
): Promise<void> | undefined {
  if (ctx.assertions === undefined) return undefined;
  const assertion = ctx.assertions.assertionFor(principal);
  if (typeof assertion === 'string') {
    headers['x-mcp-auth-assertion'] = assertion;
    return undefined;
  }
  return assertion.then((signed) => {
    headers['x-mcp-auth-assertion'] = signed;
  });
}

/** The request's `traceparent` header when it was sent once (two are ignored, as malformed). */
export function traceparentOf(req: IncomingMessage): string | undefined {
  const value = req.headers.traceparent;
  return typeof value === 'string' ? value : undefined;
}
