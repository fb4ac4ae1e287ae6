// Kept upstream credentials in memory: one hash per user, as on Redis; a replacement and a user's
// deletion are the part both engines share (./part.ts).

import type { MemoryCore } from '../memory-core.ts';
import {
  type Fields,
  sameUpstreamIdentity,
  subjectUpstreamCredentials,
  upstreamCredentialField,
  upstreamCredentialFromValue,
  upstreamCredentialValue,
} from '../records.ts';
import type { StoredUpstreamCredential } from '../types.ts';
import type { StoredRead } from '../../model/records.ts';
import { KeyspaceUpstreamCredentials } from './part.ts';
import type { UpstreamCredentialStorage } from './types.ts';

export class MemoryUpstreamCredentials extends KeyspaceUpstreamCredentials<MemoryCore> implements UpstreamCredentialStorage {
  async putUpstreamCredential(record: StoredUpstreamCredential): Promise<void> {
    this.core.check();
    const key = this.core.keys.upstreamCredentials(record.subject);
    this.core.put(key, {
      ...this.core.get(key),
      [upstreamCredentialField(record.issuer, record.provider)]: upstreamCredentialValue(record),
    });
  }

  async getUpstreamCredential(subject: string, issuer: string, provider: string): Promise<StoredRead<StoredUpstreamCredential>> {
    this.core.check();
    const value = this.core.get(this.core.keys.upstreamCredentials(subject))?.[upstreamCredentialField(issuer, provider)];
    return value === undefined ? null : sameUpstreamIdentity(upstreamCredentialFromValue(value), subject, issuer, provider);
  }

  async deleteUpstreamCredential(subject: string, issuer: string, provider: string): Promise<boolean> {
    this.core.check();
    const key = this.core.keys.upstreamCredentials(subject);
    const field = upstreamCredentialField(issuer, provider);
    const fields = this.core.get(key);
    if (fields?.[field] === undefined) return false;
    const kept: Fields = { ...fields };
    delete kept[field];
    if (Object.keys(kept).length > 0) this.core.put(key, kept);
    else this.core.hashes.delete(key);
    return true;
  }

  async listSubjectUpstreamCredentials(subject: string): Promise<StoredUpstreamCredential[]> {
    this.core.check();
    return subjectUpstreamCredentials(this.core.get(this.core.keys.upstreamCredentials(subject)) ?? {}, subject);
  }

  async listUpstreamCredentials(): Promise<StoredUpstreamCredential[]> {
    this.core.check();
    const prefix = this.core.keys.upstreamCredentials('');
    const stem = prefix.slice(0, prefix.lastIndexOf(':') + 1);
    const out: StoredUpstreamCredential[] = [];
    for (const key of [...this.core.hashes.keys()]) {
      if (!key.startsWith(stem)) continue;
      for (const value of Object.values(this.core.get(key) ?? {})) {
        const record = upstreamCredentialFromValue(value);
        if (record !== 'corrupt' && this.core.keys.upstreamCredentials(record.subject) === key) out.push(record);
      }
    }
    return out;
  }
}
