// The person index, written once for both engines on the core's keyspace: what a subject holds (its
// home index and one per bucket, each read a batch at a time and checked against the records it
// names, so a read is exact), a subject's revocation index by index and batch by batch (its access
// and refresh tokens and approvals in one transition, revokeSubjectBatch in ./transitions.ts; its
// user-grade tokens one compare-and-set each), each batch then its notice; the index's rebuild from
// the records; offboarding's cut-offs; and when tokens were last used.

import { allBuckets } from '../key-layout.ts';
import { fieldsOf, membersOf, readOne, scanKey, type Command, type Keyspace, type Reply } from '../keyspace.ts';
import type { KeyspaceCore } from '../keyspace-core.ts';
import {
  ACCESS_MEMBER,
  CONSENT_MEMBER,
  consentFromValue,
  consentGrantIds,
  consentMember,
  cutoffFromFields,
  escapeGlob,
  EVERY_ISSUER,
  hashBucket,
  lastUseUpdate,
  parseConsentMember,
  REFRESH_MEMBER,
  subjectDigest,
  subjectTokenFromFields,
  subjectUserRevocationUpdate,
  USER_MEMBER,
} from '../records.ts';
import type { RevocationNotice, SubjectConsent, SubjectIndexRebuild, SubjectRevocation } from '../types.ts';
import type { SubjectToken } from '../../model/records.ts';
import { memberKey } from '../tokens/transitions.ts';
import { addBatch, indexSubject, revokeSubjectBatch } from './transitions.ts';
import type { SubjectCutoffStorage, SubjectStorage } from './types.ts';

/** Members of a subject's index (or a client's token set) read per round trip when listing. */
const SUBJECT_READ_BATCH = 500;

/** The kind of token a member of a person index names (by its prefix); undefined for a consent. */
function tokenKind(member: string): 'user' | 'access' | 'refresh' | undefined {
  if (member.startsWith(USER_MEMBER)) return 'user';
  if (member.startsWith(ACCESS_MEMBER)) return 'access';
  if (member.startsWith(REFRESH_MEMBER)) return 'refresh';
  return undefined;
}

export class KeyspaceSubjects implements SubjectStorage, SubjectCutoffStorage {
  readonly #core: KeyspaceCore;

  constructor(core: KeyspaceCore) {
    this.#core = core;
  }

