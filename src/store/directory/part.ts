// The directory's users, the part both engines share: each change planned by the model
// (src/model/directory.ts) on what was read, and written in one step on the keyspace port, guarded by
// everything the plan read (the user, the index entries it reads and drops, the users those name); a
// change that lost a race is planned again on what is there now. Every key is in the one `{directory}`
// slot, so a change and its indexes are one step on Redis Cluster too.

import {
  planCreate,
  planDelete,
  planUpdate,
  userNameKey,
  writesNothing,
  type DirectoryChange,
  type DirectoryWrite,
} from '../../model/directory.ts';
import type { StoredRead } from '../../model/records.ts';
import { readRecord } from '../codec.ts';
import type { KeyspaceCore } from '../keyspace-core.ts';
import {
  fieldArgs,
  fieldsOf,
  hashGuards,
  membersOf,
  readOne,
  transition,
  type Command,
  type Guard,
  type Keyspace,
  type Plan,
} from '../keyspace.ts';
import {
  directoryIndexName,
  directoryLinkName,
  directoryListName,
  directoryUserFields,
  directoryUserFromFields,
  linkedIdentityField,
  linkedIdentityFromField,
} from './records.ts';
import type { DirectoryIndex, DirectoryStorage, DirectoryUser, LinkedIdentity } from './types.ts';

/** Identities kept per email: a bound on what one address can make a deactivation revoke. */
const MAX_LINKS = 32;

/** What a change read: the user it plans on, and the guards that hold while all it read is unchanged. */
interface Read<T> {
  value: T;
  guards: Guard[];
}

/** A change planned on what it read. */
type Planned = Read<DirectoryChange>;

const live = (u: StoredRead<DirectoryUser>): u is DirectoryUser => u !== null && u !== 'corrupt' && u.deletedAt === undefined;

export class KeyspaceDirectory implements DirectoryStorage {
  readonly #core: KeyspaceCore;

  constructor(core: KeyspaceCore) {
    this.#core = core;
  }

