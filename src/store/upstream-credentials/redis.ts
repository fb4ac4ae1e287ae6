// Kept upstream credentials on Redis: what it does its own way, the credential of a forwarded request
// read on the token lookups' connection; everything else is the part both engines share (./part.ts).

import { upstreamCredentialField } from '../records.ts';
import type { RedisCore } from '../redis-core.ts';
import type { StoredUpstreamCredential } from '../types.ts';
import type { StoredRead } from '../../model/records.ts';
import { KeyspaceUpstreamCredentials } from './part.ts';

export class RedisUpstreamCredentials extends KeyspaceUpstreamCredentials<RedisCore> {
  override async getUpstreamCredential(subject: string, issuer: string, provider: string): Promise<StoredRead<StoredUpstreamCredential>> {
    // Read on every forwarded request that carries the user's credential: on the token lookups'
    // connection, sent with the other reads of its turn (see LookupConnection).
    const key = this.core.keys.upstreamCredentials(subject);
    const value = await this.core.lookups.read((client) => client.hget(key, upstreamCredentialField(issuer, provider)));
    return this.identified(value, subject, issuer, provider);
  }
}
