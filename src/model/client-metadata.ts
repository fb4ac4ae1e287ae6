// Client metadata, declared once: each field's kind (its rule) and its names (RFC 7591 on the wire of
// /register and in a Client ID Metadata Document; camelCase in the admin createClient). The admin
// operation, dynamic registration and the metadata document reader all check a field with its
// declaration here, so the same bad value is refused the same way, naming the same field, whichever
// door it came through. A document describes its client to every server and cannot be tailored to
// this one: where its rule differs (a private-use redirect scheme, a display name shown rather than
// refused for invisible characters), the field declares it as `inDocument`.

import type { JSONWebKeySet } from 'jose';
import { isLoopbackHost } from './net-address.ts';
import { choice, hasControlCharacter, INVALID, kind, list, refine, refusal, text, type Kind } from './validate.ts';

/** Keys in one JSON Web Key Set of a client. */
export const MAX_KEYS = 32;
export const MAX_REDIRECT_URIS = 16;
const MAX_URL_LENGTH = 2048;
const MAX_NAME_LENGTH = 256;
const SCOPE_TOKEN = /^[\x21\x23-\x5b\x5d-\x7e]+$/;

/**
 * Unicode format characters (general category Cf): the bidi overrides, embeddings and isolates
 * (U+202A-202E, U+2066-2069, U+200E/200F, U+061C), zero-width spaces and joiners (U+200B-200D,
 * U+2060, U+FEFF), soft hyphens, tags. Invisible on a page, they make a name read other than it is
 * ("\u202Eexe.elif" shows as "file.exe"), so a name a client chooses may not hold them.
 */
const FORMAT_CHARACTER = /\p{Cf}/u;

export function hasFormatCharacter(value: string): boolean {
  return FORMAT_CHARACTER.test(value);
}

/** A URI as stored and shown: the raw value is checked (the URL parser silently drops tabs and newlines). */
function plainUri(value: unknown): value is string {
  return (
    typeof value === 'string' && value.length > 0 && value.length <= MAX_URL_LENGTH && !hasControlCharacter(value) && !value.includes(' ')
  );
}

function parsedUrl(value: string): URL | undefined {
  try {
    return new URL(value);
  } catch {
    return undefined;
  }
}

/** https, or http on a loopback host (RFC 8252 §7.3); no fragment; matched by redirectUriMatches. */
export function checkRedirectUri(value: unknown): string | null {
  if (!plainUri(value) || value.includes('#')) return null;
  const url = parsedUrl(value);
  if (url === undefined || url.hash !== '') return null;
  if (url.protocol === 'https:') return value;
  return url.protocol === 'http:' && isLoopbackHost(url.hostname) ? value : null;
}

/**
 * A redirect URI of a document: https, http on loopback (RFC 8252 §7.3) or a private-use scheme named
 * after a domain (RFC 8252 §7.1, e.g. `com.example.app:/callback`); absolute, without fragment.
 */
function checkDocumentRedirectUri(value: unknown): boolean {
  if (checkRedirectUri(value) !== null) return true;
  if (!plainUri(value) || value.includes('#')) return false;
  const scheme = parsedUrl(value)?.protocol.slice(0, -1);
  return scheme !== undefined && /^[a-z][a-z0-9+-]*(\.[a-z0-9+-]+)+$/.test(scheme);
}

/** An https URL with a host, without fragment or user info (a `jwks_uri`). */
export function isHttpsUrl(value: unknown): value is string {
  if (!plainUri(value) || value.includes('#')) return false;
  const url = parsedUrl(value);
  return url !== undefined && url.protocol === 'https:' && url.username === '' && url.password === '' && url.href === value;
}

/** An https URL to show or link to (`client_uri`, `logo_uri`), or undefined: display-only fields never refuse. */
export function displayUri(value: unknown): string | undefined {
  return plainUri(value) && parsedUrl(value)?.protocol === 'https:' ? value : undefined;
}

/** A JWKS as published: `{"keys": [...]}` of at most MAX_KEYS public keys (no private or symmetric member). */
export function checkKeySet(value: unknown): JSONWebKeySet | undefined {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const keys = (value as { keys?: unknown }).keys;
  if (!Array.isArray(keys) || keys.length === 0 || keys.length > MAX_KEYS) return undefined;
  for (const k of keys) {
    if (k === null || typeof k !== 'object' || Array.isArray(k)) return undefined;
    const key = k as Record<string, unknown>;
    if (typeof key.kty !== 'string' || key.kty === 'oct' || key.d !== undefined || key.k !== undefined) return undefined;
  }
  return { keys: keys as JSONWebKeySet['keys'] };
}

/** True for space-separated scope tokens (RFC 6749 §3.3), at most 1024 characters in all. */
export function isScopeText(value: string): boolean {
  return value.length <= 1024 && value.split(' ').every((t) => SCOPE_TOKEN.test(t));
}

/** The kinds of client metadata value. */
export const SCOPE = refine(text(), 'a space-separated list of scope tokens', isScopeText);
const NAME_IN_DOCUMENT = text({ max: MAX_NAME_LENGTH, plain: true });
const NAME = refine(
  NAME_IN_DOCUMENT,
  `${NAME_IN_DOCUMENT.rule} or invisible formatting characters (bidi controls, zero-width characters)`,
  (v) => !hasFormatCharacter(v),
);
const REDIRECT_URI = 'https or http on a loopback host, without fragment, space or control character';
const REDIRECT_URIS = list(
  kind(REDIRECT_URI, (raw) => checkRedirectUri(raw) ?? INVALID),
  { max: MAX_REDIRECT_URIS, rule: `a list of at most ${MAX_REDIRECT_URIS} URIs, each ${REDIRECT_URI}` },
);
const DOCUMENT_REDIRECT_URI = 'https, http on a loopback host or a private-use scheme, without fragment, space or control character';
/**
 * A document is published once for every server it is used with, so it may list more redirect URIs
 * than one registration does; still bounded, as everything a client chooses is (each one is checked
 * on every authorization request of that client).
 */
