// Kept upstream credentials on Redis: one hash per user, outside the {oauth} slot, and an index of
// them; a replacement and a user's deletion are the part both engines share (./part.ts).

import {
  sameUpstreamIdentity,
  subjectUpstreamCredentials,
  upstreamCredentialField,
  upstreamCredentialFromValue,
  upstreamCredentialValue,
} from '../records.ts';
import type { RedisCore } from '../redis-core.ts';
import type { StoredUpstreamCredential } from '../types.ts';
import type { StoredRead } from '../../model/records.ts';
import { KeyspaceUpstreamCredentials } from './part.ts';
import type { UpstreamCredentialStorage } from './types.ts';

export class RedisUpstreamCredentials extends KeyspaceUpstreamCredentials<RedisCore> implements UpstreamCredentialStorage {
  async putUpstreamCredential(record: StoredUpstreamCredential): Promise<void> {
    const key = this.core.keys.upstreamCredentials(record.subject);
    // Two keys in two slots on a Cluster: the index first, so a listed key may be gone (dropped when
    // walked) but a written record is never missing from the walk.
    await this.core.redis.sadd(this.core.keys.upstreamCredentialIndex(), key);
    await this.core.redis.hset(key, upstreamCredentialField(record.issuer, record.provider), upstreamCredentialValue(record));
  }

  async getUpstreamCredential(subject: string, issuer: string, provider: string): Promise<StoredRead<StoredUpstreamCredential>> {
    // Read on every forwarded request that carries the user's credential: on the token lookups'
    // connection, sent with the other reads of its turn (see LookupConnection).
    const key = this.core.keys.upstreamCredentials(subject);
    const value = await this.core.lookups.read((client) => client.hget(key, upstreamCredentialField(issuer, provider)));
    return value === null ? null : sameUpstreamIdentity(upstreamCredentialFromValue(value), subject, issuer, provider);
  }

  async deleteUpstreamCredential(subject: string, issuer: string, provider: string): Promise<boolean> {
    // An emptied hash is gone with its last field; its index member is dropped when next walked.
    return (await this.core.redis.hdel(this.core.keys.upstreamCredentials(subject), upstreamCredentialField(issuer, provider))) === 1;
  }

  async listSubjectUpstreamCredentials(subject: string): Promise<StoredUpstreamCredential[]> {
    return subjectUpstreamCredentials(await this.core.redis.hgetall(this.core.keys.upstreamCredentials(subject)), subject);
  }

  async listUpstreamCredentials(): Promise<StoredUpstreamCredential[]> {
    const index = this.core.keys.upstreamCredentialIndex();
    const out: StoredUpstreamCredential[] = [];
    for (const key of await this.core.redis.smembers(index)) {
      const all = await this.core.redis.hgetall(key);
      if (Object.keys(all).length === 0) {
        await this.core.redis.srem(index, key);
        continue;
      }
      for (const value of Object.values(all)) {
        const record = upstreamCredentialFromValue(value);
        if (record !== 'corrupt' && this.core.keys.upstreamCredentials(record.subject) === key) out.push(record);
      }
    }
    return out;
  }
}
