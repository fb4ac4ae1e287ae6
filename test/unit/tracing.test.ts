// Tracing's switch and settings: off unless an OTLP endpoint for traces is named, and then the SDK is
// loaded; off, no module of the SDK is imported anywhere (only tracing-otel.ts names it, and only
// tracing.ts loads that, dynamically). The exporter, resource and sampler settings follow the standard
// OTEL_* variables (opentelemetry-specification, sdk-environment-variables and OTLP exporter).

import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createTracing, tracingEnabled } from '../../src/observability/tracing.ts';
import { exporterOptionsFrom, samplerFrom } from '../../src/observability/tracing-otel.ts';

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

describe('tracing: on or off', () => {
  it.each([
    [{}, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: '' }, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: '  ' }, false],
    [{ OTEL_SERVICE_NAME: 'x' }, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }, true],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' }, true],
  ])('%j: %s', (env, on) => {
    expect(tracingEnabled(env)).toBe(on);
  });

  it('off (or OTEL_SDK_DISABLED=true): no tracing object at all', async () => {
    expect(await createTracing({})).toBeUndefined();
    expect(await createTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:1', OTEL_SDK_DISABLED: 'true' })).toBeUndefined();
  });

  it('no module but tracing-otel.ts imports the OpenTelemetry packages, and only tracing.ts loads it, with a dynamic import', () => {
    const staticImport = /(?:^|\n)\s*import\s+(?!type\s)[^'";]*from\s*['"]([^'"]+)['"]/g;
    for (const file of sourceFiles(SRC)) {
      const source = readFileSync(file, 'utf8');
      const name = relative(SRC, file);
      const imported = [...source.matchAll(staticImport)].map((m) => m[1]!);
      if (name !== 'observability/tracing-otel.ts')
        expect(
          imported.filter((s) => s.startsWith('@opentelemetry/')),
          name,
        ).toEqual([]);
      expect(
        imported.filter((s) => s.endsWith('/tracing-otel.ts') || s === './tracing-otel.ts'),
        name,
      ).toEqual([]);
    }
    expect(readFileSync(join(SRC, 'observability/tracing.ts'), 'utf8')).toContain("await import('./tracing-otel.ts')");
  });
});

describe('tracing: settings from OTEL_* variables', () => {
  it('the traces endpoint as given, or the general one with /v1/traces', () => {
    expect(exporterOptionsFrom({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/custom' }).url).toBe('http://c:4318/custom');
    expect(exporterOptionsFrom({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/' }).url).toBe('http://c:4318/v1/traces');
    expect(
      exporterOptionsFrom({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t/v1/traces' }).url,
    ).toBe('http://t/v1/traces');
  });

  it('headers (percent-encoded pairs, the traces ones over the general ones) and the timeout', () => {
    const options = exporterOptionsFrom({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c',
      OTEL_EXPORTER_OTLP_HEADERS: 'api-key=a%20b,x=1,broken',
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x=2',
      OTEL_EXPORTER_OTLP_TIMEOUT: '2500',
    });
    expect(options).toEqual({ url: 'http://c/v1/traces', headers: { 'api-key': 'a b', x: '2' }, timeoutMillis: 2500 });
  });

  it.each([
    [undefined, 'ParentBased{root=AlwaysOnSampler'],
    ['always_on', 'AlwaysOnSampler'],
    ['always_off', 'AlwaysOffSampler'],
    ['traceidratio', 'TraceIdRatioBased{0.25}'],
    ['parentbased_traceidratio', 'ParentBased{root=TraceIdRatioBased{0.25}'],
    ['parentbased_always_off', 'ParentBased{root=AlwaysOffSampler'],
  ])('OTEL_TRACES_SAMPLER=%s', (name, described) => {
    expect(samplerFrom({ ...(name ? { OTEL_TRACES_SAMPLER: name } : {}), OTEL_TRACES_SAMPLER_ARG: '0.25' }).toString()).toContain(
      described,
    );
  });
});
