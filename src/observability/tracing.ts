// Tracing of proxy requests (OpenTelemetry), off unless OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set. This module is what the request path sees: an interface,
// and a loader that imports the SDK (tracing-otel.ts) only when tracing is on, so that off costs one
// `undefined` check per step and no module of the SDK is ever loaded.

import { AsyncLocalStorage } from 'node:async_hooks';
import type { RequestTrace, TraceAttributes, Tracing } from './tracing-types.ts';

export type { RequestTrace, TraceAttributes, Tracing };

/** Whether the environment turns tracing on (an OTLP endpoint for traces is named). */
export function tracingEnabled(env: NodeJS.ProcessEnv): boolean {
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim());
}

/**
 * The tracing of this process, or undefined when off. The SDK is imported here only when on; the
 * exporter, resource and sampler read the standard `OTEL_*` variables (see docs/tracing.md).
 */
export async function createTracing(env: NodeJS.ProcessEnv): Promise<Tracing | undefined> {
  if (!tracingEnabled(env) || env.OTEL_SDK_DISABLED === 'true') return undefined;
  const { createOtelTracing } = await import('./tracing-otel.ts');
  return createOtelTracing(env);
}

/**
 * The trace of the request being handled, where code far from the request needs it (IdP calls). Run
 * only when tracing is on: off, no store is ever entered and a lookup finds nothing.
 */
const currentTrace = new AsyncLocalStorage<RequestTrace>();

/** Runs `work` with `trace` as the current request's trace (directly when there is none). */
export function withTrace<T>(trace: RequestTrace | undefined, work: () => T): T {
  return trace === undefined ? work() : currentTrace.run(trace, work);
}

/** A call to the IdP, recorded as a step of the current request's trace when there is one. */
export async function idpCall<T>(name: string, work: () => Promise<T>): Promise<T> {
  const trace = currentTrace.getStore();
  if (trace === undefined) return work();
  const started = performance.now();
  let ok = false;
  try {
    const result = await work();
    ok = true;
    return result;
  } finally {
    trace.step(name, started, { 'mcp_auth.idp.ok': ok });
  }
}
