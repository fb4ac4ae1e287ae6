// OAuth client provisioning shared by the admin `createClient` and RFC 7591 `POST /register`:
// metadata checked field by field against its declaration (src/model/client-metadata.ts) and then
// across fields, generated identifiers and secrets (shown once, stored as SHA-256), and the public
// view of a client (never a secret or a hash).

import { randomBytes } from 'node:crypto';
import type { Clock } from './clock.ts';
import { generateToken, hashToken } from './credentials.ts';
import { HttpError } from './errors.ts';
import { isLoopbackHost } from './net-address.ts';
import {
  isScopeText,
  MAX_REDIRECT_URIS,
  MetadataRefusal,
  metadataName,
  readField,
  refuseField,
  SCOPE,
  type MetadataKey,
} from './client-metadata.ts';
import { refusal } from './validate.ts';
import { GRANT_AUTHORIZATION_CODE, GRANT_CLIENT_CREDENTIALS, GRANT_DEVICE_CODE } from './grant-types.ts';
import { resolveProfile } from './profiles.ts';
import type { ClientRecord, ClientRecords, ProfileRecords, StoredRead, TokenEndpointAuthMethod } from './records.ts';

/** The name a stored client is shown by: none when it has none, or when it is absent or unreadable. */
export function clientName(read: StoredRead<ClientRecord>): string | undefined {
  return read && read !== 'corrupt' ? read.clientName : undefined;
}

/**
 * A client-provided name as it may be shown to a user: each format or control character replaced
 * by U+FFFD, visibly, so a name stored before the rule or taken from a metadata document (which
 * describes the client to every server and is not refused for it) cannot reorder or hide text.
 */
export function displayableName(value: string): string {
  return value.replace(/\p{Cf}/gu, '\ufffd').replace(/[\x00-\x1f\x7f-\x9f\u2028\u2029]/g, '\ufffd');
}

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

/** What the public view of a client never shows. */
type PrivateClientField = 'clientSecretHash';

/**
 * A client as the admin API and registration answer it: the stored record without its secret's hash,
 * with `jwks` as the key set itself rather than its JSON text.
 */
export type PublicClient = Omit<ClientRecord, PrivateClientField | 'jwks'> & { jwks?: unknown };

/**
 * Every field of the stored record, shown or not: a field added to ClientRecord fails to compile here
 * until it is placed, so nothing new is shown (or hidden) by accident.
 */
const SHOWN: { readonly [K in keyof ClientRecord]-?: K extends PrivateClientField ? false : true } = {
  clientId: true,
  clientSecretHash: false,
  clientName: true,
  redirectUris: true,
  grantTypes: true,
  scope: true,
  profile: true,
  tokenEndpointAuthMethod: true,
  jwks: true,
  jwksUri: true,
  source: true,
  createdAt: true,
  revokedAt: true,
};

export function publicClient(c: ClientRecord): PublicClient {
  const out: Record<string, unknown> = {};
  for (const [field, shown] of Object.entries(SHOWN)) {
    const value = c[field as keyof ClientRecord];
    if (shown && value !== undefined) out[field] = field === 'jwks' ? (JSON.parse(value as string) as unknown) : value;
  }
  return out as PublicClient;
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

/** Whether every token of the scope `asked` is among those of `allowed` (both space-separated scope texts). */
export function scopeWithin(asked: string, allowed: string): boolean {
  const permitted = new Set(allowed.split(' '));
  return asked.split(' ').every((s) => permitted.has(s));
}

/** A space-separated list of RFC 6749 §3.3 scope tokens; undefined when absent. */
export function checkScope(value: unknown, field = 'scope'): string | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string' || !isScopeText(value)) throw new HttpError('invalid_request', refusal(field, SCOPE.rule));
  return value;
}

/** Registrations that ask for a grant a user signs in for (code, device) get the interactive profile (refresh tokens). */
function defaultProfileName(source: 'admin' | 'dcr', grantTypes: readonly string[] | undefined): string {
  if (grantTypes?.includes(GRANT_AUTHORIZATION_CODE) || grantTypes?.includes(GRANT_DEVICE_CODE)) return 'interactive';
  return source === 'dcr' ? 'dynamic' : 'default';
}

/**
 * A refused field as this caller's error: the admin answers invalid_request; RFC 7591 names its own
 * codes, `invalid_redirect_uri` for a redirect URI (a list that is not one is `invalid_client_metadata`).
 */
function metadataError(door: 'admin' | 'dcr', key: MetadataKey, description: string, input: ClientMetadataInput): HttpError {
  if (door === 'admin') return new HttpError('invalid_request', description);
  const uris =
    key === 'redirectUris' &&
    (input.redirectUris == null || (Array.isArray(input.redirectUris) && input.redirectUris.length <= MAX_REDIRECT_URIS));
  return new HttpError(uris ? 'invalid_redirect_uri' : 'invalid_client_metadata', description);
}

/** Each field of `input` checked against its declaration: absent fields are undefined. */
function readMetadata(input: ClientMetadataInput, door: 'admin' | 'dcr') {
  return {
    clientName: readField('clientName', input.clientName, door),
    redirectUris: readField('redirectUris', input.redirectUris, door),
    profile: readField('profile', input.profile, door),
    grantTypes: readField('grantTypes', input.grantTypes, door),
    tokenEndpointAuthMethod: readField('tokenEndpointAuthMethod', input.tokenEndpointAuthMethod, door),
    jwks: readField('jwks', input.jwks, door),
    jwksUri: readField('jwksUri', input.jwksUri, door),
    scope: readField('scope', input.scope, door),
  };
}
type Metadata = ReturnType<typeof readMetadata>;

