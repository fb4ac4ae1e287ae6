// Ends SSE streams that are already open when their token stops being valid: revoked through any
// replica (a store notice, within moments), revoked by hand in Redis (a batch re-check of every open
// stream's token every `recheckMs`), or expired (a deadline per stream at the token's expiresAt).

import type { ServerResponse } from 'node:http';
import type { Clock } from '../model/clock.ts';
import { decideToken } from '../model/credentials.ts';
import type { Logger } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import type { RevocationNotice, RevocationNotices, TokenStorage } from '../store/types.ts';
import type { ProxyRequest } from './request.ts';

export type StreamEndReason = NonNullable<ProxyRequest['endedBy']>;

export interface StreamRevocationOptions {
  store: TokenStorage & RevocationNotices;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  /** How often every open stream's token is looked up again (catches edits made outside the sidecar). */
  recheckMs: number;
  /** Ends one stream cleanly (the response ends, the upstream request is torn down). */
  endStream(res: ServerResponse): void;
}

interface Tracked {
  req: ProxyRequest;
  res: ServerResponse;
  tokenHash: string;
  clientId: string | undefined;
  familyId: string | undefined;
  cancelExpiry: () => void;
}

/** Lookups of one re-check sent together: Redis answers them pipelined on one connection. */
const RECHECK_BATCH = 256;
/** A re-check with failed lookups (the store reconnecting) is tried again this soon, not a whole period later. */
const RETRY_MS = 1000;

export class StreamRevocation {
  readonly #options: StreamRevocationOptions;
  readonly #streams = new Map<ServerResponse, Tracked>();
  readonly #byToken = new Map<string, Set<Tracked>>();
  readonly #byClient = new Map<string, Set<Tracked>>();
  readonly #byFamily = new Map<string, Set<Tracked>>();
  /**
   * What was revoked in this and the previous re-check period: a stream whose upstream answered only
   * after its token's notice went by is ended as it opens, not up to a period later.
   */
  #recent = new Set<string>();
  #previous = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  #retry: NodeJS.Timeout | undefined;
  #stopped = false;
  #unsubscribe: (() => Promise<void>) | undefined;
  #rechecking: Promise<void> | undefined;
  #recheckAgain = false;

  constructor(options: StreamRevocationOptions) {
    this.#options = options;
  }

