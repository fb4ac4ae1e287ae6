// What the two token-lookup caches (one server, and Redis Cluster) share: the fills in flight, marked
// by an invalidation so that a reply it overtook is never cached; which token a changed key names; and
// how long a filled copy may be served.

import type { TokenLookup } from '../model/records.ts';

/** One fill in flight: set when an invalidation (or a drop) overtook it, and then nothing is cached. */
export interface FillMark {
  invalidated: boolean;
}

/** The fills in flight, by token hash. */
export class PendingFills {
  readonly #byHash = new Map<string, Set<FillMark>>();

  /** A fill of `tokenHash` begins: its mark, and `end` to call once it is over (cached or not). */
  begin(tokenHash: string): { mark: FillMark; end: () => void } {
    const mark: FillMark = { invalidated: false };
    let marks = this.#byHash.get(tokenHash);
    if (marks === undefined) this.#byHash.set(tokenHash, (marks = new Set()));
    marks.add(mark);
    const held = marks;
    const end = () => {
      held.delete(mark);
      if (held.size === 0 && this.#byHash.get(tokenHash) === held) this.#byHash.delete(tokenHash);
    };
    return { mark, end };
  }

  /** Marks the fills of `tokenHash` in flight. */
  invalidate(tokenHash: string): void {
    const marks = this.#byHash.get(tokenHash);
    if (marks === undefined) return;
    for (const mark of marks) mark.invalidated = true;
    this.#byHash.delete(tokenHash);
  }

  /** Marks every fill in flight (the cache was emptied). */
  invalidateAll(): void {
    for (const marks of this.#byHash.values()) for (const mark of marks) mark.invalidated = true;
    this.#byHash.clear();
  }
}

/** How a tracked key's name reads: the user-grade keys' prefix, and the access-token key's hash. */
export interface TrackedKeyNames {
  userPrefix: string;
  accessHashOf(key: string): string | undefined;
}

/**
 * One invalidation message's keys applied: every token a key names is forgotten (`forget` answers
 * whether a copy was held) and its fills in flight are marked. Answers how many held copies it hit.
 */
export function invalidateKeys(
  keys: readonly unknown[],
  names: TrackedKeyNames,
  forget: (tokenHash: string) => boolean,
  fills: PendingFills,
): number {
  let hit = 0;
  for (const key of keys) {
    const name = String(key);
    const tokenHash = name.startsWith(names.userPrefix) ? name.slice(names.userPrefix.length) : names.accessHashOf(name);
    if (tokenHash === undefined) continue;
    if (forget(tokenHash)) hit++;
    fills.invalidate(tokenHash);
  }
  return hit;
}

/**
 * Until when (the cache's clock) a filled copy may be served: the shortest remaining TTL of the keys
 * it was found under (PTTL -1: none), counted from `sent`, when the reads were sent.
 */
export function heldUntil(found: TokenLookup, sent: number, userPttl: number, accessPttl: number): number {
  return Math.min(found.user !== null ? sent + ttlMs(userPttl) : Infinity, found.oauth !== null ? sent + ttlMs(accessPttl) : Infinity);
}

function ttlMs(pttl: number): number {
  if (pttl === -1) return Infinity;
  return Math.max(0, pttl);
}
