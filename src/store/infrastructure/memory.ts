// The audit streams, revocation notices (in process), the caller assertions' public keys and health, in memory.

import type { MemoryCore } from '../memory-core.ts';
import { auditFields, auditFromFields, type Fields, listedSigningKeys, newestAuditFirst, signingKeyPublication } from '../records.ts';
import type { AuditEvent, AuditTrail, PublishedSigningKey, RevocationListener, StoredAuditEvent } from '../types.ts';
import type { AuditStorage, RevocationNotices, SigningKeyStorage, StoreHealth } from './types.ts';

export class MemoryInfrastructure implements AuditStorage, RevocationNotices, SigningKeyStorage, StoreHealth {
  readonly #core: MemoryCore;

  constructor(core: MemoryCore) {
    this.#core = core;
  }

  /** The audit streams, one per trail: ids `<ms>-<seq>` increasing like Redis stream ids, each capped exactly at maxLen. */
  readonly #audit: Record<AuditTrail, Array<{ id: string; fields: Fields }>> = { admin: [], requests: [] };

  #lastAuditId: [number, number] = [0, 0];

  async appendAudit(event: AuditEvent, maxLen: number, trail: AuditTrail = 'requests'): Promise<string> {
    this.#core.check();
    const ms = Math.max(this.#core.clock.now(), this.#lastAuditId[0]);
    const seq = ms === this.#lastAuditId[0] ? this.#lastAuditId[1] + 1 : 0;
    this.#lastAuditId = [ms, seq];
    const id = `${ms}-${seq}`;
    const stream = this.#audit[trail];
    stream.push({ id, fields: auditFields(event) });
    if (stream.length > maxLen) stream.splice(0, stream.length - maxLen);
    return id;
  }

  async listAuditEvents(count: number): Promise<StoredAuditEvent[]> {
    this.#core.check();
    if (count <= 0) return [];
    return [...this.#audit.admin.slice(-count), ...this.#audit.requests.slice(-count)]
      .map((e) => auditFromFields(e.id, e.fields))
      .sort(newestAuditFirst)
      .slice(0, count);
  }

  async subscribeRevocations(listener: RevocationListener): Promise<() => Promise<void>> {
    this.#core.check();
    this.#core.listeners.add(listener);
    return async () => {
      this.#core.listeners.delete(listener);
    };
  }

  async publishSigningKey(key: PublishedSigningKey, now: number): Promise<void> {
    this.#core.check();
    this.#core.updateHash(this.#core.keys.signingKeys(), signingKeyPublication(key, now));
  }

  async listSigningKeys(now: number): Promise<PublishedSigningKey[]> {
    this.#core.check();
    return listedSigningKeys(this.#core.get(this.#core.keys.signingKeys()) ?? {}, now);
  }

  async ping(): Promise<void> {
    this.#core.check();
  }
}
