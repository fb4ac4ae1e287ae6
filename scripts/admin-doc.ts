// The table of admin operations in docs/admin.md, generated from their declarations
// (src/admin/declarations.ts): each operation with its CLI command, what it does, its body fields and its answer.
//
//   npm run docs:admin                  rewrite the table in docs/admin.md between the markers
//   tsx scripts/admin-doc.ts --check    exit 1 when the table differs (what the unit test checks)
//   tsx scripts/admin-doc.ts --print    print the table

import { fileURLToPath } from 'node:url';
import { cell, code, tableCommand, type Markers } from './config-doc.ts';
import { ADMIN_OPERATIONS } from '../src/admin/declarations.ts';
import { kebab, type Fields, type OperationSpec } from '../src/admin/spec.ts';

export const OPERATIONS_MARKERS: Markers = { start: '<!-- admin-operations:start -->', end: '<!-- admin-operations:end -->' };
export const ADMIN_DOC = 'docs/admin.md';

/** The body column: required fields as they are, optional ones with `?`, exactly-one pairs as `a` or `b`, at-least-one pairs named after. */
function bodyCell(spec: OperationSpec): string {
  const paired = new Map((spec.exactlyOne ?? []).flatMap(([a, b]) => [[a, b] as const, [b, ''] as const]));
  const parts: string[] = [];
  for (const [name, f] of Object.entries(spec.fields as Fields)) {
    const pair = paired.get(name);
    if (pair === '') continue;
    const head = pair !== undefined ? `${code(name)} or ${code(pair)}` : code(f.required ? name : `${name}?`);
    parts.push(f.bounds ? `${head} (${f.bounds})` : head);
  }
  const atLeast = (spec.atLeastOne ?? []).map(([a, b]) => `at least one of ${code(a)}, ${code(b)}`);
  return parts.length > 0 ? [parts.join(', '), ...atLeast].join('; ') : '—';
}

/** The markdown table (no trailing newline), for `specs` (default: every declared operation). */
export function operationsTable(specs: Readonly<Record<string, OperationSpec>> = ADMIN_OPERATIONS): string {
  const rows = Object.entries(specs).map(([name, spec]) =>
    [`${code(name)} (${code(kebab(name))})`, spec.description, bodyCell(spec), spec.answer].map(cell).join(' | '),
  );
  return ['| operation (CLI) | what it does | body | answer |', '|---|---|---|---|', ...rows.map((r) => `| ${r} |`)].join('\n');
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  process.exitCode = tableCommand(process.argv.slice(2), {
    what: 'admin operations',
    table: operationsTable(),
    markers: OPERATIONS_MARKERS,
    source: 'src/admin/declarations.ts',
    script: 'npm run docs:admin',
    usage: 'tsx scripts/admin-doc.ts',
    file: ADMIN_DOC,
  });
}
