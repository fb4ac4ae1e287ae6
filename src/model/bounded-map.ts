// The bounded map of every in-process cache and refusal list (assertions, client documents, addresses
// over a rate limit): at most `max` entries, the oldest dropped first, so no flood of distinct keys
// grows memory. A Map keeps insertion order, so the oldest entry is its first, found in constant time.
// Hand-written rather than a library: these few lines are all the callers need (no TTL, sizes or
// disposal), and what the sidecar sets aside per request stays in code it can read.

export class BoundedMap<K, V> {
  readonly #entries = new Map<K, V>();
  /** The most entries kept. */
  readonly max: number;

  constructor(max: number) {
    if (!Number.isSafeInteger(max) || max < 1) throw new RangeError(`a bounded map holds at least one entry (got ${max})`);
    this.max = max;
  }

  get size(): number {
    return this.#entries.size;
  }

  has(key: K): boolean {
    return this.#entries.has(key);
  }

  /** The value of `key`, its age unchanged: entries leave in the order they were set (first in, first out). */
  get(key: K): V | undefined {
    return this.#entries.get(key);
  }

  /** The value of `key`, which becomes the newest entry: the least recently used leaves first. */
  touch(key: K): V | undefined {
    const value = this.#entries.get(key);
    if (value === undefined) return undefined;
    this.#entries.delete(key);
    this.#entries.set(key, value);
    return value;
  }

  /** Sets `key` as the newest entry (also when it was there), then drops the oldest past the bound. */
  set(key: K, value: V): this {
    this.#entries.delete(key);
    this.#entries.set(key, value);
    if (this.#entries.size > this.max) this.#entries.delete(this.#entries.keys().next().value!);
    return this;
  }

  delete(key: K): boolean {
    return this.#entries.delete(key);
  }

  clear(): void {
    this.#entries.clear();
  }

  /** The keys, oldest first. */
  keys(): MapIterator<K> {
    return this.#entries.keys();
  }
}
