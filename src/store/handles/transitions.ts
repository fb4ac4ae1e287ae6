// Session and task handles' transitions, written once on the keyspace port (src/store/keyspace.ts)
// and run by both engines: a handle claimed (used or bound, renewed when due, listed in its owner's
// indexes with the least recently used forgotten past the limit), one handle forgotten, and an
// owner's index cleared.

import type { KeyLayout } from '../key-layout.ts';
import { transition, type Command, type Guard, type Keyspace, type Plan, type Reply } from '../keyspace.ts';
import { handleFields, handleMember, handleRenewalDue } from './records.ts';
import type { HandleBinding, HandleKind, HandleOwner, HandleUse } from '../types.ts';
import { indexedHandlesToForget } from '../../model/handles.ts';

/** A claim of a handle: a use (`bind` false: an unrecorded handle is `unknown`) or a bind. */
export interface HandleClaim {
  bind: boolean;
  kind: HandleKind;
  handleHash: string;
  owner: HandleOwner;
  now: number;
  ttlMs: number;
  maxPerOwner: number;
  /** On a bind that records the handle: mark it (a session whose `initialize` declared URL-mode elicitation). */
  urlElicitation?: boolean;
}

/** An owner's index a claimed handle is listed in: the index, and the handle field naming that owner. */
interface OwnerIndex {
  index: string;
  field: 'clientId' | 'subjectHash';
  value: string;
}

const text = (reply: Reply | undefined): string | null => (reply === null || reply === undefined ? null : String(reply));

/**
 * Whose the handle is, and for its owner, when due, its renewal (or its binding, when `bind` and the
 * handle is unrecorded). The common case, a use by its owner within a sixteenth of the lifetime since
 * the last renewal (handleRenewalDue), is one read (HMGET) and no write: it runs for every request
 * carrying a session id. Otherwise the handle's fields, `renewedAt = now` and its expiry (`ttlMs`) are
 * written together with its owner's indexes (listOwned), guarded by the owner and `renewedAt` as read:
 * of two first presentations by different owners one binds, the other then reads a foreign handle;
 * of two renewals one writes, the other then reads a renewal not due. All keys are under {oauth}.
 */
export function claimHandle(keyspace: Keyspace, keys: KeyLayout, claim: HandleClaim): Promise<HandleUse | HandleBinding> {
  const key = keys.handle(claim.kind, claim.handleHash);
  const ttl = Math.max(1, Math.trunc(claim.ttlMs));
  return transition<HandleUse | HandleBinding>(keyspace, 'claimHandle', async (ks) => {
    const [read] = await ks.read([['HMGET', key, 'owner', 'renewedAt']]);
    const holder = text((read as Reply[])[0]);
    const renewedAt = text((read as Reply[])[1]);
    if (holder !== null && holder !== claim.owner.id) return { result: 'foreign' };
    if (holder === null && !claim.bind) return { result: 'unknown' };
    const outcome = holder === null ? 'bound' : 'owned';
    if (outcome === 'owned' && !handleRenewalDue(renewedAt, claim.now, ttl)) return { result: outcome };
    const fields: Array<string | number> = [];
    if (outcome === 'bound') {
      for (const [field, value] of Object.entries(handleFields(claim.owner))) fields.push(field, value);
      if (claim.urlElicitation === true) fields.push('urlElicitation', '1');
    }
    const listed = await listOwned(ks, keys, ownerIndexes(keys, claim.owner), handleMember(claim.kind, claim.handleHash), claim);
    const plan: Plan = {
      guards: [
        { command: ['HGET', key, 'owner'], equals: holder },
        { command: ['HGET', key, 'renewedAt'], equals: renewedAt },
        ...listed.guards,
      ],
      steps: [['HSET', key, ...fields, 'renewedAt', claim.now], ['PEXPIRE', key, ttl], ...listed.steps],
    };
    return { result: outcome, plan };
  });
}

