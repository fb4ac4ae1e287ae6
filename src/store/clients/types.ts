// OAuth clients, their lifecycle, and the profiles that give them token lifetimes.

import type { StoredRead } from '../shared.ts';

export type TokenEndpointAuthMethod = 'client_secret_basic' | 'client_secret_post' | 'private_key_jwt' | 'none';

export interface ClientRecord {
  clientId: string;
  /** SHA-256 hex of the client secret; absent for public clients. */
  clientSecretHash?: string;
  clientName?: string;
  redirectUris: string[];
  grantTypes: string[];
  scope?: string;
  profile: string;
  tokenEndpointAuthMethod: TokenEndpointAuthMethod;
  /** private_key_jwt of a registered client: its public keys (a JWKS as JSON text), or where they are (https). */
  jwks?: string;
  jwksUri?: string;
  /** `admin` (createClient), `dcr` (POST /register) or `cimd` (a Client ID Metadata Document, first used at /authorize). */
  source: 'admin' | 'dcr' | 'cimd';
  createdAt: number;
  revokedAt?: number;
}

export interface ProfileRecord {
  name: string;
  description: string;
  /** Default lifetime of access tokens issued to clients of this profile. */
  accessTokenLifetimeSeconds: number;
  /** Lifetime of refresh tokens issued to clients of this profile (0: no refresh tokens). */
  refreshTokenLifetimeSeconds: number;
  /** Grant types a client of this profile gets when its creator names none. */
  grantTypes: string[];
  createdAt: number;
}

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
