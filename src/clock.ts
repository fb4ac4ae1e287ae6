// Time as a dependency: every expiry decision asks an injected clock, so tests move time without sleeping.

export interface Clock {
  /** Current time in integer epoch milliseconds. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock that only moves when told to; starts at real time so Redis TTLs stay meaningful. */
export class ManualClock implements Clock {
  #now: number;
  constructor(start: number = Date.now()) {
    this.#now = Math.floor(start);
  }
  now(): number {
    return this.#now;
  }
  advance(ms: number): void {
    this.#now += Math.floor(ms);
  }
  set(ms: number): void {
    this.#now = Math.floor(ms);
  }
}
