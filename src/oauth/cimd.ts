// Client ID Metadata Documents: a client_id that is an https URL names a JSON document, hosted by the
// client, that describes it (no registration). This module fetches and validates such documents, and the
// JWKS a document (or a registration) names for private_key_jwt, with an SSRF guard on the address
// actually connected to, a bound on size, time and concurrent fetches (and each client address's share
// of them), and caches the valid ones (and, briefly, the failures).

import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { request } from 'node:https';
import { isIP, type Socket } from 'node:net';
import type { JSONWebKeySet } from 'jose';
import type { Clock } from '../model/clock.ts';
import { HttpError, unusableClientDocument } from '../http/errors.ts';
import type { Logger } from '../observability/logger.ts';
import { checkKeySet, checkRedirectUri, checkScope, hasControlCharacter, isHttpsUrl, MAX_KEYS } from '../model/clients.ts';
import { ADDRESS_CLASS_NAMES, classifyAddress, type AddressClass } from '../http/net-address.ts';
import { GRANT_AUTHORIZATION_CODE, GRANT_DEVICE_CODE, GRANT_REFRESH_TOKEN } from '../model/grant-types.ts';

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

/** On whose behalf a fetch would go out: what admits it and which share of the fetch slots it takes. */
export interface ResolveOptions {
  /** Called before a fetch goes out (not on a cache hit): a per-address limit throws here. */
  beforeFetch?: () => Promise<void>;
  /** The client address the fetch is made for: no address holds more than its share of the slots. */
  address?: string;
}

export interface CimdResolver {
  /** The validated document, or HttpError `invalid_client` with a description fit for an error page. */
  resolve(url: string, options?: ResolveOptions): Promise<ClientMetadataDocument>;
  /** A JSON Web Key Set at an https URL, fetched and cached like documents; HttpError `invalid_client` when unusable. */
  keySet(url: string, options?: ResolveOptions): Promise<JSONWebKeySet>;
  /**
   * The key set at `url` fetched again, because the cached one has no key for an assertion's `kid` (a
   * key rotated in): undefined when it was fetched within the refetch cooldown (nothing newer to have).
   */
  refetchKeySet(url: string, options?: ResolveOptions): Promise<JSONWebKeySet | undefined>;
  /** The same for a document, whose inline `jwks` lacked the key. */
  refetchDocument(url: string, options?: ResolveOptions): Promise<ClientMetadataDocument | undefined>;
}

export interface CimdResolverOptions {
  /** Bound on the whole fetch: DNS, connect, TLS, headers and body. */
  timeoutMs: number;
  /** Bound on the body, enforced while it streams in. */
  maxBytes: number;
  /** Longest a valid document is reused; a shorter `Cache-Control: max-age` wins. */
  cacheTtlMs: number;
  maxCacheEntries: number;
  /** Outbound fetches (documents and key sets) at once in this process; more wait `fetchQueueWaitMs`, then 503. */
  maxConcurrentFetches?: number;
  /** Of those, how many one client address may hold at once (its further fetches wait like the rest). */
  maxConcurrentFetchesPerAddress?: number;
  fetchQueueWaitMs?: number;
  /** How long a URL whose fetch failed answers that failure again without being fetched (0: not at all). */
  failureCacheMs?: number;
  /** A URL is fetched again for an unknown `kid` at most once per this long. */
  refetchCooldownMs?: number;
  /**
   * UNSAFE outside tests and local development: lets documents come from loopback, private and other
   * internal addresses, i.e. lets anyone who can start a sign-in make this server send requests into its
   * own network.
   */
  allowPrivateAddresses: boolean;
  clock: Clock;
  logger: Logger;
  /** Tests only: the CA that signed a test server's certificate (replaces the system roots). */
  ca?: string | Buffer;
}

