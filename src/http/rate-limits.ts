// Every rate limit of the sidecar is one kind of counter: a fixed one-minute window per key, counted
// in the store (`hitCounter`), so every replica counts together. Windows are aligned to the clock
// (minute N is [N*60 s, (N+1)*60 s)), so replicas agree on where one ends and tests move time with it.
//  - WindowLimit: `perMinute` hits per key, then 429 with Retry-After until the window ends
//    (token requests, registrations, revocations, introspections, /authorize).
//  - ProvenRequestLimit: a WindowLimit counted only for requests that succeeded (a public client's
//    token requests), refused once this process has counted the limit.
//  - FailedAuthLimiter: counts only failures, and remembers in this process which addresses are over
//    the limit, so checking a request costs one Map lookup and no store round trip (the proxy's hot
//    path; the admin listener's failed master-token attempts use one too). It limits what failures
//    cost, never the holder of a valid credential: a request is authenticated first, and only when it
//    fails does the limiter decide between the usual answer (challenge, log, audit, counted) and a
//    bare 429 (`failed`). Someone else's failures from a shared address never refuse a valid token.
// An address is counted under its `limitKey` (model/net-address.ts): an IPv6 client as its network
// (rateLimits.ipv6PrefixLength, a /64 by default), so that one host cannot spread over its addresses.

import { BoundedMap } from '../model/bounded-map.ts';
import type { Clock } from '../model/clock.ts';
import { tooManyRequests, type HttpError } from './errors.ts';
import { describe, type Logger } from '../observability/logger.ts';
import { limitKey } from '../model/net-address.ts';
import type { CounterStorage } from '../store/types.ts';

const WINDOW_MS = 60_000;
const MAX_BLOCKED = 100_000;

/** Epoch ms at which the window holding `now` ends. */
function windowEnd(now: number): number {
  return (Math.floor(now / WINDOW_MS) + 1) * WINDOW_MS;
}

export class WindowLimit {
  private readonly store: CounterStorage;
  private readonly clock: Clock;
  /** Names the counter family in the store (`authfail`, `token`, …): limits never share counts. */
  private readonly name: string;
  /** 0: off. */
  readonly perMinute: number;

  constructor(store: CounterStorage, clock: Clock, name: string, perMinute: number) {
    this.store = store;
    this.clock = clock;
    this.name = name;
    this.perMinute = perMinute;
  }

  /** Counts one hit for `key`: 0 while within the limit, else the seconds until the window ends. */
  async hit(key: string): Promise<number> {
    return (await this.count(key)) > this.perMinute ? this.secondsLeft() : 0;
  }

  /** Counts one hit for `key` and returns the window's count so far (0 when the limit is off). */
  async count(key: string): Promise<number> {
    if (this.perMinute === 0) return 0;
    const window = Math.floor(this.clock.now() / WINDOW_MS);
    return (await this.store.hitCounter(`${this.name}:${window}:${key}`, WINDOW_MS)).count;
  }

  /** Seconds until the current window ends (at least 1): the Retry-After of a refusal counted with `count`. */
  secondsLeft(): number {
    const now = this.clock.now();
    return Math.max(1, Math.ceil((windowEnd(now) - now) / 1000));
  }

  /** Counts one hit; throws 429 with Retry-After past the limit. */
  async take(key: string, description: string): Promise<void> {
    const retryAfter = await this.hit(key);
    if (retryAfter > 0) throw tooManyRequests(retryAfter, description);
  }
}

const FAILURE_REFUSALS = new WeakSet<object>();

const FAILED_AUTHENTICATIONS = 'too many failed authentications from this address';

/** The 429 that answers a failed authentication from an address over the limit. */
function failureRefusal(retryAfter: number, description: string): HttpError {
  const err = tooManyRequests(retryAfter, description);
  FAILURE_REFUSALS.add(err);
  return err;
}

/** Whether `err` is such a 429: answered as it is, without the audit event a failure otherwise gets. */
export function isFailureRefusal(err: unknown): boolean {
  return typeof err === 'object' && err !== null && FAILURE_REFUSALS.has(err);
}

