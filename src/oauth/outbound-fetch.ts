// Outbound fetches of what a client publishes (its metadata document, the key set at its `jwks_uri`):
// one GET over https with an SSRF guard on the address actually connected to, one deadline for the
// whole exchange, a bound on headers and body, no redirects, no content-encoding; and the cap on such
// fetches at once in this process (and each client address's share of it).

import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { request } from 'node:https';
import { isIP, type Socket } from 'node:net';
import { HttpError, unusableClientDocument } from '../http/errors.ts';
import { ADDRESS_CLASS_NAMES, classifyAddress, type AddressClass } from '../model/net-address.ts';

/** The bounds and the guard of one fetch. */
export interface OutboundFetchOptions {
  /** Bound on the whole fetch: DNS, connect, TLS, headers and body. */
  timeoutMs: number;
  /** Bound on the body, enforced while it streams in. */
  maxBytes: number;
  /**
   * UNSAFE outside tests and local development: lets fetches reach loopback, private and other
   * internal addresses, i.e. lets anyone who can start a sign-in make this server send requests into its
   * own network.
   */
  allowPrivateAddresses: boolean;
  /** Tests only: the CA that signed a test server's certificate (replaces the system roots). */
  ca?: string | Buffer;
}

const MAX_RESPONSE_HEADER_BYTES = 16 * 1024;
/** The setting that lets fetches reach internal addresses, named on the refusal page. */
const PRIVATE_ADDRESSES_SETTING = 'oauth.clientMetadataDocuments.allowPrivateAddresses';

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
export function refusedAddressClass(err: unknown): string | undefined {
  let e: unknown = err;
  for (let depth = 0; e !== undefined && e !== null && depth < 3; depth++) {
    if (e instanceof RefusedAddressError) return ADDRESS_CLASS_NAMES[e.addressClass];
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

export interface Fetched {
  body: Buffer;
  cacheControl: string | undefined;
}

/**
 * GETs `url` (https) within the bounds of `options`. `what` names the thing fetched in a refusal
 * (`the metadata document`), which is HttpError `invalid_client` with a description fit for an error page.
 */
export function fetchPublished(url: URL, options: OutboundFetchOptions, what: string): Promise<Fetched> {
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