/**
 * The keys of a private_key_jwt client (RFC 7591 §2: `jwks` or `jwks_uri`, never both): a set of public
 * keys kept as JSON text, or an https URL fetched (with the SSRF guard of metadata documents) when an
 * assertion is checked. Other methods take no keys.
 */
function clientKeys(meta: Metadata, method: TokenEndpointAuthMethod, door: 'admin' | 'dcr'): Pick<ClientRecord, 'jwks' | 'jwksUri'> {
  const { jwks, jwksUri } = meta;
  if (method !== 'private_key_jwt') {
    if (jwks !== undefined || jwksUri !== undefined)
      refuseField(jwks !== undefined ? 'jwks' : 'jwksUri', door, 'is only for the private_key_jwt client authentication');
    return {};
  }
  if ((jwks === undefined) === (jwksUri === undefined))
    refuseField(
      'jwks',
      door,
      `or ${metadataName('jwksUri', door)} (one of them) must be given: private_key_jwt needs the client's public keys`,
    );
  return jwks !== undefined ? { jwks: JSON.stringify(jwks) } : { jwksUri: jwksUri! };
}

/**
 * The grants the client gets: those asked for (each supported here), else its profile's default; each
 * passed through `refuseGrant` (see provisionClient).
 */
function grantsOf(
  meta: Metadata,
  door: 'admin' | 'dcr',
  profile: { name: string; grantTypes: string[] },
  grantTypesSupported: readonly string[],
  refuseGrant: ((grantType: string, asked: boolean) => string | undefined) | undefined,
): string[] {
  const asked = meta.grantTypes !== undefined;
  if (asked) {
    const unsupported = meta.grantTypes!.filter((g) => !grantTypesSupported.includes(g));
    if (unsupported.length > 0)
      refuseField('grantTypes', door, `must be among ${grantTypesSupported.join(', ')} (unsupported: ${unsupported.join(', ')})`);
  }
  const grantTypes = asked ? [...new Set(meta.grantTypes)] : profile.grantTypes;
  for (const grantType of grantTypes) {
    const reason = refuseGrant?.(grantType, asked);
    if (reason === undefined) continue;
    refuseField(
      'grantTypes',
      door,
      asked
        ? `cannot hold ${grantType}: ${reason}`
        : `were not given, and the default of profile "${profile.name}" (${grantType}) cannot be given here: ${reason}`,
    );
  }
  return grantTypes;
}

/**
 * Validates metadata and stores a new client with a fresh id and secret. The raw secret is returned
 * once here and never again. `source` names the fields (camelCase for the admin, RFC 7591 names for
 * dynamic registration) and picks the error codes (RFC 7591 names its own).
 * `grantTypesSupported`: the token endpoint's grants (src/oauth/grants), which a client may be given.
 * `refuseGrant`: why this caller may not give a client one of them (dynamic registration asks the
 * grant's own rule), checked on the grants the client would get; `asked`: false for the profile's
 * default, when the input named no grant types.
 */
export async function provisionClient(
  store: Pick<ClientRecords, 'createClient'> & Pick<ProfileRecords, 'getProfile'>,
  clock: Clock,
  input: ClientMetadataInput,
  source: 'admin' | 'dcr',
  grantTypesSupported: readonly string[],
  refuseGrant?: (grantType: string, asked: boolean) => string | undefined,
): Promise<{ client: ClientRecord; clientSecret: string | undefined }> {
  const now = clock.now();
  let meta: Metadata;
  let fields: Omit<ClientRecord, 'clientId' | 'source' | 'createdAt' | 'clientSecretHash'>;
  try {
    meta = readMetadata(input, source);
    const profileName = meta.profile ?? defaultProfileName(source, meta.grantTypes);
    const profile = await resolveProfile(store, profileName, now);
    if (profile === 'corrupt')
      refuseField(
        'profile',
        source,
        `must name a readable profile (profile "${profileName}" is unreadable in the store; an administrator must fix it)`,
      );
    if (!profile) refuseField('profile', source, `must be the name of a profile: "${profileName}" is unknown (run seedDefaultProfiles)`);
    const grantTypes = grantsOf(meta, source, profile, grantTypesSupported, refuseGrant);
    const method = meta.tokenEndpointAuthMethod ?? 'client_secret_basic';
    const keys = clientKeys(meta, method, source);
    if (method === 'none' && grantTypes.includes(GRANT_CLIENT_CREDENTIALS))
      refuseField('grantTypes', source, 'cannot hold client_credentials for a public client (auth method none)');
    const redirectUris = meta.redirectUris ?? [];
    if (grantTypes.includes(GRANT_AUTHORIZATION_CODE) && redirectUris.length === 0)
      refuseField('redirectUris', source, 'must hold at least one URI for the authorization_code grant');
    fields = { redirectUris, grantTypes, profile: profile.name, tokenEndpointAuthMethod: method, ...keys };
  } catch (err) {
    if (err instanceof MetadataRefusal) throw metadataError(source, err.field, err.description, input);
    throw err;
  }
  // A public client has no secret; a private_key_jwt client proves itself with its key instead.
  const { tokenEndpointAuthMethod } = fields;
  const clientSecret = tokenEndpointAuthMethod === 'none' || tokenEndpointAuthMethod === 'private_key_jwt' ? undefined : generateToken();
  const client: ClientRecord = { clientId: `${CLIENT_ID_PREFIX}${randomBytes(16).toString('hex')}`, ...fields, source, createdAt: now };
  if (clientSecret !== undefined) client.clientSecretHash = hashToken(clientSecret);
  if (meta.clientName !== undefined) client.clientName = meta.clientName;
  if (meta.scope !== undefined) client.scope = meta.scope;
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
