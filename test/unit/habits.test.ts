// Habits of the code that no type checker holds: one helper for one job. Each check reads src/ as
// text, so a second hand-written copy fails here instead of drifting from the first.

import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { deepFreeze } from '../../src/model/deep-freeze.ts';

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** The files of src/ whose text matches `pattern`, relative to the repository. */
function filesMatching(pattern: RegExp): string[] {
  return sourceFiles('src')
    .filter((file) => pattern.test(readFileSync(file, 'utf8')))
    .map((file) => relative('.', file));
}

describe('deepFreeze', () => {
  it('is defined once in src/', () => {
    expect(filesMatching(/function deepFreeze\b/)).toEqual(['src/model/deep-freeze.ts']);
  });

  it('freezes every object and array reachable from the value', () => {
    const tree = deepFreeze({ a: { b: [1, { c: 'x' }] }, d: null });
    expect(Object.isFrozen(tree)).toBe(true);
    expect(Object.isFrozen(tree.a)).toBe(true);
    expect(Object.isFrozen(tree.a.b)).toBe(true);
    expect(Object.isFrozen(tree.a.b[1])).toBe(true);
    expect(deepFreeze('text')).toBe('text');
  });
});
