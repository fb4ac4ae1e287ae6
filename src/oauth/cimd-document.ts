// Client ID Metadata Documents: a client_id that is an https URL names a JSON document, hosted by the
// client, that describes it (no registration). This module says which client ids are such URLs and
// reads a fetched document (or a fetched key set) into what the server keeps of it.

import type { JSONWebKeySet } from 'jose';
import { unusableClientDocument } from '../http/errors.ts';
import {
  checkKeySet,
  CLIENT_METADATA,
  displayUri,
  MAX_KEYS,
  MetadataRefusal,
  readField,
  type MetadataKey,
} from '../model/client-metadata.ts';
import { GRANT_AUTHORIZATION_CODE, GRANT_DEVICE_CODE, GRANT_REFRESH_TOKEN } from '../model/grant-types.ts';
import { deepFreeze } from '../model/deep-freeze.ts';

export interface ClientMetadataDocument {
  /** The URL, equal to the document's `client_id`. */
  clientId: string;
  clientName?: string;
  clientUri?: string;
  logoUri?: string;
  redirectUris: string[];
  /** Default `['authorization_code']`. */
  grantTypes: string[];
  /** Default `['code']`. */
  responseTypes: string[];
  /**
   * `private_key_jwt` when the document offers it (as `token_endpoint_auth_method` or in
   * `token_endpoint_auth_methods_supported`) and publishes its keys: the client must then sign a client
   * assertion at the token endpoint. Otherwise `none`: a public client. Never a shared secret.
   */
  tokenEndpointAuthMethod: 'none' | 'private_key_jwt';
  /** Where its signing keys are (https), for private_key_jwt. */
  jwksUri?: string;
  /** Its signing keys inline, for private_key_jwt. */
  jwks?: JSONWebKeySet;
  scope?: string;
  /** hostname[:port] of the URL: what a consent page names as the client's home. */
  host: string;
}

const MAX_URL_LENGTH = 2048;
/** Grants a document may list that its client may use here (a listed device grant: RFC 8628 sign-in too). */
const DOCUMENT_GRANT_TYPES = [GRANT_AUTHORIZATION_CODE, GRANT_REFRESH_TOKEN, GRANT_DEVICE_CODE];
/** Fields that mean a shared secret: a document is public, so it must never carry or ask for one. */
const SECRET_FIELDS = ['client_secret', 'client_secret_expires_at'];
/** Methods that mean a shared secret: a client known by a public document has none to share. */
const SECRET_METHODS = ['client_secret_basic', 'client_secret_post', 'client_secret_jwt'];

/**
 * Whether `clientId` is a URL this server treats as a metadata document: https, a path other than `/`,
 * no fragment, no user info, no `.` or `..` segments, and in normalised form (what is fetched is exactly
 * the string the document's `client_id` is compared with).
 */
export function isClientIdMetadataUrl(clientId: string): boolean {
  if (clientId.length > MAX_URL_LENGTH || clientId.includes('#')) return false;
  let url: URL;
  try {
    url = new URL(clientId);
  } catch {
    return false;
  }
  if (url.protocol !== 'https:' || url.username !== '' || url.password !== '') return false;
  if (url.pathname === '/' || url.pathname === '') return false;
  // The URL parser resolves dot segments (also %2e forms), so a URL that had any is not in normalised form.
  if (url.href !== clientId) return false;
  return !url.pathname.split('/').some((s) => s === '.' || s === '..');
}

/** Field `key` of the document, read with its declaration (src/model/client-metadata.ts); undefined when absent. */
function read<T>(d: Record<string, unknown>, key: MetadataKey): T | undefined {
  try {
    return readField(key, d[CLIENT_METADATA[key].rfc], 'document') as T | undefined;
  } catch (err) {
    if (err instanceof MetadataRefusal) throw unusableClientDocument(`the metadata document's ${err.description}`);
    throw err;
  }
}

/**
 * The entries of a list this server supports. A document describes its client to every server it talks
 * to and cannot be tailored to this one, so entries this server does not support are ignored (VS Code's
 * lists the device-code grant, Claude's the jwt-bearer grant); only a list without `required` is refused.
 */
function supportedEntries(
  d: Record<string, unknown>,
  key: 'grantTypes' | 'responseTypes',
  fallback: string[],
  supported: readonly string[],
  required: string,
): string[] {
  const listed = read<string[]>(d, key) ?? fallback;
  const kept = [...new Set(listed.filter((x) => supported.includes(x)))];
  if (!kept.includes(required))
    throw unusableClientDocument(`the metadata document's ${CLIENT_METADATA[key].rfc} must include ${required}`);
  return kept;
}

