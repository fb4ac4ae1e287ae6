// OAuth client provisioning shared by the admin `createClient` and RFC 7591 `POST /register`:
// metadata validation, generated identifiers and secrets (shown once, stored as SHA-256), and the
// public view of a client (never a secret or a hash).

import { randomBytes } from 'node:crypto';
import type { Clock } from './clock.ts';
import { generateToken, hashToken } from './credentials.ts';
import { HttpError } from '../http/errors.ts';
import { isLoopbackHost } from '../http/net-address.ts';
import type { JSONWebKeySet } from 'jose';
import { GRANT_AUTHORIZATION_CODE, GRANT_CLIENT_CREDENTIALS, GRANT_DEVICE_CODE } from './grant-types.ts';
import { resolveProfile } from './profiles.ts';
import type { ClientRecord, ClientStorage, ProfileStorage, StoredRead, TokenEndpointAuthMethod } from '../store/types.ts';

const SCOPE_TOKEN = /^[\x21\x23-\x5b\x5d-\x7e]+$/;
/** C0 and C1 controls, DEL and the Unicode line separators: never part of a stored name or URI. */
const CONTROL = /[\x00-\x1f\x7f-\x9f\u2028\u2029]/;

/** The name a stored client is shown by: none when it has none, or when it is absent or unreadable. */
export function clientName(read: StoredRead<ClientRecord>): string | undefined {
  return read && read !== 'corrupt' ? read.clientName : undefined;
}

/** True when `value` holds a control character (CR/LF above all: stored values reach logs, headers and pages). */
export function hasControlCharacter(value: string): boolean {
  return CONTROL.test(value);
}

/**
 * Unicode format characters (general category Cf): the bidi overrides, embeddings and isolates
 * (U+202A-202E, U+2066-2069, U+200E/200F, U+061C), zero-width spaces and joiners (U+200B-200D,
 * U+2060, U+FEFF), soft hyphens, tags. Invisible on a page, they make a name read other than it is
 * ("\u202Eexe.elif" shows as "file.exe"), so a name a client chooses may not hold them.
 */
const FORMAT_CHARACTER = /\p{Cf}/u;
const FORMAT_CHARACTERS = /\p{Cf}/gu;

export function hasFormatCharacter(value: string): boolean {
  return FORMAT_CHARACTER.test(value);
}

/**
 * A client-provided name as it may be shown to a user: each format or control character replaced
 * by U+FFFD, visibly, so a name stored before the rule or taken from a metadata document (which
 * describes the client to every server and is not refused for it) cannot reorder or hide text.
 */
export function displayableName(value: string): string {
  return value.replace(FORMAT_CHARACTERS, '\ufffd').replace(new RegExp(CONTROL.source, 'g'), '\ufffd');
}

const MAX_REDIRECT_URIS = 16;
const MAX_TEXT = 256;

export interface ClientMetadataInput {
  clientName?: unknown;
  redirectUris?: unknown;
  grantTypes?: unknown;
  scope?: unknown;
  profile?: unknown;
  tokenEndpointAuthMethod?: unknown;
  /** private_key_jwt: the client's public keys (a JWKS object), or an https URL where they are. */
  jwks?: unknown;
  jwksUri?: unknown;
}

export interface PublicClient {
  clientId: string;
  clientName?: string;
  redirectUris: string[];
  grantTypes: string[];
  scope?: string;
  profile: string;
  tokenEndpointAuthMethod: TokenEndpointAuthMethod;
  jwks?: unknown;
  jwksUri?: string;
  source: 'admin' | 'dcr' | 'cimd';
  createdAt: number;
  revokedAt?: number;
}

export function publicClient(c: ClientRecord): PublicClient {
  const out: PublicClient = {
    clientId: c.clientId,
    redirectUris: c.redirectUris,
    grantTypes: c.grantTypes,
    profile: c.profile,
    tokenEndpointAuthMethod: c.tokenEndpointAuthMethod,
    source: c.source,
    createdAt: c.createdAt,
  };
  if (c.clientName !== undefined) out.clientName = c.clientName;
  if (c.scope !== undefined) out.scope = c.scope;
  if (c.jwks !== undefined) out.jwks = JSON.parse(c.jwks) as unknown;
  if (c.jwksUri !== undefined) out.jwksUri = c.jwksUri;
  if (c.revokedAt !== undefined) out.revokedAt = c.revokedAt;
  return out;
}

