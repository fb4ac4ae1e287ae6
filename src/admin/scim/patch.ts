// PATCH of a User (RFC 7644 §3.5.2) in the shapes Entra ID and Okta send: ops `add`, `replace`,
// `remove` in any case (Entra sends "Replace"), with a path (`active`, `name.givenName`,
// `emails[type eq "work"].value`, an extension's `urn:...:User:manager`) or without one and a value
// object (Okta's `{"op":"replace","value":{"active":false}}`). The user is patched as a whole document
// and read again as a PUT body would be, so a PATCH can set nothing a PUT could not.

import type { DirectoryUser } from '../../model/directory.ts';
import { invalidSyntax, scimError } from './errors.ts';
import { ENTERPRISE_USER_SCHEMA, PATCH_OP_SCHEMA, readUserBody, USER_SCHEMA } from './resource.ts';

/** The most operations one PATCH may carry. */
const MAX_OPERATIONS = 100;

type Doc = Record<string, unknown>;
type Op = 'add' | 'replace' | 'remove';

/** A parsed path: the attribute (in its container: the user, or an extension), an element filter, a sub-attribute. */
interface Path {
  container?: string;
  attribute: string;
  filter?: { attribute: string; value: unknown };
  sub?: string;
}

const invalidPath = (detail: string) => scimError(400, detail, 'invalidPath');
const ATTRIBUTE = '[A-Za-z][A-Za-z0-9_$-]*';
const PATH_PATTERN = new RegExp(`^(${ATTRIBUTE})(?:\\[(.+)\\])?(?:\\.(${ATTRIBUTE}))?$`);
const FILTER_PATTERN = new RegExp(`^\\s*(${ATTRIBUTE})\\s+eq\\s+(.+?)\\s*$`, 'i');

/** The user `patch` makes of `user`; throws a SCIM 400 for a body or operation it cannot apply. */
export function applyPatch(user: DirectoryUser, patch: Record<string, unknown>): DirectoryUser {
  const schemas = patch.schemas;
  if (!Array.isArray(schemas) || !schemas.includes(PATCH_OP_SCHEMA)) throw invalidSyntax(`schemas must list ${PATCH_OP_SCHEMA}`);
  const operations = patch.Operations ?? patch.operations;
  if (!Array.isArray(operations) || operations.length === 0 || operations.length > MAX_OPERATIONS)
    throw invalidSyntax(`Operations must be a list of 1 to ${MAX_OPERATIONS} operations`);
  const doc: Doc = structuredClone({
    userName: user.userName,
    ...(user.externalId === undefined ? {} : { externalId: user.externalId }),
    active: user.active,
    ...user.attributes,
  });
  for (const operation of operations) applyOperation(doc, operation, user.id);
  const read = readUserBody({ ...doc, schemas: [USER_SCHEMA] });
  const next: DirectoryUser = { ...user, ...read };
  if (read.externalId === undefined) delete next.externalId;
  return next;
}

function applyOperation(doc: Doc, operation: unknown, id: string): void {
  if (operation === null || typeof operation !== 'object' || Array.isArray(operation))
    throw invalidSyntax('each operation must be an object');
  const { op, path, value } = operation as { op?: unknown; path?: unknown; value?: unknown };
  const kind = typeof op === 'string' ? op.toLowerCase() : '';
  if (kind !== 'add' && kind !== 'replace' && kind !== 'remove') throw invalidSyntax('op must be add, replace or remove');
  if (path === undefined || path === null || path === '') {
    if (kind === 'remove') throw scimError(400, 'remove needs a path', 'noTarget');
    if (value === null || typeof value !== 'object' || Array.isArray(value))
      throw invalidSyntax('an operation without a path needs an object value');
    // Okta and Entra send sub-attributes as "name.givenName" keys of the value object too.
    for (const [key, v] of Object.entries(value as Doc)) applyAt(doc, parsePath(key, id, v), kind, v);
    return;
  }
  if (typeof path !== 'string' || path.length > 512) throw invalidPath('path must be a string');
  applyAt(doc, parsePath(path, id, value), kind, value);
}

