// What a part both engines share needs of its engine's core: the keyspace port its transitions run on
// and the key layout (RedisCore and MemoryCore both are one). A part written once over this
// (src/store/<aggregate>/part.ts) is the whole aggregate on both engines, or its engine parts
// (memory.ts, redis.ts) extend it with only what is engine-specific.

import type { Keyspace } from './keyspace.ts';
import type { KeyLayout } from './key-layout.ts';

export interface KeyspaceCore {
  /** The keyspace port: on Redis the main connection's, in memory the store's maps. */
  readonly keyspace: Keyspace;
  readonly keys: KeyLayout;
}