/** https, or http on a loopback host (RFC 8252 §7.3); no fragment; matched by redirectUriMatches. */
export function checkRedirectUri(value: unknown): string | null {
  if (typeof value !== 'string' || value.length === 0 || value.length > 2048) return null;
  // The URL parser silently drops tabs and newlines: checked on the raw value, which is what is stored.
  if (CONTROL.test(value) || value.includes(' ')) return null;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return null;
  }
  if (url.hash !== '' || value.includes('#')) return null;
  if (url.protocol === 'https:') return value;
  return url.protocol === 'http:' && isLoopbackHost(url.hostname) ? value : null;
}

/**
 * Whether `presented` is one of the client's registered redirect URIs: exact string comparison, except
 * that an http loopback URI matches on any port (RFC 8252 §7.3: native apps bind an ephemeral port).
 * `localhost` counts as loopback because the common MCP clients register it, but it never matches
 * 127.0.0.1 or [::1] (nor the reverse): host, path and query must be identical.
 */
export function redirectUriMatches(registered: readonly string[], presented: string): boolean {
  if (presented.includes('#')) return false;
  if (registered.includes(presented)) return true;
  let url: URL;
  try {
    url = new URL(presented);
  } catch {
    return false;
  }
  if (url.protocol !== 'http:' || !isLoopbackHost(url.hostname) || url.username !== '' || url.password !== '') return false;
  return registered.some((r) => {
    let reg: URL;
    try {
      reg = new URL(r);
    } catch {
      return false;
    }
    return (
      reg.protocol === 'http:' &&
      reg.hostname === url.hostname &&
      reg.pathname === url.pathname &&
      reg.search === url.search &&
      reg.username === '' &&
      reg.password === ''
    );
  });
}

const CLIENT_ID_PREFIX = 'mcp_';
const CLIENT_ID_SHAPE = /^mcp_[0-9a-f]{32}$/;

/** Whether `value` has the shape of a client id this sidecar issues (`mcp_` and 32 hex). */
export function isClientIdShaped(value: string): boolean {
  return CLIENT_ID_SHAPE.test(value);
}

/** Keys in one JSON Web Key Set of a client. */
export const MAX_KEYS = 32;

/** An https URL with a host, without fragment or user info (a `jwks_uri`). */
export function isHttpsUrl(value: unknown): value is string {
  if (typeof value !== 'string' || value.length > 2048 || value.includes('#') || CONTROL.test(value) || value.includes(' ')) return false;
  try {
    const url = new URL(value);
    return url.protocol === 'https:' && url.username === '' && url.password === '' && url.href === value;
  } catch {
    return false;
  }
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

/**
 * The keys of a private_key_jwt client (RFC 7591 §2: `jwks` or `jwks_uri`, never both): a set of public
 * keys kept as JSON text, or an https URL fetched (with the SSRF guard of metadata documents) when an
 * assertion is checked. Other methods take no keys.
 */
function clientKeys(
  input: ClientMetadataInput,
  method: TokenEndpointAuthMethod,
  metaError: 'invalid_client_metadata' | 'invalid_request',
): Pick<ClientRecord, 'jwks' | 'jwksUri'> {
  const given = (v: unknown) => v !== undefined && v !== null;
  if (method !== 'private_key_jwt') {
    if (given(input.jwks) || given(input.jwksUri))
      throw new HttpError(metaError, 'jwks and jwks_uri are only for the private_key_jwt client authentication');
    return {};
  }
  if (given(input.jwks) === given(input.jwksUri))
    throw new HttpError(metaError, "private_key_jwt needs the client's public keys: jwks or jwks_uri (one of them)");
  if (given(input.jwks)) {
    const set = checkKeySet(input.jwks);
    if (set === undefined) throw new HttpError(metaError, `jwks must be a JSON Web Key Set of 1 to ${MAX_KEYS} public keys`);
    return { jwks: JSON.stringify(set) };
  }
  if (!isHttpsUrl(input.jwksUri)) throw new HttpError(metaError, 'jwks_uri must be an https URL without fragment or user info');
  return { jwksUri: input.jwksUri };
}

/** True for space-separated scope tokens (RFC 6749 §3.3), at most 1024 characters in all. */
export function isScopeText(value: string): boolean {
  return value.length <= 1024 && value.split(' ').every((t) => SCOPE_TOKEN.test(t));
}

/** Whether every token of the scope `asked` is among those of `allowed` (both space-separated scope texts). */
export function scopeWithin(asked: string, allowed: string): boolean {
  const permitted = new Set(allowed.split(' '));
  return asked.split(' ').every((s) => permitted.has(s));
}

/** A space-separated list of RFC 6749 §3.3 scope tokens; undefined when absent. */
export function checkScope(value: unknown, field = 'scope'): string | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string' || !isScopeText(value)) {
    throw new HttpError('invalid_request', `${field} must be a space-separated list of scope tokens`);
  }
  return value;
}

