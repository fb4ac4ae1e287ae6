// The import graph of src/, read from the source text: what the import-cycle and folder-layer tests walk.

import { readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../src');

export function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

/**
 * Every relative specifier a module names: `import` and `export ... from` statements, type-only ones
 * included, side-effect imports, and `import('...')` (a dynamic import or a type query).
 */
export function moduleImports(source: string): string[] {
  const found: string[] = [];
  const statement =
    /(?:^|\n)\s*(?:import|export)\s+[^'";]*?\s*from\s*['"](\.[^'"]+)['"]|(?:^|\n)\s*import\s*['"](\.[^'"]+)['"]|\bimport\(\s*['"](\.[^'"]+)['"]\s*\)/g;
  for (const m of source.matchAll(statement)) found.push((m[1] ?? m[2] ?? m[3])!);
  return found;
}
