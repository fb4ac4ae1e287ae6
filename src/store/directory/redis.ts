// The directory's users on Redis: each change planned by the model (src/model/directory.ts) over what
// was read under WATCH, and written in one MULTI/EXEC with its indexes (all under one `{directory}`
// slot); a change that lost a race is planned again on what is there now.

import { planCreate, planDelete, planUpdate, userNameKey, writesNothing, type DirectoryChange } from '../../model/directory.ts';
import { orNull, readRecord } from '../codec.ts';
import { assertExec, type RedisCore } from '../redis-core.ts';
import type { RedisClient } from '../redis-connection.ts';
import { fieldArgs } from '../keyspace.ts';
import { StoreUnavailableError } from '../shared.ts';
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

const MAX_TRANSACTION_ATTEMPTS = 16;
/** Identities kept per email: a bound on what one address can make a deactivation revoke. */
const MAX_LINKS = 32;

export class RedisDirectory implements DirectoryStorage {
  readonly #core: RedisCore;

  constructor(core: RedisCore) {
    this.#core = core;
  }

  #userKey(id: string): string {
    return this.#core.keys.directoryUser(id);
  }

  #indexKey(provider: string, index: DirectoryIndex, value: string): string {
    return this.#core.keys.directoryIndex(directoryIndexName(provider, index, index === 'userName' ? userNameKey(value) : value));
  }

  async #readUser(client: RedisClient, id: string | null): Promise<StoredRead<DirectoryUser>> {
    if (id === null) return null;
    return readRecord(orNull(await client.hgetall(this.#userKey(id))), directoryUserFromFields);
  }

  async getDirectoryUser(id: string): Promise<StoredRead<DirectoryUser>> {
    return this.#readUser(this.#core.redis, id);
  }

  async findDirectoryUser(provider: string, index: DirectoryIndex, value: string): Promise<StoredRead<DirectoryUser>> {
    const id = await this.#core.redis.hget(this.#indexKey(provider, index, value), 'id');
    const user = await this.#readUser(this.#core.redis, id);
    // An index entry left behind by a change (renamed since) names someone else: not a match.
    if (user === null || user === 'corrupt' || user.provider !== provider) return user === 'corrupt' ? user : null;
    return index === 'userName'
      ? userNameKey(user.userName) === userNameKey(value)
        ? user
        : null
      : user.externalId === value
        ? user
        : null;
  }

  createDirectoryUser(user: DirectoryUser): Promise<DirectoryChange> {
    return this.#change(this.#userKey(user.id), async (tx) => {
      const indexKey = this.#indexKey(user.provider, 'userName', user.userName);
      await tx.watch(indexKey, this.#userKey(user.id));
      const holder = await this.#readUser(tx, await tx.hget(indexKey, 'id'));
      return planCreate(user, holder);
    });
  }

  updateDirectoryUser(id: string, change: (user: DirectoryUser) => DirectoryUser, now: number): Promise<DirectoryChange> {
    return this.#change(this.#userKey(id), async (tx) => {
      await tx.watch(this.#userKey(id));
      const current = await this.#readUser(tx, id);
      let holder: StoredRead<DirectoryUser> = null;
      if (current !== null && current !== 'corrupt' && current.deletedAt === undefined) {
        const proposed = change(current);
        if (userNameKey(proposed.userName) !== userNameKey(current.userName)) {
          const indexKey = this.#indexKey(current.provider, 'userName', proposed.userName);
          await tx.watch(indexKey);
          holder = await this.#readUser(tx, await tx.hget(indexKey, 'id'));
        }
      }
      return planUpdate(current, change, () => holder, now);
    });
  }

  deleteDirectoryUser(id: string, now: number): Promise<DirectoryChange> {
    return this.#change(this.#userKey(id), async (tx) => {
      await tx.watch(this.#userKey(id));
      return planDelete(await this.#readUser(tx, id), now);
    });
  }

  /**
   * Plans under WATCH (`plan` watches what it reads), then writes the plan in one MULTI/EXEC: the
   * user replaced whole, the indexes it takes set, those it leaves dropped while they still name it.
   * A refusal thrown by the plan leaves the transaction connection clean and is thrown here.
   * `watched`: a key the plan watches (UNWATCH names no key: on Cluster it is sent with a command on
   * that key, so that it reaches the node holding the WATCH).
   */
  #change(watched: string, plan: (tx: RedisClient) => Promise<DirectoryChange>): Promise<DirectoryChange> {
    const unwatch = async (tx: RedisClient) => assertExec(await tx.pipeline().exists(watched).unwatch().exec());
    const run = this.#core.transaction(async (tx): Promise<{ change: DirectoryChange } | { refused: unknown }> => {
      for (let attempt = 0; attempt < MAX_TRANSACTION_ATTEMPTS; attempt++) {
        let change: DirectoryChange;
        try {
          change = await plan(tx);
        } catch (refused) {
          await unwatch(tx);
          return { refused };
        }
        if (change.outcome !== 'written' || writesNothing(change)) {
          await unwatch(tx);
          return { change };
        }
        const { write } = change;
        const provider = write.user.provider;
        const dropKeys = write.dropIndexes.map(([index, value]) =>
          this.#core.keys.directoryIndex(directoryIndexName(provider, index, value)),
        );
        if (dropKeys.length > 0) await tx.watch(...dropKeys);
        const holders = await Promise.all(dropKeys.map((key) => tx.hget(key, 'id')));
        const userKey = this.#userKey(write.user.id);
        const multi = tx
          .multi()
          .del(userKey)
          .hset(userKey, ...fieldArgs(directoryUserFields(write.user)));
        for (const [index, value] of write.setIndexes)
          multi.hset(this.#core.keys.directoryIndex(directoryIndexName(provider, index, value)), 'id', write.user.id);
        dropKeys.forEach((key, i) => {
          if (holders[i] === write.user.id) multi.del(key);
        });
        const list = this.#core.keys.directoryList(directoryListName(provider));
        if (write.dropUser !== undefined) multi.del(this.#userKey(write.dropUser)).zrem(list, write.dropUser);
        if (write.user.deletedAt === undefined) multi.zadd(list, 'NX', String(write.user.createdAt), write.user.id);
        else multi.zrem(list, write.user.id);
        const result = await multi.exec();
        if (result === null) continue;
        assertExec(result);
        return { change };
      }
      throw new StoreUnavailableError('directory change: too much contention, gave up');
    });
    return run.then((outcome) => {
      if ('refused' in outcome) throw outcome.refused;
      return outcome.change;
    });
  }

  async listDirectoryUsers(provider: string, offset: number, count: number): Promise<{ total: number; users: DirectoryUser[] }> {
    const list = this.#core.keys.directoryList(directoryListName(provider));
    const total = await this.#core.redis.zcard(list);
    if (count === 0 || offset >= total) return { total, users: [] };
    const ids = await this.#core.redis.zrange(list, offset, offset + count - 1);
    const users = await Promise.all(ids.map((id) => this.#readUser(this.#core.redis, id)));
    return { total, users: users.filter((u): u is DirectoryUser => u !== null && u !== 'corrupt' && u.deletedAt === undefined) };
  }

  async linkDirectoryIdentity(provider: string, email: string, identity: LinkedIdentity, now: number): Promise<void> {
    const key = this.#core.keys.directoryLinks(directoryLinkName(provider, email));
    const field = linkedIdentityField(identity);
    // Kept only while few: the links of one email are the people a deactivation must find.
    if ((await this.#core.redis.hexists(key, field)) === 1 || (await this.#core.redis.hlen(key)) < MAX_LINKS)
      await this.#core.redis.hset(key, field, String(now));
  }

  async linkedDirectoryIdentities(provider: string, email: string): Promise<LinkedIdentity[]> {
    const fields = await this.#core.redis.hkeys(this.#core.keys.directoryLinks(directoryLinkName(provider, email)));
    return fields.map(linkedIdentityFromField).filter((i): i is LinkedIdentity => i !== undefined);
  }
}
