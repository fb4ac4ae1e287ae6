// The person index's transitions, written once on the keyspace port (src/store/keyspace.ts) and run by
// both engines: a member listed in a subject's index, and one batch of a subject's revocation.

import { revokeHolding, type Holding, type HoldingRevocation } from '../../model/offboarding.ts';
import { transition, type Command, type Guard, type Keyspace, type Plan, type Reply } from '../keyspace.ts';
import type { KeyLayout } from '../key-layout.ts';
import type { RevocationNotice } from '../types.ts';
import { ACCESS_MEMBER, CONSENT_MEMBER, parseConsentMember, REFRESH_MEMBER } from './records.ts';
import { memberKey } from '../tokens/transitions.ts';

/**
 * Lists `member` in the sorted set `index`, scored by its record's expiry; the index expires with
 * its longest-lived member: PEXPIREAT NX gives a new index the member's expiry, PEXPIREAT GT moves an
 * older one's later, never earlier. No guard: the steps are right whatever the index holds.
 */
export function indexSubjectPlan(index: string, member: string, expiresAt: number): Plan {
  return {
    guards: [],
    steps: [
      ['ZADD', index, expiresAt, member],
      ['PEXPIREAT', index, expiresAt, 'NX'],
      ['PEXPIREAT', index, expiresAt, 'GT'],
    ],
  };
}

/** Lists `member` in `index` (indexSubjectPlan): one atomic step. */
export async function indexSubject(keyspace: Keyspace, index: string, member: string, expiresAt: number): Promise<void> {
  await keyspace.apply(indexSubjectPlan(index, member, expiresAt));
}

/** What one batch of a subject's revocation took away: counts, and what the revocation notice names. */
export interface SubjectBatchRevocation {
  accessTokensRevoked: number;
  refreshTokensRevoked: number;
  consentsForgotten: number;
  /** The revoked access tokens' hashes. */
  tokenHashes: string[];
  /** The families of the revoked refresh tokens. */
  familyIds: string[];
}

/** The fields of a token record a revocation reads (HMGET, in this order). */
const TOKEN_FIELDS = ['subject', 'issuer', 'revokedAt', 'familyId', 'expiresAt'] as const;

/** One member of a batch: its kind, where its record lives (the field, for an approval), and its read. */
interface Member {
  kind: 'access' | 'refresh' | 'consent' | 'unreadable' | 'other';
  member: string;
  key?: string;
  field?: string;
  command?: Command;
}

/** A member and the read its decision needs (none for a member that names no record). */
function memberOf(keys: KeyLayout, member: string): Member {
  if (member.startsWith(ACCESS_MEMBER) || member.startsWith(REFRESH_MEMBER)) {
    const key = memberKey(keys, member);
    return { kind: member.startsWith(ACCESS_MEMBER) ? 'access' : 'refresh', member, key, command: ['HMGET', key, ...TOKEN_FIELDS] };
  }
  if (member.startsWith(CONSENT_MEMBER)) {
    const where = parseConsentMember(member);
    if (where === null) return { kind: 'unreadable', member };
    const key = keys.consents(where.browserHash);
    return { kind: 'consent', member, key, field: where.key, command: ['HGET', key, where.key] };
  }
  return { kind: 'other', member };
}

/** A token record's fields as offboarding's rule reads them: null when no record is stored. */
function tokenHolding(fields: Array<string | null>): Holding | null {
  const [subject, issuer, revokedAt, , expiresAt] = fields;
  return subject === null || expiresAt === null ? null : { subject, issuer, revoked: revokedAt !== null };
}

/** An approval's JSON value as offboarding's rule reads it: null when gone or not an object. */
function consentHolding(value: string | null): Holding | null {
  if (value === null) return null;
  try {
    const v: unknown = JSON.parse(value);
    if (typeof v !== 'object' || v === null) return null;
    const { subject, issuer } = v as Record<string, unknown>;
    return { subject, issuer, revoked: false };
  } catch {
    return null;
  }
}

/**
 * One batch of `subject`'s revocation, for members of one index (one Cluster slot: a bucket's index
 * lists that bucket's access and refresh tokens, the home index the subject's approvals): the batch's
 * records are read together, each member decided by offboarding's one rule (revokeHolding), then
 * plans of PLAN_MEMBERS members apply the batch: access and refresh tokens get revokedAt, approvals are forgotten, members
 * naming nothing of the subject's leave the index, another issuer's stay. User-grade tokens (`u:`)
 * are not for this step (they live outside any slot): any other member stays as it is.
 *
 * The guards pin what each write depends on. A token revoked here: its `subject` (the record is still
 * there: a token's subject, issuer and expiry never change while it is stored, and a write on a record
 * expired meanwhile would create a hash of its own) and its `revokedAt` still absent (counted once
 * among concurrent revocations). An approval forgotten or unlisted here: its value as read (given
 * again meanwhile, its member re-listed, it would otherwise lose its listing). A token already revoked
 * or gone leaves the index unguarded: neither comes back under the same hash. A guard that failed
 * means the batch is read and decided again on what is there now.
 */
