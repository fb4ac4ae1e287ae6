// Audit events as stream fields and published signing keys as hash values, and back.

import { publishKey } from '../../model/published-keys.ts';
import { type Fields, type HashUpdate } from '../codec.ts';
import type { PublishedSigningKey, AuditEvent, StoredAuditEvent } from '../types.ts';

/** An audit event as flat stream fields (XADD), and back; `detail` travels as one JSON field. */
export function auditFields(e: AuditEvent): Fields {
  const f: Fields = { at: String(e.at), who: e.who, action: e.action, result: e.result };
  if (e.eventId !== undefined) f.eventId = e.eventId;
  if (e.clientId !== undefined) f.clientId = e.clientId;
  if (e.tokenHashPrefix !== undefined) f.tokenHashPrefix = e.tokenHashPrefix;
  if (e.subject !== undefined) f.subject = e.subject;
  if (e.detail !== undefined) f.detail = JSON.stringify(e.detail);
  return f;
}

export function auditFromFields(id: string, f: Fields): StoredAuditEvent {
  const e: StoredAuditEvent = { id, at: Number(f.at), who: f.who ?? '', action: f.action ?? '', result: f.result ?? '' };
  if (f.eventId !== undefined) e.eventId = f.eventId;
  if (f.clientId !== undefined) e.clientId = f.clientId;
  if (f.tokenHashPrefix !== undefined) e.tokenHashPrefix = f.tokenHashPrefix;
  if (f.subject !== undefined) e.subject = f.subject;
  if (f.detail !== undefined) {
    try {
      e.detail = JSON.parse(f.detail) as Record<string, string | number | boolean>;
    } catch {
      // A hand-written entry with a broken detail is still shown, without it.
    }
  }
  return e;
}

/** A published signing key as its hash field's value: `{"expiresAt":<ms>,"jwk":{...}}`. */
export function signingKeyValue(key: PublishedSigningKey): string {
  return `{"expiresAt":${key.expiresAt},"jwk":${key.jwk}}`;
}

/**
 * The published key of a hash field, if it is one that may be listed at `now`: not expired, and a
 * public EC key (an entry carrying a private part, or anything else, is never listed).
 */
export function signingKeyFromValue(kid: string, value: string, now: number): PublishedSigningKey | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return null;
  }
  if (typeof parsed !== 'object' || parsed === null) return null;
  const { expiresAt, jwk } = parsed as { expiresAt?: unknown; jwk?: unknown };
  if (typeof expiresAt !== 'number' || !Number.isSafeInteger(expiresAt) || expiresAt <= now) return null;
  if (typeof jwk !== 'object' || jwk === null || Array.isArray(jwk)) return null;
  const k = jwk as Record<string, unknown>;
  if (k.kty !== 'EC' || k.crv !== 'P-256' || typeof k.x !== 'string' || typeof k.y !== 'string' || 'd' in k || k.kid !== kid) return null;
  return { kid, jwk: JSON.stringify(jwk), expiresAt };
}

/** The keys of a signing-key hash that may be listed at `now`, sorted by kid. */
export function listedSigningKeys(fields: Fields, now: number): PublishedSigningKey[] {
  const out: PublishedSigningKey[] = [];
  for (const kid of Object.keys(fields).sort()) {
    const key = signingKeyFromValue(kid, fields[kid]!, now);
    if (key) out.push(key);
  }
  return out;
}

/** Stream ids (`<ms>-<seq>`) in time order, newest first; ids of two streams interleave by time. */
export function newestAuditFirst(a: StoredAuditEvent, b: StoredAuditEvent): number {
  const [am = 0, as = 0] = a.id.split('-').map(Number);
  const [bm = 0, bs = 0] = b.id.split('-').map(Number);
  return bm - am || bs - as;
}

/** When a published-key entry's listing ends: the expiresAt of its JSON value; undefined when it does not read. */
function listingEnd(value: string): number | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return undefined;
  }
  const at = typeof parsed === 'object' && parsed !== null ? (parsed as { expiresAt?: unknown }).expiresAt : undefined;
  return typeof at === 'number' && Number.isFinite(at) ? at : undefined;
}

/** Publishing a key at `now` (the model's publishKey) as an update of the signing-keys hash. */
export function signingKeyPublication(key: PublishedSigningKey, now: number): (current: Fields | null) => HashUpdate<void> {
  return (current) => {
    const listed = Object.entries(current ?? {}).map(([kid, value]) => ({ kid, expiresAt: listingEnd(value) }));
    const { write, forget, until } = publishKey(listed, key.kid, key.expiresAt, now);
    if (until === undefined) return { result: undefined, drop: current !== null };
    const set = write && !forget.includes(key.kid) ? { [key.kid]: signingKeyValue(key) } : undefined;
    return { result: undefined, set, unset: forget, expireAt: until };
  };
}
