// The audit streams, revocation notices, the caller assertions' public keys and health, on Redis.

import { StoreUnavailableError } from '../shared.ts';
import { auditFields, auditFromFields, type Fields, listedSigningKeys, newestAuditFirst, signingKeyPublication } from '../records.ts';
import type { RedisCore } from '../redis-core.ts';
import { subscribeNotices } from '../redis-notices.ts';
import { fieldArgs } from '../keyspace.ts';
import type { AuditEvent, AuditTrail, PublishedSigningKey, RevocationListener, StoredAuditEvent } from '../types.ts';
import type { AuditStorage, RevocationNotices, SigningKeyStorage, StoreHealth } from './types.ts';

export class RedisInfrastructure implements AuditStorage, RevocationNotices, SigningKeyStorage, StoreHealth {
  readonly #core: RedisCore;

  constructor(core: RedisCore) {
    this.#core = core;
  }

  async appendAudit(event: AuditEvent, maxLen: number, trail: AuditTrail = 'requests'): Promise<string> {
    const stream = trail === 'admin' ? this.#core.keys.adminAuditStream() : this.#core.keys.auditStream();
    const id = await this.#core.redis.xadd(stream, 'MAXLEN', '~', String(maxLen), '*', ...fieldArgs(auditFields(event)));
    if (id === null) throw new TypeError('XADD returned no id');
    return id;
  }

  async listAuditEvents(count: number): Promise<StoredAuditEvent[]> {
    if (count <= 0) return [];
    // Two keys, two commands (they may live in different Cluster slots), merged by time.
    const [admin, requests] = await Promise.all([
      this.#core.redis.xrevrange(this.#core.keys.adminAuditStream(), '+', '-', 'COUNT', count),
      this.#core.redis.xrevrange(this.#core.keys.auditStream(), '+', '-', 'COUNT', count),
    ]);
    return [...admin, ...requests]
      .map(([id, flat]) => {
        const fields: Fields = {};
        for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
        return auditFromFields(id, fields);
      })
      .sort(newestAuditFirst)
      .slice(0, count);
  }

  async subscribeRevocations(listener: RevocationListener): Promise<() => Promise<void>> {
    // A closed store subscribes to nothing (the subscriber connection would be a fresh copy).
    if (this.#core.redis.status === 'end') throw new StoreUnavailableError('store is closed');
    return subscribeNotices(this.#core.redis, this.#core.keys.revocationChannel(), listener, this.#core.connectTimeoutMs);
  }

  async publishSigningKey(key: PublishedSigningKey, now: number): Promise<void> {
    await this.#core.updateHash(this.#core.keys.signingKeys(), signingKeyPublication(key, now));
  }

  async listSigningKeys(now: number): Promise<PublishedSigningKey[]> {
    const all = await this.#core.redis.hgetall(this.#core.keys.signingKeys());
    return listedSigningKeys(all, now);
  }

  async ping(): Promise<void> {
    await Promise.all([this.#core.redis.ping(), this.#core.lookups.ping()]);
  }
}
