// The operations of TokenStore by aggregate, named once: each engine (Redis, memory) builds one part
// per aggregate (src/store/<aggregate>/) and composes them into a whole store here, and a decorator
// (decorator.ts) wraps every operation by walking the same names. The table is checked against the
// interfaces both ways: an operation added to an aggregate's interface and not listed here, or
// listed and not there, does not compile.

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
import type { TokenStore } from './types.ts';
import type { UpstreamCredentialStorage } from './upstream-credentials/types.ts';

/** A store's parts, one per aggregate: what each engine implements in src/store/<aggregate>/. */
export interface StoreParts {
  tokens: TokenStorage;
  clients: ClientStorage & ProfileStorage;
  refreshTokens: RefreshTokenStorage;
  signIn: AuthorizationCodeStorage & ConsentStorage & AccountSessionStorage;
  devices: DeviceAuthorizationStorage;
  handles: HandleStorage;
  subjects: SubjectStorage & SubjectCutoffStorage;
  upstreamCredentials: UpstreamCredentialStorage;
  directory: DirectoryStorage;
  counters: CounterStorage & QuotaStorage & OneTimeValueStorage;
  infrastructure: AuditStorage & RevocationNotices & SigningKeyStorage & StoreHealth;
}

/** The name of one store operation (what a decorator's `around` is told, and what metrics label it with). */
export type StoreOperation = Exclude<keyof TokenStore, 'close' | 'watch'>;

/** Every operation of a store, without its lifecycle (`close`) and what it lets the metrics watch. */
export type StoreOperations = Pick<TokenStore, StoreOperation>;

/** Each part's operations, each operation once. */
export const STORE_OPERATIONS = {
  tokens: ['lookupToken', 'putUserToken', 'revokeUserToken', 'createAccessToken', 'revokeAccessToken', 'issueTokens'],
  clients: [
    'createClient',
    'getClient',
    'listClients',
    'deleteClient',
    'touchClient',
    'seedProfiles',
    'getProfile',
    'getProfileFields',
    'listProfiles',
  ],
  refreshTokens: ['getRefreshToken', 'rotateRefreshToken', 'revokeRefreshFamily'],
  signIn: [
    'putAuthorizationRequest',
    'putPendingSignIn',
    'takeAuthorizationRequest',
    'putAuthorizationCode',
    'getAuthorizationCode',
    'redeemAuthorizationCode',
    'putConsent',
    'listConsents',
    'linkConsentGrant',
    'forgetConsent',
    'putAccountSession',
    'getAccountSession',
    'deleteAccountSession',
  ],
  devices: ['putDeviceAuthorization', 'findDeviceAuthorization', 'decideDeviceAuthorization', 'pollDeviceAuthorization'],
  handles: ['readHandle', 'useHandle', 'bindHandle', 'forgetHandle', 'forgetSubjectHandles'],
  subjects: [
    'listSubjectTokens',
    'listClientTokens',
    'listSubjectConsents',
    'revokeSubject',
    'rebuildSubjectIndex',
    'recordLastUse',
    'markSubjectRevoked',
    'subjectRevokedAt',
  ],
  upstreamCredentials: [
    'putUpstreamCredential',
    'getUpstreamCredential',
    'replaceUpstreamCredential',
    'deleteUpstreamCredentials',
    'deleteUpstreamCredential',
    'listSubjectUpstreamCredentials',
    'listUpstreamCredentials',
  ],
  directory: [
    'createDirectoryUser',
    'getDirectoryUser',
    'findDirectoryUser',
    'updateDirectoryUser',
    'deleteDirectoryUser',
    'listDirectoryUsers',
    'linkDirectoryIdentity',
    'linkedDirectoryIdentities',
  ],
  counters: ['hitCounter', 'takeQuota', 'useOnce'],
  infrastructure: ['appendAudit', 'listAuditEvents', 'subscribeRevocations', 'publishSigningKey', 'listSigningKeys', 'ping'],
} as const satisfies { readonly [P in keyof StoreParts]: ReadonlyArray<keyof StoreParts[P]> };

/** Operations of a part's interface that its list leaves out, and of TokenStore that no part has. */
type Unlisted =
  | { [P in keyof StoreParts]: Exclude<keyof StoreParts[P], (typeof STORE_OPERATIONS)[P][number]> }[keyof StoreParts]
  | Exclude<StoreOperation, { [P in keyof StoreParts]: keyof StoreParts[P] }[keyof StoreParts]>;
type NoneOf<T extends never> = T;
/** Fails to compile, naming the operation, while one is unlisted. */
export type EveryOperationListed = NoneOf<Unlisted>;

/** Every operation name, in the table's order. */
export const STORE_OPERATION_NAMES: readonly StoreOperation[] = Object.values(STORE_OPERATIONS).flat();

/**
 * One object carrying every operation, each the method of the part that implements it (bound: the
 * call is the part's own, no wrapper, so the hot path's lookup costs one function call more, no promise).
 */
export function composeParts(parts: StoreParts): StoreOperations {
  const store: Record<string, unknown> = {};
  for (const part of Object.keys(STORE_OPERATIONS) as Array<keyof StoreParts>) {
    const impl = parts[part] as unknown as Record<string, (...args: unknown[]) => unknown>;
    for (const name of STORE_OPERATIONS[part]) {
      const method = impl[name];
      if (typeof method !== 'function') throw new TypeError(`store part ${part} has no operation ${name}`);
      store[name] = method.bind(impl);
    }
  }
  return store as unknown as StoreOperations;
}
