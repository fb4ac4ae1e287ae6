// The metrics table of docs/operations.md is generated from src/observability/metrics.ts
// (scripts/metrics-doc.ts) and must match it: a metric or label added without `npm run docs:metrics`,
// a label without its values stated, or a value the code uses that its label's doc does not name, fails here.

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { describeMetrics, labelDocs, METRICS_DOC, METRICS_MARKERS, metricsTable } from '../../scripts/metrics-doc.ts';
import { tableIn } from '../../scripts/config-doc.ts';
import { Metrics } from '../../src/observability/metrics.ts';

const ROOT = new URL('../../', import.meta.url);
const DOC = readFileSync(new URL(METRICS_DOC, ROOT), 'utf8');
const SOURCE = readFileSync(new URL('src/observability/metrics.ts', ROOT), 'utf8');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

describe('metrics table', () => {
  it(`${METRICS_DOC} holds exactly the generated table (run \`npm run docs:metrics\` to regenerate)`, () => {
    expect(tableIn(DOC, METRICS_MARKERS), `${METRICS_DOC} metrics table is stale: run \`npm run docs:metrics\``).toBe(metricsTable());
  });

  it('has one row per metric of the registry, in its order, with its type and labels', () => {
    const registered = new Metrics({ defaultMetrics: false }).registry.getMetricsAsArray();
    const described = describeMetrics();
    expect(described.map((m) => m.name)).toEqual(registered.map((m) => (m as unknown as { name: string }).name));
    expect(described.length).toBeGreaterThan(20);
    const rows = metricsTable().split('\n').slice(2);
    expect(rows).toHaveLength(described.length);
    expect(described.find((m) => m.name === 'mcp_auth_store_up')).toMatchObject({ type: 'gauge', labels: [] });
    expect(described.find((m) => m.name === 'mcp_auth_validation_seconds')?.type).toBe('histogram');
    expect(described.find((m) => m.name === 'mcp_auth_admin_operations_total')?.labels.map((l) => l.name)).toEqual(['operation', 'status']);
  });

  it('a label without an @label comment, or an @label naming no label, is an error', () => {
    const withoutDoc = SOURCE.replace(/\/\*\* @label kind `user`, `oauth_access`, `oauth_refresh` \*\//, '');
    expect(withoutDoc).not.toBe(SOURCE);
    expect(() => describeMetrics(withoutDoc)).toThrow('mcp_auth_tokens_issued_total: label kind has no @label');
    const stray = SOURCE.replace('@label kind `user`, `oauth_access`, `oauth_refresh` */', '@label kind `user`\n   * @label sort x */');
    expect(() => describeMetrics(stray)).toThrow('mcp_auth_tokens_issued_total: @label sort names no label');
  });

  it('reads a multi-line @label, and stops it at the next tag', () => {
    const source = `  /**\n   * @label a one\n   *   two\n   * @label b three\n   */\n  readonly x = new Counter({\n    name: 'm',`;
    expect(labelDocs(source).get('m')).toEqual(
      new Map([
        ['a', 'one two'],
        ['b', 'three'],
      ]),
    );
  });

  it('every label value the code passes as a literal is named, in backquotes, by that label’s doc', () => {
    const metricOf = new Map([...SOURCE.matchAll(/readonly\s+(\w+)\s*=\s*new\s+\w+\(\{\s*name:\s*'([^']+)'/g)].map((m) => [m[1]!, m[2]!]));
    const described = new Map(describeMetrics().map((m) => [m.name, m]));
    const src = fileURLToPath(new URL('src/', ROOT));
    let checked = 0;
    for (const file of sourceFiles(src)) {
      for (const call of readFileSync(file, 'utf8').matchAll(/\b(?:metrics|this)\.(\w+)\.labels\(([^()]*)\)/g)) {
        const metric = metricOf.get(call[1]!);
        if (metric === undefined) continue;
        const args = call[2]!.split(',').map((a) => a.trim());
        for (const [i, arg] of args.entries()) {
          const literal = /^'([^']+)'$/.exec(arg)?.[1];
          if (literal === undefined) continue;
          const label = described.get(metric)!.labels[i]!;
          expect(label.values, `${metric}{${label.name}="${literal}"} (${file})`).toContain(`\`${literal}\``);
          checked++;
        }
      }
    }
    expect(checked).toBeGreaterThan(20);
  });
});
