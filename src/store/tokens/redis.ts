// Bearer tokens on Redis: what they do their own way, the hot path's lookup (its own connection, and the
// lookup cache when on); everything else is the part both engines share (./part.ts).

import { orNull, tokenLookupFromFields } from '../records.ts';
import { asStoreFailure } from '../redis-connection.ts';
import type { RedisCore } from '../redis-core.ts';
import type { TokenLookup } from '../../model/records.ts';
import { KeyspaceTokens } from './part.ts';

export class RedisTokens extends KeyspaceTokens<RedisCore> {
  readonly #readLookup = (tokenHash: string): Promise<TokenLookup> => this.#read(tokenHash);

  /** The hot path: one per proxied request. */
  lookupToken(tokenHash: string): Promise<TokenLookup> {
    const cache = this.core.lookupCache;
    return cache === undefined ? this.#read(tokenHash) : cache.lookup(tokenHash, this.#readLookup);
  }

  /**
   * Both records of a token, read now. It applies the choke point's classifier itself (a try/catch
   * costs nothing until something throws; the decorator's wrapper would add a promise per call).
   */
  async #read(tokenHash: string): Promise<TokenLookup> {
    try {
      const [user, oauth] = await this.core.lookups.readHashes(this.core.keys.userToken(tokenHash), this.core.keys.accessToken(tokenHash));
      return tokenLookupFromFields(tokenHash, orNull(user), orNull(oauth));
    } catch (err) {
      throw asStoreFailure(err);
    }
  }
}
