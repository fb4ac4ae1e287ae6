// Kept upstream credentials, the part both engines share: a credential replaced (re-encrypted) and a
// user's credentials deleted, each the model's rule in a compare-and-set on the user's one hash
// (KeyspaceCore.updateHash). Plain reads and writes, and the index of users on Redis, are each
// engine's own (memory.ts, redis.ts).

import type { KeyspaceCore } from '../keyspace-core.ts';
import { credentialReplacementUpdate, credentialsDeletionUpdate } from '../records.ts';
import type { StoredUpstreamCredential } from '../types.ts';
import type { UpstreamCredentialStorage } from './types.ts';

export class KeyspaceUpstreamCredentials<Core extends KeyspaceCore = KeyspaceCore> implements Pick<
  UpstreamCredentialStorage,
  'replaceUpstreamCredential' | 'deleteUpstreamCredentials'
> {
  /** The engine's core (its own part reads what only that engine has from it). */
  protected readonly core: Core;

  constructor(core: Core) {
    this.core = core;
  }

  async replaceUpstreamCredential(record: StoredUpstreamCredential, expectedSealed: string): Promise<boolean> {
    return this.core.updateHash(this.core.keys.upstreamCredentials(record.subject), credentialReplacementUpdate(record, expectedSealed));
  }

  async deleteUpstreamCredentials(subject: string, issuer?: string): Promise<number> {
    return this.core.updateHash(this.core.keys.upstreamCredentials(subject), credentialsDeletionUpdate(issuer));
  }
}
