// OAuth clients and profiles in memory; deleteClient revokes the client, its tokens and handles in one step.

import type { MemoryCore } from '../memory-core.ts';
import {
  ACCESS_MEMBER,
  clientFields,
  creationUpdate,
  clientFromFields,
  type Fields,
  profileFields,
  profileFromFields,
  REFRESH_MEMBER,
} from '../records.ts';
import { forgetIndexedHandles } from '../handles/transitions.ts';
import { type DeleteClientResult, DuplicateRecordError } from '../types.ts';
import type { ClientRecord, ProfileRecord, StoredRead } from '../../model/records.ts';
import type { ClientStorage, ProfileStorage } from './types.ts';

export class MemoryClients implements ClientStorage, ProfileStorage {
  readonly #core: MemoryCore;

  constructor(core: MemoryCore) {
    this.#core = core;
  }

  #getRecord<T>(key: string, parse: (fields: Fields) => T | 'corrupt'): StoredRead<T> {
    const fields = this.#core.get(key);
    return fields && parse(fields);
  }

  /** Every record named in an index set, sorted by id; ids whose record expired are dropped from the index. */
  #listIndexed<T>(index: string, keyOf: (id: string) => string, parse: (fields: Fields) => T | 'corrupt'): T[] {
    const ids = this.#core.set(index);
    const out: T[] = [];
    for (const id of [...ids].sort()) {
      const fields = this.#core.get(keyOf(id));
      if (!fields) ids.delete(id);
      const record = fields && parse(fields);
      if (record && record !== 'corrupt') out.push(record);
    }
    return out;
  }

  async createClient(client: ClientRecord): Promise<void> {
    this.#core.check();
    if (!this.#core.updateHash(this.#core.keys.client(client.clientId), creationUpdate(clientFields(client)))) {
      throw new DuplicateRecordError(`client ${client.clientId} already exists`);
    }
    this.#core.set(this.#core.keys.clientIndex()).add(client.clientId);
  }

  async getClient(clientId: string): Promise<StoredRead<ClientRecord>> {
    this.#core.check();
    return this.#getRecord(this.#core.keys.client(clientId), clientFromFields);
  }

  async listClients(): Promise<ClientRecord[]> {
    this.#core.check();
    return this.#listIndexed(this.#core.keys.clientIndex(), this.#core.keys.client, clientFromFields);
  }

  async deleteClient(clientId: string, now: number): Promise<DeleteClientResult | null> {
    this.#core.check();
    const client = this.#core.get(this.#core.keys.client(clientId));
    if (!client) return null;
    const revokedAt = client.revokedAt !== undefined ? Number(client.revokedAt) : now;
    client.revokedAt = String(revokedAt);
    let accessTokensRevoked = 0;
    let refreshTokensRevoked = 0;
    const members = this.#core.set(this.#core.keys.clientTokens(clientId));
    for (const member of members) {
      const hash = member.slice(2);
      const isAccess = member.startsWith(ACCESS_MEMBER);
      const fields = this.#core.get(isAccess ? this.#core.keys.accessToken(hash) : this.#core.keys.refreshToken(hash));
      if (fields && fields.revokedAt === undefined) {
        fields.revokedAt = String(revokedAt);
        if (isAccess) accessTokensRevoked++;
        else if (member.startsWith(REFRESH_MEMBER)) refreshTokensRevoked++;
      }
    }
    members.clear();
    await forgetIndexedHandles(this.#core.keyspace, this.#core.keys, this.#core.keys.handlesByClient(clientId), 'clientId', clientId);
    this.#core.notify({ clientIds: [clientId] });
    return { clientId, revokedAt, accessTokensRevoked, refreshTokensRevoked };
  }

  async touchClient(clientId: string, ttlMs: number): Promise<void> {
    this.#core.check();
    const entry = this.#core.hashes.get(this.#core.keys.client(clientId));
    if (entry && this.#core.get(this.#core.keys.client(clientId))) entry.expiresAt = this.#core.clock.now() + ttlMs;
  }

  async seedProfiles(profiles: readonly ProfileRecord[]): Promise<string[]> {
    this.#core.check();
    const created: string[] = [];
    for (const profile of profiles) {
      if (this.#core.updateHash(this.#core.keys.profile(profile.name), creationUpdate(profileFields(profile)))) created.push(profile.name);
      this.#core.set(this.#core.keys.profileIndex()).add(profile.name);
    }
    return created;
  }

  async getProfile(name: string): Promise<StoredRead<ProfileRecord>> {
    this.#core.check();
    return this.#getRecord(this.#core.keys.profile(name), profileFromFields);
  }

  async getProfileFields(name: string): Promise<Fields | null> {
    this.#core.check();
    const fields = this.#core.get(this.#core.keys.profile(name));
    return fields && { ...fields };
  }

  async listProfiles(): Promise<ProfileRecord[]> {
    this.#core.check();
    return this.#listIndexed(this.#core.keys.profileIndex(), this.#core.keys.profile, profileFromFields);
  }
}
