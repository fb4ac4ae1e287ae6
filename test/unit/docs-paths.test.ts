// The docs name files of this repository (`src/...`, `test/...`, `examples/...`): each named file must
// exist, so a reader never follows a path to nothing after a file moved or was merged into another.

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const DOCS = [
  'README.md',
  'CHANGELOG.md',
  ...readdirSync('docs')
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** Repository paths a text names: a top-level folder of the repository, then a path (no glob, no URL). */
export function namedPaths(text: string): string[] {
  const found = new Set<string>();
  for (const [, written] of text.matchAll(/(?<![\w/.-])((?:src|test|examples|bench|docs|bin|\.ci)\/[\w./*-]*)/g)) {
    // A sentence's full stop or a folder's trailing slash is not part of the path.
    const path = written!.replace(/[./]+$/, '');
    if (!path.includes('*')) found.add(path);
  }
  return [...found];
}

describe('paths named in the docs', () => {
  it('are found in a text as they are written there', () => {
    expect(namedPaths('see `src/proxy/server.ts`, (test/unit/a.test.ts) and docs/storage.md.')).toEqual([
      'src/proxy/server.ts',
      'test/unit/a.test.ts',
      'docs/storage.md',
    ]);
    // Not repository paths: an absolute path, a URL's path, a glob.
    expect(namedPaths('/usr/bin/node, https://example.com/docs/x, test/slow/**')).toEqual([]);
  });

  it.each(DOCS)('%s names only files that exist', (doc) => {
    const missing = namedPaths(readFileSync(doc, 'utf8')).filter((path) => !existsSync(path));
    expect(missing).toEqual([]);
  });
});
