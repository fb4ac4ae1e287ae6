// The directory's people (SCIM users), and the identities seen signing in with a matched email.

import type { DirectoryChange, DirectoryIndex, DirectoryUser } from '../../model/directory.ts';
import type { StoredRead } from '../../model/records.ts';

export type { DirectoryChange, DirectoryIndex, DirectoryUser };

/** A person seen signing in with an email the directory matches on (`scim.match: email`). */
export interface LinkedIdentity {
  subject: string;
  issuer: string;
}

/** SCIM users of one or more identity providers, each change planned by src/model/directory.ts. */
export interface DirectoryStorage {
  /** Creates `user` unless a live user of its provider holds its userName (ignoring case): `conflict`. */
  createDirectoryUser(user: DirectoryUser): Promise<DirectoryChange>;
  /** A user by id, tombstones included (the caller tells a deleted one by `deletedAt`). */
  getDirectoryUser(id: string): Promise<StoredRead<DirectoryUser>>;
  /** The user an index names (a userName ignoring case, an externalId exactly), tombstones included. */
  findDirectoryUser(provider: string, index: DirectoryIndex, value: string): Promise<StoredRead<DirectoryUser>>;
  /**
   * Changes a live user to what `change` makes of it, atomically with its indexes (a new userName held
   * by another live user: `conflict`). `change` may run more than once (on contention) and may throw
   * to refuse; nothing is written when it changes nothing.
   */
  updateDirectoryUser(id: string, change: (user: DirectoryUser) => DirectoryUser, now: number): Promise<DirectoryChange>;
  /** Makes a user a tombstone (inactive, kept under its userName); a second delete finds it so. */
  deleteDirectoryUser(id: string, now: number): Promise<DirectoryChange>;
  /**
   * One page of a provider's live users, oldest first: `count` from the `offset`-th (0-based), and how
   * many there are in all.
   */
  listDirectoryUsers(provider: string, offset: number, count: number): Promise<{ total: number; users: DirectoryUser[] }>;
  /** Records that `identity` signed in with `email` (lowercase) at `provider`, for `scim.match: email`. */
  linkDirectoryIdentity(provider: string, email: string, identity: LinkedIdentity, now: number): Promise<void>;
  /** The identities seen signing in with `email` (lowercase) at `provider`. */
  linkedDirectoryIdentities(provider: string, email: string): Promise<LinkedIdentity[]>;
}
