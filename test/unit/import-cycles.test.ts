// No import cycle in src/, of any kind: a runtime cycle makes a module's exports undefined while its
// partner loads (which one depends on who is imported first); any cycle, type-only imports included,
// ties modules that should change alone (a type belongs to the module that owns it, or to a small
// types module both import).

import { dirname, join, relative, resolve } from 'node:path';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { moduleImports, sourceFiles, SRC } from '../support/module-graph.ts';

/** Every cycle's modules, as paths relative to src/ (Tarjan's strongly connected components of size > 1 or self-loops). */
export function importCycles(files: readonly string[], read: (file: string) => string): string[][] {
  const graph = new Map<string, string[]>();
  for (const file of files) {
    graph.set(
      file,
      moduleImports(read(file))
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
  it('form no cycle, type-only imports included', () => {
    expect(importCycles(sourceFiles(SRC), (f) => readFileSync(f, 'utf8'))).toEqual([]);
  });

  it('the walk finds a cycle when there is one, type-only imports and import() types included', () => {
    const files = ['a.ts', 'b.ts', 'c.ts', 'd.ts', 'e.ts', 'f.ts', 'g.ts'].map((f) => join(SRC, f));
    const text: Record<string, string> = {
      'a.ts': "import { b } from './b.ts';\n",
      'b.ts': "import { a } from './a.ts';\nimport type { E } from './e.ts';\n",
      'c.ts': "import { type D } from './d.ts';\n",
      'd.ts': "export type { C } from './c.ts';\n",
      'e.ts': "let f: typeof import('./f.ts');\n",
      'f.ts': "import type { E } from './e.ts';\n",
      'g.ts': "import './a.ts';\n",
    };
    expect(importCycles(files, (f) => text[relative(SRC, f)]!)).toEqual([
      ['e.ts', 'f.ts'],
      ['a.ts', 'b.ts'],
      ['c.ts', 'd.ts'],
    ]);
  });
});