const MAX_URL_LENGTH = 2048;
const MAX_NAME_LENGTH = 256;
const MAX_RESPONSE_HEADER_BYTES = 16 * 1024;
/** Grants a document may list that its client may use here (a listed device grant: RFC 8628 sign-in too). */
const DOCUMENT_GRANT_TYPES = [GRANT_AUTHORIZATION_CODE, GRANT_REFRESH_TOKEN, GRANT_DEVICE_CODE];
/** Fields that mean a shared secret: a document is public, so it must never carry or ask for one. */
const SECRET_FIELDS = ['client_secret', 'client_secret_expires_at'];
/** Methods that mean a shared secret: a client known by a public document has none to share. */
const SECRET_METHODS = ['client_secret_basic', 'client_secret_post', 'client_secret_jwt'];
/** The setting that lets documents come from internal addresses, named on the refusal page. */
const PRIVATE_ADDRESSES_SETTING = 'oauth.clientMetadataDocuments.allowPrivateAddresses';
/**
 * URLs whose last fetch time and last failure are remembered, at least (even with the cache off): a
 * small bound would let someone cycling through URLs push out the cooldown and the failure of another.
 */
const MIN_BOOKKEEPING_ENTRIES = 1000;

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

/** Thrown into a socket or a lookup when an address is outside what may be fetched. */
class RefusedAddressError extends Error {
  readonly addressClass: Exclude<AddressClass, 'public'>;
  constructor(addressClass: Exclude<AddressClass, 'public'>) {
    super(`refused address: ${addressClass}`);
    this.name = 'RefusedAddressError';
    this.addressClass = addressClass;
  }
}

function refusedClass(address: string | undefined): Exclude<AddressClass, 'public'> | undefined {
  const cls = address === undefined ? 'invalid' : classifyAddress(address);
  return cls === 'public' ? undefined : cls;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for the https request: resolves every address of the name and refuses the name when any
 * of them is not public (one bad answer among good ones is how DNS rebinding hides).
 */
export function lookupPublicAddress(hostname: string, options: LookupOptions, callback: LookupCallback): void {
  dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, '');
    for (const a of addresses) {
      const cls = refusedClass(a.address);
      if (cls !== undefined) return callback(new RefusedAddressError(cls), '');
    }
    if (addresses.length === 0) return callback(Object.assign(new Error('no address'), { code: 'ENOTFOUND' }), '');
    if (options.all) return callback(null, addresses);
    return callback(null, addresses[0]!.address, addresses[0]!.family);
  });
}

/**
 * Destroys `socket` as soon as it is connected to an address that is not public. The lookup already
 * refuses such names; this checks the peer the kernel actually connected to, whatever resolved it.
 */
export function refuseNonPublicPeer(socket: Socket): void {
  const check = () => {
    const cls = refusedClass(socket.remoteAddress);
    if (cls !== undefined) socket.destroy(new RefusedAddressError(cls));
  };
  if (socket.connecting || socket.remoteAddress === undefined) socket.once('connect', check);
  else check();
}

/**
 * Why a fetch failed, for an error page: no address, no internal detail. A name that resolves to an
 * internal address and a name that does not resolve get the same words, so the page cannot be used to
 * learn which internal names exist or what they resolve to (the log has the address class).
 */
function describeFetchError(err: unknown, what: string): string {
  const code = (err as NodeJS.ErrnoException | undefined)?.code ?? '';
  if (err instanceof RefusedAddressError || code === 'ENOTFOUND' || code === 'EAI_AGAIN') {
    return `${what}'s host has no public address that could be fetched (only public addresses are; for local development, ${PRIVATE_ADDRESSES_SETTING} allows loopback and private ones)`;
  }
  if (code === 'ECONNREFUSED') return `${what}'s host refused the connection`;
  // OpenSSL's verification codes (CERT_HAS_EXPIRED, UNABLE_TO_VERIFY_LEAF_SIGNATURE, ...) and Node's own.
  if (code.includes('CERT') || code.startsWith('UNABLE_TO_') || code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    return `${what}'s host did not present a valid TLS certificate for its name`;
  }
  if (code.startsWith('ERR_SSL_') || code.startsWith('ERR_TLS_')) return `the TLS handshake with ${what}'s host failed`;
  return `${what} could not be fetched`;
}

