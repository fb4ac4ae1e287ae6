// The directory's people (SCIM users pushed by Entra ID, Okta...): the record, and every change to it
// as a pure plan over what was read (the user, and the user its new userName would take the place of).
// Both stores read the same things, ask these functions what to write, and write it only while what
// they read is unchanged (a WATCH/MULTI on Redis, one synchronous step in memory): no script of its own.
//
// A user deleted by the directory stays as a tombstone under its userName, so the person stays
// refused at sign-in until the directory creates them again (or another record takes the name).

/** One person as the directory provisioned them, for one identity provider (`provider`). */
export interface DirectoryUser {
  /** The SCIM `id`: chosen here (a UUID), never by the directory. */
  id: string;
  /** The identity provider whose people this directory provisions (`scim.provider`). */
  provider: string;
  /** As the directory sent it; unique per provider ignoring case (RFC 7643 §4.1.1: caseExact false). */
  userName: string;
  /** The directory's own identifier of the person, kept and returned. */
  externalId?: string;
  active: boolean;
  /** The other attributes the directory sent (name, emails, extensions), kept and returned as sent. */
  attributes: Record<string, unknown>;
  createdAt: number;
  updatedAt: number;
  /** Counts the changes (the SCIM `meta.version`). */
  version: number;
  /** When the directory deleted the person: the record is then a tombstone. */
  deletedAt?: number;
}

/** An index of the directory's users: by userName (ignoring case) or by externalId (exact). */
export type DirectoryIndex = 'userName' | 'externalId';

/** What a change writes: the user, the indexes set to name it, those dropped while they still name it. */
export interface DirectoryWrite {
  user: DirectoryUser;
  setIndexes: Array<[DirectoryIndex, string]>;
  dropIndexes: Array<[DirectoryIndex, string]>;
  /** A tombstone whose userName a new user takes: it goes. */
  dropUser?: string;
}

/** The outcome of a change to one user, with the user before and after when it was written. */
export type DirectoryChange =
  | { outcome: 'not_found' }
  | { outcome: 'conflict' }
  | { outcome: 'deleted_before'; before: DirectoryUser }
  | { outcome: 'written'; before: DirectoryUser | null; after: DirectoryUser; write: DirectoryWrite };

/** The value a userName is indexed and matched under. */
export function userNameKey(userName: string): string {
  return userName.normalize('NFC').toLowerCase();
}

/** Whether a user read under an index is a tombstone (deleted by the directory). */
function tombstone(user: DirectoryUser | null | 'corrupt'): user is DirectoryUser & { deletedAt: number } {
  return user !== null && user !== 'corrupt' && user.deletedAt !== undefined;
}

function indexChanges(before: DirectoryUser | null, after: DirectoryUser): Pick<DirectoryWrite, 'setIndexes' | 'dropIndexes'> {
  const setIndexes: DirectoryWrite['setIndexes'] = [];
  const dropIndexes: DirectoryWrite['dropIndexes'] = [];
  const oldName = before && userNameKey(before.userName);
  const newName = userNameKey(after.userName);
  if (oldName !== newName) {
    setIndexes.push(['userName', newName]);
    if (oldName !== null) dropIndexes.push(['userName', oldName]);
  }
  const oldExternal = before?.externalId;
  const newExternal = after.deletedAt === undefined ? after.externalId : undefined;
  if (oldExternal !== newExternal) {
    if (newExternal !== undefined) setIndexes.push(['externalId', newExternal]);
    if (oldExternal !== undefined) dropIndexes.push(['externalId', oldExternal]);
  }
  return { setIndexes, dropIndexes };
}

/**
 * A new user. `holder`: the user the userName index names now. A live holder is a conflict (SCIM 409
 * uniqueness), and so is a record that cannot be read (fail closed); a tombstone gives its name up
 * (and goes).
 */