export async function revokeSubjectBatch(
  keyspace: Keyspace,
  keys: KeyLayout,
  index: string,
  subject: string,
  issuer: string | undefined,
  now: number,
  members: readonly string[],
): Promise<SubjectBatchRevocation> {
  const parts: Array<Promise<SubjectBatchRevocation>> = [];
  for (let at = 0; at < members.length; at += PLAN_MEMBERS)
    parts.push(revokeMembers(keyspace, keys, index, subject, issuer, now, members.slice(at, at + PLAN_MEMBERS)));
  const result = noneRevoked();
  for (const part of await Promise.all(parts)) {
    addCounts(result, part);
    result.tokenHashes.push(...part.tokenHashes);
    result.familyIds.push(...part.familyIds);
  }
  return result;
}

/** A batch that revoked nothing. */
function noneRevoked(): SubjectBatchRevocation {
  return { accessTokensRevoked: 0, refreshTokensRevoked: 0, consentsForgotten: 0, tokenHashes: [], familyIds: [] };
}

type Counts = Pick<SubjectBatchRevocation, 'accessTokensRevoked' | 'refreshTokensRevoked' | 'consentsForgotten'>;

function addCounts(into: Counts, done: Counts): void {
  into.accessTokensRevoked += done.accessTokensRevoked;
  into.refreshTokensRevoked += done.refreshTokensRevoked;
  into.consentsForgotten += done.consentsForgotten;
}

/**
 * What a batch revoked, added to a subject's revocation (its counts) and to the batch's notice (the
 * access tokens and families it names): both engines report a batch this way.
 */
export function addBatch(result: Counts, notice: RevocationNotice, done: SubjectBatchRevocation): void {
  addCounts(result, done);
  if (done.tokenHashes.length > 0) notice.tokenHashes = done.tokenHashes;
  if (done.familyIds.length > 0) notice.familyIds = done.familyIds;
}

/**
 * Members decided and written by one plan. Each member's decision depends on its own record only, so
 * a batch is cut into plans of this many, sent together (one round trip for their reads, one for
 * their plans): the widest plan (about 17 arguments a revoked token) stays under 200 arguments, and
 * Redis, which runs one script at a time, is never held by one longer than a short script.
 */
const PLAN_MEMBERS = 11;

/** Part of a batch (revokeSubjectBatch): one transition, read, decided and written as one plan. */
function revokeMembers(
  keyspace: Keyspace,
  keys: KeyLayout,
  index: string,
  subject: string,
  issuer: string | undefined,
  now: number,
  members: readonly string[],
): Promise<SubjectBatchRevocation> {
  // An empty issuer names none: every issuer's (as the admin API's absent one).
  const only = issuer === '' ? undefined : issuer;
  const planned = members.map((member) => memberOf(keys, member));
  return transition(keyspace, 'revokeSubject', async (ks) => {
    const commands = planned.flatMap((p) => (p.command === undefined ? [] : [p.command]));
    const replies = commands.length === 0 ? [] : await ks.read(commands);
    const result = noneRevoked();
    const guards: Guard[] = [];
    const steps: Command[] = [];
    const unlisted: string[] = [];
    let at = 0;
    for (const p of planned) {
      const reply: Reply | undefined = p.command === undefined ? undefined : replies[at++];
      if (p.kind === 'unreadable') unlisted.push(p.member);
      if (p.kind === 'access' || p.kind === 'refresh') {
        const fields = (reply as Array<string | null>).map((f) => (f === null ? null : String(f)));
        const outcome: HoldingRevocation = revokeHolding(tokenHolding(fields), subject, only);
        if (outcome === 'other_issuer') continue;
        unlisted.push(p.member);
        if (outcome !== 'revoked') continue;
        guards.push({ command: ['HGET', p.key!, 'subject'], equals: subject }, { command: ['HGET', p.key!, 'revokedAt'], equals: null });
        steps.push(['HSET', p.key!, 'revokedAt', now]);
        if (p.kind === 'access') {
          result.accessTokensRevoked++;
          result.tokenHashes.push(p.member.slice(2));
        } else {
          result.refreshTokensRevoked++;
          if (fields[3] !== null) result.familyIds.push(fields[3]!);
        }
      } else if (p.kind === 'consent') {
        const value = reply === null || reply === undefined ? null : String(reply);
        const outcome = revokeHolding(consentHolding(value), subject, only);
        if (outcome === 'other_issuer') continue;
        guards.push({ command: ['HGET', p.key!, p.field!], equals: value });
        unlisted.push(p.member);
        if (outcome !== 'revoked') continue;
        steps.push(['HDEL', p.key!, p.field!]);
        result.consentsForgotten++;
      }
    }
    if (unlisted.length > 0) steps.push(['ZREM', index, ...unlisted]);
    return steps.length === 0 ? { result } : { result, plan: { guards, steps } };
  });
}
