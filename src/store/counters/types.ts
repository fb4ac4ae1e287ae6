// Counters shared by every replica: rate counters, quotas, one-time values.

/** Counters shared by every replica (rate limits). */
export interface CounterStorage {
  /**
   * Counts one event in a fixed window shared by every replica: the count so far in the current
   * window and the ms until it ends. The window starts with the first event.
   */
  hitCounter(name: string, windowMs: number): Promise<{ count: number; resetMs: number }>;
}

/** The state of one quota counter after a take (see QuotaStorage). */
export interface QuotaOutcome {
  /** The units asked for were within the limit and are now counted (a read: the next one would be). */
  allowed: boolean;
  /** Units counted in the current window, after this take. */
  used: number;
  /** Epoch ms at which the current window ends and the count starts again at 0. */
  resetAt: number;
}

/** Quota counters shared by every replica (`policy.quotas`). */
export interface QuotaStorage {
  /**
   * Takes `cost` units of the counter `name`, all or nothing, in one atomic step across replicas: they
   * are counted when the window's count plus `cost` stays within `limit`, else nothing is. Windows are
   * fixed and aligned to the epoch: window N is [N * windowMs, (N + 1) * windowMs), N from `now` (the
   * sidecar's clock); a counter already in a later window (a replica whose clock is ahead) stays in it.
   * `cost` 0 reads the counter without counting.
   */
  takeQuota(name: string, cost: number, limit: number, windowMs: number, now: number): Promise<QuotaOutcome>;
}

/** One-time values (a signed assertion's `jti`), shared by every replica. */
export interface OneTimeValueStorage {
  /**
   * Records `name` until `expiresAt` (epoch ms), atomically across replicas: true the first time,
   * false while an earlier record of the same name lives. A name already past its expiry is not kept
   * (true): the caller refuses expired values before asking.
   */
  useOnce(name: string, expiresAt: number): Promise<boolean>;
}
