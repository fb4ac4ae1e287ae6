// Directory users as hash fields, and the indexes' names.

import { createHash } from 'node:crypto';
import { parseEpochMs } from '../../model/credentials.ts';
import type { DirectoryIndex, DirectoryUser } from '../../model/directory.ts';
import type { Fields } from '../codec.ts';

/** A directory user as hash fields; `attributes` as JSON. */
export function directoryUserFields(u: DirectoryUser): Fields {
  const f: Fields = {
    id: u.id,
    provider: u.provider,
    userName: u.userName,
    active: u.active ? '1' : '0',
    attributes: JSON.stringify(u.attributes),
    createdAt: String(u.createdAt),
    updatedAt: String(u.updatedAt),
    version: String(u.version),
  };
  if (u.externalId !== undefined) f.externalId = u.externalId;
  if (u.deletedAt !== undefined) f.deletedAt = String(u.deletedAt);
  return f;
}

/** A stored directory user, or `'corrupt'` without its id, names, state, times or readable attributes. */
export function directoryUserFromFields(f: Fields): DirectoryUser | 'corrupt' {
  const createdAt = parseEpochMs(f.createdAt);
  const updatedAt = parseEpochMs(f.updatedAt);
  const version = Number(f.version);
  if (!f.id || !f.provider || !f.userName || (f.active !== '1' && f.active !== '0')) return 'corrupt';
  if (createdAt === undefined || updatedAt === undefined || !Number.isSafeInteger(version) || version < 1) return 'corrupt';
  let attributes: unknown;
  try {
    attributes = JSON.parse(f.attributes ?? '');
  } catch {
    return 'corrupt';
  }
  if (attributes === null || typeof attributes !== 'object' || Array.isArray(attributes)) return 'corrupt';
  const u: DirectoryUser = {
    id: f.id,
    provider: f.provider,
    userName: f.userName,
    active: f.active === '1',
    attributes: attributes as Record<string, unknown>,
    createdAt,
    updatedAt,
    version,
  };
  if (f.externalId !== undefined) u.externalId = f.externalId;
  if (f.deletedAt !== undefined) {
    const deletedAt = parseEpochMs(f.deletedAt);
    if (deletedAt === undefined) return 'corrupt';
    u.deletedAt = deletedAt;
  }
  return u;
}

/** The name an index entry is kept under: the SHA-256 of provider and value (they may carry emails). */
export function directoryIndexName(provider: string, index: DirectoryIndex, value: string): string {
  return `${index}:${createHash('sha256').update(`${provider}\n${value}`).digest('hex')}`;
}

/** The name of a provider's list of live users. */
export function directoryListName(provider: string): string {
  return createHash('sha256').update(provider).digest('hex');
}

/** The name of the identities linked to one email at one provider. */
export function directoryLinkName(provider: string, email: string): string {
  return createHash('sha256').update(`${provider}\n${email}`).digest('hex');
}

/** A linked identity as a hash field (JSON [subject, issuer]) and back. */
export function linkedIdentityField(identity: { subject: string; issuer: string }): string {
  return JSON.stringify([identity.subject, identity.issuer]);
}

export function linkedIdentityFromField(field: string): { subject: string; issuer: string } | undefined {
  try {
    const parsed: unknown = JSON.parse(field);
    if (Array.isArray(parsed) && parsed.length === 2 && typeof parsed[0] === 'string' && typeof parsed[1] === 'string')
      return { subject: parsed[0], issuer: parsed[1] };
  } catch {
    // fall through: not a field this code wrote
  }
  return undefined;
}
