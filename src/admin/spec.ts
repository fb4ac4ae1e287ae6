// The kinds of admin operation field (text, integer, list, choice, a 64-hex token, scopes, client metadata) and how a
// body is read against an operation's declaration. The operations themselves are declared once, in
// src/admin/declarations.ts; the admin listener, the CLI and the table in docs/admin.md all read them.
//
// Rules for every operation: a field that is absent or JSON `null` is not given; a field nobody
// declared is ignored; a problem names the field as the caller wrote it (`lifetimeSeconds` over HTTP,
// `--lifetime-seconds` on the command line) and says what the value must be, in the one style of
// src/model/validate.ts, whose kinds these are.

import { isTokenShaped } from '../model/credentials.ts';
import { CLIENT_METADATA, SCOPE } from '../model/client-metadata.ts';
import * as kit from '../model/validate.ts';
import { INVALID, refusal, type Kind } from '../model/validate.ts';

/** How the CLI takes the value: one string, an integer, a list (repeated flag or commas), or JSON text. */
export type FieldType = 'string' | 'integer' | 'list' | 'json';

/** What every field declares besides its kind. */
export interface FieldDoc {
  /** What the field means: the CLI help and the docs/admin.md table. */
  description: string;
  /** The CLI flag (default: the field name in kebab case, `clientId` -> `--client-id`). */
  flag?: string;
  /** More CLI flags for the same field. */
  aliases?: readonly string[];
  /** `-` as the flag's value reads the value from stdin (a secret stays out of `ps` and shell history). */
  stdin?: boolean;
}

/** One declared field. `T` is the type the operation's handler sees. */
export interface Field<T> {
  readonly type: FieldType;
  readonly required: boolean;
  /** The bounds and default as the help and the docs/admin.md table show them (e.g. `1..1000, default 100`). */
  readonly bounds: string | undefined;
  readonly doc: FieldDoc;
  /** What a value must be, and the well-typed value of a given one. */
  readonly kind: Kind<T>;
  /** The value when the field is not given. */
  readonly fallback: T;
}

export type Fields = Readonly<Record<string, Field<unknown>>>;

function field<T>(type: FieldType, k: Kind<T>, doc: FieldDoc & { required?: boolean }, fallback: T, bounds?: string): Field<T> {
  const { required = false, ...rest } = doc;
  return { type, required, bounds, doc: rest, kind: k, fallback };
}

/** A field of `kind`, optional: undefined when not given. */
function optional<T>(type: FieldType, k: Kind<T>, doc: FieldDoc, bounds?: string): Field<T | undefined> {
  return field<T | undefined>(type, k, doc, undefined, bounds);
}

interface TextOptions extends FieldDoc {
  /** What the value must be, when the length alone does not say it (e.g. `a JSON-RPC method name`). */
  rule?: string;
  min?: number;
  max?: number;
}

/** A string of `min` to `max` characters. */
export function text(o: TextOptions & { required: true }): Field<string>;
export function text(o: TextOptions & { required?: false }): Field<string | undefined>;
export function text(o: TextOptions & { required?: boolean }): Field<string | undefined> {
  const { rule, min, max, ...doc } = o;
  return field<string | undefined>('string', kit.text({ min, max, rule }), doc, undefined);
}

/** An integer from `min` to `max`; without `required`, `default` when not given. */
export function integer(o: FieldDoc & { min: number; max: number } & ({ required: true } | { default: number })): Field<number> {
  const { min, max, ...doc } = o;
  const fallback = 'default' in o ? o.default : 0;
  return field('integer', kit.integer(min, max), doc, fallback, `${min}..${max}${'default' in o ? `, default ${o.default}` : ''}`);
}

/** A list of strings (the CLI: the flag repeated, or comma-separated values). */
export function list(o: FieldDoc): Field<string[] | undefined> {
  return optional('list', kit.list(), o);
}

/** A JSON object (the CLI: its JSON text). */
export function object(o: FieldDoc): Field<Record<string, unknown> | undefined> {
  return optional('json', kit.object(), o);
}

/** One of `allowed`. */
export function choice<const C extends string>(allowed: readonly C[], o: FieldDoc): Field<C | undefined> {
  return optional('string', kit.choice(allowed), o, `one of ${allowed.join(', ')}`);
}