/** For the log only: the class of a refused address (never shown to the requester). */
function refusedAddressClass(err: unknown): string | undefined {
  let e: unknown = err;
  for (let depth = 0; e !== undefined && e !== null && depth < 3; depth++) {
    if (e instanceof RefusedAddressError) return ADDRESS_CLASS_NAMES[e.addressClass];
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

interface Fetched {
  body: Buffer;
  cacheControl: string | undefined;
}

function fetchDocument(url: URL, options: CimdResolverOptions, what: string): Promise<Fetched> {
  return new Promise((resolve, reject) => {
    const literal = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    if (isIP(literal) !== 0 && !options.allowPrivateAddresses) {
      // An IP literal is never looked up, so the lookup guard cannot see it.
      const cls = refusedClass(literal);
      if (cls !== undefined) {
        const refused = new RefusedAddressError(cls);
        return reject(unusableClientDocument(describeFetchError(refused, what), refused));
      }
    }
    let settled = false;
    const chunks: Buffer[] = [];
    let size = 0;
    const fail = (description: string, cause?: unknown) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      reject(unusableClientDocument(description, cause));
    };
    // One deadline for everything (DNS, connect, TLS, headers, body): a trickling server cannot reset it.
    const timer = setTimeout(() => fail(`${what} was not fetched within ${options.timeoutMs} ms`), options.timeoutMs);
    const req = request(url, {
      method: 'GET',
      headers: { accept: 'application/json', 'user-agent': 'mcp-bearer-proxy (client metadata document fetch)' },
      // A fresh connection per fetch: a pooled socket would skip the address checks below.
      agent: false,
      maxHeaderSize: MAX_RESPONSE_HEADER_BYTES,
      ...(options.allowPrivateAddresses ? {} : { lookup: lookupPublicAddress }),
      ...(options.ca === undefined ? {} : { ca: options.ca }),
    });
    if (!options.allowPrivateAddresses) req.on('socket', refuseNonPublicPeer);
    req.on('error', (err) => fail(describeFetchError(err, what), err));
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      if (status >= 300 && status < 400) return fail(`${what} URL answered with a redirect (HTTP ${status}); redirects are not followed`);
      if (status !== 200) return fail(`${what} URL answered HTTP ${status}, not 200`);
      const type = (res.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
      if (type !== 'application/json' && !/^application\/[a-z0-9.+-]+\+json$/.test(type)) {
        return fail(`${what} is not JSON (its content-type must be application/json)`);
      }
      const encoding = (res.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
      if (encoding !== 'identity') return fail(`${what} must be sent without content-encoding`);
      const declared = Number(res.headers['content-length']);
      if (Number.isFinite(declared) && declared > options.maxBytes) return fail(`${what} is larger than ${options.maxBytes} bytes`);
      res.on('data', (chunk: Buffer) => {
        if (settled) return;
        size += chunk.length;
        if (size > options.maxBytes) return fail(`${what} is larger than ${options.maxBytes} bytes`);
        chunks.push(chunk);
      });
      res.on('error', (err) => fail(`${what} was cut off`, err));

      res.on('end', () => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve({ body: Buffer.concat(chunks), cacheControl: res.headers['cache-control'] });
      });
      return undefined;
    });
    req.end();
  });
}

function optionalString(doc: Record<string, unknown>, field: string, max: number): string | undefined {
  const v = doc[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string' || v.length > max || hasControlCharacter(v)) {
    throw unusableClientDocument(
      `the metadata document's ${field} must be a string of at most ${max} characters, without control characters`,
    );
  }
  return v;
}

