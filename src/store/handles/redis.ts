// Session and task handles on Redis: a plain read on the lookups' connection; every other operation is
// the part both engines share (./part.ts), on the main connection's keyspace.

import type { RedisCore } from '../redis-core.ts';
import type { HandleKind, StoredHandle } from '../types.ts';
import { KeyspaceHandles } from './part.ts';
import { storedHandleOf } from './records.ts';

export class RedisHandles extends KeyspaceHandles<RedisCore> {
  async readHandle(kind: HandleKind, handleHash: string): Promise<StoredHandle | null> {
    // Read beside the token lookup, on its connection: the two leave in one write.
    const key = this.core.keys.handle(kind, handleHash);
    const [owner, renewedAt, urlElicitation] = await this.core.lookups.read((client) =>
      client.hmget(key, 'owner', 'renewedAt', 'urlElicitation'),
    );
    return storedHandleOf(owner, renewedAt, urlElicitation);
  }
}
