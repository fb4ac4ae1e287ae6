// The one validation kit: kinds of value (text, integer, boolean, choice, list, object, and rules
// refined from them), each with the rule a refusal states, and the one refusal style every input
// uses: `<field> must be <rule>`, the field named as the caller wrote it (a configuration key or
// variable, an admin field or flag, an RFC 7591 metadata name). Configuration keys
// (src/config/spec.ts), admin operation fields (src/admin/spec.ts) and client metadata
// (src/model/client-metadata.ts) are all declared with these kinds.

/** What `accept` answers for a value that is not of the kind. */
export const INVALID: unique symbol = Symbol('invalid');
export type Invalid = typeof INVALID;

/** A kind of value: what it must be, and the well-typed value of a raw one (or INVALID). */
export interface Kind<T> {
  /** What a value must be, as a refusal says it after `must be` (e.g. `an integer from 1 to 10`). */
  readonly rule: string;
  readonly accept: (raw: unknown) => T | Invalid;
}

/** The refusal of a value: `<field> must be <rule>`, with the value given when it may be shown. */
export function refusal(field: string, rule: string, got?: unknown): string {
  return got === undefined ? `${field} must be ${rule}` : `${field} must be ${rule} (got ${JSON.stringify(got)})`;
}

export function kind<T>(rule: string, accept: (raw: unknown) => T | Invalid): Kind<T> {
  return { rule, accept };
}

/** `base` narrowed by `ok`, with the rule of the narrower kind. */
export function refine<T>(base: Kind<T>, rule: string, ok: (value: T) => boolean): Kind<T> {
  return kind(rule, (raw) => {
    const value = base.accept(raw);
    return value !== INVALID && ok(value) ? value : INVALID;
  });
}

/** C0 and C1 controls, DEL and the Unicode line separators: never part of a stored name or URI. */
const CONTROL = /[\x00-\x1f\x7f-\x9f\u2028\u2029]/;

/** True when `value` holds a control character (CR/LF above all: stored values reach logs, headers and pages). */
export function hasControlCharacter(value: string): boolean {
  return CONTROL.test(value);
}

export interface TextOptions {
  min?: number;
  max?: number;
  /** Refuse control characters (a value stored and shown, or sent in a header). */
  plain?: boolean;
  /** What the value must be, when the length alone does not say it (e.g. `the name of a profile`). */
  rule?: string;
}

/** A string of `min` to `max` characters. */
export function text(o: TextOptions = {}): Kind<string> {
  const { min = 0, max = Infinity, plain = false } = o;
  const length =
    max === Infinity
      ? min > 0
        ? ` of at least ${min} characters`
        : ''
      : min > 0
        ? ` of ${min} to ${max} characters`
        : ` of at most ${max} characters`;
  const rule = o.rule ?? `a string${length}${plain ? ', without control characters' : ''}`;
  return kind(rule, (raw) =>
    typeof raw === 'string' && raw.length >= min && raw.length <= max && !(plain && CONTROL.test(raw)) ? raw : INVALID,
  );
}

/** An integer from `min` to `max`. */
export function integer(min: number, max = Number.MAX_SAFE_INTEGER): Kind<number> {
  return kind(`an integer from ${min} to ${max}`, (raw) =>
    typeof raw === 'number' && Number.isInteger(raw) && raw >= min && raw <= max ? raw : INVALID,
  );
}

export function boolean(): Kind<boolean> {
  return kind('true or false', (raw) => (typeof raw === 'boolean' ? raw : INVALID));
}

/** One of `allowed`. */
export function choice<const C extends string>(allowed: readonly C[]): Kind<C> {
  return kind(`one of ${allowed.join(', ')}`, (raw) => ((allowed as readonly unknown[]).includes(raw) ? (raw as C) : INVALID));
}

export interface ListOptions {
  min?: number;
  max?: number;
  /** The rule, when the item's does not say it well (e.g. `a non-empty list of grant type names`). */
  rule?: string;
}

/** A list of `min` to `max` items of `item` (default: strings). */
export function list<T = string>(item?: Kind<T>, o: ListOptions = {}): Kind<T[]> {
  const { min = 0, max = Infinity } = o;
  const each = item ?? (text() as unknown as Kind<T>);
  const count =
    max === Infinity ? (min > 0 ? 'a non-empty list' : 'a list') : `a list of ${min > 0 ? `${min} to ${max}` : `at most ${max}`}`;
  const rule = o.rule ?? (item === undefined ? `${count} of strings` : `${count} of items, each ${item.rule}`);
  return kind(rule, (raw) => {
    if (!Array.isArray(raw) || raw.length < min || raw.length > max) return INVALID;
    const out: T[] = [];
    for (const x of raw) {
      const v = each.accept(x);
      if (v === INVALID) return INVALID;
      out.push(v);
    }
    return out;
  });
}

/** A JSON object (not an array, not null). */
export function object(): Kind<Record<string, unknown>> {
  return kind('a JSON object', (raw) =>
    typeof raw === 'object' && raw !== null && !Array.isArray(raw) ? (raw as Record<string, unknown>) : INVALID,
  );
}
