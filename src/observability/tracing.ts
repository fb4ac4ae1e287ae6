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
 * The OpenTelemetry packages tracing-otel.ts imports: optional dependencies, installed by default
 * (`npm ci --omit=dev`, the container image) and left out by `npm ci --omit=dev --omit=optional`.
 */
export const TRACING_PACKAGES = [
  '@opentelemetry/api',
  '@opentelemetry/core',
  '@opentelemetry/exporter-trace-otlp-http',
  '@opentelemetry/resources',
  '@opentelemetry/sdk-trace',
  '@opentelemetry/semantic-conventions',
] as const;

/** Tracing is configured but its packages are not installed: the message is the paragraph start-up prints. */
export class TracingUnavailableError extends Error {
  override readonly name = 'TracingUnavailableError';
}

type OtelModule = typeof import('./tracing-otel.ts');

/**
 * The SDK module; a package of it that is not installed (an install with `--omit=optional`) is a
 * TracingUnavailableError saying what to install, rather than a stack naming one file.
 */
async function loadSdk(): Promise<OtelModule> {
  try {
    return await import('./tracing-otel.ts');
  } catch (err) {
    const missing = /'(@opentelemetry\/[^'/]+)/.exec((err as Error).message)?.[1];
    if ((err as NodeJS.ErrnoException).code !== 'ERR_MODULE_NOT_FOUND' || missing === undefined) throw err;
    throw new TracingUnavailableError(
      `tracing is on (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set) but the OpenTelemetry packages are not installed (${missing} is missing): this install left out the optional dependencies (npm ci --omit=optional). Install them with \`npm ci --omit=dev\` (without --omit=optional), or \`npm install ${TRACING_PACKAGES.join(' ')}\`; or unset the OTLP endpoint variables to run without tracing.`,
    );
  }
}

/**
 * Rejects with TracingUnavailableError when tracing is on and its packages are missing, so start-up
 * can say so before anything opens; resolves at once when tracing is off (nothing is loaded).
 */
export async function checkTracingInstalled(env: NodeJS.ProcessEnv): Promise<void> {
  if (tracingOn(env)) await loadSdk();
}

function tracingOn(env: NodeJS.ProcessEnv): boolean {
  return tracingEnabled(env) && env.OTEL_SDK_DISABLED !== 'true';
}

/**
 * The tracing of this process, or undefined when off. The SDK is imported here only when on; the
 * exporter, resource and sampler read the standard `OTEL_*` variables (see docs/tracing.md).
 */
export async function createTracing(env: NodeJS.ProcessEnv): Promise<Tracing | undefined> {
  if (!tracingOn(env)) return undefined;
  const { createOtelTracing } = await loadSdk();
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
