// One error type for every refusal, whose HTTP status follows from its code: the model's rules raise
// it as every listener does. Internal causes stay in `cause` for the log; only `code` and the public
// description reach the wire (http/errors.ts writes it).

/** Each error code with the HTTP status it is answered with: the one place a status is chosen. */
const STATUS = {
  invalid_request: 400,
  invalid_grant: 400,
  invalid_target: 400,
  invalid_scope: 400,
  invalid_client_metadata: 400,
  invalid_redirect_uri: 400,
  unauthorized_client: 400,
  unsupported_grant_type: 400,
  unsupported_token_type: 400,
  // RFC 8628 §3.5: the answers to a device-code poll that is not (yet) a token.
  authorization_pending: 400,
  slow_down: 400,
  access_denied: 400,
  expired_token: 400,
  invalid_token: 401,
  // RFC 9449 §7.1 (resource) and §5 (token endpoint, 400): a DPoP proof that is missing, invalid or
  // not for this request; a proof without the server nonce.
  invalid_dpop_proof: 401,
  use_dpop_nonce: 401,
  // RFC 6749 §5.2: 401 (with a challenge when the client used Basic); 400 is allowed when it did not.
  invalid_client: 401,
  unauthorized: 401,
  // RFC 6750 §3.1: the token is valid but does not reach this far (per-tool policy).
  insufficient_scope: 403,
  // An Origin this server does not serve (DNS rebinding protection).
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  // A request whose body came too slowly: Node's own answer (proxy.requestTimeoutMs), counted under it.
  request_timeout: 408,
  // RFC 7644 §3.12: a SCIM create or change that would break a uniqueness rule.
  conflict: 409,
  payload_too_large: 413,
  // RFC 9110 §15.5.20: a Host this server does not answer for (DNS rebinding protection).
  misdirected_request: 421,
  too_many_requests: 429,
  request_header_fields_too_large: 431,
  server_error: 500,
  bad_gateway: 502,
  temporarily_unavailable: 503,
  gateway_timeout: 504,
} as const;

export type ErrorCode = keyof typeof STATUS;

/** The codes a standard lets answer with another status than STATUS gives, and which. */
const OTHER_STATUSES: { readonly [C in ErrorCode]?: readonly number[] } = {
  invalid_client: [400],
  invalid_dpop_proof: [400],
  use_dpop_nonce: [400],
};

interface HttpErrorOptions {
  headers?: Record<string, string>;
  cause?: unknown;
  /** A JSON body to send instead of `{error, error_description}` (a JSON-RPC error for an MCP client). */
  body?: string;
}

export class HttpError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly description: string | undefined;
  readonly headers: Readonly<Record<string, string>> | undefined;
  readonly body: string | undefined;

  constructor(
    code: 'invalid_client' | 'invalid_dpop_proof' | 'use_dpop_nonce',
    description?: string,
    options?: HttpErrorOptions & { status?: 400 | 401 },
  );
  constructor(code: ErrorCode, description?: string, options?: HttpErrorOptions);
  constructor(code: ErrorCode, description?: string, options?: HttpErrorOptions & { status?: number }) {
    super(description ? `${code}: ${description}` : code, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'HttpError';
    const status = options?.status;
    if (status !== undefined && status !== STATUS[code] && !OTHER_STATUSES[code]?.includes(status)) {
      throw new TypeError(`${code} is never answered with ${status}`);
    }
    this.status = status ?? STATUS[code];
    this.code = code;
    this.description = description;
    this.headers = options?.headers;
    this.body = options?.body;
  }
}
