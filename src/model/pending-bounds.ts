// Requests that wait for someone (a browser sign-in between its steps, a device authorization until
// the user decides), bounded per holder: a client address, a client, the whole server. The rule is
// written once here; the store reads what each holder holds and makes the decision atomic.

/** What one holder holds at the moment of the decision. */
export interface HeldRequests<H extends string> {
  holder: H;
  /** Its bound of pending requests; 0: none. */
  bound: number;
  /** Its pending requests not expired. */
  count: number;
  /** The expiry of its oldest pending request (undefined: none). */
  oldest: number | undefined;
}

/**
 * The first holder (in the order given) that holds its bound refuses one more request, until its
 * oldest pending one expires (`now` when none is left to wait for); undefined: every holder has room.
 */
export function boundHeld<H extends string>(held: ReadonlyArray<HeldRequests<H>>, now: number): { holder: H; retryAt: number } | undefined {
  const full = held.find(({ bound, count }) => bound > 0 && count >= bound);
  return full === undefined ? undefined : { holder: full.holder, retryAt: full.oldest ?? now };
}
