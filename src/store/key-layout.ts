// Key names under the prefix, one place for both stores (docs/storage.md lists them).

import { createHash } from 'node:crypto';
import { handleMember } from './handles/records.ts';
import type { HandleKind } from './types.ts';
import { approvalKeys } from './approvals/keys.ts';
import { clientBucket, hashBucket, OAUTH_BUCKETS } from '../model/buckets.ts';
import { directoryKeys } from './directory/keys.ts';

export { clientBucket, hashBucket, OAUTH_BUCKETS };

/**
 * The layout these names describe, stored under `<prefix>layout`. Layout 1 had no such key and put
 * every OAuth record under the one `{oauth}` tag; layout 2 spreads a client's records over buckets.
 */
export const CURRENT_LAYOUT = 2;

/** The tag spot in a bucketed key template: the subject revocation script (TOKEN_KEY) puts the bucket there, the id at the end. */
const BUCKET_SPOT = '{oauth:}';

/** One family of bucketed keys: `<prefix>{oauth:<bucket>}:<family>:<id>`. */
function bucketedFamily(prefix: string, family: string) {
  const head = `${prefix}{oauth:`;
  const tail = `}:${family}:`;
  return {
    /** The key of `id` in bucket `bucket`. */
    key: (bucket: string, id: string) => `${head}${bucket}${tail}${id}`,
    /** The key with the bucket and id left out, for the Lua scripts (bucketed there from the id). */
    template: `${prefix}${BUCKET_SPOT}:${family}:`,
    /** A SCAN MATCH pattern for every key of the family (the prefix's glob characters escaped). */
    pattern: `${escapeGlob(prefix)}{oauth:??}:${family}:*`,
    /** The id a key of this family names; undefined for any other key. */
    idOf: (key: string): string | undefined => {
      if (!key.startsWith(head) || key.slice(head.length + 2, head.length + 2 + tail.length) !== tail) return undefined;
      return key.slice(head.length + 2 + tail.length);
    },
  };
}

/**
 * Key names under the prefix. OAuth records bound to a client are spread over OAUTH_BUCKETS hash tags
 * `{oauth:<bucket>}`; the rest of the OAuth state (sign-in, devices, handles, consents) keeps the
 * `{oauth}` tag, as its multi-key steps span records of different clients.
 */
export function keyLayout(prefix: string) {
  const access = bucketedFamily(prefix, 'oauthAccessTokens');
  const refresh = bucketedFamily(prefix, 'oauthRefreshTokens');
  const codes = bucketedFamily(prefix, 'oauthAuthorizationCodes');
  const clients = bucketedFamily(prefix, 'oauthClients');
  const clientTokenSets = bucketedFamily(prefix, 'oauthClientTokens');
  const families = bucketedFamily(prefix, 'oauthRefreshFamilies');
  const grants = bucketedFamily(prefix, 'subjectGrants');
  return {
    /** The layout version key (CURRENT_LAYOUT): written on an empty store, checked at start-up. */
    layout: () => `${prefix}layout`,
    userToken: (tokenHash: string) => `${prefix}userBearerTokens:${tokenHash}`,
    accessToken: (tokenHash: string) => access.key(hashBucket(tokenHash), tokenHash),
    refreshToken: (tokenHash: string) => refresh.key(hashBucket(tokenHash), tokenHash),
    /** Templates of the token keys for the Lua script of a subject's revocation, which buckets a member's hash itself. */
    accessTokenTemplate: () => access.template,
    refreshTokenTemplate: () => refresh.template,
    /** SCAN patterns and key parsers of the token families (one per bucket). */
    accessTokenPattern: () => access.pattern,
    refreshTokenPattern: () => refresh.pattern,
    accessTokenHashOf: access.idOf,
    refreshTokenHashOf: refresh.idOf,
    client: (clientId: string) => clients.key(clientBucket(clientId), clientId),
    /** Every client id, for listing: one set outside the buckets, added to after the client record is written. */
    clientIndex: () => `${prefix}{oauth}:oauthClientIndex`,
    clientTokens: (clientId: string) => clientTokenSets.key(clientBucket(clientId), clientId),
    /** A refresh family lives in its client's bucket (its members are the client's tokens). */
    refreshFamily: (clientId: string, familyId: string) => families.key(clientBucket(clientId), familyId),
    authorizationCode: (codeHash: string) => codes.key(hashBucket(codeHash), codeHash),
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
     * Everything an IdP subject (by SHA-256) holds: sorted sets, member = subjectMember, score = the
     * record's expiresAt. One per bucket for the bucket's access and refresh tokens (`a:`, `r:` + token
     * hash: indexed in the step that issues them), and the subject's home index under `{oauth}` for its
     * user-grade tokens (`u:`) and approvals (`c:` + browser hash + `:` + consentKey).
     */
    subjectGrants: (subjectHash: string, bucket?: string) =>
      bucket === undefined ? `${prefix}{oauth}:subjectGrants:${subjectHash}` : grants.key(bucket, subjectHash),
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
    ...directoryKeys(prefix),
    ...approvalKeys(prefix),
    /** Pub/sub channel of revocation notices (not a key: nothing is stored under it). */
    revocationChannel: () => `${prefix}revocations`,
  };
}
export type KeyLayout = ReturnType<typeof keyLayout>;

/** Every bucket's name, in order: `00` to `ff`. */
export function allBuckets(): string[] {
  return Array.from({ length: OAUTH_BUCKETS }, (_, i) => i.toString(16).padStart(2, '0'));
}

/**
 * A SCAN MATCH glob as Redis reads it, for the memory engine's scans: `*` any run of characters, `?`
 * one, a backslash the next character literally. The store's patterns have no character class
 * (`[...]`): one is refused rather than half read.
 */
export function globMatcher(pattern: string): (key: string) => boolean {
  let source = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*') source += '[\\s\\S]*';
    else if (c === '?') source += '[\\s\\S]';
    else if (c === '\\' && i + 1 < pattern.length) source += escapeRegExp(pattern[++i]!);
    else if (c === '[') throw new Error(`globMatcher: character classes are not supported: ${pattern}`);
    else source += escapeRegExp(c);
  }
  const regex = new RegExp(`^${source}$`);
  return (key) => regex.test(key);
}

const escapeRegExp = (c: string): string => c.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');

/** A key prefix as a SCAN MATCH pattern: its glob characters (`*`, `?`, `[`, `]`, `\\`) taken literally. */
export function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}
