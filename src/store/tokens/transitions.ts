// Issuing OAuth tokens as transitions on the keyspace port (src/store/keyspace.ts), written once for
// both engines: the writes every issuance makes (issue, rotate, redeem), the client check they are
// guarded by, and the revocation of a refresh family. Every key here is in the client's bucket
// (`{oauth:<bucket>}`: the client, its token set and families, the tokens minted for it, the subject's
// index of that bucket), so each plan is one Cluster slot.

import { ACCESS_MEMBER, REFRESH_MEMBER, accessTokenFields, hashBucket, refreshTokenFields, type KeyLayout } from '../records.ts';
import { fieldArgs, membersOf, readOne, transition, type Command, type Guard, type Keyspace, type Reply } from '../keyspace.ts';
import type { CreateTokenOutcome } from '../types.ts';
import type { AccessTokenRecord, RefreshTokenRecord } from '../../model/records.ts';

/** Where the transitions on tokens find their keys (RedisCore and MemoryCore both are one). */
export interface TokenKeys {
  readonly keys: KeyLayout;
  /**
   * The index listing a subject's tokens of one bucket: on Redis the bucket's own (in the slot of the
   * tokens it lists), without a bucket the subject's home index (user-grade tokens); in memory the
   * subject's one index either way (no slots there; the one its person index reads).
   */
  subjectIndex(subject: string, bucket?: string): string;
}

/** The reads of a client's state, to run with whatever else a transition reads. */
export function clientReads(keys: KeyLayout, clientId: string): Command[] {
  const client = keys.client(clientId);
  return [
    ['EXISTS', client],
    ['HEXISTS', client, 'revokedAt'],
  ];
}

/** A client's state from the replies of clientReads. */
export function clientState([exists, revoked]: Reply[]): CreateTokenOutcome {
  if (exists !== 1) return 'client_not_found';
  return revoked === 1 ? 'client_revoked' : 'ok';
}

/**
 * A client as read `ok`, pinned: it still exists and is still not revoked when the tokens are stored.
 * deleteClient marks the client revoked (and WATCHes its token set, which the plan adds to), so an
 * issuance racing it either lands before its snapshot (and is revoked with the rest) or reads the
 * client revoked on its next attempt: never a live token of a revoked client.
 */
export function clientGuards(keys: KeyLayout, clientId: string): Guard[] {
  const [exists, revoked] = clientReads(keys, clientId);
  return [
    { command: exists!, equals: 1 },
    { command: revoked!, equals: 0 },
  ];
}

/** An HMGET reply as its values (absent: null). */
export function fieldsRead(reply: Reply): Array<string | null> {
  return Array.isArray(reply) ? reply.map((v) => (v === null ? null : String(v))) : [];
}

/** Guards that the fields a decision read from `key` (HMGET) are still as read. */
export function fieldGuards(key: string, fields: readonly string[], values: ReadonlyArray<string | null>): Guard[] {
  return fields.map((field, i) => ({ command: ['HGET', key, field], equals: values[i] ?? null }));
}

/** The key of a member of a token set or family (`a:` access, `r:` refresh, then the token hash). */
export function memberKey(keys: KeyLayout, member: string): string {
  const hash = member.slice(ACCESS_MEMBER.length);
  return member.startsWith(ACCESS_MEMBER) ? keys.accessToken(hash) : keys.refreshToken(hash);
}

/** Lists `member` in a sorted-set index that expires with its longest-lived member (PEXPIREAT NX, then GT). */
function indexed(index: string, member: string, expiresAt: number): Command[] {
  return [
    ['ZADD', index, expiresAt, member],
    ['PEXPIREAT', index, expiresAt, 'NX'],
    ['PEXPIREAT', index, expiresAt, 'GT'],
  ];
}

/**
 * The writes of issuing an access token and optionally a refresh token: each record with its expiry,
 * both in the client's token set (which deleteClient revokes), the pair in the refresh family (which
 * a reuse revokes), and, for a signed-in user, both in the subject's index of the access token's
 * bucket (an offboarding finds them there). A set expires with its longest-lived member.
 */
