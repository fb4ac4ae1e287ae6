// The person index on Redis: what a subject holds (read in batches, exact when read, which a
// revocation, the part both engines share, goes through: ./part.ts), the index's rebuild by SCAN, and
// offboarding's cut-offs.

import { StoreUnavailableError } from '../shared.ts';
import {
  ACCESS_MEMBER,
  CONSENT_MEMBER,
  consentFromValue,
  consentMember,
  cutoffFromFields,
  escapeGlob,
  lastUseUpdate,
  EVERY_ISSUER,
  hashBucket,
  orNull,
  parseConsentMember,
  REFRESH_MEMBER,
  subjectDigest,
  subjectTokenFromFields,
  USER_MEMBER,
} from '../records.ts';
import { assertExec, type RedisCore } from '../redis-core.ts';
import type { SubjectConsent, SubjectIndexRebuild } from '../types.ts';
import type { SubjectToken } from '../../model/records.ts';
import { KeyspaceSubjects } from './part.ts';
import { indexSubject } from './transitions.ts';
import type { SubjectCutoffStorage, SubjectStorage } from './types.ts';
import { Cluster, type Redis } from 'ioredis';

/** Members of a subject's index (or a client's token set) read per round trip when listing. */
const SUBJECT_READ_BATCH = 500;

/** SCANs one node for keys matching `pattern`, `count` at a time, handing each non-empty batch to `each`. */
async function scanKeys(node: Redis, pattern: string, count: number, each: (keys: string[]) => Promise<void>): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', count);
    cursor = next;
    if (keys.length > 0) await each(keys);
  } while (cursor !== '0');
}

