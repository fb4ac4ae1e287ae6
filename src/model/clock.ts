// Time as a dependency: every expiry decision asks an injected clock, so tests move time without sleeping.

export interface Clock {
  /** Current time in integer epoch milliseconds. */
  now(): number;
  /**
   * Calls `fire` once the clock reaches `at` (epoch ms; at once if past); the result cancels it. A
   * pending deadline keeps the process alive: cancel it when what it guards is gone.
   */
  at(at: number, fire: () => void): () => void;
}

/** setTimeout's longest delay (about 24.8 days); a later deadline is reached in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export const systemClock: Clock = {
  now: () => Date.now(),
  at(at, fire) {
    let timer: NodeJS.Timeout;
    const arm = () => {
      const delay = at - Date.now();
      // Not unref'd, on purpose. Node keeps one timer list per distinct delay, and drops the list of a
      // cancelled timer at once only when the timer is ref'd; an unref'd one leaves ~160 bytes behind
      // until its delay has passed. Deadlines are token expiries, hours or days out, and almost every
      // one is distinct to the millisecond: one per SSE-framed reply leaked ~5 MiB a minute at 4,000
      // replies a second. Whoever sets a deadline cancels it when done (a stream, when it closes).
      timer = delay > MAX_TIMER_MS ? setTimeout(arm, MAX_TIMER_MS) : setTimeout(fire, Math.max(0, delay));
    };
    arm();
    return () => clearTimeout(timer);
  },
};

/** A clock that only moves when told to; starts at real time so Redis TTLs stay meaningful. */
export class ManualClock implements Clock {
  #now: number;
  readonly #pending = new Set<{ at: number; fire: () => void }>();
  constructor(start: number = Date.now()) {
    this.#now = Math.floor(start);
  }
  now(): number {
    return this.#now;
  }
  /** Deadlines fire when advance() or set() reaches them, synchronously, earliest first. */
  at(at: number, fire: () => void): () => void {
    const entry = { at, fire };
    this.#pending.add(entry);
    if (at <= this.#now) queueMicrotask(() => this.#fireDue());
    return () => this.#pending.delete(entry);
  }
  advance(ms: number): void {
    this.#now += Math.floor(ms);
    this.#fireDue();
  }
  set(ms: number): void {
    this.#now = Math.floor(ms);
    this.#fireDue();
  }
  #fireDue(): void {
    const due = [...this.#pending].filter((e) => e.at <= this.#now).sort((a, b) => a.at - b.at);
    for (const e of due) {
      if (this.#pending.delete(e)) e.fire();
    }
  }
}