/** `attribute`, `attribute.sub`, `attribute[filter].sub`, each optionally after a schema URN. */
function parsePath(path: string, id: string, value: unknown): Path {
  let rest = path;
  let container: string | undefined;
  if (path.toLowerCase().startsWith('urn:')) {
    if (path.toLowerCase().startsWith(`${USER_SCHEMA.toLowerCase()}:`)) rest = path.slice(USER_SCHEMA.length + 1);
    else if (path.toLowerCase() === ENTERPRISE_USER_SCHEMA.toLowerCase()) return { attribute: ENTERPRISE_USER_SCHEMA };
    else {
      const cut = path.lastIndexOf(':');
      container = path.slice(0, cut);
      rest = path.slice(cut + 1);
    }
  }
  const lower = rest.toLowerCase();
  if (container === undefined && (lower === 'schemas' || lower === 'meta')) throw scimError(400, `${rest} cannot be changed`, 'mutability');
  if (container === undefined && lower === 'id') {
    if (value === id) return { attribute: 'id' };
    throw scimError(400, 'id cannot be changed', 'mutability');
  }
  const match = PATH_PATTERN.exec(rest);
  if (!match) throw invalidPath('this path is not supported');
  const [, attribute, filterText, sub] = match;
  const parsed: Path = { attribute: attribute! };
  if (container !== undefined) parsed.container = container;
  if (sub !== undefined) parsed.sub = sub;
  if (filterText !== undefined) parsed.filter = parseValueFilter(filterText);
  return parsed;
}

/** `type eq "work"`, `primary eq true`: the only value filters directories send in a path. */
function parseValueFilter(text: string): { attribute: string; value: unknown } {
  const match = FILTER_PATTERN.exec(text);
  if (!match) throw invalidPath('only `attribute eq value` filters are supported in a path');
  let value: unknown;
  try {
    value = JSON.parse(match[2]!);
  } catch {
    throw invalidPath('the filter value must be a JSON string, number or boolean');
  }
  if (value !== null && typeof value === 'object') throw invalidPath('the filter value must be a JSON string, number or boolean');
  return { attribute: match[1]!, value };
}

/** The key of `obj` that names `name`, ignoring case; `name` itself when none does. */
function keyOf(obj: Doc, name: string): string {
  const lower = name.toLowerCase();
  return Object.keys(obj).find((k) => k.toLowerCase() === lower) ?? name;
}

function objectAt(parent: Doc, name: string): Doc {
  const key = keyOf(parent, name);
  const current = parent[key];
  if (current !== null && typeof current === 'object' && !Array.isArray(current)) return current as Doc;
  const created: Doc = {};
  parent[key] = created;
  return created;
}

function matches(element: unknown, filter: NonNullable<Path['filter']>): element is Doc {
  if (element === null || typeof element !== 'object' || Array.isArray(element)) return false;
  const v = (element as Doc)[keyOf(element as Doc, filter.attribute)];
  return typeof v === 'string' && typeof filter.value === 'string' ? v.toLowerCase() === filter.value.toLowerCase() : v === filter.value;
}

function applyAt(doc: Doc, path: Path, op: Op, value: unknown): void {
  if (path.attribute === 'id') return;
  const parent = path.container === undefined ? doc : objectAt(doc, path.container);
  const key = keyOf(parent, path.attribute);
  if (path.filter !== undefined) return applyFiltered(parent, key, path as Path & { filter: object }, op, value);
  if (path.sub !== undefined) {
    if (op === 'remove') {
      const inner = parent[key];
      if (inner !== null && typeof inner === 'object' && !Array.isArray(inner)) delete (inner as Doc)[keyOf(inner as Doc, path.sub)];
      return;
    }
    const inner = objectAt(parent, path.attribute);
    inner[keyOf(inner, path.sub)] = value;
    return;
  }
  if (op === 'remove') {
    delete parent[key];
    return;
  }
  const current = parent[key];
  // RFC 7644 §3.5.2.1: add to a multi-valued attribute appends; add to a complex one merges.
  if (op === 'add' && Array.isArray(current) && Array.isArray(value)) parent[key] = [...(current as unknown[]), ...(value as unknown[])];
  else if (op === 'add' && isObject(current) && isObject(value)) parent[key] = { ...current, ...value };
  else parent[key] = value;
}

function isObject(v: unknown): v is Doc {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** `emails[type eq "work"].value`: the matching elements changed; a replace or add with none matching adds one (what Entra ID expects). */
function applyFiltered(parent: Doc, key: string, path: Path & { filter: NonNullable<Path['filter']> }, op: Op, value: unknown): void {
  const list = Array.isArray(parent[key]) ? (parent[key] as unknown[]) : [];
  const hits = list.filter((e) => matches(e, path.filter));
  if (op === 'remove') {
    parent[key] =
      path.sub === undefined
        ? list.filter((e) => !matches(e, path.filter))
        : list.map((e) => {
            if (!matches(e, path.filter)) return e;
            const copy = { ...e };
            delete copy[keyOf(copy, path.sub!)];
            return copy;
          });
    return;
  }
  if (hits.length === 0) {
    const element: Doc = { [path.filter.attribute]: path.filter.value };
    if (path.sub !== undefined) element[path.sub] = value;
    else if (isObject(value)) Object.assign(element, value);
    parent[key] = [...list, element];
    return;
  }
  for (const hit of hits) {
    if (path.sub !== undefined) hit[keyOf(hit, path.sub)] = value;
    else if (isObject(value)) Object.assign(hit, value);
  }
  parent[key] = list;
}