/** The indexes an owner's handles are listed in: its client's, its person's (either may be absent). */
function ownerIndexes(keys: KeyLayout, owner: HandleOwner): OwnerIndex[] {
  const indexes: OwnerIndex[] = [];
  if (owner.clientId !== undefined) indexes.push({ index: keys.handlesByClient(owner.clientId), field: 'clientId', value: owner.clientId });
  if (owner.subjectHash !== undefined)
    indexes.push({ index: keys.handlesBySubject(owner.subjectHash), field: 'subjectHash', value: owner.subjectHash });
  return indexes;
}

/**
 * The claimed handle (`member`) listed in each of its owner's indexes, scored by its new expiry
 * (`now + ttl`), each index expiring `ttl` from now: members expired by `now` are dropped, and a
 * member not listed yet takes the place of the least recently used ones past `maxPerOwner` (their
 * handles forgotten only if still that owner's: a stale member names someone else's handle by now).
 * Reads the member's score and the live count of each index (one round trip), and only when some are
 * over the limit, the oldest live members, then their handles' owner field (one round trip each).
 * Guards: the member's score as read (listed or not), and when it is not listed the live count
 * (ZCOUNT from `now`, exclusive, which is what the index holds once its expired members are dropped:
 * ZCARD would also count members expired meanwhile, which another claim may drop while adding one):
 * still below the limit when there was room, exactly as read when evicting; each evicted member's
 * score and its handle's owner field as read. So the index grows by one only
 * from a count read, never past `maxPerOwner` however many claims race.
 */
async function listOwned(
  ks: Keyspace,
  keys: KeyLayout,
  indexes: OwnerIndex[],
  member: string,
  claim: HandleClaim,
): Promise<{ guards: Guard[]; steps: Command[] }> {
  const ttl = Math.max(1, Math.trunc(claim.ttlMs));
  const max = Math.max(1, Math.trunc(claim.maxPerOwner));
  const live = `(${claim.now}`;
  const counts = await ks.read(
    indexes.flatMap(({ index }): Command[] => [
      ['ZSCORE', index, member],
      ['ZCOUNT', index, live, '+inf'],
    ]),
  );
  const states = indexes.map((owner, i) => {
    const score = text(counts[2 * i]);
    const count = Number(counts[2 * i + 1]);
    const listed = score !== null && Number(score) > claim.now;
    return { ...owner, score, count, listed, over: listed ? 0 : count - max + 1 };
  });
  const evicting = states.filter(({ over }) => over > 0);
  const oldest = await readAll(
    ks,
    evicting.map(({ index, over }): Command => ['ZRANGEBYSCORE', index, live, '+inf', 'WITHSCORES', 'LIMIT', 0, over]),
  );
  const candidates = evicting.flatMap((state, i) => pairs(oldest[i]!).map(([m, score]) => ({ ...state, m, score })));
  const prefix = keys.handlePrefix();
  const holders = await readAll(
    ks,
    candidates.map(({ m, field }): Command => ['HGET', prefix + m, field]),
  );
  const guards: Guard[] = [];
  const steps: Command[] = [];
  for (const { index, score, count, listed } of states) {
    guards.push({ command: ['ZSCORE', index, member], equals: score });
    // With room left, only that room is pinned (claims racing into one index with room do not retry
    // each other); when evicting, the count itself, with the evicted members below.
    if (!listed)
      guards.push(
        count < max
          ? { command: ['ZCOUNT', index, live, '+inf'], below: max }
          : { command: ['ZCOUNT', index, live, '+inf'], equals: count },
      );
    steps.push(['ZREMRANGEBYSCORE', index, '-inf', claim.now]);
  }
  candidates.forEach(({ index, field, value, m, score }, i) => {
    const holder = text(holders[i]);
    guards.push({ command: ['ZSCORE', index, m], equals: score }, { command: ['HGET', prefix + m, field], equals: holder });
    steps.push(['ZREM', index, m]);
    if (holder === value) steps.push(['DEL', prefix + m]);
  });
  for (const { index } of states) steps.push(['ZADD', index, claim.now + ttl, member], ['PEXPIRE', index, ttl]);
  return { guards, steps };
}

