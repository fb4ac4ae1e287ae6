// What a request's trace is, shared by the interface the request path sees (tracing.ts) and the
// OpenTelemetry implementation it loads only when tracing is on (tracing-otel.ts).

/** Attribute values a step may carry: never a token, hash, secret or credential. */
export type TraceAttributes = Record<string, string | number | boolean>;

/** The trace of one request on the proxy listener (a server span and its children). */
export interface RequestTrace {
  /** A finished step of the request (token lookup, policy decision, quota), from `start` (performance.now()) to now. */
  step(name: string, start: number, attributes?: TraceAttributes): void;
  /**
   * What the body says of the call: the first request's method and tool, and its `params._meta.traceparent`,
   * continued when the request carried no valid `traceparent` header.
   */
  body(call: { method: string; name?: string | undefined } | undefined, traceparent: string | undefined): void;
  /** Starts the upstream request's span; returns the `traceparent` to send upstream. */
  upstream(method: string, url: URL): string;
  /** Ends the request's spans: the response's status, the upstream's (or `error`). */
  end(status: number | undefined, upstreamStatus: number | 'error' | undefined): void;
}

export interface Tracing {
  /** A trace for a request of `method` on `route` (`/mcp`, `/authz`), its `traceparent` header as sent. */
  startRequest(method: string, route: string, traceparent: string | undefined): RequestTrace;
  /** Exports what is buffered and stops. */
  shutdown(): Promise<void>;
}
