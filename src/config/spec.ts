// The kinds of configuration key (text, integer, boolean, choice, list: the kinds of the one
// validation kit, src/model/validate.ts, also read from text) and the walk over a declared key tree:
// how a raw value from the file, the environment or a flag is read, checked and described. The keys
// themselves are declared once, in src/config/keys.ts.

import * as kit from '../model/validate.ts';
import { refusal, type Kind } from '../model/validate.ts';

/** Where a problem is reported: every problem of a load is collected, then reported together. */
export type Problems = string[];

/**
 * Which table of docs/configuration.md a key is in. `essential`: what a deployment sets (its secrets,
 * addresses, identity provider and the switches of its features), shown in config.yaml and the README;
 * `tuning`: a default that suits most deployments, documented in docs/configuration.md only.
 */
export type Tier = 'essential' | 'tuning';

/** What every key declares besides its kind. */
export interface KeyDoc<T> {
  /** Declared on every key, so that a new one is placed in a table by whoever adds it. */
  tier: Tier;
  /** What the key means: the description in docs/configuration.md's table. */
  description: string;
  /** The environment variable that overrides the file. */
  env?: string;
  /** The default as docs/configuration.md shows it, where the real one is computed or absent. */
  defaultText?: string;
  /** A secret is never taken from a command-line flag (shell history, `ps`). */
  secret?: boolean;
  /** Applied to a well-typed value before `check` (e.g. lowercase, drop a trailing slash). */
  normalise?(value: T): T;
  /** Further rules; `label` names the key as the user wrote it (variable, flag or key). */
  check?(value: T, label: string, problems: Problems): void;
}

/** One declared key. `T` is the type the rest of the code sees. */
export interface KeySpec<T> {
  readonly kind: 'key';
  /** The type column of docs/configuration.md's table. */
  readonly type: string;
  /** The value when the key is absent (undefined: unset). */
  readonly default: T;
  readonly doc: KeyDoc<T>;
  /** The well-typed value, or `invalid` after adding a problem. */
  readonly parse: (raw: unknown, label: string, problems: Problems) => T | typeof INVALID;
}

const INVALID = Symbol('invalid');

/** A tree of declared keys: a section is a nested tree. */
export interface KeyTree {
  readonly [name: string]: KeySpec<unknown> | KeyTree;
}

/** The frozen value type of a key tree. */
export type ValuesOf<S extends KeyTree> = {
  readonly [K in keyof S]: S[K] extends KeySpec<infer T>
    ? T extends Array<infer E>
      ? readonly E[]
      : T
    : S[K] extends KeyTree
      ? ValuesOf<S[K]>
      : never;
};

function isSpec(entry: KeySpec<unknown> | KeyTree): entry is KeySpec<unknown> {
  return entry.kind === 'key';
}

function absent(raw: unknown): boolean {
  return raw === undefined || raw === null || raw === '';
}

function key<T>(type: string, fallback: T, doc: KeyDoc<T>, parse: KeySpec<T>['parse']): KeySpec<T> {
  return { kind: 'key', type, default: fallback, doc, parse };
}

/**
 * A key of kit kind `k`: a raw value from the file, or text from the environment or a flag that
 * `fromText` turns into the kind's type; a refusal in the kit's style, with the value given when
 * `showGot` (never for free text, which may be a secret).
 */
function ofKind<T>(
  type: string,
  fallback: T,
  doc: KeyDoc<T>,
  k: Kind<T>,
  fromText: (raw: unknown) => unknown = (raw) => raw,
  showGot = true,
): KeySpec<T> {
  return key(type, fallback, doc, (raw, label, problems) => {
    const value = k.accept(fromText(raw));
    if (value !== kit.INVALID) return value;
    problems.push(refusal(label, k.rule, showGot ? raw : undefined));
    return INVALID;
  });
}

/** A number in a text key is its decimal text. */
const numberAsText = (raw: unknown) => (typeof raw === 'number' ? String(raw) : raw);

/** A string; numbers are taken as their decimal text. Without a default it may be unset. */
export function text(doc: KeyDoc<string> & { default: string }): KeySpec<string>;
export function text(doc: KeyDoc<string | undefined>): KeySpec<string | undefined>;
export function text(doc: KeyDoc<any> & { default?: string }): KeySpec<any> {
  return ofKind('string', doc.default, doc, kit.text(), numberAsText, false);
}

/** One of `allowed`. */
export function choice<const T extends string>(allowed: readonly T[], doc: KeyDoc<T> & { default: T }): KeySpec<T> {
  return ofKind(allowed.map((a) => `\`${a}\``).join(', '), doc.default, doc, kit.choice(allowed), numberAsText);
}

/** `true`/`false`, as YAML booleans or as text (environment, flags). */
export function boolean(doc: KeyDoc<boolean> & { default: boolean }): KeySpec<boolean> {
  return ofKind('boolean', doc.default, doc, kit.boolean(), (raw) => (raw === 'true' ? true : raw === 'false' ? false : raw));
}

/** An integer from `min` to `max` (max omitted: no upper bound); as a number or as decimal text. */
export function integer(doc: KeyDoc<number> & { default: number; min: number; max?: number }): KeySpec<number> {
  const { min, max = Number.MAX_SAFE_INTEGER } = doc;
  const type = max === Number.MAX_SAFE_INTEGER ? `integer >= ${min}` : `integer ${min}..${max}`;
  return ofKind(type, doc.default, doc, kit.integer(min, max), (raw) =>
    typeof raw === 'string' ? (/^-?\d+$/.test(raw.trim()) ? Number(raw) : NaN) : raw,
  );
}

