// Habits of the code that no type checker holds: one helper for one job. Each check reads src/ as
// text, so a second hand-written copy fails here instead of drifting from the first.

import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { deepFreeze } from '../../src/model/deep-freeze.ts';
import { publicClient, type PublicClient } from '../../src/model/clients.ts';
import type { ClientRecord } from '../../src/model/records.ts';

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

describe('bounded maps', () => {
  // The oldest entry of a Map is its first key: taking it (`.keys().next()`) is how a cache or a refusal
  // list drops its oldest. Every bounded map is a BoundedMap (src/model/bounded-map.ts, tested in
  // bounded-map.test.ts); the Redis lookup cache keeps its own until the store moves to it.
  const KNOWN = ['src/model/bounded-map.ts', 'src/store/redis-lookup-cache.ts'];

  it('no other module evicts the oldest entry of a Map by hand', () => {
    expect(filesMatching(/\.keys\(\)\.next\(\)/)).toEqual(expect.arrayContaining(['src/model/bounded-map.ts']));
    expect(filesMatching(/\.keys\(\)\.next\(\)/).filter((f) => !KNOWN.includes(f))).toEqual([]);
  });
});

describe('PublicClient', () => {
  // Checked by `tsc --noEmit`: the public view is the stored record less its secret's hash, field for field.
  expectTypeOf<keyof PublicClient>().toEqualTypeOf<Exclude<keyof ClientRecord, 'clientSecretHash'>>();

  it('shows every field of the stored record but the secret hash, the key set parsed', () => {
    // Required<>: a field added to ClientRecord must be added here too, and is then checked below.
    const record: Required<ClientRecord> = {
      clientId: 'c1',
      clientSecretHash: 'a'.repeat(64),
      clientName: 'Name',
      redirectUris: ['http://127.0.0.1/cb'],
      grantTypes: ['authorization_code'],
      scope: 'mcp',
      profile: 'interactive',
      tokenEndpointAuthMethod: 'private_key_jwt',
      jwks: '{"keys":[]}',
      jwksUri: 'https://client.example/jwks.json',
      source: 'admin',
      createdAt: 1,
      revokedAt: 2,
    };
    const shown = publicClient(record);
    expect(Object.keys(shown).sort()).toEqual(
      Object.keys(record)
        .filter((k) => k !== 'clientSecretHash')
        .sort(),
    );
    expect(shown.jwks).toEqual({ keys: [] });
    expect(JSON.stringify(shown)).not.toContain('a'.repeat(64));
    const minimal = publicClient({ ...record, clientSecretHash: undefined, clientName: undefined, jwks: undefined, revokedAt: undefined });
    expect(Object.keys(minimal)).not.toContain('clientName');
    expect(Object.keys(minimal)).not.toContain('jwks');
  });
});

describe('npm run test:unit', () => {
  it('runs vitest on test/unit alone, and docs/architecture.md says so', () => {
    const scripts = (JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> }).scripts;
    expect(scripts['test:unit']).toBe('vitest run test/unit');
    expect(readFileSync('docs/architecture.md', 'utf8')).toContain('`npm run test:unit`');
  });
});

describe('npm run lint', () => {
  const lint = (JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> }).scripts.lint!;

  it('caches Prettier and ESLint by content, under node_modules/.cache (never committed, empty in a clean clone)', () => {
    const [prettier, eslint] = lint.split(' && ');
    expect(prettier).toMatch(/^prettier --check --cache --cache-strategy content /);
    expect(eslint).toMatch(
      /^eslint --max-warnings 0 --cache --cache-strategy content --cache-location node_modules\/\.cache\/eslint\/ \.$/,
    );
  });

  it('keeps its type-aware rules on every TypeScript file', () => {
    const config = readFileSync('eslint.config.js', 'utf8');
    expect(config).toContain("files: ['**/*.ts']");
    expect(config).toContain('projectService: true');
    for (const rule of ['no-floating-promises', 'no-misused-promises', 'await-thenable'])
      expect(config).toContain(`'@typescript-eslint/${rule}': `);
  });
});
