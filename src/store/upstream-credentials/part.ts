// Kept upstream credentials, the part both engines share, on the core's keyspace: one hash per user
// and an index of those hashes (re-encryption walks it); a credential replaced (re-encrypted) and a
// user's credentials deleted, each the model's rule in a compare-and-set on the user's one hash
// (KeyspaceCore.updateHash). Redis reads the credential of a forwarded request its own way (redis.ts).

import type { KeyspaceCore } from '../keyspace-core.ts';
import { fieldsOf, membersOf, readOne } from '../keyspace.ts';
import {
  credentialReplacementUpdate,
  credentialsDeletionUpdate,
  sameUpstreamIdentity,
  subjectUpstreamCredentials,
  upstreamCredentialField,
  upstreamCredentialFromValue,
  upstreamCredentialValue,
} from '../records.ts';
import type { StoredUpstreamCredential } from '../types.ts';
import type { StoredRead } from '../../model/records.ts';
import type { UpstreamCredentialStorage } from './types.ts';

export class KeyspaceUpstreamCredentials<Core extends KeyspaceCore = KeyspaceCore> implements UpstreamCredentialStorage {
  /** The engine's core (its own part reads what only that engine has from it). */
  protected readonly core: Core;

  constructor(core: Core) {
    this.core = core;
  }

  async putUpstreamCredential(record: StoredUpstreamCredential): Promise<void> {
    const key = this.core.keys.upstreamCredentials(record.subject);
    // Two keys in two slots on a Cluster: the index first, so a listed key may be gone (dropped when
    // walked) but a written record is never missing from the walk.
    await this.core.keyspace.apply({ guards: [], steps: [['SADD', this.core.keys.upstreamCredentialIndex(), key]] });
    const field = upstreamCredentialField(record.issuer, record.provider);
    await this.core.keyspace.apply({ guards: [], steps: [['HSET', key, field, upstreamCredentialValue(record)]] });
  }

  async getUpstreamCredential(subject: string, issuer: string, provider: string): Promise<StoredRead<StoredUpstreamCredential>> {
    const field = upstreamCredentialField(issuer, provider);
    const value = (await readOne(this.core.keyspace, ['HGET', this.core.keys.upstreamCredentials(subject), field])) as string | null;
    return this.identified(value, subject, issuer, provider);
  }

  /** A credential's stored value as read for this user and provider (null: none). */
  protected identified(value: string | null, subject: string, issuer: string, provider: string): StoredRead<StoredUpstreamCredential> {
    return value === null ? null : sameUpstreamIdentity(upstreamCredentialFromValue(value), subject, issuer, provider);
  }

  async deleteUpstreamCredential(subject: string, issuer: string, provider: string): Promise<boolean> {
    // An emptied hash is gone with its last field; its index member is dropped when next walked.
    const key = this.core.keys.upstreamCredentials(subject);
    const [deleted] = (await this.core.keyspace.apply({ guards: [], steps: [['HDEL', key, upstreamCredentialField(issuer, provider)]] }))!;
    return deleted === 1;
  }

  async listSubjectUpstreamCredentials(subject: string): Promise<StoredUpstreamCredential[]> {
    const fields = fieldsOf(await readOne(this.core.keyspace, ['HGETALL', this.core.keys.upstreamCredentials(subject)]));
    return subjectUpstreamCredentials(fields ?? {}, subject);
  }

  async listUpstreamCredentials(): Promise<StoredUpstreamCredential[]> {
    const space = this.core.keyspace;
    const index = this.core.keys.upstreamCredentialIndex();
    const out: StoredUpstreamCredential[] = [];
    for (const key of membersOf(await readOne(space, ['SMEMBERS', index]))) {
      const all = fieldsOf(await readOne(space, ['HGETALL', key]));
      if (all === null) {
        await space.apply({ guards: [], steps: [['SREM', index, key]] });
        continue;
      }
      for (const value of Object.values(all)) {
        const record = upstreamCredentialFromValue(value);
        if (record !== 'corrupt' && this.core.keys.upstreamCredentials(record.subject) === key) out.push(record);
      }
    }
    return out;
  }

  async replaceUpstreamCredential(record: StoredUpstreamCredential, expectedSealed: string): Promise<boolean> {
    return this.core.updateHash(this.core.keys.upstreamCredentials(record.subject), credentialReplacementUpdate(record, expectedSealed));
  }

  async deleteUpstreamCredentials(subject: string, issuer?: string): Promise<number> {
    return this.core.updateHash(this.core.keys.upstreamCredentials(subject), credentialsDeletionUpdate(issuer));
  }
}
