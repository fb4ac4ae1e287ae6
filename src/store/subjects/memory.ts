// The person index in memory, and offboarding's cut-offs: read and written on the store's maps; a
// subject's revocation is the part both engines share (./part.ts), through the index read here.

import type { MemoryCore } from '../memory-core.ts';
import {
  ACCESS_MEMBER,
  CONSENT_MEMBER,
  consentFromValue,
  consentMember,
  cutoffFromFields,
  EVERY_ISSUER,
  lastUseUpdate,
  parseConsentMember,
  REFRESH_MEMBER,
  subjectDigest,
  subjectTokenFromFields,
  USER_MEMBER,
} from '../records.ts';
import type { SubjectConsent, SubjectIndexRebuild } from '../types.ts';
import type { SubjectToken } from '../../model/records.ts';
import { membersOf, readOne } from '../keyspace.ts';
import { KeyspaceSubjects } from './part.ts';
import { indexSubjectPlan } from './transitions.ts';
import type { SubjectCutoffStorage, SubjectStorage } from './types.ts';

export class MemorySubjects extends KeyspaceSubjects<MemoryCore> implements SubjectStorage, SubjectCutoffStorage {
  /** Lists `member` in its subject's index (indexSubjectPlan). */
  #index(subject: string, member: string, expiresAt: number): void {
    this.core.keyspace.applyNow(indexSubjectPlan(this.core.keys.subjectGrants(subjectDigest(subject)), member, expiresAt));
  }

  /** A subject's index with the members expired by `now` dropped (the whole index once empty). */
  #subjectIndex(subject: string, now: number): Map<string, number> {
    const key = this.core.keys.subjectGrants(subjectDigest(subject));
    const index = this.core.subjectIndexes.get(key) ?? new Map<string, number>();
    for (const [member, expiresAt] of index) if (expiresAt <= now) index.delete(member);
    if (index.size === 0) this.core.deleteKey(key);
    return index;
  }

  /** The record a token member of a subject index names, as a SubjectToken; null for any other member. */
  #subjectToken(member: string, now: number, subject?: string): SubjectToken | null {
    const hash = member.slice(2);
    const kind = member.startsWith(USER_MEMBER)
      ? 'user'
      : member.startsWith(ACCESS_MEMBER)
        ? 'access'
        : member.startsWith(REFRESH_MEMBER)
          ? 'refresh'
          : undefined;
    if (kind === undefined) return null;
    const key =
      kind === 'user'
        ? this.core.keys.userToken(hash)
        : kind === 'access'
          ? this.core.keys.accessToken(hash)
          : this.core.keys.refreshToken(hash);
    return subjectTokenFromFields(kind, hash, this.core.get(key), now, subject);
  }

  async listSubjectTokens(subject: string, now: number, issuer?: string): Promise<SubjectToken[]> {
    this.core.check();
    const index = this.#subjectIndex(subject, now);
    const out: SubjectToken[] = [];
    for (const member of [...index.keys()]) {
      if (member.startsWith(CONSENT_MEMBER)) continue;
      const token = this.#subjectToken(member, now, subject);
      if (token === null) index.delete(member);
      else if (issuer === undefined || token.issuer === issuer) out.push(token);
    }
    return out;
  }

  async listClientTokens(clientId: string, now: number): Promise<SubjectToken[]> {
    this.core.check();
    const out: SubjectToken[] = [];
    for (const member of this.core.set(this.core.keys.clientTokens(clientId))) {
      const token = this.#subjectToken(member, now);
      if (token !== null) out.push(token);
    }
    return out;
  }

  /** The approval a consent member names, when it is still kept, unexpired, for `subject`. */
  #subjectConsent(member: string, now: number, subject: string): SubjectConsent | null {
    const where = parseConsentMember(member);
    const value = where && this.core.get(this.core.keys.consents(where.browserHash))?.[where.key];
    const consent = value === undefined || value === null ? null : consentFromValue(value, now);
    return consent && consent.subject === subject ? { ...consent, browserHash: where!.browserHash, key: where!.key } : null;
  }

  async listSubjectConsents(subject: string, now: number): Promise<SubjectConsent[]> {
    this.core.check();
    const index = this.#subjectIndex(subject, now);
    const out: SubjectConsent[] = [];
    for (const member of [...index.keys()]) {
      if (!member.startsWith(CONSENT_MEMBER)) continue;
      const consent = this.#subjectConsent(member, now, subject);
      if (consent === null) index.delete(member);
      else out.push(consent);
    }
    return out;
  }

  /** The index read whole, once its members expired by `now` are dropped (as on Redis), then cut into batches. */
  protected async *revocationBatches(index: string, _subject: string, now: number, size: number): AsyncGenerator<string[]> {
    const keyspace = this.core.keyspace;
    await keyspace.apply({ guards: [], steps: [['ZREMRANGEBYSCORE', index, '-inf', now]] });
    const members = membersOf(await readOne(keyspace, ['ZRANGE', index, 0, -1]));
    for (let i = 0; i < members.length; i += size) yield members.slice(i, i + size);
  }

  async rebuildSubjectIndex(now: number, _batchSize: number): Promise<SubjectIndexRebuild> {
    this.core.check();
    let scanned = 0;
    let indexed = 0;
    const userPrefix = this.core.keys.userToken('');
    const kinds = [
      [(key: string) => (key.startsWith(userPrefix) ? key.slice(userPrefix.length) : undefined), USER_MEMBER],
      [this.core.keys.accessTokenHashOf, ACCESS_MEMBER],
      [this.core.keys.refreshTokenHashOf, REFRESH_MEMBER],
    ] as const;
    for (const key of [...this.core.hashes.keys()]) {
      const fields = this.core.get(key);
      if (!fields) continue;
      const kind = kinds.find(([hashOf]) => hashOf(key) !== undefined);
      if (kind !== undefined) {
        scanned++;
        const expiresAt = Number(fields.expiresAt);
        if (!fields.subject || !Number.isSafeInteger(expiresAt) || expiresAt <= now) continue;
        this.#index(fields.subject, kind[1] + kind[0](key)!, expiresAt);
        indexed++;
      } else if (key.startsWith(this.core.keys.consents(''))) {
        const browserHash = key.slice(this.core.keys.consents('').length);
        for (const [field, value] of Object.entries(fields)) {
          scanned++;
          const consent = consentFromValue(value, now);
          if (!consent) continue;
          this.#index(consent.subject, consentMember(browserHash, field), consent.expiresAt);
          indexed++;
        }
      }
    }
    return { scanned, indexed };
  }

  async recordLastUse(uses: ReadonlyArray<{ tokenHash: string; kind: 'user' | 'oauth'; at: number }>): Promise<void> {
    this.core.check();
    for (const use of uses) {
      this.core.updateHash(
        use.kind === 'user' ? this.core.keys.userToken(use.tokenHash) : this.core.keys.accessToken(use.tokenHash),
        lastUseUpdate(use.at),
      );
    }
  }

  async markSubjectRevoked(subject: string, issuer: string | undefined, at: number, keepUntil: number): Promise<void> {
    this.core.check();
    const key = this.core.keys.subjectCutoff(subjectDigest(subject));
    this.core.put(key, { ...this.core.get(key), [issuer ?? EVERY_ISSUER]: String(at) }, keepUntil);
  }

  async subjectRevokedAt(subject: string, issuer: string): Promise<number | undefined> {
    this.core.check();
    return cutoffFromFields(this.core.get(this.core.keys.subjectCutoff(subjectDigest(subject))), issuer);
  }
}