export class RedisSubjects extends KeyspaceSubjects<RedisCore> implements SubjectStorage, SubjectCutoffStorage {
  /**
   * A subject's index, a batch at a time (ZSCAN, COUNT `batchSize`): members expired by `now` are
   * dropped first, a bounded number per command.
   */
  async *#subjectMembers(index: string, now: number, batchSize: number): AsyncGenerator<string[]> {
    for (;;) {
      const expired = await this.core.redis.zrangebyscore(index, '-inf', String(now), 'LIMIT', 0, batchSize);
      if (expired.length === 0) break;
      await this.core.redis.zrem(index, ...expired);
    }
    let cursor = '0';
    do {
      const [next, flat] = await this.core.redis.zscan(index, cursor, 'COUNT', batchSize);
      cursor = next;
      const members: string[] = [];
      for (let i = 0; i < flat.length; i += 2) members.push(flat[i]!);
      // COUNT is a hint: a small index in one hash table comes back whole, over the batch size.
      for (let i = 0; i < members.length; i += batchSize) yield members.slice(i, i + batchSize);
    } while (cursor !== '0');
  }

  /** The records token members name, read together; each as a SubjectToken or null (to be dropped). */
  async #readTokens(members: string[], now: number, subject?: string): Promise<Array<SubjectToken | null>> {
    return Promise.all(
      members.map(async (member) => {
        const hash = member.slice(2);
        if (member.startsWith(USER_MEMBER))
          return subjectTokenFromFields('user', hash, orNull(await this.core.redis.hgetall(this.core.keys.userToken(hash))), now, subject);
        if (member.startsWith(ACCESS_MEMBER))
          return subjectTokenFromFields(
            'access',
            hash,
            orNull(await this.core.redis.hgetall(this.core.keys.accessToken(hash))),
            now,
            subject,
          );
        if (member.startsWith(REFRESH_MEMBER))
          return subjectTokenFromFields(
            'refresh',
            hash,
            orNull(await this.core.redis.hgetall(this.core.keys.refreshToken(hash))),
            now,
            subject,
          );
        return null;
      }),
    );
  }

  /**
   * The members of one of a subject's indexes that it answers for: in the home index, not the OAuth
   * tokens a store of layout 1 listed there (the migration lists them in their bucket's index too,
   * and a plan on the home index's slot cannot reach them on Cluster).
   */
  #answeredBy(index: string, subject: string, members: string[]): string[] {
    if (index !== this.core.subjectIndex(subject)) return members;
    return members.filter((m) => !m.startsWith(ACCESS_MEMBER) && !m.startsWith(REFRESH_MEMBER));
  }

  async listSubjectTokens(subject: string, now: number, issuer?: string): Promise<SubjectToken[]> {
    const out: SubjectToken[] = [];
    // The home index and every bucket's, read side by side (each bucket's index on its own node).
    await Promise.all(
      this.core.subjectIndexes(subject).map(async (index) => {
        for await (const batch of this.#subjectMembers(index, now, SUBJECT_READ_BATCH)) {
          const members = this.#answeredBy(index, subject, batch).filter((m) => !m.startsWith(CONSENT_MEMBER));
          const tokens = await this.#readTokens(members, now, subject);
          const gone = members.filter((_, i) => tokens[i] === null);
          if (gone.length > 0) await this.core.redis.zrem(index, ...gone);
          for (const token of tokens) if (token !== null && (issuer === undefined || token.issuer === issuer)) out.push(token);
        }
      }),
    );
    return out;
  }

  async listClientTokens(clientId: string, now: number): Promise<SubjectToken[]> {
    const out: SubjectToken[] = [];
    let cursor = '0';
    do {
      const [next, members] = await this.core.redis.sscan(this.core.keys.clientTokens(clientId), cursor, 'COUNT', SUBJECT_READ_BATCH);
      cursor = next;
      for (const token of await this.#readTokens(members, now)) if (token !== null) out.push(token);
    } while (cursor !== '0');
    return out;
  }

  async listSubjectConsents(subject: string, now: number): Promise<SubjectConsent[]> {
    const index = this.core.subjectIndex(subject);
    const out: SubjectConsent[] = [];
    for await (const batch of this.#subjectMembers(index, now, SUBJECT_READ_BATCH)) {
      const gone: string[] = [];
      for (const member of batch.filter((m) => m.startsWith(CONSENT_MEMBER))) {
        const where = parseConsentMember(member);
        const value = where && (await this.core.redis.hget(this.core.keys.consents(where.browserHash), where.key));
        const consent = value ? consentFromValue(value, now) : null;
        if (consent && consent.subject === subject) out.push({ ...consent, browserHash: where!.browserHash, key: where!.key });
        else gone.push(member);
      }
      if (gone.length > 0) await this.core.redis.zrem(index, ...gone);
    }
    return out;
  }

  /** The index a batch at a time (#subjectMembers), each batch what the index answers for (#answeredBy). */
  protected async *revocationBatches(index: string, subject: string, now: number, size: number): AsyncGenerator<string[]> {
    for await (const all of this.#subjectMembers(index, now, size)) yield this.#answeredBy(index, subject, all);
  }

  async rebuildSubjectIndex(now: number, batchSize: number): Promise<SubjectIndexRebuild> {
    const size = Math.max(1, Math.trunc(batchSize));
    const total: SubjectIndexRebuild = { scanned: 0, indexed: 0 };
    // SCAN is per node: on Cluster every master is scanned. A Cluster client that is not connected
    // lists no master: that is an outage, never an empty database.
    const nodes: Redis[] = this.core.redis instanceof Cluster ? this.core.redis.nodes('master') : [this.core.redis];
    if (this.core.redis.status !== 'ready' || nodes.length === 0)
      throw new StoreUnavailableError(`Redis connection is ${this.core.redis.status}`);
    const userPrefix = this.core.keys.userToken('');
    // Each kind: its SCAN pattern, the hash a key names, and the index it goes to (a bucket's for OAuth tokens).
    const tokenKinds = [
      [`${escapeGlob(userPrefix)}*`, (key: string) => key.slice(userPrefix.length), USER_MEMBER, false],
      [this.core.keys.accessTokenPattern(), (key: string) => this.core.keys.accessTokenHashOf(key) ?? '', ACCESS_MEMBER, true],
      [this.core.keys.refreshTokenPattern(), (key: string) => this.core.keys.refreshTokenHashOf(key) ?? '', REFRESH_MEMBER, true],
    ] as const;
    for (const node of nodes) {
      for (const [pattern, hashOf, kind, bucketed] of tokenKinds) {
        await scanKeys(node, pattern, size, async (keys) => {
          total.scanned += keys.length;
          const states = await Promise.all(keys.map((k) => this.core.redis.hmget(k, 'subject', 'expiresAt')));
          const writes: Array<Promise<unknown>> = [];
          keys.forEach((key, i) => {
            const [subject, expiresText] = states[i]!;
            const expiresAt = Number(expiresText);
            const hash = hashOf(key);
            if (!subject || hash === '' || !Number.isSafeInteger(expiresAt) || expiresAt <= now) return;
            const index = this.core.subjectIndex(subject, bucketed ? hashBucket(hash) : undefined);
            writes.push(indexSubject(this.core.keyspace, index, kind + hash, expiresAt));
          });
          await Promise.all(writes);
          total.indexed += writes.length;
        });
      }
      const consentsPrefix = this.core.keys.consents('');
      await scanKeys(node, `${escapeGlob(consentsPrefix)}*`, size, async (keys) => {
        for (const key of keys) {
          const browserHash = key.slice(consentsPrefix.length);
          let cursor = '0';
          do {
            const [next, flat] = await this.core.redis.hscan(key, cursor, 'COUNT', size);
            cursor = next;
            const writes: Array<Promise<unknown>> = [];
            for (let i = 0; i + 1 < flat.length; i += 2) {
              total.scanned++;
              const consent = consentFromValue(flat[i + 1]!, now);
              if (consent)
                writes.push(
                  indexSubject(
                    this.core.keyspace,
                    this.core.subjectIndex(consent.subject),
                    consentMember(browserHash, flat[i]!),
                    consent.expiresAt,
                  ),
                );
            }
            await Promise.all(writes);
            total.indexed += writes.length;
          } while (cursor !== '0');
        }
      });
    }
    return total;
  }

  async recordLastUse(uses: ReadonlyArray<{ tokenHash: string; kind: 'user' | 'oauth'; at: number }>): Promise<void> {
    await Promise.all(
      uses.map((use) =>
        this.core.updateHash(
          use.kind === 'user' ? this.core.keys.userToken(use.tokenHash) : this.core.keys.accessToken(use.tokenHash),
          lastUseUpdate(use.at),
        ),
      ),
    );
  }

  async markSubjectRevoked(subject: string, issuer: string | undefined, at: number, keepUntil: number): Promise<void> {
    const key = this.core.keys.subjectCutoff(subjectDigest(subject));
    assertExec(
      await this.core.redis
        .multi()
        .hset(key, issuer ?? EVERY_ISSUER, String(at))
        .pexpireat(key, keepUntil)
        .exec(),
    );
  }

  async subjectRevokedAt(subject: string, issuer: string): Promise<number | undefined> {
    return cutoffFromFields(orNull(await this.core.redis.hgetall(this.core.keys.subjectCutoff(subjectDigest(subject)))), issuer);
  }
}
