// OAuth clients, their lifecycle, and the profiles that give them token lifetimes.

import type { ClientRecord, ProfileRecord, StoredRead } from '../../model/records.ts';

export interface DeleteClientResult {
  clientId: string;
  revokedAt: number;
  accessTokensRevoked: number;
  refreshTokensRevoked: number;
}

/** OAuth clients and their lifecycle. */
export interface ClientStorage {
  /** Throws DuplicateRecordError when a client with this id exists. */
  createClient(client: ClientRecord): Promise<void>;
  /** null when no such client; `'corrupt'` when its record is unreadable (refused like an unknown client). */
  getClient(clientId: string): Promise<StoredRead<ClientRecord>>;
  /** Every readable client (unreadable records are skipped). */
  listClients(): Promise<ClientRecord[]>;
  /**
   * Atomically sets revokedAt on the client and every access and refresh token it owns, and forgets
   * the session and task handles bound to it (HandleStorage).
   * Idempotent: an already deleted client keeps its first revokedAt and revokes nothing new.
   * null when no such client exists.
   */
  deleteClient(clientId: string, now: number): Promise<DeleteClientResult | null>;
  /** Keeps a dynamically registered client alive for `ttlMs` more (unused registrations expire). */
  touchClient(clientId: string, ttlMs: number): Promise<void>;
}

/** Client profiles (token lifetimes and default grants). */
export interface ProfileStorage {
  /** Creates each profile that does not exist yet; returns the names created. Never overwrites. */
  seedProfiles(profiles: readonly ProfileRecord[]): Promise<string[]>;
  /** null when no such profile is stored; `'corrupt'` when its record is unreadable (never replaced by a default). */
  getProfile(name: string): Promise<StoredRead<ProfileRecord>>;
  /** The stored fields under a profile's key as they are (hand edits included); null when absent. */
  getProfileFields(name: string): Promise<Record<string, string> | null>;
  /** Every readable profile (unreadable records are skipped). */
  listProfiles(): Promise<ProfileRecord[]>;
}
