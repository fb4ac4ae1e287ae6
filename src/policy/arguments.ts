// Conditions on a tools/call's arguments: `{path, <operator>: operand}`, `path` a JSON Pointer (RFC 6901)
// into `params.arguments`. They read the value the policy's one parse of the body produced (jsonrpc.ts),
// never the text again, so what is decided is what is forwarded. Typed, without coercion: `"100"` is
// not greater than 99, `1` is not `true`; a path that leads nowhere matches only `exists: false`.
//
// A key is looked up by its exact spelling. Where the exact key is missing but one equal under case
// folding is there (`Force` for `/force`), upstreams read the call differently (Go's encoding/json
// fills a struct field case-insensitively, the TypeScript and Python SDKs do not): the call is
// refused rather than decided on one reading. Two keys of one object equal under folding never get
// here (the parse refuses them).

import { HttpError } from '../http/errors.ts';

export const ARGUMENT_OPERATORS = ['equals', 'in', 'notIn', 'prefix', 'greaterThan', 'lessThan', 'exists'] as const;
export type ArgumentOperator = (typeof ARGUMENT_OPERATORS)[number];

export interface ArgumentCondition {
  readonly path: string;
  readonly operator: ArgumentOperator;
  readonly operand: unknown;
  /** How the condition reads in an explanation: `/force equals true`. */
  readonly label: string;
  /** Whether the condition holds for these arguments (undefined: the call sent none). */
  holds(args: unknown): boolean;
}

const MAX_CONDITIONS = 32;
const MAX_POINTER = 1024;
const MAX_OPERAND_JSON = 4096;

/** The string every parser that folds case would read `key` as (Unicode upper then lower: `ſ` is `s`, `K` is `k`). */
export function fold(key: string): string {
  return key.toUpperCase().toLowerCase();
}

/**
 * Validates and compiles a rule's `arguments` list; every problem is pushed, named by `at`.
 * undefined when there is any problem.
 */
export function compileArgumentConditions(raw: unknown, at: string, problems: string[]): readonly ArgumentCondition[] | undefined {
  if (!Array.isArray(raw) || raw.length === 0 || raw.length > MAX_CONDITIONS) {
    problems.push(`${at} must be a non-empty list of at most ${MAX_CONDITIONS} conditions {path, <operator>}`);
    return undefined;
  }
  const before = problems.length;
  const conditions = raw.map((c, i) => compileCondition(c, `${at}[${i}]`, problems));
  return problems.length > before ? undefined : Object.freeze(conditions as ArgumentCondition[]);
}

function compileCondition(raw: unknown, at: string, problems: string[]): ArgumentCondition | undefined {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    problems.push(`${at} must be a mapping {path, <operator>: value}`);
    return undefined;
  }
  const c = raw as Record<string, unknown>;
  const operators = Object.keys(c).filter((k) => k !== 'path');
  for (const k of operators)
    if (!(ARGUMENT_OPERATORS as readonly string[]).includes(k))
      problems.push(`${at}.${k} is not a known field (known: path, ${ARGUMENT_OPERATORS.join(', ')})`);
  const path = c.path;
  const segments = typeof path === 'string' ? pointerSegments(path) : undefined;
  if (segments === undefined) {
    problems.push(`${at}.path must be a JSON Pointer into the arguments, such as /branch or /options/force (RFC 6901)`);
  }
  const known = operators.filter((k) => (ARGUMENT_OPERATORS as readonly string[]).includes(k)) as ArgumentOperator[];
  if (known.length !== 1) {
    problems.push(`${at} must name exactly one operator (${ARGUMENT_OPERATORS.join(', ')})`);
    return undefined;
  }
  const operator = known[0]!;
  const operand = c[operator];
  const problem = operandProblem(operator, operand);
  if (problem !== undefined) problems.push(`${at}.${operator} ${problem}`);
  if (segments === undefined || problem !== undefined) return undefined;
  const test = tester(operator, operand);
  return Object.freeze({
    path: path as string,
    operator,
    operand,
    label: `${path as string} ${operator} ${JSON.stringify(operand)}`,
    holds(args: unknown): boolean {
      const found = resolve(args, segments);
      if (found === MISSING) return operator === 'exists' && operand === false;
      return test(found);
    },
  });
}

