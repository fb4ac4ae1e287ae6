// Bearer tokens, the part both engines share, on the core's keyspace: a user-grade token written with
// its subject's index, a token revoked (the model's rule in a compare-and-set on its record, through
// KeyspaceCore.revokeThrough, then published), and OAuth access tokens issued with their index (the
// transition in ./transitions.ts). The hot path's lookup is each engine's own (memory.ts, redis.ts).

import type { KeyspaceCore } from '../keyspace-core.ts';
import { putHashSteps } from '../keyspace.ts';
import { revocationUpdate, USER_MEMBER, userRevocationUpdate, userTokenFields, type Fields, type HashUpdate } from '../records.ts';
import { indexSubject } from '../subjects/transitions.ts';
import type { CreateTokenOutcome } from '../types.ts';
import type { AccessTokenRecord, RefreshTokenRecord, TokenLookup, UserTokenRecord } from '../../model/records.ts';
import { issueTokens } from './transitions.ts';
import type { TokenStorage } from './types.ts';

export abstract class KeyspaceTokens<Core extends KeyspaceCore = KeyspaceCore> implements TokenStorage {
  /** The engine's core (its own part reads what only that engine has from it). */
  protected readonly core: Core;

  constructor(core: Core) {
    this.core = core;
  }

  /** The hot path: one per proxied request. */
  abstract lookupToken(tokenHash: string): Promise<TokenLookup>;

  async putUserToken(record: UserTokenRecord): Promise<void> {
    // The index first: the record lives outside the {oauth} slot, so the two cannot be one step on
    // Cluster. Failing between the two leaves a member naming no record (dropped when read), never a
    // token its subject's revocation cannot find.
    await indexSubject(this.core.keyspace, this.core.subjectIndex(record.subject), USER_MEMBER + record.tokenHash, record.expiresAt);
    const key = this.core.keys.userToken(record.tokenHash);
    await this.core.keyspace.apply({ guards: [], steps: putHashSteps(key, userTokenFields(record), record.expiresAt) });
  }

  revokeUserToken(tokenHash: string): Promise<boolean> {
    return this.#revoke(tokenHash, this.core.keys.userToken(tokenHash), userRevocationUpdate);
  }

  createAccessToken(record: AccessTokenRecord): Promise<CreateTokenOutcome> {
    return this.issueTokens(record);
  }

  /** The transition both engines run (./transitions.ts): a read of the client, then the guarded writes. */
  issueTokens(access: AccessTokenRecord, refresh?: RefreshTokenRecord): Promise<CreateTokenOutcome> {
    return issueTokens(this.core.keyspace, this.core, access, refresh);
  }

  revokeAccessToken(tokenHash: string, now: number): Promise<boolean> {
    return this.#revoke(tokenHash, this.core.keys.accessToken(tokenHash), revocationUpdate(now));
  }

  /** One token's record revoked by the model's rule (WAITed for on Redis with replicas), then every sidecar told. */
  async #revoke(tokenHash: string, key: string, update: (current: Fields | null) => HashUpdate<boolean>): Promise<boolean> {
    const revoked = await this.core.revokeThrough(async (keyspace) => this.core.updateHash(key, update, keyspace));
    if (revoked) await this.core.publish({ tokenHashes: [tokenHash] });
    return revoked;
  }
}
