// OAuth clients and profiles, the part both engines share, on the core's keyspace: a record created
// only when absent (the compare-and-set on one hash, KeyspaceCore.updateHash), then named in its index
// set (another slot on Cluster); records read, listed through their index, and kept alive. How a client
// is deleted with its tokens in one step is each engine's own (memory.ts, redis.ts).

import type { KeyspaceCore } from '../keyspace-core.ts';
import { fieldsOf, membersOf, readOne, type Command } from '../keyspace.ts';
import { clientFields, clientFromFields, creationUpdate, type Fields, profileFields, profileFromFields } from '../records.ts';
import { DuplicateRecordError, type DeleteClientResult } from '../types.ts';
import type { ClientRecord, ProfileRecord, StoredRead } from '../../model/records.ts';
import type { ClientStorage, ProfileStorage } from './types.ts';

export abstract class KeyspaceClients<Core extends KeyspaceCore = KeyspaceCore> implements ClientStorage, ProfileStorage {
  /** The engine's core (its own part reads what only that engine has from it). */
  protected readonly core: Core;

  constructor(core: Core) {
    this.core = core;
  }

  abstract deleteClient(clientId: string, now: number): Promise<DeleteClientResult | null>;

  /**
   * The record in the client's bucket, then its id in the index of all clients (another slot): a
   * failure between the two leaves a working client that listClients does not show until registered
   * again, never an index entry that a concurrent listing would drop before its record exists.
   */
  async createClient(client: ClientRecord): Promise<void> {
    const created = await this.core.updateHash(this.core.keys.client(client.clientId), creationUpdate(clientFields(client)));
    if (!created) throw new DuplicateRecordError(`client ${client.clientId} already exists`);
    await this.core.keyspace.apply({ guards: [], steps: [['SADD', this.core.keys.clientIndex(), client.clientId]] });
  }

  getClient(clientId: string): Promise<StoredRead<ClientRecord>> {
    return this.#record(this.core.keys.client(clientId), clientFromFields);
  }

  listClients(): Promise<ClientRecord[]> {
    return this.#listIndexed(this.core.keys.clientIndex(), this.core.keys.client, clientFromFields);
  }

  async touchClient(clientId: string, ttlMs: number): Promise<void> {
    await this.core.keyspace.apply({ guards: [], steps: [['PEXPIRE', this.core.keys.client(clientId), ttlMs]] });
  }

  /**
   * Each profile created only when absent (seeding never overwrites an admin's edits), then named in
   * the index of profiles, created or not: a seed stopped between the two is finished by the next.
   */
  async seedProfiles(profiles: readonly ProfileRecord[]): Promise<string[]> {
    const created: string[] = [];
    for (const profile of profiles) {
      if (await this.core.updateHash(this.core.keys.profile(profile.name), creationUpdate(profileFields(profile))))
        created.push(profile.name);
      await this.core.keyspace.apply({ guards: [], steps: [['SADD', this.core.keys.profileIndex(), profile.name]] });
    }
    return created;
  }

  getProfile(name: string): Promise<StoredRead<ProfileRecord>> {
    return this.#record(this.core.keys.profile(name), profileFromFields);
  }

  async getProfileFields(name: string): Promise<Fields | null> {
    return fieldsOf(await readOne(this.core.keyspace, ['HGETALL', this.core.keys.profile(name)]));
  }

  listProfiles(): Promise<ProfileRecord[]> {
    return this.#listIndexed(this.core.keys.profileIndex(), this.core.keys.profile, profileFromFields);
  }

  /** One record by key, parsed; null when absent (or expired) or unreadable. */
  async #record<T>(key: string, parse: (fields: Fields) => T | 'corrupt'): Promise<StoredRead<T>> {
    const fields = fieldsOf(await readOne(this.core.keyspace, ['HGETALL', key]));
    return fields && parse(fields);
  }

  /** Every record named in an index set, sorted by id; ids whose record expired are dropped from the index. */
  async #listIndexed<T>(index: string, keyOf: (id: string) => string, parse: (fields: Fields) => T | 'corrupt'): Promise<T[]> {
    const space = this.core.keyspace;
    const ids = membersOf(await readOne(space, ['SMEMBERS', index])).sort();
    // One record at a time on Cluster, where the records of an index are in as many slots.
    const all = await Promise.all(ids.map((id) => readOne(space, ['HGETALL', keyOf(id)] satisfies Command)));
    const out: T[] = [];
    const expired: string[] = [];
    all.forEach((found, i) => {
      const fields = fieldsOf(found);
      if (!fields) expired.push(ids[i]!);
      const record = fields && parse(fields);
      if (record && record !== 'corrupt') out.push(record);
    });
    // Registrations that expired unused leave their id behind in the index; drop it here.
    if (expired.length > 0) await space.apply({ guards: [], steps: [['SREM', index, ...expired]] });
    return out;
  }
}
