// The metrics table of docs/operations.md, generated from src/observability/metrics.ts: each metric's
// name, type and help as the registry holds them, and the values of each of its labels as its
// `@label <name> <values>` doc comment states them. A label without such a comment, or a comment
// naming no label of its metric, is an error: every label's values are bounded, and said so.
//
//   npm run docs:metrics                rewrite the table in docs/operations.md between the markers
//   tsx scripts/metrics-doc.ts --check  exit 1 when the table differs (what the unit test checks)
//   tsx scripts/metrics-doc.ts --print  print the table

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Counter, Gauge, Histogram, Summary } from 'prom-client';
import { cell, code, tableCommand, type Markers } from './config-doc.ts';
import { Metrics } from '../src/observability/metrics.ts';

export const METRICS_MARKERS: Markers = { start: '<!-- metrics:start -->', end: '<!-- metrics:end -->' };
export const METRICS_DOC = 'docs/operations.md';

const SOURCE = new URL('../src/observability/metrics.ts', import.meta.url);

export interface MetricDoc {
  name: string;
  type: 'counter' | 'gauge' | 'histogram' | 'summary';
  help: string;
  labels: { name: string; values: string }[];
}

/**
 * The `@label` lines of the doc comment right before each `new Counter/Gauge/Histogram({ name: '…'`,
 * by metric name: label name → its values (a comment line that does not start a tag continues the one before).
 */
export function labelDocs(source: string): Map<string, Map<string, string>> {
  const found = new Map<string, Map<string, string>>();
  const metric = /\/\*\*((?:(?!\*\/)[\s\S])*)\*\/\s*readonly\s+\w+\s*=\s*new\s+\w+\(\{\s*name:\s*'([^']+)'/g;
  for (const m of source.matchAll(metric)) {
    const labels = new Map<string, string>();
    let current: string | undefined;
    for (const raw of m[1]!.split('\n')) {
      const line = raw.replace(/^\s*\*?\s?/, '').trim();
      const tag = /^@label\s+(\w+)\s+(.+)$/.exec(line);
      if (tag) {
        current = tag[1]!;
        labels.set(current, tag[2]!);
      } else if (line.startsWith('@')) {
        current = undefined;
      } else if (current !== undefined && line !== '') {
        labels.set(current, `${labels.get(current)!} ${line}`);
      }
    }
    found.set(m[2]!, labels);
  }
  return found;
}

function typeOf(metric: unknown, name: string): MetricDoc['type'] {
  if (metric instanceof Counter) return 'counter';
  if (metric instanceof Gauge) return 'gauge';
  if (metric instanceof Histogram) return 'histogram';
  if (metric instanceof Summary) return 'summary';
  throw new Error(`metric of an unknown type: ${name}`);
}

/** Every metric of the sidecar's registry (Node's default process metrics aside), in registration order. */
export function describeMetrics(source: string = readFileSync(SOURCE, 'utf8')): MetricDoc[] {
  const docs = labelDocs(source);
  const metrics = new Metrics({ defaultMetrics: false }).registry.getMetricsAsArray();
  return metrics.map((metric) => {
    const { name, help } = metric as unknown as { name: string; help: string };
    const labelNames = ((metric as unknown as { labelNames?: readonly string[] }).labelNames ?? []).slice();
    const documented = docs.get(name) ?? new Map<string, string>();
    for (const label of documented.keys()) {
      if (!labelNames.includes(label)) throw new Error(`${name}: @label ${label} names no label of the metric`);
    }
    const labels = labelNames.map((label) => {
      const values = documented.get(label);
      if (values === undefined) throw new Error(`${name}: label ${label} has no @label doc comment stating its values`);
      return { name: label, values };
    });
    return { name, type: typeOf(metric, name), help, labels };
  });
}

/** The markdown table (no trailing newline). */
export function metricsTable(metrics: readonly MetricDoc[] = describeMetrics()): string {
  const rows = metrics.map((m) =>
    [code(m.name), m.type, m.labels.length > 0 ? m.labels.map((l) => `${code(l.name)}: ${l.values}`).join('; ') : '—', m.help]
      .map(cell)
      .join(' | '),
  );
  return ['| metric | type | labels and their values | help |', '|---|---|---|---|', ...rows.map((r) => `| ${r} |`)].join('\n');
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  process.exitCode = tableCommand(process.argv.slice(2), {
    what: 'metrics',
    table: metricsTable(),
    markers: METRICS_MARKERS,
    source: 'src/observability/metrics.ts',
    script: 'npm run docs:metrics',
    usage: 'tsx scripts/metrics-doc.ts',
    file: METRICS_DOC,
  });
}
