// Session and task handles in memory: the plain read on the store's maps; every other operation is
// the part both engines share (./part.ts), on the memory keyspace.

import type { MemoryCore } from '../memory-core.ts';
import type { HandleKind, StoredHandle } from '../types.ts';
import { KeyspaceHandles } from './part.ts';
import { storedHandleOf } from './records.ts';

export class MemoryHandles extends KeyspaceHandles<MemoryCore> {
  async readHandle(kind: HandleKind, handleHash: string): Promise<StoredHandle | null> {
    this.core.check();
    const fields = this.core.get(this.core.keys.handle(kind, handleHash));
    return storedHandleOf(fields?.owner, fields?.renewedAt, fields?.urlElicitation);
  }
}
