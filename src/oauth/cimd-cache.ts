// The cache of what clients publish (metadata documents and key sets, keyed by kind and URL): valid
// values for their lifetime, failures briefly, one fetch per URL at a time, and when each URL was last
// fetched (the refetch cooldown). Every map is bounded.

import type { HttpError } from '../http/errors.ts';
import { BoundedMap } from '../model/bounded-map.ts';
import type { Clock } from '../model/clock.ts';

/**
 * URLs whose last fetch time and last failure are remembered, at least (even with the cache off): a
 * small bound would let someone cycling through URLs push out the cooldown and the failure of another.
 */
const MIN_BOOKKEEPING_ENTRIES = 1000;

export interface FetchCacheOptions {
  /** Values kept at once (0: none). */
  maxEntries: number;
  /** How long a key whose fetch failed answers that failure again without being fetched (0: not at all). */
  failureCacheMs: number;
  /** A key is fetched again past the cache at most once per this long. */
  refetchCooldownMs: number;
  clock: Clock;
}

export interface FetchCache {
  /** The cached value of `key`, else the failure remembered for it, else `fetchIt` (shared by whoever asks meanwhile). */
  cachedOrFetch<T extends object>(key: string, fetchIt: () => Promise<T>, pastTheCache?: boolean): Promise<T>;
  /** `fetchIt` past the cache, unless `key` was fetched within the cooldown (then undefined). */
  refetch<T extends object>(key: string, fetchIt: () => Promise<T>): Promise<T | undefined>;
  /** A fetch of `key` goes out now (the cooldown counts from here). */
  fetching(key: string): void;
  /** What was fetched replaces what was cached, also when it may not be kept (lifetime 0). */
  fetched(key: string, value: object, lifetimeMs: number): void;
  /** A refusal answered again for `key` during the failure period. */
  failed(key: string, refusal: HttpError): void;
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

export function createFetchCache(options: FetchCacheOptions): FetchCache {
  const { clock, maxEntries, failureCacheMs, refetchCooldownMs } = options;
  const bookkeeping = Math.max(maxEntries, MIN_BOOKKEEPING_ENTRIES);
  // A hit renews its entry: the least recently used is evicted first. (maxEntries 0: nothing is set.)
  const cache = new BoundedMap<string, { value: object; expiresAt: number }>(Math.max(maxEntries, 1));
  // Keys whose fetch failed, with the failure: answered again until `until`, without a fetch, so that a
  // URL that fails (slowly, or at once) costs one fetch per period however often it is named.
  const failures = new BoundedMap<string, { error: HttpError; until: number }>(bookkeeping);
  // When each key was last fetched: the refetch cooldown.
  const lastFetched = new BoundedMap<string, number>(bookkeeping);
  // One fetch per key at a time; its outcome is shared with whoever waited on it.
  const inFlight = new Map<string, Promise<object>>();

  const cachedOrFetch = <T extends object>(key: string, fetchIt: () => Promise<T>, pastTheCache = false): Promise<T> => {
    const hit = pastTheCache ? undefined : cache.touch(key);
    if (hit !== undefined) {
      if (hit.expiresAt > clock.now()) return Promise.resolve(hit.value as T);
      cache.delete(key);
    }
    const failed = failures.get(key);
    if (failed !== undefined) {
      if (failed.until > clock.now()) return Promise.reject(failed.error);
      failures.delete(key);
    }
    let pending = inFlight.get(key) as Promise<T> | undefined;
    if (pending === undefined) {
      pending = fetchIt().finally(() => inFlight.delete(key));
      inFlight.set(key, pending);
    }
    return pending;
  };

  return {
    cachedOrFetch,
    refetch(key, fetchIt) {
      const last = lastFetched.get(key);
      if (last !== undefined && clock.now() - last < refetchCooldownMs) return Promise.resolve(undefined);
      // The cached copy stays until a fetch replaces it: a refetch refused (the address over its budget)
      // costs the client nothing.
      return cachedOrFetch(key, fetchIt, true);
    },
    fetching(key) {
      lastFetched.set(key, clock.now());
    },
    fetched(key, value, lifetimeMs) {
      failures.delete(key);
      // A key removed from a set must not live on in an older copy.
      cache.delete(key);
      if (lifetimeMs > 0 && maxEntries > 0) {
        cache.set(key, { value, expiresAt: clock.now() + lifetimeMs });
      }
    },
    failed(key, refusal) {
      if (failureCacheMs <= 0) return;
      failures.set(key, { error: refusal, until: clock.now() + failureCacheMs });
    },
  };
}
