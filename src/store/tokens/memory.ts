// Bearer tokens in memory: what they do their own way, the lookup read off the store's maps; everything
// else is the part both engines share (./part.ts).

import type { MemoryCore } from '../memory-core.ts';
import { tokenLookupFromFields } from '../records.ts';
import type { TokenLookup } from '../../model/records.ts';
import { KeyspaceTokens } from './part.ts';

export class MemoryTokens extends KeyspaceTokens<MemoryCore> {
  async lookupToken(tokenHash: string): Promise<TokenLookup> {
    this.core.check();
    // Parsed into new objects: mutating a result cannot change the stored record.
    return tokenLookupFromFields(
      tokenHash,
      this.core.get(this.core.keys.userToken(tokenHash)),
      this.core.get(this.core.keys.accessToken(tokenHash)),
    );
  }
}