/** Registrations that ask for a grant a user signs in for (code, device) get the interactive profile (refresh tokens). */
function defaultProfileName(source: 'admin' | 'dcr', grantTypes: unknown): string {
  if (Array.isArray(grantTypes) && (grantTypes.includes(GRANT_AUTHORIZATION_CODE) || grantTypes.includes(GRANT_DEVICE_CODE)))
    return 'interactive';
  return source === 'dcr' ? 'dynamic' : 'default';
}

/**
 * Validates metadata and stores a new client with a fresh id and secret. The raw secret is returned
 * once here and never again. `kind` only changes the error code (RFC 7591 names its own).
 * `grantTypesSupported`: the token endpoint's grants (src/oauth/grants), which a client may be given.
 * `refuseGrant`: why this caller may not give a client one of them (dynamic registration asks the
 * grant's own rule), checked on the grants the client would get; `asked`: false for the profile's
 * default, when the input named no grant types.
 */
export async function provisionClient(
  store: ClientStorage & ProfileStorage,
  clock: Clock,
  input: ClientMetadataInput,
  source: 'admin' | 'dcr',
  grantTypesSupported: readonly string[],
  refuseGrant?: (grantType: string, asked: boolean) => string | undefined,
): Promise<{ client: ClientRecord; clientSecret: string | undefined }> {
  const metaError = source === 'dcr' ? 'invalid_client_metadata' : 'invalid_request';
  const now = clock.now();

  let clientName: string | undefined;
  if (input.clientName !== undefined && input.clientName !== null) {
    if (typeof input.clientName !== 'string' || input.clientName.length > MAX_TEXT || CONTROL.test(input.clientName)) {
      throw new HttpError(metaError, `clientName must be a string of at most ${MAX_TEXT} characters, without control characters`);
    }
    if (hasFormatCharacter(input.clientName)) {
      throw new HttpError(metaError, 'clientName must not contain invisible formatting characters (bidi controls, zero-width characters)');
    }
    clientName = input.clientName;
  }

  const redirectUris: string[] = [];
  if (input.redirectUris !== undefined && input.redirectUris !== null) {
    if (!Array.isArray(input.redirectUris) || input.redirectUris.length > MAX_REDIRECT_URIS) {
      throw new HttpError(metaError, `redirectUris must be a list of at most ${MAX_REDIRECT_URIS} URIs`);
    }
    for (const uri of input.redirectUris) {
      const ok = checkRedirectUri(uri);
      if (ok === null) {
        throw new HttpError(
          source === 'dcr' ? 'invalid_redirect_uri' : 'invalid_request',
          'each redirect URI must be https, or http on a loopback host, with no fragment, space or control character',
        );
      }
      redirectUris.push(ok);
    }
  }

  const profileName = input.profile === undefined || input.profile === null ? defaultProfileName(source, input.grantTypes) : input.profile;
  if (typeof profileName !== 'string' || profileName.length === 0 || profileName.length > 64 || CONTROL.test(profileName)) {
    throw new HttpError(metaError, 'profile must be the name of a profile');
  }
  const profile = await resolveProfile(store, profileName, now);
  if (profile === 'corrupt')
    throw new HttpError(metaError, `profile "${profileName}" is unreadable in the store; an administrator must fix it`);
  if (!profile) throw new HttpError(metaError, `unknown profile "${profileName}" (run seedDefaultProfiles, or name an existing profile)`);

  let grantTypes = profile.grantTypes;
  if (input.grantTypes !== undefined && input.grantTypes !== null) {
    if (!Array.isArray(input.grantTypes) || input.grantTypes.length === 0 || !input.grantTypes.every((g) => typeof g === 'string')) {
      throw new HttpError(metaError, 'grantTypes must be a non-empty list of grant type names');
    }
    const unsupported = input.grantTypes.filter((g) => !grantTypesSupported.includes(g as string));
    if (unsupported.length > 0) {
      throw new HttpError(metaError, `unsupported grant types: ${unsupported.join(', ')} (supported: ${grantTypesSupported.join(', ')})`);
    }
    grantTypes = [...new Set(input.grantTypes as string[])];
  }
  const asked = input.grantTypes !== undefined && input.grantTypes !== null;
  for (const grantType of grantTypes) {
    const refusal = refuseGrant?.(grantType, asked);
    if (refusal === undefined) continue;
    throw new HttpError(
      metaError,
      asked
        ? refusal
        : `no grant types were asked for, and the default of profile "${profile.name}" (${grantType}) cannot be given here: ${refusal}`,
    );
  }

  let tokenEndpointAuthMethod: TokenEndpointAuthMethod = 'client_secret_basic';
  if (input.tokenEndpointAuthMethod !== undefined && input.tokenEndpointAuthMethod !== null) {
    const m = input.tokenEndpointAuthMethod;
    if (m !== 'client_secret_basic' && m !== 'client_secret_post' && m !== 'private_key_jwt' && m !== 'none') {
      throw new HttpError(metaError, 'tokenEndpointAuthMethod must be client_secret_basic, client_secret_post, private_key_jwt or none');
    }
    tokenEndpointAuthMethod = m;
  }
  const keys = clientKeys(input, tokenEndpointAuthMethod, metaError);
  if (tokenEndpointAuthMethod === 'none' && grantTypes.includes(GRANT_CLIENT_CREDENTIALS)) {
    throw new HttpError(metaError, 'a public client (auth method none) cannot use client_credentials');
  }
  if (grantTypes.includes(GRANT_AUTHORIZATION_CODE) && redirectUris.length === 0) {
    throw new HttpError(
      source === 'dcr' ? 'invalid_redirect_uri' : 'invalid_request',
      'the authorization_code grant needs at least one redirect URI',
    );
  }

  let scope: string | undefined;
  try {
    scope = checkScope(input.scope);
  } catch (err) {
    if (source === 'dcr' && err instanceof HttpError) throw new HttpError(metaError, err.description ?? 'bad scope');
    throw err;
  }
  // A public client has no secret; a private_key_jwt client proves itself with its key instead.
  const clientSecret = tokenEndpointAuthMethod === 'none' || tokenEndpointAuthMethod === 'private_key_jwt' ? undefined : generateToken();
  const client: ClientRecord = {
    clientId: `${CLIENT_ID_PREFIX}${randomBytes(16).toString('hex')}`,
    redirectUris,
    grantTypes,
    profile: profile.name,
    tokenEndpointAuthMethod,
    source,
    createdAt: now,
  };
  if (clientSecret !== undefined) client.clientSecretHash = hashToken(clientSecret);
  Object.assign(client, keys);
  if (clientName !== undefined) client.clientName = clientName;
  if (scope !== undefined) client.scope = scope;
  await store.createClient(client);
  return { client, clientSecret };
}

/**
 * RFC 6749 §3.3 lets the server ignore requested scopes; this one ignores every scope it does not
 * define (`supported`: those the policy names, what metadata advertises as `scopes_supported`).
 * Clients ask for scopes that mean nothing here (mcp-remote falls back to `openid email profile`):
 * they are neither shown as access on the consent page nor granted, so they never reach the upstream
 * in `X-MCP-Auth-Scope`. Without a policy naming scopes, no scope is granted.
 */
export function splitScopes(
  requested: string | undefined,
  supported: readonly string[],
): { granted: string | undefined; ignored: string[] } {
  const asked = [...new Set(requested?.split(' ') ?? [])];
  const granted = asked.filter((s) => supported.includes(s));
  return { granted: granted.length > 0 ? granted.join(' ') : undefined, ignored: asked.filter((s) => !supported.includes(s)) };
}
