// Key names under the prefix, one place for both stores (docs/storage.md lists them).

import { createHash } from 'node:crypto';
import { handleMember } from './handles/records.ts';
import type { HandleKind } from './types.ts';

/** Key names under the prefix; every OAuth key carries the `{oauth}` hash tag (one Cluster slot). */
export function keyLayout(prefix: string) {
  return {
    userToken: (tokenHash: string) => `${prefix}userBearerTokens:${tokenHash}`,
    accessToken: (tokenHash: string) => `${prefix}{oauth}:oauthAccessTokens:${tokenHash}`,
    refreshToken: (tokenHash: string) => `${prefix}{oauth}:oauthRefreshTokens:${tokenHash}`,
    client: (clientId: string) => `${prefix}{oauth}:oauthClients:${clientId}`,
    clientIndex: () => `${prefix}{oauth}:oauthClientIndex`,
    clientTokens: (clientId: string) => `${prefix}{oauth}:oauthClientTokens:${clientId}`,
    refreshFamily: (familyId: string) => `${prefix}{oauth}:oauthRefreshFamilies:${familyId}`,
    authorizationCode: (codeHash: string) => `${prefix}{oauth}:oauthAuthorizationCodes:${codeHash}`,
    authorizationRequest: (requestHash: string) => `${prefix}{oauth}:oauthAuthorizationRequests:${requestHash}`,
    /** Pending sign-ins held by a client address or a client: sorted sets, member = request hash prefix, score = expiry. */
    pendingSignInsByAddress: (address: string) => `${prefix}{oauth}:pendingSignIns:address:${address}`,
    pendingSignInsByClient: (clientId: string) => `${prefix}{oauth}:pendingSignIns:client:${clientId}`,
    /** Device authorizations (RFC 8628) under the SHA-256 of the device code, and the index of their user codes. */
    deviceAuthorization: (deviceCodeHash: string) => `${prefix}{oauth}:oauthDeviceAuthorizations:${deviceCodeHash}`,
    deviceUserCode: (userCodeHash: string) => `${prefix}{oauth}:oauthDeviceUserCodes:${userCodeHash}`,
    /** Device authorizations held by a client address and by the server: sorted sets, member = hash prefix, score = expiry. */
    pendingDevicesByAddress: (address: string) => `${prefix}{oauth}:pendingDevices:address:${address}`,
    pendingDevicesAll: () => `${prefix}{oauth}:pendingDevices:all`,
    /** One browser's remembered approvals: consentKey -> consentValue. */
    consents: (browserHash: string) => `${prefix}{oauth}:oauthConsents:${browserHash}`,
    /** A grant issued under an approval -> where the approval lives (browser, consent). */
    consentGrant: (grantId: string) => `${prefix}{oauth}:oauthConsentGrants:${grantId}`,
    /** An account-page session, by the SHA-256 of its cookie: accountSessionFields. */
    accountSession: (sessionHash: string) => `${prefix}{oauth}:accountSessions:${sessionHash}`,
    /** A session or task handle, by the SHA-256 of the handle: its owner (handleFields). */
    handle: (kind: HandleKind, handleHash: string) => `${prefix}{oauth}:mcpHandles:${handleMember(kind, handleHash)}`,
    /** What every handle key starts with (followed by its handleMember). */
    handlePrefix: () => `${prefix}{oauth}:mcpHandles:`,
    /** The handles of a client / of an IdP subject (by SHA-256): sorted sets, member = handleMember, score = expiry. */
    handlesByClient: (clientId: string) => `${prefix}{oauth}:mcpHandlesByClient:${clientId}`,
    handlesBySubject: (subjectHash: string) => `${prefix}{oauth}:mcpHandlesBySubject:${subjectHash}`,
    /**
     * Everything an IdP subject (by SHA-256) holds: a sorted set, member = subjectMember (`u:`, `a:`,
     * `r:` + token hash, `c:` + browser hash + `:` + consentKey), score = the record's expiresAt.
     */
    subjectGrants: (subjectHash: string) => `${prefix}{oauth}:subjectGrants:${subjectHash}`,
    /** Offboarding's cut-offs of one subject: field issuer (or `*`: every issuer) -> epoch ms. */
    subjectCutoff: (subjectHash: string) => `${prefix}subjectCutoffs:${subjectHash}`,
    profile: (name: string) => `${prefix}{oauth}:profiles:${name}`,
    profileIndex: () => `${prefix}{oauth}:profileIndex`,
    rateCounter: (name: string) => `${prefix}rateLimits:${name}`,
    /** A quota counter; the name (rule, window, caller) is hashed: it carries subjects and client ids. */
    quotaCounter: (name: string) => `${prefix}quotas:${createHash('sha256').update(name).digest('hex')}`,
    /** The name is hashed: it may come from a client (a `jti`), and keys stay short and printable. */
    oneTimeValue: (name: string) => `${prefix}{oauth}:usedOnce:${createHash('sha256').update(name).digest('hex')}`,
    auditStream: () => `${prefix}audit`,
    /** The admin trail (events of the master token), capped on its own: request floods cannot evict them. */
    adminAuditStream: () => `${prefix}audit:admin`,
    /** One hash of every replica's public assertion keys: kid -> signingKeyValue. */
    signingKeys: () => `${prefix}assertionKeys`,
    /**
     * One user's kept upstream credentials: field JSON [issuer, provider] -> upstreamCredentialValue.
     * No `{oauth}` tag: nothing atomic spans users, and per-user records spread over the Cluster.
     */
    upstreamCredentials: (subject: string) => `${prefix}upstreamCredentials:${createHash('sha256').update(subject).digest('hex')}`,
    /** The set of every upstreamCredentials key written (re-encryption walks it; stale members are dropped). */
    upstreamCredentialIndex: () => `${prefix}upstreamCredentialIndex`,
    /**
     * The lookup cache's database marker: a random value set once (SET NX) and read by every cache
     * barrier, so a database swapped or flushed under a caching sidecar (SWAPDB sends no invalidation)
     * is noticed before a cached record is used.
     */
    lookupCacheMarker: () => `${prefix}lookupCacheMarker`,
    /** A SCIM user of the directory, by its id: directoryUserFields. One `{directory}` slot: a change and its indexes are one transaction. */
    directoryUser: (id: string) => `${prefix}{directory}:scimUsers:${id}`,
    /** One index entry of the directory's users (directoryIndexName): field `id`. */
    directoryIndex: (name: string) => `${prefix}{directory}:scimIndex:${name}`,
    /** The live users of one provider (SHA-256 hex of its name): a sorted set, member = id, score = createdAt. */
    directoryList: (providerHash: string) => `${prefix}{directory}:scimList:${providerHash}`,
    /** The identities seen signing in with one email (directoryLinkName): field JSON [subject, issuer] -> epoch ms. */
    directoryLinks: (name: string) => `${prefix}{directory}:scimLinks:${name}`,
    /** Pub/sub channel of revocation notices (not a key: nothing is stored under it). */
    revocationChannel: () => `${prefix}revocations`,
  };
}
export type KeyLayout = ReturnType<typeof keyLayout>;
