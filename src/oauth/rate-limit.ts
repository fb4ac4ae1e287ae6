// A fixed-window counter per key (client IP for POST /register), held in this process. Bounded: when
// more keys than `maxKeys` are live, the oldest window is dropped first, so a flood of source
// addresses cannot grow memory. (Limits shared between replicas through Redis are a later step.)

import type { Clock } from '../clock.ts';

export class FixedWindowLimiter {
  readonly #windows = new Map<string, { start: number; count: number }>();
  readonly #limit: number;
  readonly #windowMs: number;
  readonly #maxKeys: number;
  readonly #clock: Clock;

  constructor(options: { limit: number; windowMs: number; clock: Clock; maxKeys?: number }) {
    this.#limit = options.limit;
    this.#windowMs = options.windowMs;
    this.#clock = options.clock;
    this.#maxKeys = options.maxKeys ?? 10_000;
  }

  /** Counts one attempt; returns 0 when allowed, else the seconds until the window reopens. */
  take(key: string): number {
    const now = this.#clock.now();
    let window = this.#windows.get(key);
    if (!window || now - window.start >= this.#windowMs) {
      this.#windows.delete(key);
      window = { start: now, count: 0 };
      this.#windows.set(key, window);
      if (this.#windows.size > this.#maxKeys) this.#windows.delete(this.#windows.keys().next().value!);
    }
    window.count++;
    if (window.count <= this.#limit) return 0;
    return Math.max(1, Math.ceil((window.start + this.#windowMs - now) / 1000));
  }
}