/** The keys of a document that offers private_key_jwt: `jwks_uri` or `jwks`, one of them. */
function keysOf(d: Record<string, unknown>): Pick<ClientMetadataDocument, 'tokenEndpointAuthMethod' | 'jwksUri' | 'jwks'> {
  const jwksUri = read<string>(d, 'jwksUri');
  const jwks = read<JSONWebKeySet>(d, 'jwks');
  if (jwksUri !== undefined && jwks !== undefined)
    throw unusableClientDocument('the metadata document must not give both jwks_uri and jwks');
  if (jwksUri !== undefined) return { tokenEndpointAuthMethod: 'private_key_jwt', jwksUri };
  if (jwks !== undefined) return { tokenEndpointAuthMethod: 'private_key_jwt', jwks };
  throw unusableClientDocument('the metadata document asks for private_key_jwt but publishes no keys (jwks_uri or jwks)');
}

/**
 * The client authentication a document asks for. `token_endpoint_auth_methods_supported` (what the
 * client can do) and `token_endpoint_auth_method` are read together; methods this server does not
 * support are ignored. private_key_jwt wins when offered: a client that can sign is held to it (no
 * downgrade to `none`). A document that asks for a shared secret is refused: it is public.
 */
function authMethodOf(d: Record<string, unknown>): Pick<ClientMetadataDocument, 'tokenEndpointAuthMethod' | 'jwksUri' | 'jwks'> {
  const declared = read<string>(d, 'tokenEndpointAuthMethod');
  if (declared !== undefined && SECRET_METHODS.includes(declared)) {
    throw unusableClientDocument(
      `the metadata document asks for token_endpoint_auth_method ${JSON.stringify(declared)}: a shared secret, which a public document cannot have`,
    );
  }
  const offered = [...(read<string[]>(d, 'tokenEndpointAuthMethodsSupported') ?? []), ...(declared !== undefined ? [declared] : [])];
  if (offered.length === 0) offered.push('none');
  if (offered.includes('private_key_jwt')) return keysOf(d);
  if (offered.includes('none')) return { tokenEndpointAuthMethod: 'none' };
  throw unusableClientDocument(
    `the metadata document offers no client authentication this server supports (none or private_key_jwt; it names ${offered.slice(0, 3).join(', ').slice(0, 120)})`,
  );
}

function jsonObject(body: Buffer): Record<string, unknown> {
  let doc: unknown;
  try {
    doc = JSON.parse(body.toString('utf8'));
  } catch {
    throw unusableClientDocument('the metadata document is not valid JSON');
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc))
    throw unusableClientDocument('the metadata document must be a JSON object');
  return doc as Record<string, unknown>;
}

/** Validates a fetched document against the URL it came from. */
export function parseClientMetadataDocument(url: string, body: Buffer): ClientMetadataDocument {
  const d = jsonObject(body);
  if (d.client_id !== url) throw unusableClientDocument("the metadata document's client_id is not exactly the URL it was fetched from");
  const secretField = SECRET_FIELDS.find((f) => d[f] !== undefined);
  if (secretField !== undefined)
    throw unusableClientDocument(`the metadata document must not contain ${secretField}: such documents are public`);
  const auth = authMethodOf(d);
  const redirectUris = read<string[]>(d, 'redirectUris');
  if (redirectUris === undefined) throw unusableClientDocument('the metadata document has no redirect_uris');
  const scope = read<string>(d, 'scope');
  const out: ClientMetadataDocument = {
    clientId: url,
    redirectUris: [...new Set(redirectUris)],
    grantTypes: supportedEntries(d, 'grantTypes', [GRANT_AUTHORIZATION_CODE], DOCUMENT_GRANT_TYPES, GRANT_AUTHORIZATION_CODE),
    responseTypes: supportedEntries(d, 'responseTypes', ['code'], ['code'], 'code'),
    ...auth,
    host: new URL(url).host,
  };
  const clientName = read<string>(d, 'clientName');
  if (clientName !== undefined) out.clientName = clientName;
  const clientUri = displayUri(d.client_uri);
  if (clientUri !== undefined) out.clientUri = clientUri;
  const logoUri = displayUri(d.logo_uri);
  if (logoUri !== undefined) out.logoUri = logoUri;
  if (scope !== undefined) out.scope = scope;
  return out;
}

export function freezeDocument(doc: ClientMetadataDocument): ClientMetadataDocument {
  Object.freeze(doc.redirectUris);
  Object.freeze(doc.grantTypes);
  Object.freeze(doc.responseTypes);
  if (doc.jwks !== undefined) deepFreeze(doc.jwks);
  return Object.freeze(doc);
}

/** A fetched key set (`jwks_uri`): JSON, `{"keys": [...]}` of 1 to MAX_KEYS public keys; frozen. */
export function parseKeySetBody(body: Buffer, what: string): JSONWebKeySet {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    throw unusableClientDocument(`${what} is not valid JSON`);
  }
  const set = checkKeySet(parsed);
  if (set === undefined) throw unusableClientDocument(`${what} must be a set of 1 to ${MAX_KEYS} public keys`);
  return deepFreeze(set);
}
