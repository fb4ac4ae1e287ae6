// The factories of the errors that carry headers, the answer to the store being unavailable, and one
// writer that turns an error into a response. The error type and its codes are the model's
// (model/errors.ts), re-exported here for the listeners and features that raise and answer it.

import type { ServerResponse } from 'node:http';
import { HttpError } from '../model/errors.ts';
import { StoreUnavailableError } from '../store/shared.ts';

export { HttpError, type ErrorCode } from '../model/errors.ts';

/**
 * The answer to anything a handler threw: an HttpError as it is, the store being unavailable as 503
 * with Retry-After, anything else (a bug) as 500 carrying the error as its cause.
 */
export function httpErrorFor(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  if (err instanceof StoreUnavailableError) return storeUnavailable(err);
  return new HttpError('server_error', undefined, { cause: err });
}

/** Storage is down or too slow: the caller must not be let through, and may retry shortly. */
export function storeUnavailable(cause: unknown): HttpError {
  return new HttpError('temporarily_unavailable', undefined, { headers: { 'retry-after': '2' }, cause });
}

/** `allow` is the Allow header: the methods the path does answer. */
export function methodNotAllowed(allow: string): HttpError {
  return new HttpError('method_not_allowed', undefined, { headers: { allow } });
}

export function payloadTooLarge(maxBytes: number): HttpError {
  return new HttpError('payload_too_large', `request bodies are limited to ${maxBytes} bytes`);
}

export function tooManyRequests(retryAfterSeconds: number, description: string): HttpError {
  return new HttpError('too_many_requests', description, { headers: { 'retry-after': String(Math.max(1, retryAfterSeconds)) } });
}

/** RFC 6750 §3: the challenge of a request without a token names where to learn how to get one. */
export function bearerTokenRequired(resourceMetadataUrl: string): HttpError {
  return new HttpError('unauthorized', 'a bearer token is required', {
    headers: { 'www-authenticate': `Bearer realm="mcp", resource_metadata="${resourceMetadataUrl}"` },
  });
}

const INVALID_TOKEN_DESCRIPTION = 'the access token is invalid, expired or revoked';

/** One answer for a malformed, unknown, revoked or expired token alike: the client learns nothing more. */
export function invalidBearerToken(resourceMetadataUrl: string): HttpError {
  return new HttpError('invalid_token', INVALID_TOKEN_DESCRIPTION, {
    headers: {
      'www-authenticate': `Bearer realm="mcp", resource_metadata="${resourceMetadataUrl}", error="invalid_token", error_description="${INVALID_TOKEN_DESCRIPTION}"`,
    },
  });
}

const DPOP_DESCRIPTIONS = {
  invalid_dpop_proof: 'the DPoP proof is missing, invalid, used before or not for this request',
  invalid_token: 'the access token is invalid, expired or revoked, or not presented as its binding requires',
  use_dpop_nonce: 'the DPoP proof must carry the nonce this server gave (DPoP-Nonce)',
} as const;

/**
 * RFC 9449 §7.1: a refusal at the resource under the DPoP scheme, with the algorithms a proof may use.
 * One description per code, whatever the cause (the log has it). `nonce`: the DPoP-Nonce to sign with.
 */
export function dpopChallenge(
  code: keyof typeof DPOP_DESCRIPTIONS | undefined,
  resourceMetadataUrl: string,
  algs: string,
  nonce?: string,
): HttpError {
  const error = code === undefined ? '' : `, error="${code}", error_description="${DPOP_DESCRIPTIONS[code]}"`;
  const headers: Record<string, string> = {
    'www-authenticate': `DPoP realm="mcp", resource_metadata="${resourceMetadataUrl}"${error}, algs="${algs}"`,
  };
  if (nonce !== undefined) headers['dpop-nonce'] = nonce;
  if (code === undefined) return new HttpError('unauthorized', 'a DPoP-bound access token is required', { headers });
  return new HttpError(code, DPOP_DESCRIPTIONS[code], { headers });
}

/** RFC 9449 §5: a DPoP proof refused at the token endpoint (400, no challenge). */
export function invalidDpopProofAtToken(nonce?: string): HttpError {
  if (nonce !== undefined)
    return new HttpError('use_dpop_nonce', DPOP_DESCRIPTIONS.use_dpop_nonce, { status: 400, headers: { 'dpop-nonce': nonce } });
  return new HttpError('invalid_dpop_proof', DPOP_DESCRIPTIONS.invalid_dpop_proof, { status: 400 });
}

/**
 * RFC 6750 §3.1 / MCP step-up: the token is good but policy refuses the call. `scope`, when some scope
 * would allow it, tells the client what to ask the user for; `body` is the JSON-RPC error answer.
 */
export function insufficientScope(resourceMetadataUrl: string, scope: string | undefined, body: string): HttpError {
  const scopePart = scope === undefined ? '' : `, scope="${scope}"`;
  return new HttpError('insufficient_scope', 'the token does not allow this call', {
    headers: { 'www-authenticate': `Bearer error="insufficient_scope"${scopePart}, resource_metadata="${resourceMetadataUrl}"` },
    body,
  });
}

/** RFC 6749 §5.2: a client that tried Basic gets the Basic challenge with its 401. */
export function invalidClient(usedBasic: boolean): HttpError {
  return new HttpError('invalid_client', 'client authentication failed', {
    headers: usedBasic ? { 'www-authenticate': 'Basic realm="mcp-bearer-proxy", charset="UTF-8"' } : {},
  });
}

/** A client_id naming a metadata document that cannot be used: 400, not 401, as nothing was authenticated. */
export function unusableClientDocument(description: string, cause?: unknown): HttpError {
  return new HttpError('invalid_client', description, cause === undefined ? { status: 400 } : { status: 400, cause });
}

/** Writes `err` as `{"error": code, "error_description"?: ...}`; never caches, never leaks `cause`. */
export function writeError(res: ServerResponse, err: HttpError): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (err.body !== undefined) {
    writeJsonText(res, err.status, err.body, err.headers);
    return;
  }
  const body: Record<string, string> = { error: err.code };
  if (err.description !== undefined) body.error_description = err.description;
  writeJson(res, err.status, body, err.headers);
}

/** Writes a JSON success body with `Cache-Control: no-store` (responses may carry secrets shown once). */
export function writeJson(res: ServerResponse, status: number, body: unknown, headers?: Readonly<Record<string, string>>): void {
  writeJsonText(res, status, JSON.stringify(body), headers);
}

/** Writes JSON text as it is (already serialised), with `Cache-Control: no-store`. */
export function writeJsonText(res: ServerResponse, status: number, payload: string, headers?: Readonly<Record<string, string>>): void {
  res.statusCode = status;
  if (headers) for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  // A protocol with a media type of its own (SCIM's application/scim+json) names it in `headers`.
  if (headers?.['content-type'] === undefined) res.setHeader('content-type', 'application/json');
  res.setHeader('cache-control', 'no-store');
  res.setHeader('content-length', Buffer.byteLength(payload));
  res.end(payload);
}
