// Bearer tokens on Redis: the hot path's lookup (its own connection, and the lookup cache when on),
// user-grade records outside the {oauth} slot, and OAuth access tokens issued with their index (the
// transition both engines run: ./transitions.ts).

import { orNull, revocationUpdate, tokenLookupFromFields, USER_MEMBER, userRevocationUpdate, userTokenFields } from '../records.ts';
import { asStoreFailure } from '../redis-connection.ts';
import { assertExec, type RedisCore } from '../redis-core.ts';
import type { CreateTokenOutcome } from '../types.ts';
import type { AccessTokenRecord, RefreshTokenRecord, TokenLookup, UserTokenRecord } from '../../model/records.ts';
import { indexSubject } from '../subjects/transitions.ts';
import { issueTokens } from './transitions.ts';
import type { TokenStorage } from './types.ts';

export class RedisTokens implements TokenStorage {
  readonly #core: RedisCore;

  constructor(core: RedisCore) {
    this.#core = core;
  }

  readonly #readLookup = (tokenHash: string): Promise<TokenLookup> => this.#read(tokenHash);

  /** The hot path: one per proxied request. */
  lookupToken(tokenHash: string): Promise<TokenLookup> {
    const cache = this.#core.lookupCache;
    return cache === undefined ? this.#read(tokenHash) : cache.lookup(tokenHash, this.#readLookup);
  }

  /**
   * Both records of a token, read now. It applies the choke point's classifier itself (a try/catch
   * costs nothing until something throws; the decorator's wrapper would add a promise per call).
   */
  async #read(tokenHash: string): Promise<TokenLookup> {
    try {
      const [user, oauth] = await this.#core.lookups.readHashes(
        this.#core.keys.userToken(tokenHash),
        this.#core.keys.accessToken(tokenHash),
      );
      return tokenLookupFromFields(tokenHash, orNull(user), orNull(oauth));
    } catch (err) {
      throw asStoreFailure(err);
    }
  }

  async putUserToken(record: UserTokenRecord): Promise<void> {
    const key = this.#core.keys.userToken(record.tokenHash);
    // The index first: the record lives outside the {oauth} slot, so the two cannot be one MULTI on
    // Cluster. Failing between the two leaves a member naming no record (dropped when read), never a
    // token its subject's revocation cannot find.
    await indexSubject(this.#core.keyspace, this.#core.subjectIndex(record.subject), USER_MEMBER + record.tokenHash, record.expiresAt);
    const result = await this.#core.redis.multi().hset(key, userTokenFields(record)).pexpireat(key, record.expiresAt).exec();
    assertExec(result);
  }

  async revokeUserToken(tokenHash: string): Promise<boolean> {
    const revoked = await this.#core.revokeThrough((keyspace) =>
      this.#core.updateHash(this.#core.keys.userToken(tokenHash), userRevocationUpdate, keyspace),
    );
    if (revoked) await this.#core.publish({ tokenHashes: [tokenHash] });
    return revoked;
  }

  async createAccessToken(record: AccessTokenRecord): Promise<CreateTokenOutcome> {
    return this.issueTokens(record);
  }

  /** The transition both engines run (./transitions.ts): a read of the client, then the guarded writes. */
  issueTokens(access: AccessTokenRecord, refresh?: RefreshTokenRecord): Promise<CreateTokenOutcome> {
    return issueTokens(this.#core.keyspace, this.#core, access, refresh);
  }

  async revokeAccessToken(tokenHash: string, now: number): Promise<boolean> {
    const revoked = await this.#core.revokeThrough((keyspace) =>
      this.#core.updateHash(this.#core.keys.accessToken(tokenHash), revocationUpdate(now), keyspace),
    );
    if (revoked) await this.#core.publish({ tokenHashes: [tokenHash] });
    return revoked;
  }
}
