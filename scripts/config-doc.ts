// The configuration tables of docs/configuration.md, generated from what src/config/keys.ts declares
// (describeConfigKeys): every key, its environment variable, type or range, default and meaning, in two
// tables by tier (the essential keys, then the tuning ones). The
// writing and checking of a generated table (tableCommand) serves the admin operations' table
// (scripts/admin-doc.ts) and the metrics table (scripts/metrics-doc.ts) too.
//
//   npm run docs:config                rewrite the table in docs/configuration.md between the markers
//   tsx scripts/config-doc.ts --check  exit 1 when the table differs (what the unit test checks)
//   tsx scripts/config-doc.ts --print  print the table

import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describeConfigKeys, type ConfigKeyInfo } from '../src/config/keys.ts';
import type { Tier } from '../src/config/spec.ts';

export const TABLE_START = '<!-- config:start -->';
export const TABLE_END = '<!-- config:end -->';
export const CONFIG_DOC = 'docs/configuration.md';

export function code(text: string): string {
  return `\`${text}\``;
}

function formatDefault(value: unknown): string {
  if (value === undefined) return 'unset';
  if (Array.isArray(value)) return value.length === 0 ? code('[]') : code(value.join(', '));
  return code(String(value));
}

export function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

/** What each tier's table is headed by. */
const TIER_HEADINGS: Record<Tier, string> = {
  essential:
    '### Essential settings\n\nWhat a deployment sets: its secrets, addresses and identity provider, and the switches of its features. `config.yaml` lists these, and the README names them.',
  tuning:
    '### Tuning\n\nDefaults that suit most deployments: bounds, timeouts, rate limits, caches and lifetimes. Set one in `config.yaml`, the environment (where a variable is named) or a flag when its default does not fit.',
};

/** The markdown of the two tables, essential keys first (no trailing newline). */
export function configTable(keys: ConfigKeyInfo[] = describeConfigKeys()): string {
  const tiers: Tier[] = ['essential', 'tuning'];
  return tiers
    .map((tier) => {
      const rows = keys
        .filter((k) => k.tier === tier)
        .map((k) =>
          [code(k.key), k.env ? code(k.env) : '', k.type, k.defaultText ?? formatDefault(k.default), k.description].map(cell).join(' | '),
        );
      return [
        TIER_HEADINGS[tier],
        '',
        '| key | env | type | default | description |',
        '|---|---|---|---|---|',
        ...rows.map((r) => `| ${r} |`),
      ].join('\n');
    })
    .join('\n\n');
}

/** Where a generated table sits in its document: between two HTML comments. */
export interface Markers {
  start: string;
  end: string;
}

const CONFIG_MARKERS: Markers = { start: TABLE_START, end: TABLE_END };

function between(doc: string, markers: Markers): [start: number, end: number] {
  const start = doc.indexOf(markers.start);
  const end = doc.indexOf(markers.end);
  if (start === -1 || end === -1 || end < start) throw new Error(`the document must contain ${markers.start} and then ${markers.end}`);
  return [start + markers.start.length, end];
}

/** `doc` with the text between the markers replaced by `table`; throws when the markers are missing. */
export function withTable(doc: string, table: string, markers: Markers = CONFIG_MARKERS): string {
  const [start, end] = between(doc, markers);
  return `${doc.slice(0, start)}\n${table}\n${doc.slice(end)}`;
}

/** The table currently between the markers, trimmed. */
export function tableIn(doc: string, markers: Markers = CONFIG_MARKERS): string {
  const [start, end] = between(doc, markers);
  return doc.slice(start, end).trim();
}

/**
 * A generated table's command: `--write` (default), `--check` (exit 1 when stale) or `--print`. The
 * table sits in `file` (a path from the repository's root).
 */
export function tableCommand(
  argv: string[],
  t: { what: string; table: string; markers: Markers; source: string; script: string; usage: string; file: string },
): number {
  const file = t.file;
  const docPath = fileURLToPath(new URL(`../${file}`, import.meta.url));
  const mode = argv[0] ?? '--write';
  if (mode === '--print') {
    process.stdout.write(`${t.table}\n`);
    return 0;
  }
  const doc = readFileSync(docPath, 'utf8');
  if (mode === '--check') {
    if (tableIn(doc, t.markers) === t.table) return 0;
    process.stderr.write(`${file}: the ${t.what} table differs from ${t.source}; run \`${t.script}\`\n`);
    return 1;
  }
  if (mode !== '--write') {
    process.stderr.write(`usage: ${t.usage} [--write | --check | --print]\n`);
    return 2;
  }
  const updated = withTable(doc, t.table, t.markers);
  if (updated !== doc) writeFileSync(docPath, updated);
  process.stdout.write(updated !== doc ? `${file}: ${t.what} table updated\n` : `${file}: ${t.what} table already up to date\n`);
  return 0;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  process.exitCode = tableCommand(process.argv.slice(2), {
    what: 'configuration',
    table: configTable(),
    markers: CONFIG_MARKERS,
    source: 'src/config/keys.ts',
    script: 'npm run docs:config',
    usage: 'tsx scripts/config-doc.ts',
    file: CONFIG_DOC,
  });
}
