// The README's configuration table, generated from what src/config-keys.ts declares (describeConfigKeys):
// every key, its environment variable, type or range, default and meaning.
//
//   npm run docs:config            rewrite the table in README.md between the markers
//   tsx src/config-doc.ts --check  exit 1 when README.md's table differs (what the unit test checks)
//   tsx src/config-doc.ts --print  print the table

import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describeConfigKeys } from './config-keys.ts';

export const TABLE_START = '<!-- config:start -->';
export const TABLE_END = '<!-- config:end -->';

function code(text: string): string {
  return `\`${text}\``;
}

function formatDefault(value: unknown): string {
  if (value === undefined) return 'unset';
  if (Array.isArray(value)) return value.length === 0 ? code('[]') : code(value.join(', '));
  return code(String(value));
}

function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

/** The markdown table (no trailing newline). */
export function configTable(): string {
  const rows = describeConfigKeys().map((k) =>
    [code(k.key), k.env ? code(k.env) : '', k.type, k.defaultText ?? formatDefault(k.default), k.description].map(cell).join(' | '),
  );
  return ['| key | env | type | default | description |', '|---|---|---|---|---|', ...rows.map((r) => `| ${r} |`)].join('\n');
}

/** `readme` with the text between the markers replaced by `table`; throws when the markers are missing. */
export function withTable(readme: string, table: string): string {
  const start = readme.indexOf(TABLE_START);
  const end = readme.indexOf(TABLE_END);
  if (start === -1 || end === -1 || end < start) throw new Error(`README.md must contain ${TABLE_START} and then ${TABLE_END}`);
  return `${readme.slice(0, start + TABLE_START.length)}\n${table}\n${readme.slice(end)}`;
}

/** The table currently between the markers, trimmed. */
export function tableIn(readme: string): string {
  const start = readme.indexOf(TABLE_START);
  const end = readme.indexOf(TABLE_END);
  if (start === -1 || end === -1 || end < start) throw new Error(`README.md must contain ${TABLE_START} and then ${TABLE_END}`);
  return readme.slice(start + TABLE_START.length, end).trim();
}

function main(argv: string[]): number {
  const readmePath = fileURLToPath(new URL('../README.md', import.meta.url));
  const mode = argv[0] ?? '--write';
  const table = configTable();
  if (mode === '--print') {
    process.stdout.write(`${table}\n`);
    return 0;
  }
  const readme = readFileSync(readmePath, 'utf8');
  if (mode === '--check') {
    if (tableIn(readme) === table) return 0;
    process.stderr.write('README.md: the configuration table differs from src/config.ts; run `npm run docs:config`\n');
    return 1;
  }
  if (mode !== '--write') {
    process.stderr.write('usage: tsx src/config-doc.ts [--write | --check | --print]\n');
    return 2;
  }
  const updated = withTable(readme, table);
  if (updated !== readme) writeFileSync(readmePath, updated);
  process.stdout.write(updated !== readme ? 'README.md: configuration table updated\n' : 'README.md: configuration table already up to date\n');
  return 0;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) process.exitCode = main(process.argv.slice(2));
