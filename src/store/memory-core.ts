// What every memory part of the store shares (src/store/<aggregate>/memory.ts): the records under the
// same keys and fields as Redis, with TTLs honoured against the injected clock, and the steps several
// aggregates take together (a subject's index, a notice sent). Transitions written once on the keyspace
// port (src/store/keyspace.ts) run on these maps through `keyspace`; as a KeyspaceCore
// (keyspace-core.ts), this is what the parts both engines share (<aggregate>/part.ts) run on in memory.
// JavaScript runs each operation to completion between awaits, which gives the same atomicity the
// Redis store gets from MULTI/EXEC and Lua.

import type { Clock } from '../model/clock.ts';
import { hashUpdatePlan, INTEGER_TEXT, type Keyspace } from './keyspace.ts';
import type { KeyspaceCore } from './keyspace-core.ts';
import { MemoryKeyspace, type KeyspaceMaps } from './memory-keyspace.ts';
import { StoreUnavailableError } from './shared.ts';
import {
  consentGrantIds,
  globMatcher,
  keyLayout,
  subjectDigest,
  type Fields,
  type HashUpdate,
  type KeyLayout,
  writesHash,
} from './records.ts';
import type { RevocationListener, RevocationNotice } from './types.ts';

/** The fewest writes between two sweeps of expired records. */
const SWEEP_AFTER_WRITES = 1024;

interface Entry {
  fields: Fields;
  expiresAt: number | undefined;
}

export class MemoryCore implements KeyspaceMaps, KeyspaceCore {
  readonly hashes = new Map<string, Entry>();
  readonly sets = new Map<string, Set<string>>();
  /** Sorted sets (handle indexes, subject indexes, holders of pending requests): member -> score. */
  readonly sortedSets = new Map<string, Map<string, number>>();
  /** Counters (INCR): key -> value. */
  readonly strings = new Map<string, string>();
  /** Expiries of the keys that are not hashes (a hash's lives in its entry), epoch ms. */
  readonly expiries = new Map<string, number>();
  readonly keys: KeyLayout;
  readonly clock: Clock;
  /** The keyspace port on these maps: transitions written once run here as on Redis. */
  readonly keyspace: MemoryKeyspace = new MemoryKeyspace(this);
  /** In-process notices: every sidecar sharing this store object hears every revocation. */
  readonly listeners = new Set<RevocationListener>();
  #closed = false;
  #writesSinceSweep = 0;

  constructor(options: { clock: Clock; keyPrefix?: string }) {
    this.clock = options.clock;
    this.keys = keyLayout(options.keyPrefix ?? 'mcpauth:');
  }

  close(): void {
    this.#closed = true;
  }

  check(): void {
    if (this.#closed) throw new StoreUnavailableError('store is closed');
  }

  get(key: string): Fields | null {
    const entry = this.hashes.get(key);
    if (!entry) return null;
    if (entry.expiresAt !== undefined && entry.expiresAt <= this.clock.now()) {
      this.hashes.delete(key);
      return null;
    }
    return entry.fields;
  }

  put(key: string, fields: Fields, expiresAt?: number): void {
    this.hashes.set(key, { fields: { ...fields }, expiresAt });
    this.#wrote();
  }

  /**
   * Records issued and never read again would otherwise stay until the process ends: every so many
   * writes (at least half the keys held, so a sweep costs O(1) a write over time) the expired ones
   * are dropped, as Redis drops them.
   */
  #wrote(): void {
    if (++this.#writesSinceSweep >= Math.max(SWEEP_AFTER_WRITES, (this.hashes.size + this.expiries.size) >> 1)) this.#sweep();
  }

  #sweep(): void {
    this.#writesSinceSweep = 0;
    const now = this.clock.now();
    for (const [key, entry] of this.hashes) if (entry.expiresAt !== undefined && entry.expiresAt <= now) this.hashes.delete(key);
    for (const [key, at] of this.expiries) if (at <= now) this.deleteKey(key);
  }

  /**
   * A compare-and-set on one hash (updateHash in keyspace.ts), at once: the read, the decision and the
   * plan's write are one step here (nothing runs in between), so the guards hold by construction.
   * A closed store refuses it, as it refuses every other operation. `via` is Redis's (a revocation's
   * keyspace, revokeThrough's): in memory there is one keyspace.
   */
  updateHash<R>(key: string, decide: (current: Fields | null) => HashUpdate<R>, _via?: Keyspace): R {
    this.check();
    const current = this.get(key);
    const update = decide(current && { ...current });
    if (writesHash(update)) this.keyspace.applyNow(hashUpdatePlan(key, current, update));
    return update.result;
  }

