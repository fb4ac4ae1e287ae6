// Session and task handles in memory: CLAIM_HANDLE's steps in the same order.

import type { MemoryCore } from '../memory-core.ts';
import { type Fields, handleFields, handleMember, handleRenewalDue, subjectDigest } from '../records.ts';
import type { HandleBinding, HandleKind, HandleOwner, HandleUse, StoredHandle } from '../types.ts';
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

  async useHandle(
    kind: HandleKind,
    handleHash: string,
    owner: HandleOwner,
    now: number,
    ttlMs: number,
    maxPerOwner: number,
  ): Promise<HandleUse> {
    this.#core.check();
    return this.#claimHandle(false, kind, handleHash, owner, now, ttlMs, maxPerOwner) as HandleUse;
  }

  async bindHandle(
    kind: HandleKind,
    handleHash: string,
    owner: HandleOwner,
    now: number,
    ttlMs: number,
    maxPerOwner: number,
    marks?: { urlElicitation?: boolean },
  ): Promise<HandleBinding> {
    this.#core.check();
    return this.#claimHandle(true, kind, handleHash, owner, now, ttlMs, maxPerOwner, marks?.urlElicitation === true) as HandleBinding;
  }

  /** The Redis script's steps (CLAIM_HANDLE in redis-scripts.ts), in the same order. */
  #claimHandle(
    bind: boolean,
    kind: HandleKind,
    handleHash: string,
    owner: HandleOwner,
    now: number,
    ttlMs: number,
    maxPerOwner: number,
    urlElicitation = false,
  ): HandleUse | HandleBinding {
    const key = this.#core.keys.handle(kind, handleHash);
    const stored = this.#core.get(key);
    let outcome: HandleUse | HandleBinding = 'owned';
    let fields: Fields;
    if (stored) {
      if (stored.owner !== owner.id) return 'foreign';
      fields = stored;
    } else if (bind) {
      outcome = 'bound';
      fields = handleFields(owner);
      if (urlElicitation) fields.urlElicitation = '1';
    } else {
      return 'unknown';
    }
    const ttl = Math.max(1, Math.trunc(ttlMs));
    const max = Math.max(1, Math.trunc(maxPerOwner));
    if (outcome === 'owned' && !handleRenewalDue(fields.renewedAt, now, ttl)) return outcome;
    this.#core.put(key, { ...fields, renewedAt: String(now) }, now + ttl);
    const member = handleMember(kind, handleHash);
    if (owner.clientId !== undefined)
      this.#listHandle(this.#core.keys.handlesByClient(owner.clientId), member, 'clientId', owner.clientId, now, ttl, max);
    if (owner.subjectHash !== undefined)
      this.#listHandle(this.#core.keys.handlesBySubject(owner.subjectHash), member, 'subjectHash', owner.subjectHash, now, ttl, max);
    return outcome;
  }

  /** An owner's index of handles: member -> expiry; expired ones dropped, past `max` the least recently used forgotten. */
  #listHandle(index: string, member: string, field: string, value: string, now: number, ttl: number, max: number): void {
    let listed = this.#core.handleIndexes.get(index);
    if (!listed) this.#core.handleIndexes.set(index, (listed = new Map()));
    for (const [m, expiresAt] of listed) if (expiresAt <= now) listed.delete(m);
    if (!listed.has(member)) {
      const oldest = [...listed].sort((a, b) => a[1] - b[1] || (a[0] < b[0] ? -1 : 1));
      for (const [m] of oldest.slice(0, Math.max(0, listed.size - max + 1))) {
        listed.delete(m);
        const key = this.#core.keys.handlePrefix() + m;
        if (this.#core.get(key)?.[field] === value) this.#core.hashes.delete(key);
      }
    }
    listed.set(member, now + ttl);
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
    return this.#core.forgetIndexed(this.#core.keys.handlesBySubject(subjectHash), 'subjectHash', subjectHash);
  }
}
