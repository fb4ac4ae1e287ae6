// Bearer tokens in memory: the same records as on Redis (MemoryCore); issuing is the transition both
// engines run (./transitions.ts).

import type { MemoryCore } from '../memory-core.ts';
import { revocationUpdate, subjectDigest, tokenLookupFromFields, USER_MEMBER, userRevocationUpdate, userTokenFields } from '../records.ts';
import { indexSubjectPlan } from '../subjects/transitions.ts';
import type { CreateTokenOutcome } from '../types.ts';
import type { AccessTokenRecord, RefreshTokenRecord, TokenLookup, UserTokenRecord } from '../../model/records.ts';
import { issueTokens } from './transitions.ts';
import type { TokenStorage } from './types.ts';

export class MemoryTokens implements TokenStorage {
  readonly #core: MemoryCore;

  constructor(core: MemoryCore) {
    this.#core = core;
  }

  async lookupToken(tokenHash: string): Promise<TokenLookup> {
    this.#core.check();
    // Parsed into new objects: mutating a result cannot change the stored record.
    return tokenLookupFromFields(
      tokenHash,
      this.#core.get(this.#core.keys.userToken(tokenHash)),
      this.#core.get(this.#core.keys.accessToken(tokenHash)),
    );
  }

  async putUserToken(record: UserTokenRecord): Promise<void> {
    this.#core.check();
    const index = this.#core.keys.subjectGrants(subjectDigest(record.subject));
    this.#core.keyspace.applyNow(indexSubjectPlan(index, USER_MEMBER + record.tokenHash, record.expiresAt));
    this.#core.put(this.#core.keys.userToken(record.tokenHash), userTokenFields(record), record.expiresAt);
  }

  async revokeUserToken(tokenHash: string): Promise<boolean> {
    this.#core.check();
    if (!this.#core.updateHash(this.#core.keys.userToken(tokenHash), userRevocationUpdate)) return false;
    this.#core.notify({ tokenHashes: [tokenHash] });
    return true;
  }

  async createAccessToken(record: AccessTokenRecord): Promise<CreateTokenOutcome> {
    this.#core.check();
    return this.issueTokens(record);
  }

  async revokeAccessToken(tokenHash: string, now: number): Promise<boolean> {
    this.#core.check();
    if (!this.#core.updateHash(this.#core.keys.accessToken(tokenHash), revocationUpdate(now))) return false;
    this.#core.notify({ tokenHashes: [tokenHash] });
    return true;
  }

  async issueTokens(access: AccessTokenRecord, refresh?: RefreshTokenRecord): Promise<CreateTokenOutcome> {
    this.#core.check();
    return issueTokens(this.#core.keyspace, this.#core, access, refresh);
  }
}