/** An https URL to show or link to, or nothing: display-only fields never refuse a document. */
function displayUri(doc: Record<string, unknown>, field: string): string | undefined {
  const v = doc[field];
  // Raw value checked: the URL parser drops tabs and newlines, but the raw string is what is shown.
  if (typeof v !== 'string' || v.length > MAX_URL_LENGTH || hasControlCharacter(v) || v.includes(' ')) return undefined;
  try {
    return new URL(v).protocol === 'https:' ? v : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A redirect URI of a document: https, http on loopback (RFC 8252 §7.3) or a private-use scheme named
 * after a domain (RFC 8252 §7.1, e.g. `com.example.app:/callback`); absolute, without fragment.
 */
function checkDocumentRedirectUri(value: unknown): boolean {
  if (checkRedirectUri(value) !== null) return true;
  if (
    typeof value !== 'string' ||
    value.length > MAX_URL_LENGTH ||
    value.includes('#') ||
    value.includes(' ') ||
    hasControlCharacter(value)
  )
    return false;
  try {
    const scheme = new URL(value).protocol.slice(0, -1);
    return /^[a-z][a-z0-9+-]*(\.[a-z0-9+-]+)+$/.test(scheme);
  } catch {
    return false;
  }
}

function strings(doc: Record<string, unknown>, field: string): string[] | undefined {
  const v = doc[field];
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || v.length === 0 || v.length > 64 || !v.every((x) => typeof x === 'string' && x.length <= 256)) {
    throw unusableClientDocument(`the metadata document's ${field} must be a non-empty list of strings`);
  }
  return v as string[];
}

/**
 * The entries of a list this server supports. A document describes its client to every server it talks
 * to and cannot be tailored to this one, so entries this server does not support are ignored (VS Code's
 * lists the device-code grant, Claude's the jwt-bearer grant); only a list without `required` is refused.
 */
function supportedEntries(
  doc: Record<string, unknown>,
  field: string,
  fallback: string[],
  supported: readonly string[],
  required: string,
): string[] {
  const listed = strings(doc, field) ?? fallback;
  const kept = [...new Set(listed.filter((x) => supported.includes(x)))];
  if (!kept.includes(required)) throw unusableClientDocument(`the metadata document's ${field} must include ${required}`);
  return kept;
}

/**
 * The client authentication a document asks for. `token_endpoint_auth_methods_supported` (what the
 * client can do) and `token_endpoint_auth_method` are read together; methods this server does not
 * support are ignored. private_key_jwt wins when offered: a client that can sign is held to it (no
 * downgrade to `none`). A document that asks for a shared secret is refused: it is public.
 */
function authMethodOf(d: Record<string, unknown>): Pick<ClientMetadataDocument, 'tokenEndpointAuthMethod' | 'jwksUri' | 'jwks'> {
  const declared = d.token_endpoint_auth_method;
  if (declared !== undefined && declared !== null && typeof declared !== 'string')
    throw unusableClientDocument("the metadata document's token_endpoint_auth_method must be a string");
  if (typeof declared === 'string' && SECRET_METHODS.includes(declared)) {
    throw unusableClientDocument(
      `the metadata document asks for token_endpoint_auth_method ${JSON.stringify(declared)}: a shared secret, which a public document cannot have`,
    );
  }
  const offered = [...(strings(d, 'token_endpoint_auth_methods_supported') ?? []), ...(typeof declared === 'string' ? [declared] : [])];
  if (offered.length === 0) offered.push('none');
  if (offered.includes('private_key_jwt')) {
    if (d.jwks_uri !== undefined && d.jwks !== undefined)
      throw unusableClientDocument('the metadata document must not give both jwks_uri and jwks');
    if (d.jwks_uri !== undefined) {
      if (!isHttpsUrl(d.jwks_uri))
        throw unusableClientDocument("the metadata document's jwks_uri must be an https URL without fragment or user info");
      return { tokenEndpointAuthMethod: 'private_key_jwt', jwksUri: d.jwks_uri };
    }
    const jwks = checkKeySet(d.jwks);
    if (jwks !== undefined) return { tokenEndpointAuthMethod: 'private_key_jwt', jwks };
    if (d.jwks !== undefined) throw unusableClientDocument(`the metadata document's jwks must be a set of 1 to ${MAX_KEYS} public keys`);
    throw unusableClientDocument('the metadata document asks for private_key_jwt but publishes no keys (jwks_uri or jwks)');
  }
  if (offered.includes('none')) return { tokenEndpointAuthMethod: 'none' };
  throw unusableClientDocument(
    `the metadata document offers no client authentication this server supports (none or private_key_jwt; it names ${offered.slice(0, 3).join(', ').slice(0, 120)})`,
  );
}

/** Validates a fetched document against the URL it came from. */
export function parseClientMetadataDocument(url: string, body: Buffer): ClientMetadataDocument {
  let doc: unknown;
  try {
    doc = JSON.parse(body.toString('utf8'));
  } catch {
    throw unusableClientDocument('the metadata document is not valid JSON');
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc))
    throw unusableClientDocument('the metadata document must be a JSON object');
  const d = doc as Record<string, unknown>;
  if (d.client_id !== url) throw unusableClientDocument("the metadata document's client_id is not exactly the URL it was fetched from");
  const secretField = SECRET_FIELDS.find((f) => d[f] !== undefined);
  if (secretField !== undefined)
    throw unusableClientDocument(`the metadata document must not contain ${secretField}: such documents are public`);
  const auth = authMethodOf(d);
  const redirectUris = d.redirect_uris;
  if (!Array.isArray(redirectUris) || redirectUris.length === 0) throw unusableClientDocument('the metadata document has no redirect_uris');
  if (!redirectUris.every(checkDocumentRedirectUri)) {
    throw unusableClientDocument(
      "each of the metadata document's redirect_uris must be an absolute https URI, http on a loopback host or a private-use scheme, without fragment",
    );
  }
  let scope: string | undefined;
  try {
    scope = checkScope(d.scope);
  } catch {
    throw unusableClientDocument("the metadata document's scope must be a space-separated list of scope tokens");
  }
  const parsed = new URL(url);
  const out: ClientMetadataDocument = {
    clientId: url,
    redirectUris: [...new Set(redirectUris as string[])],
    grantTypes: supportedEntries(d, 'grant_types', [GRANT_AUTHORIZATION_CODE], DOCUMENT_GRANT_TYPES, GRANT_AUTHORIZATION_CODE),
    responseTypes: supportedEntries(d, 'response_types', ['code'], ['code'], 'code'),
    ...auth,
    host: parsed.host,
  };
  const clientName = optionalString(d, 'client_name', MAX_NAME_LENGTH);
  if (clientName !== undefined) out.clientName = clientName;
  const clientUri = displayUri(d, 'client_uri');
  if (clientUri !== undefined) out.clientUri = clientUri;
  const logoUri = displayUri(d, 'logo_uri');
  if (logoUri !== undefined) out.logoUri = logoUri;
  if (scope !== undefined) out.scope = scope;
  return out;
}

