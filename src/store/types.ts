// The storage boundary: small interfaces by aggregate (each in src/store/<aggregate>/types.ts), all
// implemented by RedisTokenStore (production) and MemoryTokenStore (demo), both held to one contract
// suite (test/integration/store-contract/). Stores persist and fetch records atomically; they never
// decide whether a token is valid. Each consumer names only the parts it uses (the proxy TokenStorage
// and StoreHealth, the audit trail AuditStorage, the rate limits CounterStorage...). Operations throw
// StoreUnavailableError when the backing store cannot answer.

import type { ApprovalStorage } from './approvals/types.ts';
import type { ClientStorage, ProfileStorage } from './clients/types.ts';
import type { CounterStorage, OneTimeValueStorage, QuotaStorage } from './counters/types.ts';
import type { DeviceAuthorizationStorage } from './devices/types.ts';
import type { DirectoryStorage } from './directory/types.ts';
import type { HandleStorage } from './handles/types.ts';
import type { AuditStorage, RevocationNotices, SigningKeyStorage, StoreHealth } from './infrastructure/types.ts';
import type { RefreshTokenStorage } from './refresh-tokens/types.ts';
import type { AccountSessionStorage, AuthorizationCodeStorage, ConsentStorage } from './sign-in/types.ts';
import type { SubjectCutoffStorage, SubjectStorage } from './subjects/types.ts';
import type { TokenStorage } from './tokens/types.ts';
import type { UpstreamCredentialStorage } from './upstream-credentials/types.ts';

export * from './shared.ts';
export type * from './approvals/types.ts';
export type * from './clients/types.ts';
export type * from './counters/types.ts';
export type * from './devices/types.ts';
export type * from './directory/types.ts';
export type * from './handles/types.ts';
export type * from './infrastructure/types.ts';
export type * from './refresh-tokens/types.ts';
export type * from './sign-in/types.ts';
export type * from './subjects/types.ts';
export type * from './tokens/types.ts';
export type * from './upstream-credentials/types.ts';

/** The token-lookup cache's plain counters (store/redis-lookup-cache.ts), read by the metrics at each scrape. */
export interface LookupCacheStats {
  hits: number;
  misses: number;
  /** Lookups that went straight to Redis because the cache was not live. */
  bypasses: number;
  /** Invalidation messages received (a FLUSHDB/FLUSHALL one included). */
  invalidations: number;
  /** Times the whole cache was emptied (connection lost, PING unanswered, flush). */
  drops: number;
  /** Barriers sent (each one PING and one GET, shared by the hits that waited on it). */
  barriers: number;
}

/**
 * Why redis.lookupCache: auto runs without the cache (the strict mode): Redis refused tracking, or the
 * cache's connections could not be set up at start.
 */
export type LookupCacheFallback = 'tracking_refused' | 'setup_failed';

/**
 * What a store lets the metrics watch at each scrape, when it has such state (the Redis store does;
 * the memory store has none).
 */
export interface StoreWatch {
  /** Whether its connection can answer now (`mcp_auth_store_up`). */
  ready(): boolean;
  /** Copies of its counts of replica waits after revocations. */
  replication(): { waits: number; unacknowledged: number };
  /** The token-lookup cache, when it is on: its state and counters. */
  readonly lookupCache?: { readonly stats: LookupCacheStats; readonly live: boolean; readonly size: number } | undefined;
  /** With redis.lookupCache: auto, why the cache is not used (the strict mode), when it is not. */
  readonly lookupCacheFallback?: LookupCacheFallback | undefined;
}

/** A whole store, as built at start-up and closed at shutdown. */
export interface TokenStore
  extends
    TokenStorage,
    ClientStorage,
    HandleStorage,
    SubjectStorage,
    SubjectCutoffStorage,
    AccountSessionStorage,
    RefreshTokenStorage,
    AuthorizationCodeStorage,
    DeviceAuthorizationStorage,
    ConsentStorage,
    ProfileStorage,
    CounterStorage,
    QuotaStorage,
    OneTimeValueStorage,
    AuditStorage,
    RevocationNotices,
    SigningKeyStorage,
    UpstreamCredentialStorage,
    DirectoryStorage,
    ApprovalStorage,
    StoreHealth {
  /** What the metrics watch, when the store has it. */
  readonly watch?: StoreWatch | undefined;
  close(): Promise<void>;
}
