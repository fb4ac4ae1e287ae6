// The OpenTelemetry packages are optional dependencies: an install without them (`npm ci --omit=dev
// --omit=optional`) runs the sidecar without tracing, and one that asks for tracing anyway
// (OTEL_EXPORTER_OTLP_ENDPOINT) is refused at start-up, exit 2, with one paragraph naming what to
// install. The missing packages are simulated by an import hook (test/support/without-opentelemetry.ts)
// that makes Node's own resolver fail for them.

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { generateToken } from '../../src/model/credentials.ts';
import { TRACING_PACKAGES } from '../../src/observability/tracing.ts';
import { RUN_TS } from '../support/node-ts.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const WITHOUT_OTEL = ['--import', './test/support/without-opentelemetry.ts'];

function checkConfig(env: Record<string, string>, hook: readonly string[] = WITHOUT_OTEL) {
  const result = spawnSync(
    process.execPath,
    [...RUN_TS, ...hook, 'src/entry/main.ts', '--config', 'config.yaml', '--check-config', '--skip-network-checks'],
    {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', BEARER_SECRET_MASTER: generateToken(), ...env },
      encoding: 'utf8',
      timeout: 25_000,
    },
  );
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('tracing without its optional packages', () => {
  it('tracing off: the configuration checks out, nothing of OpenTelemetry is needed', () => {
    const r = checkConfig({});
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('configuration OK');
  }, 30_000);

  it('OTEL_EXPORTER_OTLP_ENDPOINT set: exit 2 with one paragraph naming the packages and how to install them', () => {
    const r = checkConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' });
    expect(r.status).toBe(2);
    expect(r.stdout).not.toContain('configuration OK');
    const lines = r.stderr.trimEnd().split('\n');
    expect(lines, r.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(/^mcp-bearer-proxy: tracing is on \(OTEL_EXPORTER_OTLP_ENDPOINT/);
    expect(lines[0]).toMatch(/\(@opentelemetry\/[a-z-]+ is missing\)/);
    expect(lines[0]).toContain('npm ci --omit=dev');
    for (const name of TRACING_PACKAGES) expect(lines[0]).toContain(name);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  }, 30_000);

  it('the same with OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; OTEL_SDK_DISABLED=true turns tracing off, so nothing is missing', () => {
    expect(checkConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:4318/v1/traces' }).status).toBe(2);
    expect(checkConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_SDK_DISABLED: 'true' }).status).toBe(0);
  }, 60_000);

  it('with the packages installed (no hook), the same variables check out', () => {
    const r = checkConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }, []);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  }, 30_000);

  it('the packages named are exactly the optional dependencies of package.json', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      dependencies: Record<string, string>;
      optionalDependencies: Record<string, string>;
    };
    expect(Object.keys(pkg.optionalDependencies).sort()).toEqual([...TRACING_PACKAGES].sort());
    expect(Object.keys(pkg.dependencies).filter((d) => d.startsWith('@opentelemetry/'))).toEqual([]);
  });

  it("the Dockerfile's production install keeps them: tracing is one variable away in the image", () => {
    const installs = readFileSync(new URL('../../Dockerfile', import.meta.url), 'utf8')
      .split('\n')
      .filter((l) => /npm ci --omit=dev/.test(l));
    expect(installs).toHaveLength(1);
    expect(installs[0]).not.toContain('--omit=optional');
  });
});