/** How long a response may be reused: `no-store`, `no-cache` and `max-age=0` mean not at all. */
export function cacheLifetimeMs(cacheControl: string | undefined, capMs: number): number {
  if (cacheControl === undefined) return capMs;
  const directives = cacheControl
    .toLowerCase()
    .split(',')
    .map((d) => d.trim());
  if (directives.includes('no-store') || directives.includes('no-cache')) return 0;
  const maxAge = directives.map((d) => /^max-age\s*=\s*"?(\d+)"?$/.exec(d)).find((m) => m !== null);
  if (!maxAge) return capMs;
  return Math.min(capMs, Number(maxAge[1]) * 1000);
}

function freezeDocument(doc: ClientMetadataDocument): ClientMetadataDocument {
  Object.freeze(doc.redirectUris);
  Object.freeze(doc.grantTypes);
  Object.freeze(doc.responseTypes);
  if (doc.jwks !== undefined) deepFreeze(doc.jwks);
  return Object.freeze(doc);
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/** Thrown when the process already has its cap of outbound fetches and none freed within the wait. */
export function fetchCapacityExceeded(): HttpError {
  return new HttpError('temporarily_unavailable', 'too many client metadata fetches in progress; try again in a few seconds', {
    headers: { 'retry-after': '5' },
  });
}

/**
 * A counting semaphore with a bounded wait: the cap on outbound fetches. With `perKeyMax`, one key (a
 * client address) holds at most that many of the slots at once; its further work waits (within the
 * same bound) while other keys' work still finds free slots, so no one address can fill the pool.
 */
export function createFetchSlots(max: number, waitMs: number, perKeyMax = max): <T>(work: () => Promise<T>, key?: string) => Promise<T> {
  let inUse = 0;
  const heldBy = new Map<string, number>();
  const waiting: Array<{ key: string | undefined; grant: () => void }> = [];
  const fits = (key: string | undefined) => inUse < max && (key === undefined || (heldBy.get(key) ?? 0) < perKeyMax);
  const take = (key: string | undefined) => {
    inUse++;
    if (key !== undefined) heldBy.set(key, (heldBy.get(key) ?? 0) + 1);
  };
  const release = (key: string | undefined) => {
    inUse--;
    if (key !== undefined) {
      const held = heldBy.get(key)! - 1;
      if (held === 0) heldBy.delete(key);
      else heldBy.set(key, held);
    }
    // The first waiter whose key is under its share gets the freed slot.
    const next = waiting.findIndex((w) => fits(w.key));
    if (next >= 0) waiting.splice(next, 1)[0]!.grant();
  };
  const acquire = (key: string | undefined): Promise<void> => {
    if (fits(key)) {
      take(key);
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const entry = {
        key,
        grant: () => {
          clearTimeout(timer);
          take(key);
          resolve();
        },
      };
      const timer = setTimeout(() => {
        const i = waiting.indexOf(entry);
        if (i >= 0) waiting.splice(i, 1);
        reject(fetchCapacityExceeded());
      }, waitMs);
      waiting.push(entry);
    });
  };
  return async (work, key) => {
    await acquire(key);
    try {
      return await work();
    } finally {
      release(key);
    }
  };
}

