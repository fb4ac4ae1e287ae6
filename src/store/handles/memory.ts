// Session and task handles in memory: a use or a bind is the transition claimHandle
// (src/store/handles/transitions.ts) on the memory keyspace, as on Redis.

import type { MemoryCore } from '../memory-core.ts';
import { handleMember, subjectDigest } from '../records.ts';
import type { HandleBinding, HandleKind, HandleOwner, HandleUse, StoredHandle } from '../types.ts';
import { claimHandle, forgetIndexedHandles } from './transitions.ts';
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

  async forgetHandle(kind: HandleKind, handleHash: string): Promise<boolean> {
    this.#core.check();
    const key = this.#core.keys.handle(kind, handleHash);
    const fields = this.#core.get(key);
    if (!fields) return false;
    const member = handleMember(kind, handleHash);
    if (fields.clientId !== undefined) this.#core.handleIndexes.get(this.#core.keys.handlesByClient(fields.clientId))?.delete(member);
    if (fields.subjectHash !== undefined)
      this.#core.handleIndexes.get(this.#core.keys.handlesBySubject(fields.subjectHash))?.delete(member);
    this.#core.hashes.delete(key);
    return true;
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