export function planCreate(candidate: DirectoryUser, holder: DirectoryUser | null | 'corrupt'): DirectoryChange {
  if (holder !== null && !tombstone(holder)) return { outcome: 'conflict' };
  const write: DirectoryWrite = { user: candidate, ...indexChanges(null, candidate) };
  if (holder !== null) write.dropUser = holder.id;
  return { outcome: 'written', before: null, after: candidate, write };
}

/**
 * A change to a live user: `change` gives the user it becomes (it may throw to refuse). `holder`: the
 * user the new userName's index names now (read when the name changes). Nothing is written when the
 * change leaves the user as it was: a directory's retry changes nothing.
 */
export function planUpdate(
  current: DirectoryUser | null | 'corrupt',
  change: (user: DirectoryUser) => DirectoryUser,
  holder: (userName: string) => DirectoryUser | null | 'corrupt',
  now: number,
): DirectoryChange {
  if (current === null || current === 'corrupt') return { outcome: 'not_found' };
  if (current.deletedAt !== undefined) return { outcome: 'deleted_before', before: current };
  const proposed = change(current);
  const renamed = userNameKey(proposed.userName) !== userNameKey(current.userName);
  if (renamed) {
    const other = holder(proposed.userName);
    if (other !== null && !tombstone(other) && (other === 'corrupt' || other.id !== current.id)) return { outcome: 'conflict' };
  }
  if (sameUser(current, proposed)) return { outcome: 'written', before: current, after: current, write: noWrite(current) };
  const after: DirectoryUser = {
    ...proposed,
    id: current.id,
    provider: current.provider,
    createdAt: current.createdAt,
    updatedAt: now,
    version: current.version + 1,
  };
  return { outcome: 'written', before: current, after, write: { user: after, ...indexChanges(current, after) } };
}

/** A delete: the user becomes a tombstone under its userName (inactive); a second delete finds it so. */
export function planDelete(current: DirectoryUser | null | 'corrupt', now: number): DirectoryChange {
  if (current === null || current === 'corrupt') return { outcome: 'not_found' };
  if (current.deletedAt !== undefined) return { outcome: 'deleted_before', before: current };
  const after: DirectoryUser = { ...current, active: false, deletedAt: now, updatedAt: now, version: current.version + 1 };
  return { outcome: 'written', before: current, after, write: { user: after, ...indexChanges(current, after) } };
}

function noWrite(user: DirectoryUser): DirectoryWrite {
  return { user, setIndexes: [], dropIndexes: [] };
}

/** Whether a plan writes anything. */
export function writesNothing(change: DirectoryChange): boolean {
  return change.outcome !== 'written' || (change.before !== null && change.before === change.after);
}

function sameUser(a: DirectoryUser, b: DirectoryUser): boolean {
  return (
    a.userName === b.userName &&
    a.externalId === b.externalId &&
    a.active === b.active &&
    JSON.stringify(a.attributes) === JSON.stringify(b.attributes)
  );
}

/**
 * The person a change leaves without access (made inactive, deleted, created inactive), whose grants
 * are revoked: after every such change, a directory's retry included, so that a revocation cut short
 * (an outage halfway) is completed by the retry. Undefined: the person keeps access.
 */
export function leftInactive(change: DirectoryChange): DirectoryUser | undefined {
  if (change.outcome === 'written') return change.after.active ? undefined : change.after;
  return change.outcome === 'deleted_before' ? change.before : undefined;
}

/**
 * Whether the directory refuses a sign-in: the user its userName index names for the identity's
 * `value` (the IdP `sub`, or the verified email, per `scim.match`) is inactive or deleted. A person
 * the directory does not know is not refused (the directory deprovisions; it does not allow-list).
 */
export function directoryRefuses(user: DirectoryUser | null | 'corrupt', match: 'sub' | 'email', value: string): boolean {
  if (user === null) return false;
  // A record that cannot be read refuses: fail closed.
  if (user === 'corrupt') return true;
  const same = match === 'email' ? userNameKey(user.userName) === userNameKey(value) : user.userName === value;
  return same && (!user.active || user.deletedAt !== undefined);
}
