// What a part both engines share needs of its engine's core (RedisCore and MemoryCore both are one):
// the keyspace port its transitions run on, the key layout, and the few steps each engine takes its
// own way (a revocation WAITed for, what follows it, Cluster's slot check). A part written once over this
// (src/store/<aggregate>/part.ts) is extended by its engine parts (memory.ts, redis.ts) with only
// what is engine-specific.

import type { Keyspace } from './keyspace.ts';
import type { Fields, HashUpdate } from './records.ts';
import type { TokenKeys } from './tokens/transitions.ts';
import type { RevocationNotice } from './types.ts';

export interface KeyspaceCore extends TokenKeys {
  /** The keyspace port: on Redis the main connection's, in memory the store's maps. */
  readonly keyspace: Keyspace;
  /**
   * Whether a presented refresh token or code cannot be used with this client in one step: on Redis
   * Cluster one outside its client's bucket (RedisCore.outsideClientSlot); never in memory.
   */
  outsideClientSlot(hash: string, key: string, clientId: string): Promise<boolean>;
  /**
   * A compare-and-set on one hash (updateHash in keyspace.ts): in memory the read, the decision and the
   * write in one step; on Redis a read, then a plan guarded by it, retried when it changed.
   */
  updateHash<R>(key: string, decide: (current: Fields | null) => HashUpdate<R>, via?: Keyspace): R | Promise<R>;
  /**
   * A revocation written through the keyspace handed to `write` (for updateHash, its `via`): on Redis
   * with replicas on the transaction connection, then WAITed for (RedisCore.revokeThrough); in memory
   * on its one keyspace.
   */
  revokeThrough<T>(write: (keyspace: Keyspace) => Promise<T>): Promise<T>;
  /**
   * What follows every revocation: the approvals of its grants (`grantIds`, by default every grant it
   * names) forgotten, then every sidecar told.
   */
  publish(notice: RevocationNotice, grantIds?: string[]): Promise<void>;
  /**
   * Every key matching `pattern` (a SCAN MATCH glob), about `count` at a time, each non-empty batch
   * handed to `each` (a key may come twice): on Redis SCAN on every master (a connection that is not
   * ready is an outage, never an empty database), in memory the store's keys.
   */
  scanKeys(pattern: string, count: number, each: (keys: string[]) => Promise<void>): Promise<void>;
}
