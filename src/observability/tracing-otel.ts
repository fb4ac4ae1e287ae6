// The OpenTelemetry side of tracing, loaded only when tracing is on (see tracing.ts): an OTLP/HTTP
// exporter (JSON), a batch processor, the sampler of OTEL_TRACES_SAMPLER, the resource of
// OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES. A request's server span is started once its parent is
// known (the `traceparent` header, else the body's `params._meta.traceparent`): at the upstream request,
// or at the end for a request answered by the sidecar. Steps recorded before then become its children
// with their own start and end times. Spans carry HTTP and MCP semantic-convention attributes and the
// kind of principal; never a token, a hash, a secret or a credential.

import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  defaultTextMapGetter,
  defaultTextMapSetter,
  isSpanContextValid,
  trace,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
} from '@opentelemetry/sdk-trace';
import {
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_SERVICE_NAME,
  ATTR_URL_FULL,
} from '@opentelemetry/semantic-conventions';
import type { RequestTrace, TraceAttributes, Tracing } from './tracing-types.ts';

/** MCP attributes (the OpenTelemetry MCP semantic conventions, in development). */
const ATTR_MCP_METHOD_NAME = 'mcp.method.name';
const ATTR_GEN_AI_TOOL_NAME = 'gen_ai.tool.name';
/** The longest `traceparent` read (version 00 is 55 characters; later versions may append fields). */
const MAX_TRACEPARENT = 256;

const propagator = new W3CTraceContextPropagator();

export function createOtelTracing(env: NodeJS.ProcessEnv): Tracing {
  const provider = new TracerProvider({
    resource: defaultResource().merge(resourceFromAttributes(resourceAttributesFrom(env))),
    sampler: samplerFrom(env),
    spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter(exporterOptionsFrom(env)) })],
  });
  const tracer = provider.getTracer('mcp-bearer-proxy');
  return {
    startRequest: (method, route, traceparent) => new OtelRequestTrace(tracer, method, route, traceparent),
    async shutdown() {
      await provider.shutdown();
    },
  };
}

/**
 * The exporter's settings from `env` as the OTLP exporter specification reads them (the exporter would
 * read the process's environment; the sidecar is given its own): the traces endpoint as it is, or the
 * general endpoint with `/v1/traces` appended; headers as `key=value` pairs, comma-separated and
 * percent-encoded; the timeout in ms.
 */
export function exporterOptionsFrom(env: NodeJS.ProcessEnv): { url: string; headers: Record<string, string>; timeoutMillis?: number } {
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  const general = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() ?? '';
  const url = traces || `${general.replace(/\/+$/, '')}/v1/traces`;
  const headers = { ...keyValues(env.OTEL_EXPORTER_OTLP_HEADERS), ...keyValues(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS) };
  const timeout = Number(env.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT ?? env.OTEL_EXPORTER_OTLP_TIMEOUT);
  return { url, headers, ...(Number.isInteger(timeout) && timeout > 0 ? { timeoutMillis: timeout } : {}) };
}

/** OTEL_RESOURCE_ATTRIBUTES, then OTEL_SERVICE_NAME over its `service.name` (default: mcp-bearer-proxy). */
function resourceAttributesFrom(env: NodeJS.ProcessEnv): Record<string, string> {
  const attributes = keyValues(env.OTEL_RESOURCE_ATTRIBUTES);
  attributes[ATTR_SERVICE_NAME] = env.OTEL_SERVICE_NAME?.trim() || attributes[ATTR_SERVICE_NAME] || 'mcp-bearer-proxy';
  return attributes;
}

/** `k1=v1,k2=v2` (W3C Baggage-like, percent-encoded values); a malformed pair is skipped. */
function keyValues(text: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of (text ?? '').split(',')) {
    const at = pair.indexOf('=');
    if (at <= 0) continue;
    try {
      out[decodeURIComponent(pair.slice(0, at).trim())] = decodeURIComponent(pair.slice(at + 1).trim());
    } catch {
      // Not percent-decodable: skipped, as the specification's parsers do.
    }
  }
  return out;
}

/** OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG as the specification defines them; default parentbased_always_on. */
export function samplerFrom(env: NodeJS.ProcessEnv): Sampler {
  const name = (env.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on').trim().toLowerCase();
  const arg = Number(env.OTEL_TRACES_SAMPLER_ARG);
  const ratio = Number.isFinite(arg) && arg >= 0 && arg <= 1 ? arg : 1;
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio);
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/** The context a W3C `traceparent` names; undefined when it is missing or malformed (then ignored). */
function parentFrom(traceparent: string | undefined): Context | undefined {
  if (traceparent === undefined || traceparent.length > MAX_TRACEPARENT) return undefined;
  const context = propagator.extract(ROOT_CONTEXT, { traceparent }, defaultTextMapGetter);
  const span = trace.getSpanContext(context);
  return span !== undefined && isSpanContextValid(span) ? context : undefined;
}

/** Epoch ms of a performance.now() reading (what span times are given in). */
function epochOf(performanceMs: number): number {
  return performance.timeOrigin + performanceMs;
}

class OtelRequestTrace implements RequestTrace {
  readonly #tracer: Tracer;
  readonly #method: string;
  readonly #route: string;
  readonly #started = performance.now();
  readonly #headerParent: Context | undefined;
  #bodyParent: Context | undefined;
  #attributes: TraceAttributes = {};
  #pending: Array<{ name: string; start: number; end: number; attributes: TraceAttributes | undefined }> = [];
  #root: { span: Span; context: Context } | undefined;
  #upstream: Span | undefined;

  constructor(tracer: Tracer, method: string, route: string, traceparent: string | undefined) {
    this.#tracer = tracer;
    this.#method = method;
    this.#route = route;
    this.#headerParent = parentFrom(traceparent);
  }

  step(name: string, start: number, attributes?: TraceAttributes): void {
    const step = { name, start, end: performance.now(), attributes };
    if (this.#root === undefined) this.#pending.push(step);
    else this.#child(step);
  }

  body(call: { method: string; name?: string | undefined } | undefined, traceparent: string | undefined): void {
    if (call !== undefined) {
      this.#attributes[ATTR_MCP_METHOD_NAME] = call.method;
      if (call.method === 'tools/call' && call.name !== undefined) this.#attributes[ATTR_GEN_AI_TOOL_NAME] = call.name;
    }
    this.#bodyParent ??= parentFrom(traceparent);
  }

  upstream(method: string, url: URL): string {
    const root = this.#ensureRoot();
    const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    this.#upstream = this.#tracer.startSpan(
      method,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          [ATTR_HTTP_REQUEST_METHOD]: method,
          [ATTR_SERVER_ADDRESS]: url.hostname,
          [ATTR_SERVER_PORT]: port,
          [ATTR_URL_FULL]: `${url.origin}${url.pathname}`,
        },
      },
      root.context,
    );
    const carrier: Record<string, string> = {};
    propagator.inject(trace.setSpan(root.context, this.#upstream), carrier, defaultTextMapSetter);
    return carrier.traceparent!;
  }

  end(status: number | undefined, upstreamStatus: number | 'error' | undefined): void {
    const root = this.#ensureRoot();
    if (this.#upstream !== undefined) {
      if (typeof upstreamStatus === 'number') this.#upstream.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, upstreamStatus);
      if (upstreamStatus === 'error' || (typeof upstreamStatus === 'number' && upstreamStatus >= 400))
        this.#upstream.setStatus({ code: SpanStatusCode.ERROR });
      this.#upstream.end();
    }
    if (status !== undefined) root.span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
    // HTTP server spans are errors for 5xx only: a 4xx is the client's, not the server's failure.
    if (status === undefined || status >= 500) root.span.setStatus({ code: SpanStatusCode.ERROR });
    root.span.end();
  }

  #ensureRoot(): { span: Span; context: Context } {
    if (this.#root !== undefined) return this.#root;
    const parent = this.#headerParent ?? this.#bodyParent ?? ROOT_CONTEXT;
    const span = this.#tracer.startSpan(
      `${this.#method} ${this.#route}`,
      {
        kind: SpanKind.SERVER,
        startTime: epochOf(this.#started),
        attributes: { [ATTR_HTTP_REQUEST_METHOD]: this.#method, [ATTR_HTTP_ROUTE]: this.#route, ...this.#attributes },
      },
      parent,
    );
    this.#root = { span, context: trace.setSpan(parent, span) };
    for (const step of this.#pending) this.#child(step);
    this.#pending = [];
    return this.#root;
  }

  #child(step: { name: string; start: number; end: number; attributes: TraceAttributes | undefined }): void {
    const span = this.#tracer.startSpan(
      step.name,
      { kind: SpanKind.INTERNAL, startTime: epochOf(step.start), ...(step.attributes ? { attributes: step.attributes } : {}) },
      this.#root!.context,
    );
    span.end(epochOf(step.end));
  }
}
