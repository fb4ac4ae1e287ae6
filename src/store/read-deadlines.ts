// Bounds on the token lookups, the reads every request waits for, kept with one timer for all of them
// instead of ioredis's timer per command. ioredis's commandTimeout arms a timer for each command and
// clears it with `delete` (which leaves the command object on V8's slow path), and its socketTimeout
// arms another timer and a `data` listener for each write: on a forward-auth check that was about a
// fifth of the sidecar's CPU. The lookups therefore run on a connection without either, and here:
// - a lookup not answered within `commandTimeoutMs` is rejected (the request gets 503, fail closed);
// - a connection that leaves a lookup unanswered for `socketTimeoutMs` is taken as dead (a peer gone
//   without a FIN or RST keeps a socket "ready" until the kernel gives up, minutes later) and
//   `onStalled` is called to replace it.
// Redis answers a connection's commands in the order they were sent, so the lookups in flight are a
// queue: each settles at the head, which keeps the work per lookup constant and lets a settled lookup
// be collected young.

import { StoreUnavailableError } from './shared.ts';

/** A lookup's wait past its bound: the store cannot answer now (503), as for ioredis's own command timeout. */
export class ReadTimeoutError extends StoreUnavailableError {
  constructor(timeoutMs: number) {
    super(`Redis did not answer within ${timeoutMs} ms`);
    this.name = 'ReadTimeoutError';
  }
}

interface Waiting {
  readonly at: number;
  reject: ((err: Error) => void) | undefined;
  /** Redis answered (or the command failed): nothing is waited for any more. */
  settled: boolean;
  next: Waiting | undefined;
}

export interface ReadDeadlineOptions {
  commandTimeoutMs: number;
  socketTimeoutMs: number;
  /** A lookup has gone unanswered for socketTimeoutMs: the connection is to be replaced. */
  onStalled(): void;
  /** Monotonic milliseconds (tests move it); default performance.now. */
  now?: () => number;
}

export class ReadDeadlines {
  readonly #commandTimeoutMs: number;
  readonly #socketTimeoutMs: number;
  readonly #onStalled: () => void;
  readonly #now: () => number;
  #head: Waiting | undefined;
  #tail: Waiting | undefined;
  #timer: NodeJS.Timeout | undefined;
  /** The earliest time the timer is due (undefined: not armed). */
  #due: number | undefined;
  readonly #fire = (): void => this.#check();

  constructor(options: ReadDeadlineOptions) {
    this.#commandTimeoutMs = options.commandTimeoutMs;
    this.#socketTimeoutMs = Math.max(options.socketTimeoutMs, options.commandTimeoutMs);
    this.#onStalled = options.onStalled;
    this.#now = options.now ?? (() => performance.now());
  }

  /** `read`, bounded: it rejects with ReadTimeoutError once commandTimeoutMs have passed unanswered. */
  bound<T>(read: Promise<T>): Promise<T> {
    const waiting: Waiting = { at: this.#now(), reject: undefined, settled: false, next: undefined };
    if (this.#tail === undefined) this.#head = waiting;
    else this.#tail.next = waiting;
    this.#tail = waiting;
    if (this.#due === undefined) this.#arm(waiting.at + this.#commandTimeoutMs);
    return new Promise<T>((resolve, reject) => {
      waiting.reject = reject;
      read.then(
        (value) => {
          this.#settle(waiting);
          resolve(value);
        },
        (err: unknown) => {
          this.#settle(waiting);
          reject(err as Error);
        },
      );
    });
  }

  /** How many lookups are in flight. */
  get pending(): number {
    let n = 0;
    for (let w = this.#head; w !== undefined; w = w.next) if (!w.settled) n++;
    return n;
  }

  /** Stops the timer (the store is closing); lookups still waiting are rejected by their connection's close. */
  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#due = undefined;
  }

  #settle(waiting: Waiting): void {
    waiting.settled = true;
    waiting.reject = undefined;
    // Answers come in order: what settles is almost always the head.
    let head = this.#head;
    while (head !== undefined && head.settled) head = head.next;
    this.#head = head;
    if (head === undefined) this.#tail = undefined;
  }

  #arm(at: number): void {
    this.#due = at;
    this.#timer = setTimeout(this.#fire, Math.max(1, Math.ceil(at - this.#now())));
    this.#timer.unref();
  }

  #check(): void {
    this.#timer = undefined;
    this.#due = undefined;
    const now = this.#now();
    const head = this.#head;
    if (head !== undefined && now - head.at >= this.#socketTimeoutMs) {
      // The oldest lookup has had no answer for socketTimeoutMs: every lookup in flight is given up
      // (their answers, should they come, are dropped) and the connection replaced.
      for (let w: Waiting | undefined = head; w !== undefined; w = w.next) this.#expire(w);
      this.#head = this.#tail = undefined;
      this.#onStalled();
      return;
    }
    let next: number | undefined;
    for (let w = head; w !== undefined; w = w.next) {
      if (w.settled || w.reject === undefined) continue;
      if (now - w.at < this.#commandTimeoutMs) {
        // Later lookups started later: this one's deadline is the next to come.
        next = w.at + this.#commandTimeoutMs;
        break;
      }
      this.#expire(w);
    }
    // Rejected but still unanswered: watched until Redis answers them or socketTimeoutMs has passed.
    if (next === undefined && this.#head !== undefined) next = this.#head.at + this.#socketTimeoutMs;
    if (next !== undefined) this.#arm(next);
  }

  #expire(waiting: Waiting): void {
    const reject = waiting.reject;
    waiting.reject = undefined;
    reject?.(new ReadTimeoutError(this.#commandTimeoutMs));
  }
}