  get #keyspace(): Keyspace {
    return this.#core.keyspace;
  }

  /** The subject's indexes that hold anything (home first, then by bucket), asked in one round: most of a subject's buckets are empty. */
  async #heldIndexes(subject: string): Promise<string[]> {
    const indexes = [this.#core.subjectIndex(subject), ...allBuckets().map((bucket) => this.#core.subjectIndex(subject, bucket))];
    const held = await this.#keyspace.read(indexes.map((index): Command => ['EXISTS', index]));
    return indexes.filter((_, i) => held[i] === 1);
  }

  /**
   * An index, a batch at a time (ZSCAN, COUNT `size`): members expired by `now` are dropped first, a
   * bounded number per command. Only the members the index answers for: the home index never for the
   * OAuth tokens a store of layout 1 listed there (the migration lists them in their bucket's index
   * too, and a plan on the home index's slot cannot reach them on Cluster).
   */
  async *#members(index: string, subject: string, now: number, size: number): AsyncGenerator<string[]> {
    for (;;) {
      const expired = membersOf(await readOne(this.#keyspace, ['ZRANGEBYSCORE', index, '-inf', now, 'LIMIT', 0, size]));
      if (expired.length === 0) break;
      await this.#keyspace.apply({ guards: [], steps: [['ZREM', index, ...expired]] });
    }
    const home = index === this.#core.subjectIndex(subject);
    for await (const flat of scanKey(this.#keyspace, ['ZSCAN', index], size)) {
      const members: string[] = [];
      for (let i = 0; i < flat.length; i += 2)
        if (!home || (!flat[i]!.startsWith(ACCESS_MEMBER) && !flat[i]!.startsWith(REFRESH_MEMBER))) members.push(flat[i]!);
      // COUNT is a hint: a small index comes back whole, over the batch size.
      for (let i = 0; i < members.length; i += size) yield members.slice(i, i + size);
    }
  }

  /** The records token members name, read together; each as a SubjectToken, or null (to be dropped). */
  async #readTokens(members: string[], now: number, subject?: string): Promise<Array<SubjectToken | null>> {
    const { keys } = this.#core;
    const kinds = members.map(tokenKind);
    const reads: Command[] = [];
    members.forEach((member, i) => {
      const kind = kinds[i];
      if (kind !== undefined) reads.push(['HGETALL', kind === 'user' ? keys.userToken(member.slice(2)) : memberKey(keys, member)]);
    });
    const replies = reads.length === 0 ? [] : await this.#keyspace.read(reads);
    let at = 0;
    return members.map((member, i) => {
      const kind = kinds[i];
      return kind === undefined ? null : subjectTokenFromFields(kind, member.slice(2), fieldsOf(replies[at++]!), now, subject);
    });
  }

  async listSubjectTokens(subject: string, now: number, issuer?: string): Promise<SubjectToken[]> {
    const out: SubjectToken[] = [];
    // The indexes read side by side (on Cluster, each bucket's on its own node).
    await Promise.all(
      (await this.#heldIndexes(subject)).map(async (index) => {
        for await (const batch of this.#members(index, subject, now, SUBJECT_READ_BATCH)) {
          const members = batch.filter((m) => !m.startsWith(CONSENT_MEMBER));
          const tokens = await this.#readTokens(members, now, subject);
          const gone = members.filter((_, i) => tokens[i] === null);
          if (gone.length > 0) await this.#keyspace.apply({ guards: [], steps: [['ZREM', index, ...gone]] });
          for (const token of tokens) if (token !== null && (issuer === undefined || token.issuer === issuer)) out.push(token);
        }
      }),
    );
    return out;
  }

  async listClientTokens(clientId: string, now: number): Promise<SubjectToken[]> {
    const out: SubjectToken[] = [];
    for await (const members of scanKey(this.#keyspace, ['SSCAN', this.#core.keys.clientTokens(clientId)], SUBJECT_READ_BATCH))
      for (const token of await this.#readTokens(members, now)) if (token !== null) out.push(token);
    return out;
  }

  async listSubjectConsents(subject: string, now: number): Promise<SubjectConsent[]> {
    const { keys } = this.#core;
    const index = this.#core.subjectIndex(subject);
    const out: SubjectConsent[] = [];
    for await (const batch of this.#members(index, subject, now, SUBJECT_READ_BATCH)) {
      const gone: string[] = [];
      // A member that names no approval is dropped with those whose approval is gone.
      const named: Array<{ member: string; browserHash: string; key: string }> = [];
      for (const member of batch.filter((m) => m.startsWith(CONSENT_MEMBER))) {
        const where = parseConsentMember(member);
        if (where === null) gone.push(member);
        else named.push({ member, ...where });
      }
      const values =
        named.length === 0 ? [] : await this.#keyspace.read(named.map((n): Command => ['HGET', keys.consents(n.browserHash), n.key]));
      named.forEach(({ member, browserHash, key }, i) => {
        const value = values[i];
        const consent = typeof value === 'string' ? consentFromValue(value, now) : null;
        if (consent && consent.subject === subject) out.push({ ...consent, browserHash, key });
        else gone.push(member);
      });
      if (gone.length > 0) await this.#keyspace.apply({ guards: [], steps: [['ZREM', index, ...gone]] });
    }
    return out;
  }

  /**
   * The subject's indexes one after another (home, then bucket by bucket: each batch's plan runs in
   * one slot); a run stopped half-way is finished by the next, which finds only what is left.
   */
  async revokeSubject(subject: string, issuer: string | undefined, now: number, batchSize: number): Promise<SubjectRevocation> {
    const size = Math.max(1, Math.trunc(batchSize));
    const result: SubjectRevocation = { accessTokensRevoked: 0, refreshTokensRevoked: 0, userTokensRevoked: 0, consentsForgotten: 0 };
    for (const index of await this.#heldIndexes(subject))
      for await (const batch of this.#members(index, subject, now, size))
        await this.#revokeBatch(index, subject, issuer, now, batch, result);
    return result;
  }

  /**
   * Revokes one batch of `index`'s members, counted into `result`. Each write is a revocation
   * (revokeThrough: on Redis with replicas, WAITed for); the user-grade tokens' records are outside
   * any slot of the OAuth records, so theirs is one compare-and-set per token (Cluster routes each to
   * its node), their members then removed but for another issuer's. The batch's notice is sent once.
   */
  async #revokeBatch(
    index: string,
    subject: string,
    issuer: string | undefined,
    now: number,
    batch: string[],
    result: SubjectRevocation,
  ): Promise<void> {
    const core = this.#core;
    const notice: RevocationNotice = {};
    /** The grants revoked in this batch that an approval may be linked to (user-grade tokens never are). */
    let grantIds: string[] = [];
    const inSlot = batch.filter((m) => !m.startsWith(USER_MEMBER));
    if (inSlot.length > 0) {
      const done = await core.revokeThrough((keyspace) => revokeSubjectBatch(keyspace, core.keys, index, subject, issuer, now, inSlot));
      addBatch(result, notice, done);
      grantIds = consentGrantIds(notice);
    }
    const users = batch.filter((m) => m.startsWith(USER_MEMBER));
    if (users.length > 0) {
      const outcomes = await core.revokeThrough((keyspace) =>
        Promise.all(
          users.map(async (m) => core.updateHash(core.keys.userToken(m.slice(2)), subjectUserRevocationUpdate(subject, issuer), keyspace)),
        ),
      );
      const revoked = users.filter((_, i) => outcomes[i] === 'revoked').map((m) => m.slice(2));
      result.userTokensRevoked += revoked.length;
      if (revoked.length > 0) notice.tokenHashes = [...(notice.tokenHashes ?? []), ...revoked];
      const done = users.filter((_, i) => outcomes[i] !== 'other_issuer');
      if (done.length > 0) await core.keyspace.apply({ guards: [], steps: [['ZREM', index, ...done]] });
    }
    if (notice.tokenHashes !== undefined || notice.familyIds !== undefined) await core.publish(notice, grantIds);
  }

  async rebuildSubjectIndex(now: number, batchSize: number): Promise<SubjectIndexRebuild> {
    const size = Math.max(1, Math.trunc(batchSize));
    const total: SubjectIndexRebuild = { scanned: 0, indexed: 0 };
    const { keys } = this.#core;
    const userPrefix = keys.userToken('');
    // Each kind: its SCAN pattern, the hash a key names, and the index it goes to (a bucket's for OAuth tokens).
    const tokenKinds = [
      [`${escapeGlob(userPrefix)}*`, (key: string) => (key.startsWith(userPrefix) ? key.slice(userPrefix.length) : ''), USER_MEMBER, false],
      [keys.accessTokenPattern(), (key: string) => keys.accessTokenHashOf(key) ?? '', ACCESS_MEMBER, true],
      [keys.refreshTokenPattern(), (key: string) => keys.refreshTokenHashOf(key) ?? '', REFRESH_MEMBER, true],
    ] as const;
    for (const [pattern, hashOf, kind, bucketed] of tokenKinds) {
      await this.#core.scanKeys(pattern, size, async (found) => {
        total.scanned += found.length;
        const states = await this.#keyspace.read(found.map((key): Command => ['HMGET', key, 'subject', 'expiresAt']));
        const writes: Array<Promise<unknown>> = [];
        found.forEach((key, i) => {
          const [subject, expiresText] = states[i] as Reply[];
          const expiresAt = Number(expiresText);
          const hash = hashOf(key);
          if (typeof subject !== 'string' || subject === '' || hash === '' || !Number.isSafeInteger(expiresAt) || expiresAt <= now) return;
          const index = this.#core.subjectIndex(subject, bucketed ? hashBucket(hash) : undefined);
          writes.push(indexSubject(this.#keyspace, index, kind + hash, expiresAt));
        });
        await Promise.all(writes);
        total.indexed += writes.length;
      });
    }
    const consentsPrefix = keys.consents('');
    await this.#core.scanKeys(`${escapeGlob(consentsPrefix)}*`, size, async (found) => {
      for (const key of found) {
        const browserHash = key.slice(consentsPrefix.length);
        for await (const flat of scanKey(this.#keyspace, ['HSCAN', key], size)) {
          const writes: Array<Promise<unknown>> = [];
          for (let i = 0; i + 1 < flat.length; i += 2) {
            total.scanned++;
            const consent = consentFromValue(flat[i + 1]!, now);
            if (consent)
              writes.push(
                indexSubject(
                  this.#keyspace,
                  this.#core.subjectIndex(consent.subject),
                  consentMember(browserHash, flat[i]!),
                  consent.expiresAt,
                ),
              );
          }
          await Promise.all(writes);
          total.indexed += writes.length;
        }
      }
    });
    return total;
  }

  async recordLastUse(uses: ReadonlyArray<{ tokenHash: string; kind: 'user' | 'oauth'; at: number }>): Promise<void> {
    const { keys } = this.#core;
    await Promise.all(
      uses.map(async (use) =>
        this.#core.updateHash(use.kind === 'user' ? keys.userToken(use.tokenHash) : keys.accessToken(use.tokenHash), lastUseUpdate(use.at)),
      ),
    );
  }

  async markSubjectRevoked(subject: string, issuer: string | undefined, at: number, keepUntil: number): Promise<void> {
    const key = this.#core.keys.subjectCutoff(subjectDigest(subject));
    await this.#keyspace.apply({
      guards: [],
      steps: [
        ['HSET', key, issuer ?? EVERY_ISSUER, String(at)],
        ['PEXPIREAT', key, Math.trunc(keepUntil)],
      ],
    });
  }

  async subjectRevokedAt(subject: string, issuer: string): Promise<number | undefined> {
    return cutoffFromFields(
      fieldsOf(await readOne(this.#keyspace, ['HGETALL', this.#core.keys.subjectCutoff(subjectDigest(subject))])),
      issuer,
    );
  }
}
