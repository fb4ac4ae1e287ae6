// The directory's users in memory: the same plans (src/model/directory.ts) as the Redis store, each
// read, planned and written in one synchronous step.

import { planCreate, planDelete, planUpdate, userNameKey, writesNothing, type DirectoryChange } from '../../model/directory.ts';
import { readRecord } from '../codec.ts';
import type { MemoryCore } from '../memory-core.ts';
import type { StoredRead } from '../../model/records.ts';
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

const MAX_LINKS = 32;

export class MemoryDirectory implements DirectoryStorage {
  readonly #core: MemoryCore;

  constructor(core: MemoryCore) {
    this.#core = core;
  }

  #indexKey(provider: string, index: DirectoryIndex, value: string): string {
    return this.#core.keys.directoryIndex(directoryIndexName(provider, index, index === 'userName' ? userNameKey(value) : value));
  }

  #read(id: string | undefined): StoredRead<DirectoryUser> {
    if (id === undefined) return null;
    return readRecord(this.#core.get(this.#core.keys.directoryUser(id)), directoryUserFromFields);
  }

  async getDirectoryUser(id: string): Promise<StoredRead<DirectoryUser>> {
    this.#core.check();
    return this.#read(id);
  }

  async findDirectoryUser(provider: string, index: DirectoryIndex, value: string): Promise<StoredRead<DirectoryUser>> {
    this.#core.check();
    const user = this.#read(this.#core.get(this.#indexKey(provider, index, value))?.id);
    if (user === null || user === 'corrupt' || user.provider !== provider) return user === 'corrupt' ? user : null;
    return index === 'userName'
      ? userNameKey(user.userName) === userNameKey(value)
        ? user
        : null
      : user.externalId === value
        ? user
        : null;
  }

  async createDirectoryUser(user: DirectoryUser): Promise<DirectoryChange> {
    this.#core.check();
    return this.#apply(planCreate(user, this.#read(this.#core.get(this.#indexKey(user.provider, 'userName', user.userName))?.id)));
  }

  async updateDirectoryUser(id: string, change: (user: DirectoryUser) => DirectoryUser, now: number): Promise<DirectoryChange> {
    this.#core.check();
    const current = this.#read(id);
    const provider = current !== null && current !== 'corrupt' ? current.provider : '';
    return this.#apply(
      planUpdate(current, change, (userName) => this.#read(this.#core.get(this.#indexKey(provider, 'userName', userName))?.id), now),
    );
  }

  async deleteDirectoryUser(id: string, now: number): Promise<DirectoryChange> {
    this.#core.check();
    return this.#apply(planDelete(this.#read(id), now));
  }

  #apply(change: DirectoryChange): DirectoryChange {
    if (change.outcome !== 'written' || writesNothing(change)) return change;
    const { write } = change;
    const provider = write.user.provider;
    const key = (index: DirectoryIndex, value: string) => this.#core.keys.directoryIndex(directoryIndexName(provider, index, value));
    for (const [index, value] of write.dropIndexes)
      if (this.#core.get(key(index, value))?.id === write.user.id) this.#core.hashes.delete(key(index, value));
    for (const [index, value] of write.setIndexes) this.#core.put(key(index, value), { id: write.user.id });
    const list = this.#core.set(this.#core.keys.directoryList(directoryListName(provider)));
    if (write.dropUser !== undefined) {
      this.#core.hashes.delete(this.#core.keys.directoryUser(write.dropUser));
      list.delete(write.dropUser);
    }
    // A Set keeps insertion order: oldest first, as the Redis store's createdAt scores do.
    if (write.user.deletedAt === undefined) list.add(write.user.id);
    else list.delete(write.user.id);
    this.#core.put(this.#core.keys.directoryUser(write.user.id), directoryUserFields(write.user));
    return change;
  }

  async listDirectoryUsers(provider: string, offset: number, count: number): Promise<{ total: number; users: DirectoryUser[] }> {
    this.#core.check();
    const ids = [...this.#core.set(this.#core.keys.directoryList(directoryListName(provider)))];
    const users = ids.slice(offset, offset + count).map((id) => this.#read(id));
    return {
      total: ids.length,
      users: users.filter((u): u is DirectoryUser => u !== null && u !== 'corrupt' && u.deletedAt === undefined),
    };
  }

  async linkDirectoryIdentity(provider: string, email: string, identity: LinkedIdentity, now: number): Promise<void> {
    this.#core.check();
    const key = this.#core.keys.directoryLinks(directoryLinkName(provider, email));
    const links = this.#core.get(key);
    const field = linkedIdentityField(identity);
    if (links === null) this.#core.put(key, { [field]: String(now) });
    else if (field in links || Object.keys(links).length < MAX_LINKS) links[field] = String(now);
  }

  async linkedDirectoryIdentities(provider: string, email: string): Promise<LinkedIdentity[]> {
    this.#core.check();
    const links = this.#core.get(this.#core.keys.directoryLinks(directoryLinkName(provider, email)));
    return Object.keys(links ?? {})
      .map(linkedIdentityFromField)
      .filter((i): i is LinkedIdentity => i !== undefined);
  }
}
