// Client profiles: named defaults an OAuth client is created with: the lifetime of the access tokens it
// gets from the token endpoint, whether and how long it gets refresh tokens, and its grant types when
// its creator names none. Seeded into the store by `seedDefaultProfiles`; an admin may edit a stored
// profile by hand and seeding never overwrites it. A profile missing from the store falls back to the
// built-in definition of the same name.

import type { ProfileRecord, ProfileStorage } from './store/types.ts';

export const GRANT_CLIENT_CREDENTIALS = 'client_credentials';
export const GRANT_REFRESH_TOKEN = 'refresh_token';
export const GRANT_TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const GRANT_AUTHORIZATION_CODE = 'authorization_code';

type ProfileDefinition = Omit<ProfileRecord, 'createdAt'>;

export const DEFAULT_PROFILES: readonly ProfileDefinition[] = [
  {
    name: 'default',
    description: 'Machine client: client_credentials, 1 h access tokens, 30-day rotating refresh tokens',
    accessTokenLifetimeSeconds: 3600,
    refreshTokenLifetimeSeconds: 30 * 24 * 3600,
    grantTypes: [GRANT_CLIENT_CREDENTIALS, GRANT_REFRESH_TOKEN],
  },
  {
    name: 'service',
    description: 'Long-running service: client_credentials only, 1 h access tokens, no refresh tokens',
    accessTokenLifetimeSeconds: 3600,
    refreshTokenLifetimeSeconds: 0,
    grantTypes: [GRANT_CLIENT_CREDENTIALS],
  },
  {
    name: 'dynamic',
    description: 'Dynamically registered MCP client: exchanges IdP JWTs for user-grade tokens (7 days, no refresh)',
    accessTokenLifetimeSeconds: 3600,
    refreshTokenLifetimeSeconds: 0,
    grantTypes: [GRANT_TOKEN_EXCHANGE],
  },
  {
    name: 'interactive',
    description: 'MCP client whose user signs in through the browser: authorization code + PKCE, 1 h access tokens, 30-day rotating refresh tokens',
    accessTokenLifetimeSeconds: 3600,
    refreshTokenLifetimeSeconds: 30 * 24 * 3600,
    grantTypes: [GRANT_AUTHORIZATION_CODE, GRANT_REFRESH_TOKEN],
  },
];

export function defaultProfileRecords(now: number): ProfileRecord[] {
  return DEFAULT_PROFILES.map((p) => ({ ...p, grantTypes: [...p.grantTypes], createdAt: now }));
}

/** The stored profile, else the built-in one of that name, else null. */
export async function resolveProfile(store: ProfileStorage, name: string, now: number): Promise<ProfileRecord | null> {
  const stored = await store.getProfile(name);
  if (stored) return stored;
  const builtIn = DEFAULT_PROFILES.find((p) => p.name === name);
  return builtIn ? { ...builtIn, grantTypes: [...builtIn.grantTypes], createdAt: now } : null;
}
