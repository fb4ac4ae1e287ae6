// Rate limits counted in the store, so every replica of the sidecar counts together:
//  - failed authentications per client address on the proxy listener (a bad, unknown, revoked or
//    expired token; a request without any token is discovery, not a failure). Past the limit the
//    address gets 429 until the window ends. Successful traffic is never counted, and the check on the
//    request path is one Map lookup, with no store round trip.
//  - token-endpoint requests per client_id (or per address when no client is named).

import type { Clock } from './clock.ts';
import { tooManyRequests } from './errors.ts';
import { describe, type Logger } from './logger.ts';
import type { CounterStorage } from './store/types.ts';

const WINDOW_MS = 60_000;
const MAX_BLOCKED = 100_000;

export class FailedAuthLimiter {
  /** Addresses over the limit, with the epoch ms at which their window ends. */
  readonly #blocked = new Map<string, number>();

  constructor(
    private readonly store: CounterStorage,
    private readonly limitPerMinute: number,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  /** Seconds until `address` may try again, or 0. */
  retryAfter(address: string): number {
    if (this.#blocked.size === 0) return 0;
    const until = this.#blocked.get(address);
    if (until === undefined) return 0;
    const left = until - this.clock.now();
    if (left > 0) return Math.ceil(left / 1000);
    this.#blocked.delete(address);
    return 0;
  }

  /** Counts a failure without delaying the answer; a store error only loses the count. */
  recordFailure(address: string): void {
    if (this.limitPerMinute === 0) return;
    this.store.hitCounter(`authfail:${address}`, WINDOW_MS).then(
      ({ count, resetMs }) => {
        if (count <= this.limitPerMinute) return;
        if (!this.#blocked.has(address)) this.logger.warn({ address, failures: count }, 'too many failed authentications: address refused until the window ends');
        if (this.#blocked.size >= MAX_BLOCKED) this.#blocked.delete(this.#blocked.keys().next().value!);
        this.#blocked.set(address, this.clock.now() + resetMs);
      },
      (err: unknown) => this.logger.debug({ err: describe(err) }, 'failed-auth counter not updated'),
    );
  }
}

/** Throws 429 when `key` has made more than `limitPerMinute` token requests in the current window. */
export async function limitTokenRequests(store: CounterStorage, key: string, limitPerMinute: number): Promise<void> {
  if (limitPerMinute === 0) return;
  const { count, resetMs } = await store.hitCounter(`token:${key}`, WINDOW_MS);
  if (count > limitPerMinute) throw tooManyRequests(Math.ceil(resetMs / 1000), 'too many token requests for this client');
}
