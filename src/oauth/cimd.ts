// Client ID Metadata Documents: a client_id that is an https URL names a JSON document, hosted by the
// client, that describes it (no registration). This module fetches and validates such documents with an
// SSRF guard on the address actually connected to, and caches the valid ones within bounds.

import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { request } from 'node:https';
import { isIP, type Socket } from 'node:net';
import type { Clock } from '../clock.ts';
import { HttpError, unusableClientDocument } from '../errors.ts';
import type { Logger } from '../logger.ts';
import { checkRedirectUri, checkScope, hasControlCharacter } from '../clients.ts';
import { ADDRESS_CLASS_NAMES, classifyAddress, type AddressClass } from '../net-address.ts';

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
  /** Clients known only by a document hold no secret and no key here: they are public clients. */
  tokenEndpointAuthMethod: 'none';
  scope?: string;
  /** hostname[:port] of the URL: what a consent page names as the client's home. */
  host: string;
}

export interface CimdResolver {
  /** The validated document, or HttpError `invalid_client` with a description fit for an error page. */
  resolve(url: string): Promise<ClientMetadataDocument>;
}

export interface CimdResolverOptions {
  /** Bound on the whole fetch: DNS, connect, TLS, headers and body. */
  timeoutMs: number;
  /** Bound on the body, enforced while it streams in. */
  maxBytes: number;
  /** Longest a valid document is reused; a shorter `Cache-Control: max-age` wins. */
  cacheTtlMs: number;
  maxCacheEntries: number;
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
const DOCUMENT_GRANT_TYPES = ['authorization_code', 'refresh_token'];
/** Fields that mean a shared secret: a document is public, so it must never carry or ask for one. */
const SECRET_FIELDS = ['client_secret', 'client_secret_expires_at'];

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

/** Why a fetch failed, for an error page: no address, no internal detail. */
function describeFetchError(err: unknown): string {
  if (err instanceof RefusedAddressError) {
    return `the metadata document's host resolves to ${ADDRESS_CLASS_NAMES[err.addressClass]}; only public addresses are fetched`;
  }
  const code = (err as NodeJS.ErrnoException | undefined)?.code ?? '';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return "the metadata document's host name could not be resolved";
  if (code === 'ECONNREFUSED') return "the metadata document's host refused the connection";
  // OpenSSL's verification codes (CERT_HAS_EXPIRED, UNABLE_TO_VERIFY_LEAF_SIGNATURE, ...) and Node's own.
  if (code.includes('CERT') || code.startsWith('UNABLE_TO_') || code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    return "the metadata document's host did not present a valid TLS certificate for its name";
  }
  if (code.startsWith('ERR_SSL_') || code.startsWith('ERR_TLS_')) return "the TLS handshake with the metadata document's host failed";
  return 'the metadata document could not be fetched';
}

interface Fetched {
  body: Buffer;
  cacheControl: string | undefined;
}

function fetchDocument(url: URL, options: CimdResolverOptions): Promise<Fetched> {
  return new Promise((resolve, reject) => {
    const literal = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    if (isIP(literal) !== 0 && !options.allowPrivateAddresses) {
      // An IP literal is never looked up, so the lookup guard cannot see it.
      const cls = refusedClass(literal);
      if (cls !== undefined) return reject(unusableClientDocument(describeFetchError(new RefusedAddressError(cls))));
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
    const timer = setTimeout(() => fail(`the metadata document was not fetched within ${options.timeoutMs} ms`), options.timeoutMs);
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
    req.on('error', (err) => fail(describeFetchError(err), err));
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      if (status >= 300 && status < 400) return fail(`the metadata document URL answered with a redirect (HTTP ${status}); redirects are not followed`);
      if (status !== 200) return fail(`the metadata document URL answered HTTP ${status}, not 200`);
      const type = (res.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
      if (type !== 'application/json' && !/^application\/[a-z0-9.+-]+\+json$/.test(type)) {
        return fail('the metadata document is not JSON (its content-type must be application/json)');
      }
      const encoding = (res.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
      if (encoding !== 'identity') return fail('the metadata document must be sent without content-encoding');
      const declared = Number(res.headers['content-length']);
      if (Number.isFinite(declared) && declared > options.maxBytes) return fail(`the metadata document is larger than ${options.maxBytes} bytes`);
      res.on('data', (chunk: Buffer) => {
        if (settled) return;
        size += chunk.length;
        if (size > options.maxBytes) return fail(`the metadata document is larger than ${options.maxBytes} bytes`);
        chunks.push(chunk);
      });
      res.on('error', (err) => fail('the metadata document was cut off', err));

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
    throw unusableClientDocument(`the metadata document's ${field} must be a string of at most ${max} characters, without control characters`);
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
  if (typeof value !== 'string' || value.length > MAX_URL_LENGTH || value.includes('#') || value.includes(' ') || hasControlCharacter(value)) return false;
  try {
    const scheme = new URL(value).protocol.slice(0, -1);
    return /^[a-z][a-z0-9+-]*(\.[a-z0-9+-]+)+$/.test(scheme);
  } catch {
    return false;
  }
}

function stringList(doc: Record<string, unknown>, field: string, fallback: string[], allowed: readonly string[]): string[] {
  const v = doc[field];
  if (v === undefined || v === null) return [...fallback];
  if (!Array.isArray(v) || v.length === 0 || !v.every((x) => typeof x === 'string')) {
    throw unusableClientDocument(`the metadata document's ${field} must be a non-empty list of strings`);
  }
  const unsupported = v.filter((x) => !allowed.includes(x as string));
  if (unsupported.length > 0) {
    throw unusableClientDocument(`the metadata document's ${field} may only contain ${allowed.join(', ')} (it names ${unsupported.slice(0, 3).join(', ').slice(0, 200)})`);
  }
  return [...new Set(v as string[])];
}

/** Validates a fetched document against the URL it came from. */
export function parseClientMetadataDocument(url: string, body: Buffer): ClientMetadataDocument {
  let doc: unknown;
  try {
    doc = JSON.parse(body.toString('utf8'));
  } catch {
    throw unusableClientDocument('the metadata document is not valid JSON');
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) throw unusableClientDocument('the metadata document must be a JSON object');
  const d = doc as Record<string, unknown>;
  if (d.client_id !== url) throw unusableClientDocument("the metadata document's client_id is not exactly the URL it was fetched from");
  const secretField = SECRET_FIELDS.find((f) => d[f] !== undefined);
  if (secretField !== undefined) throw unusableClientDocument(`the metadata document must not contain ${secretField}: such documents are public`);
  const method = d.token_endpoint_auth_method;
  if (method !== undefined && method !== null && method !== 'none') {
    throw unusableClientDocument(
      `the metadata document asks for token_endpoint_auth_method ${JSON.stringify(String(method).slice(0, 40))}; clients known by a metadata document must be public ("none") here`,
    );
  }
  const redirectUris = d.redirect_uris;
  if (!Array.isArray(redirectUris) || redirectUris.length === 0) throw unusableClientDocument('the metadata document has no redirect_uris');
  if (!redirectUris.every(checkDocumentRedirectUri)) {
    throw unusableClientDocument("each of the metadata document's redirect_uris must be an absolute https URI, http on a loopback host or a private-use scheme, without fragment");
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
    grantTypes: stringList(d, 'grant_types', ['authorization_code'], DOCUMENT_GRANT_TYPES),
    responseTypes: stringList(d, 'response_types', ['code'], ['code']),
    tokenEndpointAuthMethod: 'none',
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
  const directives = cacheControl.toLowerCase().split(',').map((d) => d.trim());
  if (directives.includes('no-store') || directives.includes('no-cache')) return 0;
  const maxAge = directives.map((d) => /^max-age\s*=\s*"?(\d+)"?$/.exec(d)).find((m) => m !== null);
  if (!maxAge) return capMs;
  return Math.min(capMs, Number(maxAge[1]) * 1000);
}

function freezeDocument(doc: ClientMetadataDocument): ClientMetadataDocument {
  Object.freeze(doc.redirectUris);
  Object.freeze(doc.grantTypes);
  Object.freeze(doc.responseTypes);
  return Object.freeze(doc);
}

export function createCimdResolver(options: CimdResolverOptions): CimdResolver {
  const { clock, logger } = options;
  // Map order is recency order: a hit moves its entry to the end, the first entry is evicted first.
  const cache = new Map<string, { document: ClientMetadataDocument; expiresAt: number }>();
  // One fetch per URL at a time; failures are shared with whoever waited on that fetch, never cached.
  const inFlight = new Map<string, Promise<ClientMetadataDocument>>();
  if (options.allowPrivateAddresses) {
    logger.warn('client metadata documents may be fetched from loopback and private addresses (allowPrivateAddresses): unsafe outside tests');
  }

  async function fetchAndValidate(url: string): Promise<ClientMetadataDocument> {
    try {
      const fetched = await fetchDocument(new URL(url), options);
      const document = freezeDocument(parseClientMetadataDocument(url, fetched.body));
      const lifetime = cacheLifetimeMs(fetched.cacheControl, options.cacheTtlMs);
      if (lifetime > 0 && options.maxCacheEntries > 0) {
        cache.set(url, { document, expiresAt: clock.now() + lifetime });
        while (cache.size > options.maxCacheEntries) cache.delete(cache.keys().next().value!);
      }
      logger.debug({ host: document.host, cachedForMs: lifetime }, 'client metadata document fetched');
      return document;
    } catch (err) {
      const description = err instanceof HttpError ? err.description : undefined;
      logger.info({ host: new URL(url).host, reason: description, cause: (err as { cause?: { code?: string } }).cause?.code }, 'client metadata document refused');
      throw err instanceof HttpError ? err : unusableClientDocument('the metadata document could not be fetched', err);
    }
  }

  return {
    resolve(url: string): Promise<ClientMetadataDocument> {
      if (!isClientIdMetadataUrl(url)) {
        return Promise.reject(
          unusableClientDocument('a client_id URL must be https, with a path, without fragment, user info or dot segments, in normalised form'),
        );
      }
      const hit = cache.get(url);
      if (hit !== undefined) {
        cache.delete(url);
        if (hit.expiresAt > clock.now()) {
          cache.set(url, hit);
          return Promise.resolve(hit.document);
        }
      }
      let pending = inFlight.get(url);
      if (pending === undefined) {
        pending = fetchAndValidate(url).finally(() => inFlight.delete(url));
        inFlight.set(url, pending);
      }
      return pending;
    },
  };
}
