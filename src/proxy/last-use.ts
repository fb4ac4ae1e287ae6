// When each token was last presented, for people (listGrants, the account page), without a Redis write
// per request: the hot path only notes a token in a process-local map, and a token is queued for
// writing at most once per `intervalMs`; the queue is written in batches by a timer.

import type { Clock } from '../model/clock.ts';
import type { Principal } from '../model/credentials.ts';
import type { Logger } from '../observability/logger.ts';
import type { SubjectStorage } from '../store/types.ts';

export interface LastUseOptions {
  store: Pick<SubjectStorage, 'recordLastUse'>;
  clock: Clock;
  logger: Logger;
  /** A token's last use is written at most this often (its recorded time is that coarse). */
  intervalMs: number;
  /** Tokens remembered between writes; past it the map is swept, then cleared (more writes, never more memory). */
  maxTokens: number;
  /** Uses written per store call. */
  batchSize: number;
}

type Use = { tokenHash: string; kind: 'user' | 'oauth'; at: number };

export class LastUseRecorder {
  readonly #options: LastUseOptions;
  /** Token hash -> when its use was last queued. */
  readonly #queuedAt = new Map<string, number>();
  #pending: Use[] = [];
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> | undefined;

  constructor(options: LastUseOptions) {
    this.#options = options;
  }

  /** Starts the periodic write (every intervalMs / 4: a queued use waits at most that long). */
  start(): void {
    this.#timer = setInterval(() => void this.flush(), Math.max(250, Math.floor(this.#options.intervalMs / 4)));
    this.#timer.unref();
  }

  /** Writes what is queued, then stops. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.flush();
  }

  /** The hot path: a Map lookup; the use is queued only when this token's last one was queued intervalMs ago or more. */
  seen(principal: Principal, now: number): void {
    const { tokenHash, kind } = principal;
    if (tokenHash === undefined || (kind !== 'user' && kind !== 'oauth')) return;
    const last = this.#queuedAt.get(tokenHash);
    if (last !== undefined && now - last < this.#options.intervalMs) return;
    if (last === undefined && this.#queuedAt.size >= this.#options.maxTokens) this.#sweep(now);
    this.#queuedAt.set(tokenHash, now);
    this.#pending.push({ tokenHash, kind, at: now });
  }

  /** Uses queued and not yet written (tests, metrics). */
  get pending(): number {
    return this.#pending.length;
  }

  /** Writes every queued use, in batches; a failed write is dropped (last use is informative, never a check). */
  flush(): Promise<void> {
    this.#flushing ??= this.#flush().finally(() => {
      this.#flushing = undefined;
    });
    return this.#flushing;
  }

  async #flush(): Promise<void> {
    while (this.#pending.length > 0) {
      const batch = this.#pending.splice(0, this.#options.batchSize);
      try {
        await this.#options.store.recordLastUse(batch);
      } catch (err) {
        this.#options.logger.debug({ err, uses: batch.length }, 'last-use write failed; those times are skipped');
      }
    }
    this.#sweep(this.#options.clock.now());
  }

  /** Forgets tokens whose interval has passed (they will be queued again on their next use); cleared if still full. */
  #sweep(now: number): void {
    for (const [hash, at] of this.#queuedAt) if (now - at >= this.#options.intervalMs) this.#queuedAt.delete(hash);
    if (this.#queuedAt.size >= this.#options.maxTokens) this.#queuedAt.clear();
  }
}
