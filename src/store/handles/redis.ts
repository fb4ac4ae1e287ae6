// Session and task handles on Redis: a plain read on the lookups' connection, CLAIM_HANDLE when a
// use is due a renewal or a handle is bound.

import { handleMember, handleRenewalDue, subjectDigest } from '../records.ts';
import { assertExec, type RedisCore } from '../redis-core.ts';
import type { HandleBinding, HandleKind, HandleOwner, HandleUse, StoredHandle } from '../types.ts';
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

  /**
   * The common case is one plain read (HMGET: cheaper for Redis than a script); the script runs only
   * when the owner's use is due a renewal (handleRenewalDue), and decides again atomically.
   */
  async useHandle(
    kind: HandleKind,
    handleHash: string,
    owner: HandleOwner,
    now: number,
    ttlMs: number,
    maxPerOwner: number,
  ): Promise<HandleUse> {
    const [stored, renewedAt] = await this.#core.redis.hmget(this.#core.keys.handle(kind, handleHash), 'owner', 'renewedAt');
    if (stored === null) return 'unknown';
    if (stored !== owner.id) return 'foreign';
    if (!handleRenewalDue(renewedAt, now, ttlMs)) return 'owned';
    return this.#claimHandle('use', kind, handleHash, owner, now, ttlMs, maxPerOwner) as Promise<HandleUse>;
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
    return this.#claimHandle(
      'bind',
      kind,
      handleHash,
      owner,
      now,
      ttlMs,
      maxPerOwner,
      marks?.urlElicitation === true,
    ) as Promise<HandleBinding>;
  }

  async #claimHandle(
    mode: 'use' | 'bind',
    kind: HandleKind,
    handleHash: string,
    owner: HandleOwner,
    now: number,
    ttlMs: number,
    maxPerOwner: number,
    urlElicitation = false,
  ): Promise<HandleUse | HandleBinding> {
    const outcome = await this.#core.scripts.mcpClaimHandle(
      this.#core.keys.handle(kind, handleHash),
      this.#core.keys.handlesByClient(owner.clientId ?? ''),
      this.#core.keys.handlesBySubject(owner.subjectHash ?? ''),
      mode,
      owner.id,
      owner.clientId ?? '',
      owner.subjectHash ?? '',
      String(now),
      String(Math.max(1, Math.trunc(ttlMs))),
      String(Math.max(1, Math.trunc(maxPerOwner))),
      handleMember(kind, handleHash),
      this.#core.keys.handlePrefix(),
      urlElicitation ? '1' : '',
    );
    if (
      outcome === 'owned' ||
      outcome === 'foreign' ||
      (mode === 'use' && outcome === 'unknown') ||
      (mode === 'bind' && outcome === 'bound')
    )
      return outcome;
    throw new TypeError(`unexpected script reply: ${String(outcome)}`);
  }

  async forgetHandle(kind: HandleKind, handleHash: string): Promise<boolean> {
    // Its owner's index entries, then the handle, in one MULTI (all under {oauth}).
    const key = this.#core.keys.handle(kind, handleHash);
    const member = handleMember(kind, handleHash);
    const [clientId, subjectHash] = await this.#core.redis.hmget(key, 'clientId', 'subjectHash');
    const multi = this.#core.redis.multi();
    if (clientId != null) multi.zrem(this.#core.keys.handlesByClient(clientId), member);
    if (subjectHash != null) multi.zrem(this.#core.keys.handlesBySubject(subjectHash), member);
    const done = await multi.del(key).exec();
    assertExec(done);
    return done!.at(-1)![1] === 1;
  }

  async forgetSubjectHandles(subject: string): Promise<number> {
    const subjectHash = subjectDigest(subject);
    return this.#core.forgetIndexedHandles(this.#core.keys.handlesBySubject(subjectHash), 'subjectHash', subjectHash);
  }
}
