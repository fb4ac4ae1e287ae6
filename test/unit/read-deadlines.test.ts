// The token lookups' bounds, kept with one timer: a lookup past the command timeout is refused (503),
// a connection silent past the socket timeout is replaced once, answers settle in order, and a late
// answer changes nothing. Fake timers and a clock the test moves: nothing here waits for real time.

import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { StoreUnavailableError } from '../../src/store/shared.ts';
import { ReadDeadlines, ReadTimeoutError } from '../../src/store/read-deadlines.ts';

interface Held<T> {
  promise: Promise<T>;
  answer(value: T): void;
  fail(err: Error): void;
}

function held<T>(): Held<T> {
  let answer!: (value: T) => void;
  let fail!: (err: Error) => void;
  const promise = new Promise<T>((resolve, reject) => ((answer = resolve), (fail = reject)));
  return { promise, answer, fail };
}

type Outcome<T> = { value: T } | { error: unknown } | 'pending';

/** Watches a promise from the start (a refusal is never unhandled); `state` is what it has come to. */
function watched<T>(promise: Promise<T>): { readonly state: Outcome<T> } {
  const w: { state: Outcome<T> } = { state: 'pending' };
  promise.then(
    (value) => (w.state = { value }),
    (error: unknown) => (w.state = { error }),
  );
  return w;
}

describe('ReadDeadlines', () => {
  let now = 0;
  let stalls = 0;
  let deadlines: ReadDeadlines;
  beforeEach(() => {
    vi.useFakeTimers();
    now = 0;
    stalls = 0;
    deadlines = new ReadDeadlines({ commandTimeoutMs: 500, socketTimeoutMs: 1000, onStalled: () => stalls++, now: () => now });
  });
  afterEach(() => {
    deadlines.stop();
    vi.useRealTimers();
  });

  /** Lets pending callbacks run, then reads the watched promise's state. */
  async function settled<T>(w: { readonly state: Outcome<T> }): Promise<Outcome<T>> {
    await vi.advanceTimersByTimeAsync(0);
    return w.state;
  }

  /** Moves the clock and the timers together. */
  async function advance(ms: number): Promise<void> {
    now += ms;
    await vi.advanceTimersByTimeAsync(ms);
  }

  it('passes an answer within the bound through, and nothing is left waiting', async () => {
    const read = held<string>();
    const bounded = watched(deadlines.bound(read.promise));
    await advance(499);
    read.answer('record');
    expect(await settled(bounded)).toEqual({ value: 'record' });
    expect(deadlines.pending).toBe(0);
    await advance(2000);
    expect(stalls).toBe(0);
  });

  it('passes a failed read through as it is', async () => {
    const read = held<string>();
    const bounded = watched(deadlines.bound(read.promise));
    const err = new Error('Connection is closed.');
    read.fail(err);
    expect(await settled(bounded)).toEqual({ error: err });
    expect(deadlines.pending).toBe(0);
  });

  it('refuses a read unanswered at the command timeout as the store being unavailable; its late answer changes nothing', async () => {
    const read = held<string>();
    const bounded = watched(deadlines.bound(read.promise));
    await advance(499);
    expect(await settled(bounded)).toBe('pending');
    await advance(1);
    const outcome = await settled(bounded);
    expect(outcome).not.toBe('pending');
    const error = (outcome as { error: unknown }).error;
    expect(error).toBeInstanceOf(ReadTimeoutError);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as Error).message).toBe('Redis did not answer within 500 ms');
    read.answer('late');
    expect(await settled(bounded)).toEqual(outcome);
    expect(deadlines.pending).toBe(0);
  });

  it('gives each read its own deadline: a later read is not refused with an earlier one', async () => {
    const first = held<string>();
    const a = watched(deadlines.bound(first.promise));
    await advance(300);
    const second = held<string>();
    const b = watched(deadlines.bound(second.promise));
    await advance(200);
    expect(await settled(a)).toHaveProperty('error');
    expect(await settled(b)).toBe('pending');
    second.answer('in time');
    expect(await settled(b)).toEqual({ value: 'in time' });
  });

  it('settles answers that come in order and keeps none of them', async () => {
    const reads = Array.from({ length: 100 }, () => held<number>());
    const bounded = reads.map((r) => deadlines.bound(r.promise));
    expect(deadlines.pending).toBe(100);
    reads.forEach((r, i) => r.answer(i));
    expect(await Promise.all(bounded)).toEqual(reads.map((_, i) => i));
    expect(deadlines.pending).toBe(0);
  });

  it('replaces a connection silent for the socket timeout once, not in a loop, and watches new reads afresh', async () => {
    const silent = [held<string>(), held<string>()];
    const bounded = silent.map((r) => watched(deadlines.bound(r.promise)));
    await advance(999);
    expect(stalls).toBe(0);
    await advance(1);
    expect(stalls).toBe(1);
    for (const b of bounded) expect(await settled(b)).toHaveProperty('error');
    expect(deadlines.pending).toBe(0);
    await advance(5000);
    expect(stalls).toBe(1);
    // On the new connection: answered, nothing more happens; silent again, replaced again.
    const answered = held<string>();
    const ok = watched(deadlines.bound(answered.promise));
    answered.answer('fresh');
    expect(await settled(ok)).toEqual({ value: 'fresh' });
    const again = watched(deadlines.bound(held<string>().promise));
    await advance(1000);
    expect(await settled(again)).toHaveProperty('error');
    expect(stalls).toBe(2);
  });

  it('does not count a connection as silent while it answers, even if one read was refused', async () => {
    const slow = held<string>();
    const refused = watched(deadlines.bound(slow.promise));
    await advance(600);
    expect(await settled(refused)).toHaveProperty('error');
    slow.answer('late but answered');
    await advance(0);
    expect(deadlines.pending).toBe(0);
    await advance(2000);
    expect(stalls).toBe(0);
  });
});