function operandProblem(operator: ArgumentOperator, operand: unknown): string | undefined {
  switch (operator) {
    case 'equals':
      return jsonProblem(operand);
    case 'in':
    case 'notIn':
      if (!Array.isArray(operand) || operand.length === 0) return 'must be a non-empty list of values';
      return jsonProblem(operand);
    case 'prefix':
      return typeof operand === 'string' && operand.length > 0 ? undefined : 'must be a non-empty string';
    case 'greaterThan':
    case 'lessThan':
      return typeof operand === 'number' && Number.isFinite(operand) ? undefined : 'must be a number';
    case 'exists':
      return typeof operand === 'boolean' ? undefined : 'must be true or false';
  }
}

/** A value a JSON argument can equal: JSON itself (no dates, no NaN), of bounded size. */
function jsonProblem(operand: unknown): string | undefined {
  if (operand === undefined) return 'must be a JSON value';
  const seen = (v: unknown): boolean =>
    v === null ||
    typeof v === 'string' ||
    typeof v === 'boolean' ||
    (typeof v === 'number' && Number.isFinite(v)) ||
    (Array.isArray(v) && v.every(seen)) ||
    (typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype && Object.values(v as object).every(seen));
  if (!seen(operand)) return 'must be a JSON value (string, number, boolean, null, list or mapping)';
  if (JSON.stringify(operand).length > MAX_OPERAND_JSON) return `must be at most ${MAX_OPERAND_JSON} characters as JSON`;
  return undefined;
}

function tester(operator: ArgumentOperator, operand: unknown): (value: unknown) => boolean {
  switch (operator) {
    case 'equals':
      return (v) => jsonEqual(v, operand);
    case 'in':
      return (v) => (operand as unknown[]).some((o) => jsonEqual(v, o));
    case 'notIn':
      return (v) => !(operand as unknown[]).some((o) => jsonEqual(v, o));
    case 'prefix':
      return (v) => typeof v === 'string' && v.startsWith(operand as string);
    case 'greaterThan':
      return (v) => typeof v === 'number' && v > (operand as number);
    case 'lessThan':
      return (v) => typeof v === 'number' && v < (operand as number);
    case 'exists':
      return () => operand === true;
  }
}

/** Equality of two JSON values, by type: no coercion, objects by their members whatever their order. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const other = b as unknown[];
    return a.length === other.length && a.every((v, i) => jsonEqual(v, other[i]));
  }
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => Object.hasOwn(b, k) && jsonEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

/** RFC 6901: `""` is the whole value; otherwise `/`-separated reference tokens with `~1` for `/` and `~0` for `~`. */
function pointerSegments(path: string): string[] | undefined {
  if (path.length > MAX_POINTER) return undefined;
  if (path === '') return [];
  if (!path.startsWith('/') || /~(?![01])/.test(path)) return undefined;
  return path
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

const MISSING: unique symbol = Symbol('missing');

/** The value at `segments` in `value`, or MISSING. Own members only: `__proto__` is a key like any other. */
function resolve(value: unknown, segments: readonly string[]): unknown {
  let at: unknown = value;
  if (at === undefined) return MISSING;
  for (const segment of segments) {
    if (Array.isArray(at)) {
      if (!/^(0|[1-9][0-9]{0,8})$/.test(segment)) return MISSING;
      const index = Number(segment);
      if (index >= at.length) return MISSING;
      at = at[index];
    } else if (typeof at === 'object' && at !== null) {
      if (!Object.hasOwn(at, segment)) {
        refuseNearSpelling(at as Record<string, unknown>, segment);
        return MISSING;
      }
      at = (at as Record<string, unknown>)[segment];
    } else return MISSING;
  }
  return at;
}

function refuseNearSpelling(object: Record<string, unknown>, segment: string): void {
  const folded = fold(segment);
  for (const key of Object.keys(object)) {
    if (fold(key) === folded)
      throw new HttpError(
        'invalid_request',
        'an argument the access policy reads is spelt in another case: servers read such a call differently, so it is refused',
      );
  }
}
