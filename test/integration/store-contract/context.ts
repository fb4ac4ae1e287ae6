// What every slice of the store contract shares: the store under test and its clock (set anew before
// each test by the runner, test/integration/store-contract.ts), and the records the tests build.

import type { Cluster, Redis } from 'ioredis';
import type { ManualClock } from '../../../src/model/clock.ts';
import { decideToken, generateToken, generateTokenFor, hashToken, type DenialReason } from '../../../src/model/credentials.ts';
import { orNull, type KeyLayout } from '../../../src/store/records.ts';
import type { AuthorizationRequestRecord, StoredUpstreamCredential, TokenStore } from '../../../src/store/types.ts';
import type { AccessTokenRecord, ClientRecord, RefreshTokenRecord, UserTokenRecord } from '../../../src/model/records.ts';

export interface StoreHarness {
  store: TokenStore;
  /** Raw fields under a key, as `redis-cli HGETALL` shows them; null when the key does not exist. */
  rawHash(key: string): Promise<Record<string, string> | null>;
  /** An admin's hand edit, as `redis-cli HSET key field value`. */
  setRawField(key: string, field: string, value: string): Promise<void>;
  keys: KeyLayout;
  cleanup(): Promise<void>;
}

/** The harness's raw access over a redis-cli-like connection (standalone or Cluster). */
export function redisRawAccess(raw: Redis | Cluster): Pick<StoreHarness, 'rawHash' | 'setRawField'> {
  return {
    rawHash: async (key) => orNull(await raw.hgetall(key)),
    setRawField: async (key, field, value) => {
      await raw.hset(key, field, value);
    },
  };
}

/**
 * The raw access of redisRawAccess, with each hand edit waited on until the lookup cache has its
 * invalidation (`settled`), as an admin's next request would come after it.
 */
export function cachedRawAccess(
  raw: Redis | Cluster,
  cache: { settled(): Promise<void> } | undefined,
): Pick<StoreHarness, 'rawHash' | 'setRawField'> {
  const access = redisRawAccess(raw);
  return {
    ...access,
    setRawField: async (key, field, value) => {
      await access.setRawField(key, field, value);
      await cache?.settled();
    },
  };
}

/** The test in progress: its clock, harness and store (replaced before each test). */
export interface Contract {
  clock: ManualClock;
  h: StoreHarness;
  store: TokenStore;
}

export const HOUR = 3_600_000;
export const INTEGER_MS = /^[0-9]+$/;

/** The records and reads the slices build on, for the test in progress. */
export function contractHelpers(contract: Contract) {
  /** A sign-in in progress at its consent step, of `clientId`. */
  function pendingRequest(clientId = 'c-1', state?: string, scope?: string): Extract<AuthorizationRequestRecord, { stage: 'consent' }> {
    const request = {
      clientId,
      redirectUri: 'http://127.0.0.1:9999/cb',
      codeChallenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
      state,
      scope,
    };
    return { stage: 'consent', browserHash: hashToken('browser cookie'), request };
  }

  /** A client that must read as a record: null when none is stored. */
  function clientRead(found: ClientRecord | 'corrupt' | null): ClientRecord | null {
    if (found === 'corrupt') throw new Error('client read as corrupt');
    return found;
  }

  /** A refresh token that must read as a record: null when none is stored. */
  async function refreshOf(tokenHash: string) {
    const found = await contract.store.getRefreshToken(tokenHash);
    if (found === 'corrupt') throw new Error('refresh token read as corrupt');
    return found;
  }

  function userRecord(overrides: Partial<UserTokenRecord> = {}): { raw: string; record: UserTokenRecord } {
    const raw = generateToken();
    const now = contract.clock.now();
    return {
      raw,
      record: {
        tokenHash: hashToken(raw),
        subject: 'user-123',
        issuer: 'https://idp.example.com/',
        createdAt: now,
        expiresAt: now + HOUR,
        ...overrides,
      },
    };
  }

  function client(clientId: string, overrides: Partial<ClientRecord> = {}): { secret: string; record: ClientRecord } {
    const secret = generateToken();
    return {
      secret,
      record: {
        clientId,
        clientSecretHash: hashToken(secret),
        clientName: `name of ${clientId}`,
        redirectUris: ['https://app.example.com/callback', 'http://127.0.0.1:9999/cb'],
        grantTypes: ['client_credentials', 'refresh_token'],
        scope: 'mcp:read mcp:write',
        profile: 'default',
        tokenEndpointAuthMethod: 'client_secret_basic',
        source: 'admin',
        createdAt: contract.clock.now(),
        ...overrides,
      },
    };
  }

  // A client's tokens are minted as the sidecar mints them: in the client's bucket (one Cluster slot).
  function accessToken(clientId: string, overrides: Partial<AccessTokenRecord> = {}): { raw: string; record: AccessTokenRecord } {
    const raw = generateTokenFor(clientId);
    return {
      raw,
      record: {
        tokenHash: hashToken(raw),
        clientId,
        createdAt: contract.clock.now(),
        expiresAt: contract.clock.now() + HOUR,
        ...overrides,
      },
    };
  }

  function refreshToken(clientId: string, familyId: string): { raw: string; record: RefreshTokenRecord } {
    const raw = generateTokenFor(clientId);
    return {
      raw,
      record: {
        tokenHash: hashToken(raw),
        clientId,
        familyId,
        createdAt: contract.clock.now(),
        expiresAt: contract.clock.now() + 24 * HOUR,
      },
    };
  }

  function upstreamCredential(overrides: Partial<StoredUpstreamCredential> = {}): StoredUpstreamCredential {
    return {
      subject: 'alice',
      issuer: 'https://idp.example/',
      provider: 'idp',
      keyId: '0123456789abcdef',
      sealed: 'c2VhbGVk',
      createdAt: contract.clock.now(),
      ...overrides,
    };
  }

  async function decide(tokenHash: string) {
    return decideToken(tokenHash, await contract.store.lookupToken(tokenHash), contract.clock.now());
  }

  async function reasonOf(tokenHash: string): Promise<DenialReason | 'ok'> {
    const d = await decide(tokenHash);
    return d.ok ? 'ok' : d.reason;
  }

  return { pendingRequest, clientRead, refreshOf, userRecord, client, accessToken, refreshToken, upstreamCredential, decide, reasonOf };
}
