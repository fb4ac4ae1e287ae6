// The resolver of what clients publish: a Client ID Metadata Document (a client_id that is an https
// URL) and the JWKS a document or a registration names for private_key_jwt. Fetches go through the
// SSRF-guarded fetcher (src/oauth/outbound-fetch.ts), within a cap on concurrent fetches (and each
// client address's share of it); documents are read by src/oauth/cimd-document.ts; valid ones are
// cached (and, briefly, the failures) by src/oauth/cimd-cache.ts.

import type { JSONWebKeySet } from 'jose';
import type { Clock } from '../model/clock.ts';
import { HttpError, unusableClientDocument } from '../http/errors.ts';
import type { Logger } from '../observability/logger.ts';
import { isHttpsUrl } from '../model/client-metadata.ts';
import { cacheLifetimeMs, createFetchCache } from './cimd-cache.ts';
import {
  freezeDocument,
  isClientIdMetadataUrl,
  parseClientMetadataDocument,
  parseKeySetBody,
  type ClientMetadataDocument,
} from './cimd-document.ts';
import { createFetchSlots, fetchPublished, refusedAddressClass, type OutboundFetchOptions } from './outbound-fetch.ts';

export { isClientIdMetadataUrl, type ClientMetadataDocument } from './cimd-document.ts';

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

export interface CimdResolverOptions extends OutboundFetchOptions {
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
  clock: Clock;
  logger: Logger;
}

const KEY_SET = "the client's key set (jwks_uri)";
const DOCUMENT = 'the metadata document';

function checkedDocumentUrl(url: string): void {
  if (!isClientIdMetadataUrl(url)) {
    throw unusableClientDocument(
      'a client_id URL must be https, with a path, without fragment, user info or dot segments, in normalised form',
    );
  }
}

function checkedKeySetUrl(url: string): void {
  if (!isHttpsUrl(url)) throw unusableClientDocument('a jwks_uri must be an https URL');
}

export function createCimdResolver(options: CimdResolverOptions): CimdResolver {
  const { clock, logger } = options;
  const maxFetches = options.maxConcurrentFetches ?? 16;
  const slots = createFetchSlots(
    maxFetches,
    options.fetchQueueWaitMs ?? 2000,
    options.maxConcurrentFetchesPerAddress ?? Math.max(1, Math.floor(maxFetches / 4)),
  );
  // Documents and key sets share one cache (keyed by kind and URL), so its bound holds for both.
  const cache = createFetchCache({
    maxEntries: options.maxCacheEntries,
    failureCacheMs: options.failureCacheMs ?? 30_000,
    refetchCooldownMs: options.refetchCooldownMs ?? 30_000,
    clock,
  });
  if (options.allowPrivateAddresses) {
    logger.warn(
      'client metadata documents may be fetched from loopback and private addresses (allowPrivateAddresses): unsafe outside tests',
    );
  }

  async function fetchAndValidate<T extends object>(key: string, url: string, what: string, parse: (body: Buffer) => T, address?: string) {
    const host = new URL(url).host;
    try {
      const fetched = await slots(() => {
        cache.fetching(key);
        return fetchPublished(new URL(url), options, what);
      }, address);
      const value = parse(fetched.body);
      const lifetime = cacheLifetimeMs(fetched.cacheControl, options.cacheTtlMs);
      cache.fetched(key, value, lifetime);
      logger.debug({ host, cachedForMs: lifetime }, `${what} fetched`);
      return value;
    } catch (err) {
      if (err instanceof HttpError && err.code === 'temporarily_unavailable') {
        logger.warn({ host }, `${what} not fetched: the cap on concurrent fetches is reached`);
        throw err;
      }
      const description = err instanceof HttpError ? err.description : undefined;
      const cause = (err as { cause?: { code?: string } }).cause?.code;
      // The address class stays here: the page says only that no public address could be fetched.
      logger.info({ host, reason: description, cause, addressClass: refusedAddressClass(err) }, `${what} refused`);
      const refusal = err instanceof HttpError ? err : unusableClientDocument(`${what} could not be fetched`, err);
      cache.failed(key, refusal);
      throw refusal;
    }
  }

  // A fetch is admitted (`beforeFetch`: a per-address limit throws there) only when it goes out, never on a cache hit.
  const admitted =
    <T>(o: ResolveOptions, work: () => Promise<T>) =>
    async () => {
      await o.beforeFetch?.();
      return work();
    };
  const documentAt = (url: string, o: ResolveOptions) =>
    admitted(o, () =>
      fetchAndValidate(`doc ${url}`, url, DOCUMENT, (body) => freezeDocument(parseClientMetadataDocument(url, body)), o.address),
    );
  const keySetAt = (url: string, o: ResolveOptions) =>
    admitted(o, () => fetchAndValidate(`jwks ${url}`, url, KEY_SET, (body) => parseKeySetBody(body, KEY_SET), o.address));

  return {
    async resolve(url, o = {}) {
      checkedDocumentUrl(url);
      return cache.cachedOrFetch(`doc ${url}`, documentAt(url, o));
    },
    async refetchDocument(url, o = {}) {
      checkedDocumentUrl(url);
      return cache.refetch(`doc ${url}`, documentAt(url, o));
    },
    async keySet(url, o = {}) {
      checkedKeySetUrl(url);
      return cache.cachedOrFetch(`jwks ${url}`, keySetAt(url, o));
    },
    async refetchKeySet(url, o = {}) {
      checkedKeySetUrl(url);
      return cache.refetch(`jwks ${url}`, keySetAt(url, o));
    },
  };
}