/**
 * Requests that may use up a key only once they have proven their credential: counted after they
 * succeeded (`counted`), refused before (`check`) once this process has seen the key's count reach
 * the limit. Replicas share the count; each refuses from its own next count on, so R replicas may let
 * up to R - 1 more through in a window. (A public client's token requests: its grant is its
 * credential, and whoever knows its id must not use up its requests with grants that fail.)
 */
export class ProvenRequestLimit {
  /** Keys at the limit, with the epoch ms at which their window ends. */
  readonly #full = new BoundedMap<string, number>(MAX_BLOCKED);
  private readonly limit: WindowLimit;
  private readonly clock: Clock;

  constructor(limit: WindowLimit, clock: Clock) {
    this.limit = limit;
    this.clock = clock;
  }

  /** Throws 429 with Retry-After while `key` is known to be at its limit. */
  check(key: string, description: string): void {
    const until = this.#full.get(key);
    if (until === undefined) return;
    const left = until - this.clock.now();
    if (left > 0) throw tooManyRequests(Math.ceil(left / 1000), description);
    this.#full.delete(key);
  }

  /** Counts a request that succeeded; the key is refused from here on once its count reaches the limit. */
  async counted(key: string): Promise<void> {
    if ((await this.limit.count(key)) < this.limit.perMinute || this.limit.perMinute === 0) return;
    this.#full.set(key, windowEnd(this.clock.now()));
  }
}

export class FailedAuthLimiter {
  /** Addresses over the limit, with the epoch ms at which their window ends. */
  readonly #blocked = new BoundedMap<string, number>(MAX_BLOCKED);

  private readonly limit: WindowLimit;
  private readonly clock: Clock;
  private readonly logger: Logger;
  /** For the log line: which listener refuses the address. */
  private readonly listener: string;
  /** rateLimits.ipv6PrefixLength: an IPv6 address counts as its network of this many bits. */
  private readonly ipv6PrefixLength: number;
  /** What the 429 and the log line say is counted (failed authentications, unless told otherwise). */
  private readonly description: string;

  constructor(
    limit: WindowLimit,
    clock: Clock,
    logger: Logger,
    listener: string,
    ipv6PrefixLength: number,
    description: string = FAILED_AUTHENTICATIONS,
  ) {
    this.limit = limit;
    this.clock = clock;
    this.logger = logger;
    this.listener = listener;
    this.ipv6PrefixLength = ipv6PrefixLength;
    this.description = description;
  }

  /** Seconds until `address` may try again, or 0. */
  #retryAfter(address: string): number {
    if (this.#blocked.size === 0) return 0;
    const until = this.#blocked.get(address);
    if (until === undefined) return 0;
    const left = until - this.clock.now();
    if (left > 0) return Math.ceil(left / 1000);
    this.#blocked.delete(address);
    return 0;
  }

  /**
   * A failed authentication from `address`, answered by the caller after this resolves: while the
   * address is over the limit, throws the bare 429 that answers it instead (not counted again, not
   * audited: see `isFailureRefusal`); otherwise counts it and resolves, and the caller answers as usual.
   */
  async failed(address: string): Promise<void> {
    const refused = this.refusal(address);
    if (refused) throw refused;
    await this.recordFailure(address);
  }

  /**
   * The bare 429 that answers a failed authentication from `address` while it is over the limit, or
   * undefined (the failure then gets its usual answer, and `recordFailure` counts it). For a caller
   * that does not wait for the count (the proxy); others use `failed`.
   */
  refusal(address: string): HttpError | undefined {
    const retryAfter = this.#retryAfter(limitKey(address, this.ipv6PrefixLength));
    return retryAfter > 0 ? failureRefusal(retryAfter, this.description) : undefined;
  }

  /**
   * Counts a failure. Never rejects (a store error only loses the count); the proxy does not wait for
   * it, the OAuth endpoints and the admin listener do, so their next request already sees the refusal.
   */
  recordFailure(address: string): Promise<void> {
    const key = limitKey(address, this.ipv6PrefixLength);
    return this.limit.hit(key).then(
      (retryAfter) => {
        if (retryAfter === 0) return;
        if (!this.#blocked.has(key))
          this.logger.warn({ address: key, listener: this.listener }, `${this.description}: address refused until the window ends`);
        this.#blocked.set(key, windowEnd(this.clock.now()));
      },
      (err: unknown) => this.logger.debug({ err: describe(err) }, 'failed-auth counter not updated'),
    );
  }
}
