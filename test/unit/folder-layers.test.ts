// The folders of src/ form layers, and a lower one never imports a higher one:
//
//   entry -> app -> features -> base
//
// `app` is src/app.ts with every folder's wiring.ts (a feature's factory from the configuration: the
// composition root, split by feature, may import any feature). Among the features, and among the base
// folders, only the edges declared below. A module that needs something from a higher folder is in
// the wrong folder, or the thing it needs is.

import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { moduleImports, sourceFiles, SRC } from '../support/module-graph.ts';

export interface LayerTable {
  /** Top to bottom: a folder may import any folder of a lower layer. */
  readonly layers: readonly (readonly string[])[];
  /** Within one layer, which folder may import which; a layer absent here imports freely within itself. */
  readonly within: { readonly [layer: number]: { readonly [folder: string]: readonly string[] } };
}

export const LAYERS: LayerTable = {
  layers: [
    ['entry'],
    ['app'],
    ['admin', 'proxy', 'oauth', 'upstream-credentials', 'config', 'policy', 'assertion', 'web'],
    ['http', 'observability', 'store', 'model'],
  ],
  within: {
    // The features. The connect pages sign in with the account page's sessions; the configuration
    // reads policy rules and quotas and the assertion key with those features' own validators.
    2: {
      admin: ['oauth', 'policy', 'upstream-credentials'],
      proxy: ['oauth', 'policy', 'upstream-credentials', 'assertion', 'config'],
      'upstream-credentials': ['oauth', 'policy', 'config', 'web'],
      oauth: ['policy', 'config', 'web'],
      config: ['policy', 'assertion'],
      policy: [],
      assertion: [],
      web: [],
    },
    // The base: the HTTP boundary, then logs, metrics and the audit trail, then storage, then the
    // model, which imports nothing of src/.
    3: {
      http: ['observability', 'store', 'model'],
      observability: ['store', 'model'],
      store: ['model'],
      model: [],
    },
  },
};

/** The folder a module belongs to: its first folder under src/; `app` for src/app.ts and src/<folder>/wiring.ts. */
export function folderOf(file: string): string {
  const parts = relative(SRC, file).split('/');
  if ((parts.length === 1 && parts[0] === 'app.ts') || (parts.length === 2 && parts[1] === 'wiring.ts')) return 'app';
  return parts[0]!;
}

function layerOf(table: LayerTable, folder: string): number {
  return table.layers.findIndex((layer) => layer.includes(folder));
}

/** Whether `from` may import `to` (two different folders). */
function mayImport(table: LayerTable, from: string, to: string): boolean {
  const [a, b] = [layerOf(table, from), layerOf(table, to)];
  if (a < 0 || b < 0 || a > b) return false;
  if (a < b) return true;
  const edges = table.within[a];
  return edges === undefined || (edges[from] ?? []).includes(to);
}

/** Every import against the table, as `file => file (rule)`, paths relative to src/. */
export function layerViolations(table: LayerTable, files: readonly string[], read: (file: string) => string): string[] {
  const found: string[] = [];
  for (const file of files) {
    const from = folderOf(file);
    if (layerOf(table, from) < 0) found.push(`${relative(SRC, file)}: its folder ${from} is in no layer`);
    for (const spec of moduleImports(read(file))) {
      const target = resolve(dirname(file), spec);
      const to = folderOf(target);
      if (from !== to && !mayImport(table, from, to))
        found.push(`${relative(SRC, file)} => ${relative(SRC, target)} (${from} may not import ${to})`);
    }
  }
  return found;
}

/** Cycles in one layer's declared edges (each as the folders around it): a cycle would let two folders import each other. */
export function tableCycles(table: LayerTable): string[][] {
  const cycles: string[][] = [];
  for (const edges of Object.values(table.within)) {
    const walk = (folder: string, path: readonly string[]): void => {
      if (path.includes(folder)) {
        if (folder === path[0]) cycles.push([...path, folder]);
        return;
      }
      for (const next of edges[folder] ?? []) walk(next, [...path, folder]);
    };
    for (const folder of Object.keys(edges)) walk(folder, []);
  }
  return cycles;
}

describe('folders of src/', () => {
  it('import only downwards, along the declared edges', () => {
    expect(layerViolations(LAYERS, sourceFiles(SRC), (f) => readFileSync(f, 'utf8'))).toEqual([]);
  });

  it('declare no cycle among the folders of one layer, and every folder of src/ is in a layer', () => {
    expect(tableCycles(LAYERS)).toEqual([]);
    const folders = new Set(sourceFiles(SRC).map(folderOf));
    expect([...folders].filter((f) => layerOf(LAYERS, f) < 0)).toEqual([]);
    expect(LAYERS.layers.flat().filter((f) => !folders.has(f))).toEqual([]);
  });

  it('the check names each import against the table: upwards, across undeclared edges, and from a folder in no layer', () => {
    const text: Record<string, string> = {
      'model/a.ts': "import type { S } from '../store/types.ts';\n",
      'store/b.ts': "import { a } from '../model/a.ts';\nexport type { H } from '../http/errors.ts';\n",
      'policy/c.ts': "import { d } from '../proxy/d.ts';\nimport { w } from '../oauth/wiring.ts';\n",
      'proxy/d.ts': "import { c } from '../policy/c.ts';\nlet e: typeof import('../entry/main.ts');\n",
      'oauth/wiring.ts': "import { c } from '../policy/c.ts';\nimport { d } from '../proxy/d.ts';\nimport '../app.ts';\n",
      'app.ts': "import { w } from './oauth/wiring.ts';\n",
      'misc/e.ts': "import { a } from '../model/a.ts';\n",
      'store/deep/wiring.ts': "import { c } from '../../policy/c.ts';\n",
    };
    const files = Object.keys(text).map((f) => join(SRC, f));
    expect(layerViolations(LAYERS, files, (f) => text[relative(SRC, f)]!)).toEqual([
      'model/a.ts => store/types.ts (model may not import store)',
      'store/b.ts => http/errors.ts (store may not import http)',
      'policy/c.ts => proxy/d.ts (policy may not import proxy)',
      'policy/c.ts => oauth/wiring.ts (policy may not import app)',
      'proxy/d.ts => entry/main.ts (proxy may not import entry)',
      'misc/e.ts: its folder misc is in no layer',
      'misc/e.ts => model/a.ts (misc may not import model)',
      'store/deep/wiring.ts => policy/c.ts (store may not import policy)',
    ]);
  });

  it('the table check finds a declared cycle', () => {
    const cyclic: LayerTable = { layers: [['a', 'b', 'c']], within: { 0: { a: ['b'], b: ['c'], c: ['a'] } } };
    expect(tableCycles(cyclic)).toEqual([
      ['a', 'b', 'c', 'a'],
      ['b', 'c', 'a', 'b'],
      ['c', 'a', 'b', 'c'],
    ]);
  });
});