export function storeTokensSteps(layout: TokenKeys, access: AccessTokenRecord, refresh?: RefreshTokenRecord): Command[] {
  const { keys } = layout;
  const user = access.user ?? refresh?.user;
  const index = user === undefined ? undefined : layout.subjectIndex(user.subject, hashBucket(access.tokenHash));
  const accessKey = keys.accessToken(access.tokenHash);
  const tokens = keys.clientTokens(access.clientId);
  const accessMember = ACCESS_MEMBER + access.tokenHash;
  const steps: Command[] = [
    ['HSET', accessKey, ...fieldArgs(accessTokenFields(access))],
    ['PEXPIREAT', accessKey, access.expiresAt],
    ['SADD', tokens, accessMember],
  ];
  if (index !== undefined) steps.push(...indexed(index, accessMember, access.expiresAt));
  if (refresh === undefined) return steps;
  const refreshKey = keys.refreshToken(refresh.tokenHash);
  const family = keys.refreshFamily(access.clientId, refresh.familyId);
  const refreshMember = REFRESH_MEMBER + refresh.tokenHash;
  steps.push(
    ['HSET', refreshKey, ...fieldArgs(refreshTokenFields(refresh))],
    ['PEXPIREAT', refreshKey, refresh.expiresAt],
    ['SADD', tokens, refreshMember],
    ['SADD', family, accessMember, refreshMember],
    ['PEXPIREAT', family, refresh.expiresAt, 'NX'],
    ['PEXPIREAT', family, refresh.expiresAt, 'GT'],
  );
  if (index !== undefined) steps.push(...indexed(index, refreshMember, refresh.expiresAt));
  return steps;
}

/**
 * Issues an access token (and optionally a refresh token of a new family) while its client exists
 * and is not revoked: one read of the client, then the writes guarded by what it read.
 */
export function issueTokens(
  keyspace: Keyspace,
  layout: TokenKeys,
  access: AccessTokenRecord,
  refresh?: RefreshTokenRecord,
): Promise<CreateTokenOutcome> {
  return transition(keyspace, 'issueTokens', async (ks) => {
    const state = clientState(await ks.read(clientReads(layout.keys, access.clientId)));
    if (state !== 'ok') return { result: state };
    return {
      result: state,
      plan: { guards: clientGuards(layout.keys, access.clientId), steps: storeTokensSteps(layout, access, refresh) },
    };
  });
}

/**
 * The guards and writes revoking every live token of a refresh family (revokedAt set where absent),
 * plus the records named in `also` (the presented token, what a code issued): the family's members
 * are read, then whether each record still exists. The guards pin the family's size (a family only
 * grows while it lives: a token added meanwhile makes the transition read again, so it is revoked
 * too) and each written record's existence (a record gone meanwhile would otherwise come back as a
 * bare hash with no expiry). Records read as absent never come back: token hashes are not reused.
 * Without a family, the records of `also` alone.
 */
export async function familyRevocation(
  keyspace: Keyspace,
  keys: KeyLayout,
  family: { clientId: string; familyId: string } | undefined,
  now: number,
  also: readonly string[] = [],
): Promise<{ guards: Guard[]; steps: Command[] }> {
  const setKey = family && keys.refreshFamily(family.clientId, family.familyId);
  const members = setKey === undefined ? [] : membersOf(await readOne(keyspace, ['SMEMBERS', setKey]));
  const targets = [...new Set([...also, ...members.map((m) => memberKey(keys, m))])];
  const exists = targets.length === 0 ? [] : await keyspace.read(targets.map((key): Command => ['EXISTS', key]));
  const live = targets.filter((_, i) => exists[i] === 1);
  const guards = live.map((key): Guard => ({ command: ['EXISTS', key], equals: 1 }));
  if (setKey !== undefined) guards.unshift({ command: ['SCARD', setKey], equals: members.length });
  return { guards, steps: live.map((key): Command => ['HSETNX', key, 'revokedAt', String(now)]) };
}
