// Session and task handles, the part both engines share: every operation but the plain read is a
// transition (./transitions.ts) on the core's keyspace. The read is each engine's own (memory.ts,
// redis.ts: on Redis it goes beside the token lookup, on that connection).

import type { KeyspaceCore } from '../keyspace-core.ts';
import { subjectDigest } from '../records.ts';
import type { HandleBinding, HandleKind, HandleOwner, HandleUse, StoredHandle } from '../types.ts';
import { claimHandle, forgetHandle, forgetIndexedHandles } from './transitions.ts';
import type { HandleStorage } from './types.ts';

export abstract class KeyspaceHandles<Core extends KeyspaceCore = KeyspaceCore> implements HandleStorage {
  /** The engine's core (its own part reads what only that engine has from it). */
  protected readonly core: Core;

  constructor(core: Core) {
    this.core = core;
  }

  abstract readHandle(kind: HandleKind, handleHash: string): Promise<StoredHandle | null>;

  /** claimHandle: one plain read (HMGET) when no renewal is due, else a plan guarded by what it read. */
  useHandle(kind: HandleKind, handleHash: string, owner: HandleOwner, now: number, ttlMs: number, maxPerOwner: number): Promise<HandleUse> {
    const claim = { bind: false, kind, handleHash, owner, now, ttlMs, maxPerOwner };
    return claimHandle(this.core.keyspace, this.core.keys, claim) as Promise<HandleUse>;
  }

  bindHandle(
    kind: HandleKind,
    handleHash: string,
    owner: HandleOwner,
    now: number,
    ttlMs: number,
    maxPerOwner: number,
    marks?: { urlElicitation?: boolean },
  ): Promise<HandleBinding> {
    const claim = { bind: true, kind, handleHash, owner, now, ttlMs, maxPerOwner, urlElicitation: marks?.urlElicitation === true };
    return claimHandle(this.core.keyspace, this.core.keys, claim) as Promise<HandleBinding>;
  }

  forgetHandle(kind: HandleKind, handleHash: string): Promise<boolean> {
    return forgetHandle(this.core.keyspace, this.core.keys, kind, handleHash);
  }

  async forgetSubjectHandles(subject: string): Promise<number> {
    const subjectHash = subjectDigest(subject);
    const { keyspace, keys } = this.core;
    return forgetIndexedHandles(keyspace, keys, keys.handlesBySubject(subjectHash), 'subjectHash', subjectHash);
  }
}