/** Reads, in one round trip; none at all when there is nothing to read. */
function readAll(ks: Keyspace, commands: readonly Command[]): Promise<Reply[]> {
  return commands.length === 0 ? Promise.resolve([]) : ks.read(commands);
}

/** A `member score ...` reply as pairs, the scores as the text Redis answers (what a guard compares). */
function pairs(reply: Reply): Array<[member: string, score: string]> {
  const out: Array<[string, string]> = [];
  if (Array.isArray(reply)) for (let i = 0; i + 1 < reply.length; i += 2) out.push([String(reply[i]), String(reply[i + 1])]);
  return out;
}

/**
 * Forgets every handle an owner's index lists that is still that owner's (`field` = `value`), then
 * the index (indexedHandlesToForget decides; all under {oauth}: one slot). Reads the index, then each
 * listed handle's owner field (one round trip each), and writes while the index's size, each member's
 * score and each handle's field are as read: the index then lists exactly the members read (a size
 * equal and every member read still there), so a handle bound, renewed or rebound meanwhile makes it
 * decide again, and a handle is either forgotten or still listed, never left unlisted. Answers how many
 * were forgotten; an empty index writes nothing.
 */
export function forgetIndexedHandles(keyspace: Keyspace, keys: KeyLayout, index: string, field: string, value: string): Promise<number> {
  const prefix = keys.handlePrefix();
  return transition(keyspace, 'forgetIndexedHandles', async (ks) => {
    const [read] = await ks.read([['ZRANGE', index, 0, -1, 'WITHSCORES']]);
    const listed = pairs(read!);
    if (listed.length === 0) return { result: 0 };
    const holders = (await ks.read(listed.map(([m]): Command => ['HGET', prefix + m, field]))).map(text);
    const forget = indexedHandlesToForget(
      listed.map(([m], i) => [m, holders[i]] as const),
      value,
    );
    const guards: Guard[] = [{ command: ['ZCARD', index], equals: listed.length }];
    listed.forEach(([m, score], i) => {
      guards.push({ command: ['ZSCORE', index, m], equals: score }, { command: ['HGET', prefix + m, field], equals: holders[i] ?? null });
    });
    const steps: Command[] = [...forget.map((m): Command => ['DEL', prefix + m]), ['DEL', index]];
    return { result: forget.length, plan: { guards, steps } };
  });
}

/**
 * Forgets one handle (a session ended by DELETE): its members in its owner's indexes, then the handle;
 * false when none was recorded. Reads the owner and the fields naming its indexes, and writes while
 * they are as read (a handle forgotten and bound again meanwhile is read again: the members removed
 * are always its owner's), so of racing forgets exactly one answers true.
 */
export function forgetHandle(keyspace: Keyspace, keys: KeyLayout, kind: HandleKind, handleHash: string): Promise<boolean> {
  const key = keys.handle(kind, handleHash);
  const member = handleMember(kind, handleHash);
  return transition(keyspace, 'forgetHandle', async (ks) => {
    const [read] = await ks.read([['HMGET', key, 'owner', 'clientId', 'subjectHash']]);
    const fields = read as Reply[];
    const [owner, clientId, subjectHash] = [text(fields[0]), text(fields[1]), text(fields[2])];
    if (owner === null) return { result: false };
    const steps: Command[] = [];
    if (clientId !== null) steps.push(['ZREM', keys.handlesByClient(clientId), member]);
    if (subjectHash !== null) steps.push(['ZREM', keys.handlesBySubject(subjectHash), member]);
    steps.push(['DEL', key]);
    const guards: Guard[] = [
      { command: ['HGET', key, 'owner'], equals: owner },
      { command: ['HGET', key, 'clientId'], equals: clientId },
      { command: ['HGET', key, 'subjectHash'], equals: subjectHash },
    ];
    return { plan: { guards, steps }, result: (replies: Reply[]) => replies.at(-1) === 1 };
  });
}
