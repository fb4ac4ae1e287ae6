// No runtime import cycle in src/: a cycle makes a module's exports undefined while its partner
// loads (which one depends on who is imported first), and it ties modules that should change alone.
// Type-only imports are erased at compile time and do not count.

import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** Relative specifiers a module loads at run time: `import type` and all-`type` named lists are skipped. */
export function runtimeImports(source: string): string[] {
  const found: string[] = [];
  const statement = /(?:^|\n)\s*(import|export)\s+([^'";]*?)\s*from\s*['"](\.[^'"]+)['"]|(?:^|\n)\s*import\s*['"](\.[^'"]+)['"]/g;
  for (const m of source.matchAll(statement)) {
    if (m[4] !== undefined) {
      found.push(m[4]);
      continue;
    }
    const clause = m[2]!.trim();
    if (clause.startsWith('type ')) continue;
    const named = /^\{([^}]*)\}$/s.exec(clause);
    if (
      named &&
      named[1]!
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
        .every((s) => s.startsWith('type '))
    )
      continue;
    found.push(m[3]!);
  }
  return found;
}

/** Every cycle's modules, as paths relative to src/ (Tarjan's strongly connected components of size > 1 or self-loops). */
export function importCycles(files: readonly string[], read: (file: string) => string): string[][] {
  const graph = new Map<string, string[]>();
  for (const file of files) {
    graph.set(
      file,
      runtimeImports(read(file))
        .map((spec) => resolve(dirname(file), spec))
        .filter((target) => files.includes(target)),
    );
  }
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter);
    counter++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v)!) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || graph.get(v)!.includes(v)) cycles.push(component.map((f) => relative(SRC, f)).sort());
    }
  };
  for (const file of files) if (!index.has(file)) visit(file);
  return cycles;
}

describe('imports in src/', () => {
  it('form no runtime cycle', () => {
    expect(importCycles(sourceFiles(SRC), (f) => readFileSync(f, 'utf8'))).toEqual([]);
  });

  it('the walk finds a cycle when there is one, and ignores type-only imports', () => {
    const files = ['a.ts', 'b.ts', 'c.ts', 'd.ts'].map((f) => join(SRC, f));
    const text: Record<string, string> = {
      'a.ts': "import { b } from './b.ts';\n",
      'b.ts': "import { a } from './a.ts';\nimport type { C } from './c.ts';\n",
      'c.ts': "import { type D } from './d.ts';\n",
      'd.ts': "import { c } from './c.ts';\n",
    };
    expect(importCycles(files, (f) => text[relative(SRC, f)]!)).toEqual([['a.ts', 'b.ts']]);
  });
});