  /** Subscribes to the store's revocation notices and starts the periodic re-check. */
  async start(): Promise<void> {
    this.#unsubscribe = await this.#options.store.subscribeRevocations({
      revoked: (notice) => this.#revoked(notice),
      // Notices may have been lost while the subscription was down: look at every open stream now.
      missed: () => {
        this.#options.logger.info(
          { openStreams: this.#streams.size },
          'revocation notices may have been missed: re-checking every open stream',
        );
        void this.recheck();
      },
    });
    this.#timer = setInterval(() => {
      this.#previous = this.#recent;
      this.#recent = new Set();
      if (this.#streams.size > 0) void this.recheck();
    }, this.#options.recheckMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    clearTimeout(this.#retry);
    this.#timer = undefined;
    const unsubscribe = this.#unsubscribe;
    this.#unsubscribe = undefined;
    await unsubscribe?.();
    await this.#rechecking;
    for (const t of [...this.#streams.values()]) this.#untrack(t);
  }

  /** Open streams being watched (the master token's are not: it is never revoked or expired). */
  get size(): number {
    return this.#streams.size;
  }

  /** Watches a stream that just opened for the request's authenticated principal. O(1); no store call. */
  track(req: ProxyRequest, res: ServerResponse): void {
    const principal = req.principal;
    const tokenHash = principal?.tokenHash;
    if (principal === undefined || tokenHash === undefined || res.destroyed || this.#streams.has(res)) return;
    const t: Tracked = { req, res, tokenHash, clientId: principal.clientId, familyId: principal.familyId, cancelExpiry: noop };
    if (this.#wasRevoked(t)) {
      this.#end(t, 'revoked');
      return;
    }
    this.#streams.set(res, t);
    add(this.#byToken, tokenHash, t);
    if (t.clientId !== undefined) add(this.#byClient, t.clientId, t);
    if (t.familyId !== undefined) add(this.#byFamily, t.familyId, t);
    if (principal.expiresAt !== undefined) t.cancelExpiry = this.#options.clock.at(principal.expiresAt, () => this.#end(t, 'expired'));
    res.once('close', () => this.#untrack(t));
  }

  /**
   * Looks up every open stream's token again, in batches (one lookup per distinct token), and ends
   * the streams whose token no longer authorizes. A lookup that fails keeps its streams open until
   * it is retried (within a second): while the store is down nothing can be revoked through it either,
   * and ending every stream on a blip would only send all clients back to a sidecar that answers 503.
   */
  recheck(): Promise<void> {
    if (this.#rechecking) {
      this.#recheckAgain = true;
      return this.#rechecking;
    }
    this.#rechecking = this.#recheck().finally(() => {
      this.#rechecking = undefined;
      if (this.#recheckAgain) {
        this.#recheckAgain = false;
        void this.recheck();
      }
    });
    return this.#rechecking;
  }

  async #recheck(): Promise<void> {
    const { store, clock, logger } = this.#options;
    const hashes = [...this.#byToken.keys()];
    let failed = 0;
    for (let i = 0; i < hashes.length; i += RECHECK_BATCH) {
      const batch = hashes.slice(i, i + RECHECK_BATCH);
      const found = await Promise.allSettled(batch.map((h) => store.lookupToken(h)));
      const now = clock.now();
      found.forEach((result, j) => {
        const tokenHash = batch[j]!;
        if (result.status === 'rejected') {
          failed++;
          return;
        }
        const decision = decideToken(tokenHash, result.value, now);
        if (decision.ok) return;
        this.#endAll(this.#byToken.get(tokenHash), decision.reason === 'expired' ? 'expired' : 'revoked');
      });
    }
    if (failed > 0 && !this.#stopped) {
      logger.warn(
        { failed, tokens: hashes.length },
        'open-stream re-check: some lookups failed; those streams stay open and are re-checked shortly',
      );
      clearTimeout(this.#retry);
      this.#retry = setTimeout(() => void this.recheck(), Math.min(RETRY_MS, this.#options.recheckMs));
      this.#retry.unref();
    }
  }

  #revoked(notice: RevocationNotice): void {
    for (const h of notice.tokenHashes ?? []) {
      this.#recent.add(`t:${h}`);
      this.#endAll(this.#byToken.get(h), 'revoked');
    }
    for (const c of notice.clientIds ?? []) {
      this.#recent.add(`c:${c}`);
      this.#endAll(this.#byClient.get(c), 'revoked');
    }
    for (const f of notice.familyIds ?? []) {
      this.#recent.add(`f:${f}`);
      this.#endAll(this.#byFamily.get(f), 'revoked');
    }
  }

  #wasRevoked(t: Tracked): boolean {
    const seen = (key: string) => this.#recent.has(key) || this.#previous.has(key);
    return (
      seen(`t:${t.tokenHash}`) ||
      (t.clientId !== undefined && seen(`c:${t.clientId}`)) ||
      (t.familyId !== undefined && seen(`f:${t.familyId}`))
    );
  }

  #endAll(set: Set<Tracked> | undefined, reason: StreamEndReason): void {
    if (set === undefined) return;
    for (const t of [...set]) this.#end(t, reason);
  }

  #end(t: Tracked, reason: StreamEndReason): void {
    this.#untrack(t);
    const { req, res } = t;
    if (req.endedBy !== undefined || res.writableEnded || res.destroyed) return;
    req.endedBy = reason;
    this.#options.metrics.streamEnded(reason);
    this.#options.endStream(res);
  }

  #untrack(t: Tracked): void {
    if (this.#streams.get(t.res) !== t) return;
    this.#streams.delete(t.res);
    t.cancelExpiry();
    remove(this.#byToken, t.tokenHash, t);
    if (t.clientId !== undefined) remove(this.#byClient, t.clientId, t);
    if (t.familyId !== undefined) remove(this.#byFamily, t.familyId, t);
  }
}

function noop(): void {}

function add(index: Map<string, Set<Tracked>>, key: string, t: Tracked): void {
  const set = index.get(key);
  if (set) set.add(t);
  else index.set(key, new Set([t]));
}

function remove(index: Map<string, Set<Tracked>>, key: string, t: Tracked): void {
  const set = index.get(key);
  if (!set) return;
  set.delete(t);
  if (set.size === 0) index.delete(key);
}
