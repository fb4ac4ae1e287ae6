// A SCIM User (RFC 7643 §4.1) as the directory sends it and as it is answered: the attributes this
// server acts on (userName, externalId, active) checked and kept apart, every other attribute kept as
// sent (name, emails, the enterprise extension...) and returned, a password never kept.

import type { DirectoryUser } from '../../model/directory.ts';
import { invalidSyntax, invalidValue, scimError } from './errors.ts';

export const USER_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:User';
export const ENTERPRISE_USER_SCHEMA = 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User';
export const LIST_RESPONSE_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:ListResponse';
export const PATCH_OP_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';

/** The longest userName and externalId kept. */
const MAX_NAME = 256;
/** Attributes of a User this server sets itself, or never keeps. */
const NOT_KEPT = new Set(['schemas', 'id', 'meta', 'username', 'externalid', 'active', 'password']);

/**
 * A SCIM boolean: JSON true/false, or the strings "True"/"False" in any case, which Entra ID sends in
 * PATCH values ("Entra ID ... sends boolean values as strings", its SCIM documentation's known issues).
 */
export function scimBoolean(value: unknown, attribute: string): boolean {
  if (typeof value === 'boolean') return value;
  if (typeof value === 'string') {
    const lower = value.toLowerCase();
    if (lower === 'true') return true;
    if (lower === 'false') return false;
  }
  throw invalidValue(`${attribute} must be a boolean`);
}

export function checkedName(value: unknown, attribute: 'userName' | 'externalId'): string {
  if (typeof value !== 'string' || value.trim().length === 0 || value.length > MAX_NAME)
    throw invalidValue(`${attribute} must be a non-empty string of at most ${MAX_NAME} characters`);
  return value;
}

/** The value of an attribute of `body` by name, ignoring case (RFC 7643 §2.1: attribute names are case-insensitive). */
function attribute(body: Record<string, unknown>, name: string): unknown {
  const lower = name.toLowerCase();
  for (const key of Object.keys(body)) if (key.toLowerCase() === lower) return body[key];
  return undefined;
}

/** A User body of POST or PUT: `schemas` naming the User schema, a userName; `active` true unless said otherwise. */
export function readUserBody(body: Record<string, unknown>): Pick<DirectoryUser, 'userName' | 'externalId' | 'active' | 'attributes'> {
  const schemas = body.schemas;
  if (!Array.isArray(schemas) || !schemas.includes(USER_SCHEMA)) throw invalidSyntax(`schemas must list ${USER_SCHEMA}`);
  const userName = attribute(body, 'userName');
  if (userName === undefined) throw invalidValue('userName is required');
  const externalId = attribute(body, 'externalId');
  const active = attribute(body, 'active');
  const attributes: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(body)) if (!NOT_KEPT.has(key.toLowerCase())) attributes[key] = value;
  return {
    userName: checkedName(userName, 'userName'),
    ...(externalId === undefined || externalId === null ? {} : { externalId: checkedName(externalId, 'externalId') }),
    active: active === undefined || active === null ? true : scimBoolean(active, 'active'),
    attributes,
  };
}

/** A user as SCIM answers it; `location`: the URL path of the resource. */
export function userResource(user: DirectoryUser, base: string): Record<string, unknown> {
  const extensions = Object.keys(user.attributes).filter((k) => k.toLowerCase().startsWith('urn:'));
  return {
    schemas: [USER_SCHEMA, ...extensions],
    id: user.id,
    ...(user.externalId === undefined ? {} : { externalId: user.externalId }),
    userName: user.userName,
    ...user.attributes,
    active: user.active,
    meta: {
      resourceType: 'User',
      created: new Date(user.createdAt).toISOString(),
      lastModified: new Date(user.updatedAt).toISOString(),
      location: `${base}/Users/${user.id}`,
      version: `W/"${user.version}"`,
    },
  };
}

/** A ListResponse (RFC 7644 §3.4.2) of the users found, one page of it. */
export function listResponse(found: DirectoryUser[], base: string, startIndex: number, count: number): Record<string, unknown> {
  const page = found.slice(startIndex - 1, startIndex - 1 + count);
  return {
    schemas: [LIST_RESPONSE_SCHEMA],
    totalResults: found.length,
    startIndex,
    itemsPerPage: page.length,
    Resources: page.map((u) => userResource(u, base)),
  };
}

/** A positive integer query parameter (startIndex, count), its default when absent; RFC 7644 §3.4.2.4 clamps, never refuses, odd values. */
export function pageParameter(value: string | null, fallback: number, min: number, max: number): number {
  if (value === null || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n)) throw invalidValue('startIndex and count must be integers');
  return Math.min(max, Math.max(min, n));
}

/** A user id as this server mints them (a UUID); anything else is an unknown resource. */
export function checkedId(id: string): string {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id)) throw scimError(404, 'no such user');
  return id;
}
