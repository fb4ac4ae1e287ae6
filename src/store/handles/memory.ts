// Session and task handles in memory: every operation but the plain read is a transition
// (src/store/handles/transitions.ts) on the memory keyspace, as on Redis.

import type { MemoryCore } from '../memory-core.ts';
import { subjectDigest } from '../records.ts';
import type { HandleBinding, HandleKind, HandleOwner, HandleUse, StoredHandle } from '../types.ts';
import { claimHandle, forgetHandle, forgetIndexedHandles } from './transitions.ts';
import type { HandleStorage } from './types.ts';

export class MemoryHandles implements HandleStorage {
  readonly #core: MemoryCore;

  constructor(core: MemoryCore) {
    this.#core = core;
  }

  async readHandle(kind: HandleKind, handleHash: string): Promise<StoredHandle | null> {
    this.#core.check();
    const fields = this.#core.get(this.#core.keys.handle(kind, handleHash));
    if (!fields?.owner) return null;
    const stored: StoredHandle = { owner: fields.owner };
    if (fields.renewedAt !== undefined) stored.renewedAt = fields.renewedAt;
    if (fields.urlElicitation === '1') stored.urlElicitation = true;
    return stored;
  }

  useHandle(kind: HandleKind, handleHash: string, owner: HandleOwner, now: number, ttlMs: number, maxPerOwner: number): Promise<HandleUse> {
    const claim = { bind: false, kind, handleHash, owner, now, ttlMs, maxPerOwner };
    return claimHandle(this.#core.keyspace, this.#core.keys, claim) as Promise<HandleUse>;
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
    return claimHandle(this.#core.keyspace, this.#core.keys, claim) as Promise<HandleBinding>;
  }

  forgetHandle(kind: HandleKind, handleHash: string): Promise<boolean> {
    return forgetHandle(this.#core.keyspace, this.#core.keys, kind, handleHash);
  }

  async forgetSubjectHandles(subject: string): Promise<number> {
    this.#core.check();
    const subjectHash = subjectDigest(subject);
    return forgetIndexedHandles(
      this.#core.keyspace,
      this.#core.keys,
      this.#core.keys.handlesBySubject(subjectHash),
      'subjectHash',
      subjectHash,
    );
  }
}