export function createCimdResolver(options: CimdResolverOptions): CimdResolver {
  const { clock, logger } = options;
  const maxFetches = options.maxConcurrentFetches ?? 16;
  const slots = createFetchSlots(
    maxFetches,
    options.fetchQueueWaitMs ?? 2000,
    options.maxConcurrentFetchesPerAddress ?? Math.max(1, Math.floor(maxFetches / 4)),
  );
  const failureCacheMs = options.failureCacheMs ?? 30_000;
  const refetchCooldownMs = options.refetchCooldownMs ?? 30_000;
  // Map order is recency order: a hit moves its entry to the end, the first entry is evicted first.
  // Documents and key sets share it (keyed by kind and URL), so its bound holds for both.
  const cache = new Map<string, { value: object; expiresAt: number }>();
  // URLs whose fetch failed, with the failure: answered again until `until`, without a fetch, so that a
  // URL that fails (slowly, or at once) costs one fetch per period however often it is named.
  const failures = new Map<string, { error: HttpError; until: number }>();
  // When each URL was last fetched (insertion order is age): the refetch cooldown.
  const lastFetched = new Map<string, number>();
  // One fetch per URL at a time; its outcome is shared with whoever waited on it.
  const inFlight = new Map<string, Promise<object>>();
  if (options.allowPrivateAddresses) {
    logger.warn(
      'client metadata documents may be fetched from loopback and private addresses (allowPrivateAddresses): unsafe outside tests',
    );
  }
  const bound = <V>(map: Map<string, V>) => {
    while (map.size > Math.max(options.maxCacheEntries, MIN_BOOKKEEPING_ENTRIES)) map.delete(map.keys().next().value!);
  };

  async function fetchAndValidate<T extends object>(
    key: string,
    url: string,
    what: string,
    parse: (body: Buffer) => T,
    address: string | undefined,
  ): Promise<T> {
    try {
      const fetched = await slots(() => {
        lastFetched.delete(key);
        lastFetched.set(key, clock.now());
        bound(lastFetched);
        return fetchDocument(new URL(url), options, what);
      }, address);
      const value = parse(fetched.body);
      const lifetime = cacheLifetimeMs(fetched.cacheControl, options.cacheTtlMs);
      failures.delete(key);
      // What was fetched replaces what was cached, also when it may not be kept (a key removed from a
      // set must not live on in an older copy).
      cache.delete(key);
      if (lifetime > 0 && options.maxCacheEntries > 0) {
        cache.set(key, { value, expiresAt: clock.now() + lifetime });
        while (cache.size > options.maxCacheEntries) cache.delete(cache.keys().next().value!);
      }
      logger.debug({ host: new URL(url).host, cachedForMs: lifetime }, `${what} fetched`);
      return value;
    } catch (err) {
      if (err instanceof HttpError && err.code === 'temporarily_unavailable') {
        logger.warn({ host: new URL(url).host }, `${what} not fetched: the cap on concurrent fetches is reached`);
        throw err;
      }
      const description = err instanceof HttpError ? err.description : undefined;
      const cause = (err as { cause?: { code?: string } }).cause?.code;
      // The address class stays here: the page says only that no public address could be fetched.
      logger.info({ host: new URL(url).host, reason: description, cause, addressClass: refusedAddressClass(err) }, `${what} refused`);
      const refusal = err instanceof HttpError ? err : unusableClientDocument(`${what} could not be fetched`, err);
      if (failureCacheMs > 0) {
        failures.delete(key);
        failures.set(key, { error: refusal, until: clock.now() + failureCacheMs });
        bound(failures);
      }
      throw refusal;
    }
  }

  function cachedOrFetch<T extends object>(
    key: string,
    fetchIt: () => Promise<T>,
    fetchOptions: ResolveOptions,
    pastTheCache = false,
  ): Promise<T> {
    const hit = pastTheCache ? undefined : cache.get(key);
    if (hit !== undefined) {
      cache.delete(key);
      if (hit.expiresAt > clock.now()) {
        cache.set(key, hit);
        return Promise.resolve(hit.value as T);
      }
    }
    const failed = failures.get(key);
    if (failed !== undefined) {
      if (failed.until > clock.now()) return Promise.reject(failed.error);
      failures.delete(key);
    }
    let pending = inFlight.get(key) as Promise<T> | undefined;
    if (pending === undefined) {
      pending = (async () => {
        await fetchOptions.beforeFetch?.();
        return fetchIt();
      })().finally(() => inFlight.delete(key));
      inFlight.set(key, pending);
    }
    return pending;
  }

  /** A fetch past the cache for an unknown `kid`, unless `key` was fetched within the cooldown. */
  function refetch<T extends object>(key: string, fetchIt: () => Promise<T>, fetchOptions: ResolveOptions): Promise<T | undefined> {
    const last = lastFetched.get(key);
    if (last !== undefined && clock.now() - last < refetchCooldownMs) return Promise.resolve(undefined);
    // The cached copy stays until a fetch replaces it: a refetch refused (the address over its budget)
    // costs the client nothing.
    return cachedOrFetch(key, fetchIt, fetchOptions, true);
  }

  function checkedDocumentUrl(url: string): void {
    if (!isClientIdMetadataUrl(url)) {
      throw unusableClientDocument(
        'a client_id URL must be https, with a path, without fragment, user info or dot segments, in normalised form',
      );
    }
  }
  const fetchDocumentAt = (url: string, address: string | undefined) => () =>
    fetchAndValidate(`doc ${url}`, url, 'the metadata document', (body) => freezeDocument(parseClientMetadataDocument(url, body)), address);

  const keySetWhat = "the client's key set (jwks_uri)";
  const fetchKeySetAt = (url: string, address: string | undefined) => () =>
    fetchAndValidate(
      `jwks ${url}`,
      url,
      keySetWhat,
      (body) => {
        let parsed: unknown;
        try {
          parsed = JSON.parse(body.toString('utf8'));
        } catch {
          throw unusableClientDocument(`${keySetWhat} is not valid JSON`);
        }
        const set = checkKeySet(parsed);
        if (set === undefined) throw unusableClientDocument(`${keySetWhat} must be a set of 1 to ${MAX_KEYS} public keys`);
        return deepFreeze(set);
      },
      address,
    );

  return {
    async resolve(url: string, resolveOptions: ResolveOptions = {}): Promise<ClientMetadataDocument> {
      checkedDocumentUrl(url);
      return cachedOrFetch(`doc ${url}`, fetchDocumentAt(url, resolveOptions.address), resolveOptions);
    },
    async refetchDocument(url: string, resolveOptions: ResolveOptions = {}): Promise<ClientMetadataDocument | undefined> {
      checkedDocumentUrl(url);
      return refetch(`doc ${url}`, fetchDocumentAt(url, resolveOptions.address), resolveOptions);
    },
    async keySet(url: string, resolveOptions: ResolveOptions = {}): Promise<JSONWebKeySet> {
      if (!isHttpsUrl(url)) throw unusableClientDocument('a jwks_uri must be an https URL');
      return cachedOrFetch(`jwks ${url}`, fetchKeySetAt(url, resolveOptions.address), resolveOptions);
    },
    async refetchKeySet(url: string, resolveOptions: ResolveOptions = {}): Promise<JSONWebKeySet | undefined> {
      if (!isHttpsUrl(url)) throw unusableClientDocument('a jwks_uri must be an https URL');
      return refetch(`jwks ${url}`, fetchKeySetAt(url, resolveOptions.address), resolveOptions);
    },
  };
}