const MAX_DOCUMENT_REDIRECT_URIS = 64;
const DOCUMENT_REDIRECT_URIS = list(
  kind(DOCUMENT_REDIRECT_URI, (raw) => (checkDocumentRedirectUri(raw) ? (raw as string) : INVALID)),
  {
    min: 1,
    max: MAX_DOCUMENT_REDIRECT_URIS,
    rule: `a non-empty list of absolute URIs (at most ${MAX_DOCUMENT_REDIRECT_URIS}), each ${DOCUMENT_REDIRECT_URI}`,
  },
);
/** A list a document may name entries of that this server ignores (grant and response types, auth methods). */
const DOCUMENT_NAMES = list(text({ max: 256 }), { min: 1, max: 64, rule: 'a non-empty list of at most 64 strings' });

export interface MetadataField<T> {
  /** The name in RFC 7591 (the JSON of /register and of a metadata document). */
  readonly rfc: string;
  /** The name in the admin createClient. */
  readonly admin: string;
  readonly kind: Kind<T>;
  /** The kind in a metadata document, where its rule differs. */
  readonly inDocument?: Kind<unknown>;
}

function field<T>(rfc: string, admin: string, k: Kind<T>, inDocument?: Kind<unknown>): MetadataField<T> {
  return inDocument === undefined ? { rfc, admin, kind: k } : { rfc, admin, kind: k, inDocument };
}

/**
 * Every field. In a document: a name with invisible formatting characters is kept and shown with them
 * replaced (displayableName), a native app's private-use redirect scheme is allowed, and lists of
 * grant types, response types and auth methods may name entries this server ignores.
 */
export const CLIENT_METADATA = {
  clientName: field('client_name', 'clientName', NAME, NAME_IN_DOCUMENT),
  redirectUris: field('redirect_uris', 'redirectUris', REDIRECT_URIS, DOCUMENT_REDIRECT_URIS),
  grantTypes: field('grant_types', 'grantTypes', list(text(), { min: 1, rule: 'a non-empty list of grant type names' }), DOCUMENT_NAMES),
  responseTypes: field('response_types', 'responseTypes', list(choice(['code']), { rule: 'a list holding only "code"' }), DOCUMENT_NAMES),
  scope: field('scope', 'scope', SCOPE),
  profile: field('profile', 'profile', text({ min: 1, max: 64, plain: true, rule: 'the name of a profile' })),
  tokenEndpointAuthMethod: field(
    'token_endpoint_auth_method',
    'tokenEndpointAuthMethod',
    choice(['client_secret_basic', 'client_secret_post', 'private_key_jwt', 'none']),
    text(),
  ),
  tokenEndpointAuthMethodsSupported: field('token_endpoint_auth_methods_supported', 'tokenEndpointAuthMethodsSupported', DOCUMENT_NAMES),
  jwks: field(
    'jwks',
    'jwks',
    kind(`a JSON Web Key Set of 1 to ${MAX_KEYS} public keys`, (raw) => checkKeySet(raw) ?? INVALID),
  ),
  jwksUri: field(
    'jwks_uri',
    'jwksUri',
    kind('an https URL without fragment or user info', (raw) => (isHttpsUrl(raw) ? raw : INVALID)),
  ),
} as const;

export type MetadataKey = keyof typeof CLIENT_METADATA;
type ValueOf<K extends MetadataKey> = (typeof CLIENT_METADATA)[K] extends MetadataField<infer T> ? T : never;

/** Where metadata comes from: it picks the field names and, for a document, the document's rules. */
export type MetadataDoor = 'admin' | 'dcr' | 'document';

/** A refused field: which one, and `<name> must be <rule>` with the name as that door spells it. */
export class MetadataRefusal extends Error {
  readonly field: MetadataKey;
  readonly description: string;
  constructor(field: MetadataKey, description: string) {
    super(description);
    this.name = 'MetadataRefusal';
    this.field = field;
    this.description = description;
  }
}

export function metadataName(key: MetadataKey, door: MetadataDoor): string {
  return door === 'admin' ? CLIENT_METADATA[key].admin : CLIENT_METADATA[key].rfc;
}

/** Refuses `key` as that door names it: `<name> <problem>` (for problems beyond the field's kind). */
export function refuseField(key: MetadataKey, door: MetadataDoor, problem: string): never {
  throw new MetadataRefusal(key, `${metadataName(key, door)} ${problem}`);
}

/**
 * The value of field `key`: undefined when absent (`undefined` or `null`, and for `scope`, empty),
 * else its well-typed value, else a MetadataRefusal naming it.
 */
export function readField<K extends MetadataKey>(key: K, raw: unknown, door: 'admin' | 'dcr'): ValueOf<K> | undefined;
export function readField(key: MetadataKey, raw: unknown, door: 'document'): unknown;
export function readField(key: MetadataKey, raw: unknown, door: MetadataDoor): unknown {
  if (raw === undefined || raw === null || (key === 'scope' && raw === '')) return undefined;
  const declared: MetadataField<unknown> = CLIENT_METADATA[key];
  const k = door === 'document' ? (declared.inDocument ?? declared.kind) : declared.kind;
  const value = k.accept(raw);
  if (value === INVALID) throw new MetadataRefusal(key, refusal(metadataName(key, door), k.rule));
  return value;
}