/** A list of strings: a YAML list, or comma-separated text (environment, flags). */
export function list(doc: KeyDoc<string[]> & { default: string[] }): KeySpec<string[]> {
  const fromText = (raw: unknown) =>
    typeof raw === 'string'
      ? raw
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean)
      : raw;
  return ofKind('list of strings', doc.default, doc, kit.list(), fromText, false);
}

/**
 * A structured value (a mapping or list with its own grammar, e.g. the policy rules), read by `read`,
 * which reports its own problems and answers undefined when there is any. Absent: undefined.
 */
export function structured<T>(
  type: string,
  doc: KeyDoc<T | undefined>,
  read: (raw: unknown, label: string, problems: Problems) => T | undefined,
): KeySpec<T | undefined> {
  return key(type, undefined, doc, (raw, label, problems) => {
    const before = problems.length;
    const value = read(raw, label, problems);
    return value === undefined || problems.length > before ? INVALID : value;
  });
}

/** Every key of a tree with its dotted name, in declaration order. */
export function keysOf(tree: KeyTree, path = ''): Array<[name: string, spec: KeySpec<unknown>]> {
  return Object.entries(tree).flatMap(([name, entry]) => {
    const dotted = path ? `${path}.${name}` : name;
    return isSpec(entry) ? [[dotted, entry] as [string, KeySpec<unknown>]] : keysOf(entry, dotted);
  });
}

/** Values that win over the file, by dotted key, with the label a problem names them by. */
export type Overrides = ReadonlyMap<string, { value: string; label: string }>;

type Tree = Record<string, unknown>;

/**
 * Reads `input` against `schema`: overrides win over the file, absent keys take their defaults, every
 * problem (a wrong type, a failed check, an unknown key) goes to `problems`.
 */
export function readTree(schema: KeyTree, input: Tree, overrides: Overrides, problems: Problems, path = '', root = schema): Tree {
  const out: Tree = {};
  for (const [name, entry] of Object.entries(schema)) {
    const dotted = path ? `${path}.${name}` : name;
    if (!isSpec(entry)) {
      out[name] = readTree(entry, sectionOf(input[name], dotted, problems), overrides, problems, dotted, root);
      continue;
    }
    const override = overrides.get(dotted);
    const raw = override?.value ?? input[name];
    const label = override?.label ?? dotted;
    if (absent(raw)) {
      out[name] = entry.default;
    } else {
      const parsed = entry.parse(raw, label, problems);
      out[name] = parsed === INVALID ? entry.default : entry.doc.normalise ? entry.doc.normalise(parsed) : parsed;
      if (parsed === INVALID) continue;
    }
    entry.doc.check?.(out[name], label, problems);
  }
  for (const name of Object.keys(input)) {
    if (Object.hasOwn(schema, name)) continue;
    const dotted = path ? `${path}.${name}` : name;
    const near = nearestKey(dotted, schema, path, root);
    problems.push(
      `unknown key "${dotted}"${near ? ` (did you mean "${near}"?)` : ` (${path ? `the keys of ${path}` : 'the top-level keys'}: ${Object.keys(schema).join(', ')})`}`,
    );
  }
  return out;
}

function sectionOf(value: unknown, dotted: string, problems: Problems): Tree {
  if (value === undefined || value === null) return {};
  if (typeof value === 'object' && !Array.isArray(value)) return value as Tree;
  problems.push(refusal(dotted, 'a mapping'));
  return {};
}

/** How many single-character edits turn `a` into `b`. */
function distance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}

function squash(name: string): string {
  return name.toLowerCase().replace(/[-_]/g, '');
}

/**
 * The name in `candidates` closest to `unknown` (`compared` picks the part of each name to compare),
 * or undefined when none is within a few edits. Case, `-` and `_` do not count as differences.
 */
export function nearestName(
  unknown: string,
  candidates: readonly string[],
  compared: (name: string) => string = (n) => n,
): string | undefined {
  const wanted = compared(unknown);
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const name = compared(candidate);
    const d = squash(name) === squash(wanted) ? 0 : distance(wanted.toLowerCase(), name.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [candidate, d];
  }
  return best !== undefined && bestDistance <= Math.max(2, Math.floor(wanted.length / 4)) ? best : undefined;
}

/**
 * The known name closest to `unknown` (a dotted key, e.g. `redis.uri`), or undefined when none is
 * close: the section's own names first, then every dotted key and section (`redis.uri` written as one
 * key), then a key of the same name in another section (`proxy.keyPrefix`).
 */
export function nearestKey(unknown: string, schema: KeyTree, path: string, root: KeyTree = schema): string | undefined {
  const prefix = path ? `${path}.` : '';
  const everywhere = [...keysOf(root).map(([n]) => n), ...Object.keys(root)];
  const leaf = (name: string) => name.slice(name.lastIndexOf('.') + 1);
  const passes: Array<[candidates: string[], compared: (name: string) => string]> = [
    [Object.keys(schema).map((n) => prefix + n), (n) => n],
    [everywhere, (n) => n],
    [everywhere, leaf],
  ];
  for (const [candidates, compared] of passes) {
    const near = nearestName(unknown, candidates, compared);
    if (near !== undefined) return near;
  }
  return undefined;
}
