// What every record codec shares: the flat string fields a hash holds, the signed-in user as fields,
// and the strict readers a corrupt record is told apart with. Timestamps are integer epoch ms.

import { parseEpochMs } from '../model/credentials.ts';
import { createRecord } from '../model/token-records.ts';
import type { SignedInUser } from '../model/records.ts';

export type Fields = Record<string, string>;

/** The signed-in user as token or code fields: subject, issuer, email?, groups? (a JSON list). */
export function userFields(u: SignedInUser): Fields {
  const f: Fields = { subject: u.subject, issuer: u.issuer };
  if (u.email !== undefined) f.email = u.email;
  if (u.groups !== undefined) f.groups = JSON.stringify(u.groups);
  if (u.signedInAt !== undefined) f.signedInAt = String(u.signedInAt);
  return f;
}

/** The signed-in user of a stored token or code; undefined for tokens of machine clients. */
export function userFromFields(f: Fields): SignedInUser | undefined {
  if (!f.subject || !f.issuer) return undefined;
  const u: SignedInUser = { subject: f.subject, issuer: f.issuer };
  if (f.email !== undefined) u.email = f.email;
  if (f.groups !== undefined) u.groups = stringArray(f.groups);
  const signedInAt = parseEpochMs(f.signedInAt);
  if (signedInAt !== undefined) u.signedInAt = signedInAt;
  return u;
}

/** A read of one record's fields (null: none stored), parsed by `parse`. */
export function readRecord<T>(fields: Fields | null, parse: (f: Fields) => T | 'corrupt'): T | 'corrupt' | null {
  return fields === null ? null : parse(fields);
}

/** A JSON list of strings, or undefined when the text is not one (absent, not JSON, another shape). */
export function strictStringArray(text: string | undefined): string[] | undefined {
  if (text === undefined) return undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    return Array.isArray(parsed) && parsed.every((x) => typeof x === 'string') ? (parsed as string[]) : undefined;
  } catch {
    return undefined;
  }
}

/** Lenient: what a record's list holds that is a string; [] when unreadable (for records shown, never for decisions). */
function stringArray(text: string | undefined): string[] {
  if (!text) return [];
  try {
    const parsed: unknown = JSON.parse(text);
    return Array.isArray(parsed) ? parsed.filter((x): x is string => typeof x === 'string') : [];
  } catch {
    return [];
  }
}

/** An RFC 7638 SHA-256 thumbprint: 43 base64url characters. */
export const JKT_PATTERN = /^[A-Za-z0-9_-]{43}$/;
export const SHA256_HEX_PATTERN = /^[0-9a-f]{64}$/;
/** A whole number of seconds as stored: at most 10 digits, nothing else. */
export const SECONDS_PATTERN = /^[0-9]{1,10}$/;

export function freezeRecord<T extends object>(r: T | 'corrupt'): Readonly<T> | 'corrupt' {
  return r === 'corrupt' ? r : Object.freeze(r);
}

/** Empty object from HGETALL means "no such key". */
export function orNull(f: Fields): Fields | null {
  for (const _ in f) return f;
  return null;
}

/**
 * What a compare-and-set on one hash decided (the stores' updateHash): its answer, and the write to
 * make on the hash as it was read (none: nothing is written). A hash read as absent is created by
 * `set` only while it is still absent.
 */
export interface HashUpdate<R> {
  result: R;
  /** Fields to set (HSET). */
  set?: Fields;
  /** Fields to delete (HDEL); the hash goes with its last field. */
  unset?: readonly string[];
  /** The whole hash deleted (DEL); nothing else is written. */
  drop?: boolean;
  /** When the hash expires, epoch ms (PEXPIREAT); absent: its expiry is left as it is. */
  expireAt?: number;
}

/** A model step on one record (src/model/) as a hash update: its change set as fields, numbers in decimal. */
export function stepUpdate<R>(step: { result: R; change?: Readonly<Record<string, string | number | boolean>> }): HashUpdate<R> {
  if (step.change === undefined) return { result: step.result };
  const set: Fields = {};
  for (const [field, value] of Object.entries(step.change)) set[field] = String(value);
  return { result: step.result, set };
}

/** Creating a hash with `fields` only while none is stored (the model's createRecord); answers whether it is. */
export function creationUpdate(fields: Fields): (current: Fields | null) => HashUpdate<boolean> {
  return (current) => {
    const { result, change } = createRecord(current, fields);
    return change === undefined ? { result } : { result, set: change };
  };
}

/** Whether an update writes anything. */
export function writesHash(update: HashUpdate<unknown>): boolean {
  if (update.drop === true || update.expireAt !== undefined || (update.unset?.length ?? 0) > 0) return true;
  for (const _ in update.set) return true;
  return false;
}
