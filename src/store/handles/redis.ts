// Session and task handles on Redis: a plain read on the lookups' connection; every other operation
// is a transition (src/store/handles/transitions.ts) on the main connection.

import { subjectDigest } from '../records.ts';
import type { RedisCore } from '../redis-core.ts';
import type { HandleBinding, HandleKind, HandleOwner, HandleUse, StoredHandle } from '../types.ts';
import { claimHandle, forgetHandle, forgetIndexedHandles } from './transitions.ts';
import type { HandleStorage } from './types.ts';

export class RedisHandles implements HandleStorage {
  readonly #core: RedisCore;

  constructor(core: RedisCore) {
    this.#core = core;
  }

  async readHandle(kind: HandleKind, handleHash: string): Promise<StoredHandle | null> {
    // Read beside the token lookup, on its connection: the two leave in one write.
    const key = this.#core.keys.handle(kind, handleHash);
    const [owner, renewedAt, urlElicitation] = await this.#core.lookups.read((client) =>
      client.hmget(key, 'owner', 'renewedAt', 'urlElicitation'),
    );
    if (owner === null || owner === undefined) return null;
    const stored: StoredHandle = { owner };
    if (renewedAt !== null && renewedAt !== undefined) stored.renewedAt = renewedAt;
    if (urlElicitation === '1') stored.urlElicitation = true;
    return stored;
  }

  /** claimHandle: one plain read (HMGET) when no renewal is due, else a plan guarded by what it read. */
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
