// One error type with a stable code and HTTP status, and one writer that turns it into a response.
// Internal causes stay in `cause` for the log; only `code` and the public description reach the wire.

import type { ServerResponse } from 'node:http';

export type ErrorCode =
  | 'invalid_token'
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'invalid_target'
  | 'invalid_scope'
  | 'invalid_client_metadata'
  | 'invalid_redirect_uri'
  | 'unauthorized_client'
  | 'unsupported_grant_type'
  | 'unsupported_token_type'
  | 'unauthorized'
  | 'not_found'
  | 'method_not_allowed'
  | 'payload_too_large'
  | 'request_header_fields_too_large'
  | 'too_many_requests'
  | 'temporarily_unavailable'
  | 'bad_gateway'
  | 'gateway_timeout'
  | 'server_error';

export class HttpError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly description: string | undefined;
  readonly headers: Readonly<Record<string, string>> | undefined;

  constructor(
    status: number,
    code: ErrorCode,
    description?: string,
    options?: { headers?: Record<string, string>; cause?: unknown },
  ) {
    super(description ? `${code}: ${description}` : code, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'HttpError';
    this.status = status;
    this.code = code;
    this.description = description;
    this.headers = options?.headers;
  }
}

/**
 * The backing store could not answer (connection down, command timed out, replica acknowledgement lost).
 * Stores throw this, and only this, for infrastructure failures, so a listener can tell an outage (503,
 * retry later) from a bug (500).
 */
export class StoreUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreUnavailableError';
  }
}

/** Storage is down or too slow: the caller must not be let through, and may retry shortly. */
export function storeUnavailable(cause: unknown): HttpError {
  return new HttpError(503, 'temporarily_unavailable', undefined, { headers: { 'retry-after': '2' }, cause });
}

export function notFound(): HttpError {
  return new HttpError(404, 'not_found');
}

/** Writes `err` as `{"error": code, "error_description"?: ...}`; never caches, never leaks `cause`. */
export function writeError(res: ServerResponse, err: HttpError): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body: Record<string, string> = { error: err.code };
  if (err.description !== undefined) body.error_description = err.description;
  const payload = JSON.stringify(body);
  res.statusCode = err.status;
  if (err.headers) for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
  res.setHeader('content-type', 'application/json');
  res.setHeader('cache-control', 'no-store');
  res.setHeader('content-length', Buffer.byteLength(payload));
  res.end(payload);
}

/** Writes a JSON success body with `Cache-Control: no-store` (responses may carry secrets shown once). */
export function writeJson(res: ServerResponse, status: number, body: unknown, headers?: Record<string, string>): void {
  const payload = JSON.stringify(body);
  res.statusCode = status;
  if (headers) for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  res.setHeader('content-type', 'application/json');
  res.setHeader('cache-control', 'no-store');
  res.setHeader('content-length', Buffer.byteLength(payload));
  res.end(payload);
}