/** A token or a token's SHA-256: exactly 64 lowercase hex characters. */
export function hex64(o: FieldDoc): Field<string | undefined> {
  return optional('string', kit.refine(kit.text(), '64 lowercase hex characters', isTokenShaped), o);
}

/** Space-separated OAuth scope tokens; empty is the same as not given. */
export function scope(o: FieldDoc): Field<string | undefined> {
  return optional(
    'string',
    kit.kind(SCOPE.rule, (raw) => (raw === '' ? undefined : SCOPE.accept(raw))),
    o,
  );
}

/** How the CLI takes each client metadata field. */
const METADATA_TYPES: Readonly<Partial<Record<keyof typeof CLIENT_METADATA, FieldType>>> = {
  redirectUris: 'list',
  grantTypes: 'list',
  jwks: 'json',
};

/** A client metadata field, with its one declaration's kind and rule (src/model/client-metadata.ts). */
export function metadata<K extends keyof typeof CLIENT_METADATA>(
  key: K,
  o: FieldDoc,
): Field<((typeof CLIENT_METADATA)[K]['kind'] extends Kind<infer T> ? T : never) | undefined> {
  const k = CLIENT_METADATA[key].kind as Kind<never>;
  return optional(METADATA_TYPES[key] ?? 'string', k, o, k.rule.startsWith('one of ') ? k.rule : undefined);
}

/** One admin operation: what it does, its fields, and how its answer is shown. */
export interface OperationSpec<F extends Fields = Fields> {
  /** What it does: the CLI help and the docs/admin.md table. */
  readonly description: string;
  readonly fields: F;
  /** Pairs of fields of which exactly one must be given (`token` or `tokenHash`). */
  readonly exactlyOne?: ReadonlyArray<readonly [string, string]>;
  /** Pairs of fields of which at least one must be given (`subject` or `clientId`). */
  readonly atLeastOne?: ReadonlyArray<readonly [string, string]>;
  /** A successful answer, as the docs/admin.md table shows it. */
  readonly answer: string;
  /** How the CLI prints a successful answer (default: `key: value` lines). */
  readonly render?: (body: any) => string;
}

/** Declares an operation (the identity, for its types: `exactlyOne` names its own fields). */
export function operation<F extends Fields>(
  spec: OperationSpec<F> & {
    exactlyOne?: ReadonlyArray<readonly [keyof F & string, keyof F & string]>;
    atLeastOne?: ReadonlyArray<readonly [keyof F & string, keyof F & string]>;
  },
): OperationSpec<F> {
  return spec;
}

/** The arguments a handler receives. */
export type ArgsOf<F extends Fields> = { readonly [K in keyof F]: F[K] extends Field<infer T> ? T : never };

export function kebab(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

/** A field's CLI flag, without the dashes. */
export function flagOf(name: string, f: Field<unknown>): string {
  return f.doc.flag ?? kebab(name);
}

function given(raw: unknown): boolean {
  return raw !== undefined && raw !== null;
}

/**
 * Reads `body` against `spec`: the arguments, or the first problem. `label` names a field as the
 * caller wrote it (the field name over HTTP, the flag on the command line).
 */
export function readArguments<F extends Fields>(
  spec: OperationSpec<F>,
  body: Readonly<Record<string, unknown>>,
  label: (name: string) => string = (name) => name,
): { ok: true; args: ArgsOf<F> } | { ok: false; problem: string } {
  for (const [a, b] of spec.exactlyOne ?? []) {
    const count = Number(given(body[a])) + Number(given(body[b]));
    if (count === 2) return { ok: false, problem: `give either ${label(a)} or ${label(b)}, not both` };
    if (count === 0) return { ok: false, problem: `${label(a)} or ${label(b)} is required` };
  }
  for (const [a, b] of spec.atLeastOne ?? []) {
    if (!given(body[a]) && !given(body[b])) return { ok: false, problem: `${label(a)} or ${label(b)} (or both) is required` };
  }
  const args: Record<string, unknown> = {};
  for (const [name, f] of Object.entries(spec.fields)) {
    const raw = Object.hasOwn(body, name) ? body[name] : undefined;
    const value = given(raw) ? f.kind.accept(raw) : f.required ? INVALID : f.fallback;
    if (value === INVALID) return { ok: false, problem: refusal(label(name), f.kind.rule) };
    args[name] = value;
  }
  return { ok: true, args: args as ArgsOf<F> };
}
