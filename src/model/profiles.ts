// Client profiles: named defaults an OAuth client is created with: the lifetime of the access tokens it
// gets from the token endpoint, whether and how long it gets refresh tokens, and its grant types when
// its creator names none. Seeded into the store by `seedDefaultProfiles`; seeding never overwrites a
// stored profile. A profile missing from the store falls back to the built-in definition of the same
// name. The token lifetimes of the built-in profiles are configuration (oauth.profiles.<name>.*), the
// same on every replica and visible in the deployment: for those names a stored profile's lifetimes
// are not used, and start-up logs a stored value the sidecar does not use. A stored profile that is
// unreadable (a field missing or malformed) is never replaced by the built-in one: its clients get
// nothing until it is fixed, and start-up says so.

import type { ProfileRecord, ProfileRecords, StoredRead } from './records.ts';
import { GRANT_AUTHORIZATION_CODE, GRANT_CLIENT_CREDENTIALS, GRANT_REFRESH_TOKEN, GRANT_TOKEN_EXCHANGE } from './grant-types.ts';

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
    description:
      'MCP client whose user signs in through the browser: authorization code + PKCE, 1 h access tokens, 30-day rotating refresh tokens',
    accessTokenLifetimeSeconds: 3600,
    refreshTokenLifetimeSeconds: 30 * 24 * 3600,
    grantTypes: [GRANT_AUTHORIZATION_CODE, GRANT_REFRESH_TOKEN],
  },
];

/** The configured token lifetimes of the built-in profiles, by name (oauth.profiles). */
export type ProfileLifetimes = Readonly<
  Record<string, { readonly accessTokenLifetimeSeconds: number; readonly refreshTokenLifetimeSeconds: number }>
>;

function configuredLifetimes(lifetimes: ProfileLifetimes | undefined, name: string) {
  // Own keys only: a profile name such as `__proto__` must not find Object.prototype.
  if (lifetimes === undefined || !Object.hasOwn(lifetimes, name)) return undefined;
  const { accessTokenLifetimeSeconds, refreshTokenLifetimeSeconds } = lifetimes[name]!;
  return { accessTokenLifetimeSeconds, refreshTokenLifetimeSeconds };
}

/** The built-in profiles as records to seed, with the configured lifetimes. */
export function defaultProfileRecords(now: number, lifetimes?: ProfileLifetimes): ProfileRecord[] {
  return DEFAULT_PROFILES.map((p) => ({ ...p, grantTypes: [...p.grantTypes], ...configuredLifetimes(lifetimes, p.name), createdAt: now }));
}

/**
 * The stored profile, else the built-in one of that name, else null; a built-in name's token
 * lifetimes are the configured ones (`lifetimes`) whatever the store holds. A stored profile that is
 * unreadable is `'corrupt'`, never replaced by the built-in one: its clients get nothing until it is fixed.
 */
export async function resolveProfile(
  store: Pick<ProfileRecords, 'getProfile'>,
  name: string,
  now: number,
  lifetimes?: ProfileLifetimes,
): Promise<StoredRead<ProfileRecord>> {
  const stored = await store.getProfile(name);
  if (stored === 'corrupt') return stored;
  const builtIn = DEFAULT_PROFILES.find((p) => p.name === name);
  const profile = stored ?? (builtIn ? { ...builtIn, grantTypes: [...builtIn.grantTypes], createdAt: now } : null);
  return profile && { ...profile, ...configuredLifetimes(lifetimes, name) };
}

/**
 * What the store holds for the built-in profiles that the sidecar does not use, one sentence each
 * (logged at start-up): a hash that is not a readable profile (written by hand for a profile that was
 * never seeded, or a field edited into something unreadable: its clients are refused), and stored
 * lifetimes that differ from the configured ones (configuration decides them).
 */
export async function unusedProfileEdits(store: ProfileRecords, lifetimes: ProfileLifetimes): Promise<string[]> {
  const problems: string[] = [];
  for (const { name } of DEFAULT_PROFILES) {
    const configured = configuredLifetimes(lifetimes, name);
    if (configured === undefined) continue;
    const fields = await store.getProfileFields(name);
    if (fields === null) continue;
    const keys = `oauth.profiles.${name}.accessTokenLifetimeSeconds / refreshTokenLifetimeSeconds`;
    if (fields.name !== name || (await store.getProfile(name)) === 'corrupt') {
      problems.push(
        `profile "${name}" in the store is not a readable profile (edited by hand, or before it was seeded?): its clients get no tokens until it is fixed or deleted (then seedDefaultProfiles); its token lifetimes come from ${keys} (${configured.accessTokenLifetimeSeconds} s / ${configured.refreshTokenLifetimeSeconds} s)`,
      );
      continue;
    }
    const access = fields.accessTokenLifetimeSeconds;
    const refresh = fields.refreshTokenLifetimeSeconds;
    if (access !== String(configured.accessTokenLifetimeSeconds) || refresh !== String(configured.refreshTokenLifetimeSeconds)) {
      problems.push(
        `profile "${name}" is stored with token lifetimes ${JSON.stringify(access ?? null)} s / ${JSON.stringify(refresh ?? null)} s, which are not used: ${keys} decide (${configured.accessTokenLifetimeSeconds} s / ${configured.refreshTokenLifetimeSeconds} s)`,
      );
    }
  }
  return problems;
}