  #userKey(id: string): string {
    return this.#core.keys.directoryUser(id);
  }

  #indexKey(provider: string, index: DirectoryIndex, value: string): string {
    return this.#core.keys.directoryIndex(directoryIndexName(provider, index, index === 'userName' ? userNameKey(value) : value));
  }

  /** A user as read (none for a null id), pinned: its field count and every field. */
  async #user(space: Keyspace, id: string | null): Promise<Read<StoredRead<DirectoryUser>>> {
    if (id === null) return { value: null, guards: [] };
    const key = this.#userKey(id);
    const fields = fieldsOf(await readOne(space, ['HGETALL', key]));
    return { value: readRecord(fields, directoryUserFromFields), guards: hashGuards(key, fields) };
  }

  /** The user an index entry names, pinned with the entry. */
  async #indexed(space: Keyspace, key: string): Promise<Read<StoredRead<DirectoryUser>>> {
    const id = (await readOne(space, ['HGET', key, 'id'])) as string | null;
    const user = await this.#user(space, id);
    return { value: user.value, guards: [{ command: ['HGET', key, 'id'], equals: id }, ...user.guards] };
  }

  async getDirectoryUser(id: string): Promise<StoredRead<DirectoryUser>> {
    return (await this.#user(this.#core.keyspace, id)).value;
  }

  async findDirectoryUser(provider: string, index: DirectoryIndex, value: string): Promise<StoredRead<DirectoryUser>> {
    const user = (await this.#indexed(this.#core.keyspace, this.#indexKey(provider, index, value))).value;
    // An index entry left behind by a change (renamed since) names someone else: not a match.
    if (user === null || user === 'corrupt' || user.provider !== provider) return user === 'corrupt' ? user : null;
    const matches = index === 'userName' ? userNameKey(user.userName) === userNameKey(value) : user.externalId === value;
    return matches ? user : null;
  }

  createDirectoryUser(user: DirectoryUser): Promise<DirectoryChange> {
    return this.#change(async (space) => {
      const holder = await this.#indexed(space, this.#indexKey(user.provider, 'userName', user.userName));
      // The new user's own key is written whole: still as read (absent) when it is.
      const own = await this.#user(space, user.id);
      return { value: planCreate(user, holder.value), guards: [...holder.guards, ...own.guards] };
    });
  }

  updateDirectoryUser(id: string, change: (user: DirectoryUser) => DirectoryUser, now: number): Promise<DirectoryChange> {
    return this.#change(async (space) => {
      const current = await this.#user(space, id);
      const guards = [...current.guards];
      let holder: StoredRead<DirectoryUser> = null;
      const user = current.value;
      if (live(user)) {
        // The user the new userName's index names, read only when the name changes (`change` is pure:
        // the model calls it again).
        const proposed = change(user);
        if (userNameKey(proposed.userName) !== userNameKey(user.userName)) {
          const named = await this.#indexed(space, this.#indexKey(user.provider, 'userName', proposed.userName));
          holder = named.value;
          guards.push(...named.guards);
        }
      }
      return { value: planUpdate(user, change, () => holder, now), guards };
    });
  }

  deleteDirectoryUser(id: string, now: number): Promise<DirectoryChange> {
    return this.#change(async (space) => {
      const current = await this.#user(space, id);
      return { value: planDelete(current.value, now), guards: current.guards };
    });
  }

  /** Plans on what `plan` reads, then writes the plan while all of it is unchanged (transition in keyspace.ts). */
  #change(plan: (space: Keyspace) => Promise<Planned>): Promise<DirectoryChange> {
    return transition(this.#core.keyspace, 'directory change', async (space) => {
      const { value: change, guards } = await plan(space);
      if (change.outcome !== 'written' || writesNothing(change)) return { result: change };
      return { result: change, plan: await this.#writes(space, change.write, guards) };
    });
  }

  /**
   * A written change as one step: the user replaced whole, the indexes it takes set, those it leaves
   * dropped while they still name it, a tombstone it takes the name of gone, and the provider's list of
   * live users (score: createdAt, kept when already listed).
   */
  async #writes(space: Keyspace, write: DirectoryWrite, guards: Guard[]): Promise<Plan> {
    const { keys } = this.#core;
    const provider = write.user.provider;
    const index = ([name, value]: [DirectoryIndex, string]) => keys.directoryIndex(directoryIndexName(provider, name, value));
    const drops = write.dropIndexes.map(index);
    const list = keys.directoryList(directoryListName(provider));
    const listed: Command = ['ZSCORE', list, write.user.id];
    const held = await space.read([...drops.map((key): Command => ['HGET', key, 'id']), listed]);
    const userKey = this.#userKey(write.user.id);
    const steps: Command[] = [
      ['DEL', userKey],
      ['HSET', userKey, ...fieldArgs(directoryUserFields(write.user))],
    ];
    for (const set of write.setIndexes) steps.push(['HSET', index(set), 'id', write.user.id]);
    drops.forEach((key, i) => {
      guards.push({ command: ['HGET', key, 'id'], equals: held[i] as string | null });
      if (held[i] === write.user.id) steps.push(['DEL', key]);
    });
    if (write.dropUser !== undefined) steps.push(['DEL', this.#userKey(write.dropUser)], ['ZREM', list, write.dropUser]);
    if (write.user.deletedAt !== undefined) steps.push(['ZREM', list, write.user.id]);
    else if (held[drops.length] === null) {
      guards.push({ command: listed, equals: null });
      steps.push(['ZADD', list, write.user.createdAt, write.user.id]);
    }
    return { guards, steps };
  }

  async listDirectoryUsers(provider: string, offset: number, count: number): Promise<{ total: number; users: DirectoryUser[] }> {
    const space = this.#core.keyspace;
    const list = this.#core.keys.directoryList(directoryListName(provider));
    const total = Number(await readOne(space, ['ZCARD', list]));
    if (count === 0 || offset >= total) return { total, users: [] };
    const ids = membersOf(await readOne(space, ['ZRANGE', list, offset, offset + count - 1]));
    const replies = ids.length === 0 ? [] : await space.read(ids.map((id): Command => ['HGETALL', this.#userKey(id)]));
    return { total, users: replies.map((reply) => readRecord(fieldsOf(reply), directoryUserFromFields)).filter(live) };
  }

  async linkDirectoryIdentity(provider: string, email: string, identity: LinkedIdentity, now: number): Promise<void> {
    const key = this.#core.keys.directoryLinks(directoryLinkName(provider, email));
    const field = linkedIdentityField(identity);
    await transition(this.#core.keyspace, 'directory link', async (space) => {
      const [known, count] = await space.read([
        ['HEXISTS', key, field],
        ['HLEN', key],
      ]);
      // Kept only while few: the links of one email are the people a deactivation must find.
      if (known !== 1 && Number(count) >= MAX_LINKS) return { result: undefined };
      const guards: Guard[] =
        known === 1 ? [{ command: ['HEXISTS', key, field], equals: 1 }] : [{ command: ['HLEN', key], below: MAX_LINKS }];
      return { result: undefined, plan: { guards, steps: [['HSET', key, field, String(now)]] } };
    });
  }

  async linkedDirectoryIdentities(provider: string, email: string): Promise<LinkedIdentity[]> {
    const links = fieldsOf(
      await readOne(this.#core.keyspace, ['HGETALL', this.#core.keys.directoryLinks(directoryLinkName(provider, email))]),
    );
    return Object.keys(links ?? {})
      .map(linkedIdentityFromField)
      .filter((i): i is LinkedIdentity => i !== undefined);
  }
}