  /** A key that is not a hash, once past its expiry, dropped (as Redis drops it). */
  #expired(key: string): boolean {
    const at = this.expiries.get(key);
    if (at === undefined || at > this.clock.now()) return false;
    this.deleteKey(key);
    return true;
  }

  liveSet(key: string): Set<string> | undefined {
    return this.#expired(key) ? undefined : this.sets.get(key);
  }

  liveSortedSet(key: string): Map<string, number> | undefined {
    return this.#expired(key) ? undefined : this.sortedSets.get(key);
  }

  liveString(key: string): string | undefined {
    return this.#expired(key) ? undefined : this.strings.get(key);
  }

  /** SET: `key` holds `value` from now on, whatever it held, gone at `expiresAt` (epoch ms; none: kept). */
  putString(key: string, value: string, expiresAt?: number): void {
    this.deleteKey(key);
    this.strings.set(key, value);
    if (expiresAt !== undefined) this.expiries.set(key, expiresAt);
    this.#wrote();
  }

  /** The sorted set at `key`, created empty when absent. */
  sortedSet(key: string): Map<string, number> {
    let scores = this.liveSortedSet(key);
    if (!scores) this.sortedSets.set(key, (scores = new Map()));
    return scores;
  }

  /** A new empty hash at `key`, without expiry: its fields to fill. */
  createHash(key: string): Fields {
    const fields: Fields = {};
    this.put(key, fields);
    // put copies the fields: hand back the stored object.
    return this.hashes.get(key)!.fields;
  }

  /** Deletes whatever `key` holds; whether it held anything. */
  deleteKey(key: string): boolean {
    const held = this.get(key) !== null || this.sets.has(key) || this.sortedSets.has(key) || this.strings.has(key);
    this.hashes.delete(key);
    this.sets.delete(key);
    this.sortedSets.delete(key);
    this.strings.delete(key);
    this.expiries.delete(key);
    return held;
  }

  /** A key's expiry: null when the key is absent, undefined when it has none. */
  expiryOf(key: string): number | null | undefined {
    const entry = this.get(key) === null ? undefined : this.hashes.get(key);
    if (entry) return entry.expiresAt;
    if (this.liveSet(key) === undefined && this.liveSortedSet(key) === undefined && this.liveString(key) === undefined) return null;
    return this.expiries.get(key);
  }

  /**
   * PEXPIREAT: sets a key's expiry (NX: only when it has none; GT: only later than the one it has,
   * none counting as never). A time already past deletes the key. Whether it was set.
   */
  expireAt(key: string, at: number, mode?: 'NX' | 'GT'): boolean {
    const current = this.expiryOf(key);
    if (current === null) return false;
    if (mode === 'NX' && current !== undefined) return false;
    if (mode === 'GT' && (current === undefined || at <= current)) return false;
    if (at <= this.clock.now()) return this.deleteKey(key);
    const entry = this.hashes.get(key);
    if (entry) entry.expiresAt = at;
    else this.expiries.set(key, at);
    return true;
  }

  /** INCR: the counter at `key` plus one (from 0 when absent), keeping its expiry. */
  increment(key: string): number {
    const held = this.liveString(key) ?? '0';
    if (!INTEGER_TEXT.test(held)) throw new Error('ERR value is not an integer or out of range');
    const value = Number(held) + 1;
    this.strings.set(key, String(value));
    this.#wrote();
    return value;
  }

  /** Records held now, expired ones not yet swept included (for tests of the sweep). */
  get recordCount(): number {
    return this.hashes.size;
  }

  set(key: string): Set<string> {
    let set = this.liveSet(key);
    if (!set) {
      set = new Set();
      this.sets.set(key, set);
    }
    return set;
  }

  /**
   * A subject's index key (by the SHA-256 of the subject), as on Redis: its home index (user-grade
   * tokens, approvals), or, given a bucket, the index of that bucket's access and refresh tokens.
   */
  subjectIndex(subject: string, bucket?: string): string {
    return this.keys.subjectGrants(subjectDigest(subject), bucket);
  }

  /** The keys held now that match a SCAN glob, `count` at a time (expired ones are not handed out). */
  async scanKeys(pattern: string, count: number, each: (keys: string[]) => Promise<void>): Promise<void> {
    this.check();
    const matches = globMatcher(pattern);
    const all = [...new Set([...this.hashes.keys(), ...this.sets.keys(), ...this.sortedSets.keys(), ...this.strings.keys()])];
    const live = all.filter((key) => matches(key) && this.expiryOf(key) !== null);
    for (let i = 0; i < live.length; i += Math.max(1, count)) await each(live.slice(i, i + Math.max(1, count)));
  }

  /** No slots in memory: every code and refresh token can be used in one step. */
  async outsideClientSlot(_hash: string, _key: string, _clientId: string): Promise<boolean> {
    return false;
  }

  /** notify, for a part shared with Redis (where telling the sidecars is awaited). */
  async publish(notice: RevocationNotice, grantIds: string[] = consentGrantIds(notice)): Promise<void> {
    this.notify(notice, grantIds);
  }

  /** A revocation done in memory: nothing to wait for (one process). */
  revokeThrough<T>(write: (keyspace: Keyspace) => Promise<T>): Promise<T> {
    return write(this.keyspace);
  }

  notify(notice: RevocationNotice, grantIds: string[] = consentGrantIds(notice)): void {
    this.#forgetConsents(grantIds);
    // After the method returns, as a notice over Redis arrives: the revoking caller never runs a listener.
    for (const listener of this.listeners) queueMicrotask(() => listener.revoked(notice));
  }

  /** Every revocation of a grant linked to an approval forgets the approval (and the link). */
  #forgetConsents(grantIds: string[]): void {
    for (const grantId of grantIds) {
      const link = this.get(this.keys.consentGrant(grantId));
      if (!link) continue;
      this.hashes.delete(this.keys.consentGrant(grantId));
      const approvals = link.browser !== undefined && link.consent !== undefined ? this.get(this.keys.consents(link.browser)) : null;
      if (approvals) delete approvals[link.consent!];
    }
  }
}
