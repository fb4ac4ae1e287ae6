// The README is the first screen, not the manual: it stays short, and everything it leaves out is a
// link away. Every relative link in the README and in docs/ must reach a file that exists, and an
// anchor (`page.md#section`) a heading of that page, so a page moved or a heading renamed fails here
// instead of sending a reader to nothing.

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, expect, it } from 'vitest';

const README_MAX_LINES = 300;

const DOCS = [
  'README.md',
  ...readdirSync('docs')
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** The text outside fenced code blocks (``` or ~~~), line by line: links and headings there are not markdown. */
function proseLines(text: string): string[] {
  const out: string[] = [];
  let fence: string | undefined;
  for (const line of text.split('\n')) {
    const marker = /^\s{0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence === undefined && marker !== undefined) fence = marker[0]!.repeat(marker.length);
    else if (fence !== undefined && marker !== undefined && marker.startsWith(fence)) fence = undefined;
    else if (fence === undefined) out.push(line);
  }
  return out;
}

/**
 * GitHub's anchor for a heading: the heading's text as rendered (link targets, emphasis and code
 * marks dropped), lower-cased, every character but letters, digits, `_`, `-` and spaces removed,
 * spaces turned into `-`; a repeated anchor gets `-1`, `-2`, ... in order.
 */
export function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of proseLines(text)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const rendered = heading.replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/<[^>]+>/g, '');
    const slug = rendered
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return anchors;
}

/** The targets of inline links and images (`[text](target)`, `![alt](target)`) outside code. */
export function linkTargets(text: string): string[] {
  const targets: string[] = [];
  for (const line of proseLines(text)) {
    // A link written inside a code span is shown, not followed.
    const prose = line.replace(/`[^`]*`/g, (span) => (span.includes('](') ? '' : span));
    for (const [, target] of prose.matchAll(/!?\[(?:[^\]`]|`[^`]*`)*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) targets.push(target!);
  }
  return targets;
}

/** Why a relative link from `doc` leads nowhere, or undefined when it resolves. */
function brokenLink(doc: string, target: string): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return undefined; // https:, mailto: ...: not a file of this repository
  const [path, anchor] = target.split('#', 2) as [string, string | undefined];
  const file = path === '' ? doc : normalize(join(dirname(doc), decodeURIComponent(path)));
  if (file.startsWith('..')) return `${target}: outside the repository`;
  if (!existsSync(file)) return `${target}: no such file (${file})`;
  if (anchor === undefined || anchor === '') return undefined;
  if (statSync(file).isDirectory() || !file.endsWith('.md')) return `${target}: an anchor into a file that is not markdown`;
  return anchorsOf(readFileSync(file, 'utf8')).has(anchor.toLowerCase()) ? undefined : `${target}: no heading makes #${anchor} in ${file}`;
}

describe('README.md', () => {
  it(`is at most ${README_MAX_LINES} lines: the manual lives in docs/`, () => {
    const lines = readFileSync('README.md', 'utf8').trimEnd().split('\n').length;
    expect(lines).toBeLessThanOrEqual(README_MAX_LINES);
  });

  it('keeps the test command CI runs discoverable: npm test, then npm run test:slow (.ci/run)', () => {
    const readme = readFileSync('README.md', 'utf8');
    const ci = readFileSync('.ci/run', 'utf8');
    for (const command of ['npm test', 'npm run test:slow']) {
      expect(ci).toContain(command);
      expect(readme).toContain(command);
    }
  });
});

describe('relative links', () => {
  it('anchors follow GitHub: marks dropped, punctuation removed, spaces to hyphens, repeats numbered', () => {
    const anchors = anchorsOf(
      '# Browser sign-in (authorization code + PKCE)\n## `proxy.workers`: several processes\n## 10b. Workers\n## Notes\n```\n## not a heading\n```\n## Notes\n### See [`storage.md`](storage.md)\n',
    );
    expect([...anchors]).toEqual([
      'browser-sign-in-authorization-code--pkce',
      'proxyworkers-several-processes',
      '10b-workers',
      'notes',
      'notes-1',
      'see-storagemd',
    ]);
  });

  it('are found in prose, images included, never in code', () => {
    const text = 'See [a](a.md), ![img](b.png) and [`c`](c.md#x "title").\n```\n[d](d.md)\n```\n`[e](e.md)` [f](https://example.com)\n';
    expect(linkTargets(text)).toEqual(['a.md', 'b.png', 'c.md#x', 'https://example.com']);
  });

  it('a link to a missing file or a missing heading is caught', () => {
    expect(brokenLink('README.md', 'docs/no-such-page.md')).toMatch(/no such file/);
    expect(brokenLink('README.md', 'docs/configuration.md#no-such-heading')).toMatch(/no heading/);
    expect(brokenLink('docs/admin.md', 'configuration.md#every-key')).toBeUndefined();
    expect(brokenLink('docs/admin.md', '../README.md')).toBeUndefined();
  });

  it.each(DOCS)('%s links only to files and headings that exist', (doc) => {
    const broken = linkTargets(readFileSync(doc, 'utf8')).flatMap((target) => brokenLink(doc, target) ?? []);
    expect(broken).toEqual([]);
  });
});
