// How records become flat string hash fields and back: shared by both stores so they hold the same
// bytes, and documented field by field in docs/storage.md. Timestamps are integer epoch ms.

import { createHash } from 'node:crypto';
import { parseEpochMs } from '../model/credentials.ts';
import { decideDevice, pollDevice } from '../model/device-authorizations.ts';
import type {
  AccountSession,
  AuthorizationRequest,
  SubjectToken,
  HandleKind,
  HandleOwner,
  AccessTokenRecord,
  AuthorizationCodeRecord,
  AuthorizationRequestRecord,
  ConsentLink,
  DeviceAuthorizationRecord,
  DevicePollOutcome,
  StoredDeviceAuthorization,
  ConsentRecord,
  PublishedSigningKey,
  RevocationNotice,
  SignedInUser,
  StoredUpstreamCredential,
  AuditEvent,
  ClientRecord,
  ProfileRecord,
  RefreshTokenRecord,
  StoredAuditEvent,
  StoredAuthorizationCode,
  StoredRefreshToken,
  StoredAccessToken,
  StoredUserToken,
  TokenEndpointAuthMethod,
  TokenLookup,
  UserTokenRecord,
} from './types.ts';

export type Fields = Record<string, string>;

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
    /** Pub/sub channel of revocation notices (not a key: nothing is stored under it). */
    revocationChannel: () => `${prefix}revocations`,
  };
}
export type KeyLayout = ReturnType<typeof keyLayout>;

/** A handle as named in its owner's indexes (and at the end of its own key): `<kind>:<sha256>`. */
export function handleMember(kind: HandleKind, handleHash: string): string {
  return `${kind}:${handleHash}`;
}

/** How an IdP subject names its handle index: SHA-256 hex (a `sub` may be long or hold any character). */
export function subjectDigest(subject: string): string {
  return createHash('sha256').update(subject).digest('hex');
}

/**
 * Whether its owner's use renews a handle (its expiry and index entries): once a sixteenth of the
 * lifetime has passed since its last renewal (`renewedAt`, epoch ms text), or when that is unreadable
 * or in the future (another replica's clock ahead). The same rule as the Redis script CLAIM_HANDLE.
 */
export function handleRenewalDue(renewedAt: string | null | undefined, now: number, ttlMs: number): boolean {
  const at = Number(renewedAt ?? NaN);
  return !Number.isFinite(at) || now < at || now - at >= Math.floor(Math.max(1, Math.trunc(ttlMs)) / 16);
}

/** A handle's record: its owner's identity and the indexes that list it. */
export function handleFields(owner: HandleOwner): Fields {
  const f: Fields = { owner: owner.id };
  if (owner.clientId !== undefined) f.clientId = owner.clientId;
  if (owner.subjectHash !== undefined) f.subjectHash = owner.subjectHash;
  return f;
}

/** Members of a client's token set: `a:<hash>` for access tokens, `r:<hash>` for refresh tokens. */
export const ACCESS_MEMBER = 'a:';
export const REFRESH_MEMBER = 'r:';
/** Members of a subject's index besides `a:` and `r:`: user-grade tokens and remembered approvals. */
export const USER_MEMBER = 'u:';
export const CONSENT_MEMBER = 'c:';

/** A remembered approval as a member of its subject's index: `c:<browserHash>:<consentKey>`. */
export function consentMember(browserHash: string, key: string): string {
  return `${CONSENT_MEMBER}${browserHash}:${key}`;
}

/** The browser and field of a consent member; null when it is not one. */
export function parseConsentMember(member: string): { browserHash: string; key: string } | null {
  const m = /^c:([0-9a-f]{64}):([0-9a-f]{64})$/.exec(member);
  return m ? { browserHash: m[1]!, key: m[2]! } : null;
}

/**
 * A stored token of a subject's index as a SubjectToken, or null when it is not a live, unrevoked
 * record of `subject` at `now` (absent, expired, revoked, unreadable, another subject's): such a
 * member is dropped from the index. `lastUsedAt` is read when recorded.
 */
export function subjectTokenFromFields(
  kind: SubjectToken['kind'],
  tokenHash: string,
  f: Fields | null,
  now: number,
  subject?: string,
): SubjectToken | null {
  if (f === null || !f.subject || !f.issuer) return null;
  if (subject !== undefined && f.subject !== subject) return null;
  const expiresAt = parseEpochMs(f.expiresAt);
  if (expiresAt === undefined || expiresAt <= now) return null;
  if (kind === 'user' ? f.revoked !== 'false' : f.revokedAt !== undefined) return null;
  const t: SubjectToken = { kind, tokenHash, subject: f.subject, issuer: f.issuer, createdAt: Number(f.createdAt ?? 0), expiresAt };
  if (f.clientId !== undefined && kind !== 'user') t.clientId = f.clientId;
  if (f.familyId !== undefined && kind !== 'user') t.familyId = f.familyId;
  if (f.scope !== undefined) t.scope = f.scope;
  const lastUsedAt = parseEpochMs(f.lastUsedAt);
  if (lastUsedAt !== undefined) t.lastUsedAt = lastUsedAt;
  return t;
}

export function userTokenFields(r: UserTokenRecord): Fields {
  // The IdP identity (subject, issuer, email, groups) is written as a sign-in token's is: one encoding.
  return {
    tokenHash: r.tokenHash,
    ...userFields(r),
    revoked: 'false',
    createdAt: String(r.createdAt),
    expiresAt: String(r.expiresAt),
    ...(r.dpopJkt !== undefined ? { dpopJkt: r.dpopJkt } : {}),
  };
}

export function accessTokenFields(r: AccessTokenRecord): Fields {
  const f: Fields = {
    tokenHash: r.tokenHash,
    clientId: r.clientId,
    createdAt: String(r.createdAt),
    expiresAt: String(r.expiresAt),
  };
  if (r.scope !== undefined) f.scope = r.scope;
  if (r.familyId !== undefined) f.familyId = r.familyId;
  if (r.dpopJkt !== undefined) f.dpopJkt = r.dpopJkt;
  if (r.user !== undefined) Object.assign(f, userFields(r.user));
  return f;
}

/** The signed-in user as token or code fields: subject, issuer, email?, groups? (a JSON list). */
export function userFields(u: SignedInUser): Fields {
  const f: Fields = { subject: u.subject, issuer: u.issuer };
  if (u.email !== undefined) f.email = u.email;
  if (u.groups !== undefined) f.groups = JSON.stringify(u.groups);
  if (u.signedInAt !== undefined) f.signedInAt = String(u.signedInAt);
  return f;
}

/** The signed-in user of a stored token or code; undefined for tokens of machine clients. */
export function userFromFields(f: Fields): SignedInUser | undefined {
  if (!f.subject || !f.issuer) return undefined;
  const u: SignedInUser = { subject: f.subject, issuer: f.issuer };
  if (f.email !== undefined) u.email = f.email;
  if (f.groups !== undefined) u.groups = stringArray(f.groups);
  const signedInAt = parseEpochMs(f.signedInAt);
  if (signedInAt !== undefined) u.signedInAt = signedInAt;
  return u;
}

/** The field of a cut-off that applies to every issuer (an issuer is a URL: never `*`). */
export const EVERY_ISSUER = '*';

/** The latest cut-off among a subject's cut-off fields that applies at `issuer`; undefined when none does. */
export function cutoffFromFields(f: Fields | null, issuer: string): number | undefined {
  if (f === null) return undefined;
  const applying = [parseEpochMs(f[issuer]), parseEpochMs(f[EVERY_ISSUER])].filter((t): t is number => t !== undefined);
  return applying.length === 0 ? undefined : Math.max(...applying);
}

/** What a reused code's revocation ends: the access token and the refresh family its redemption issued. */
export function reuseNotice(code: Fields): RevocationNotice {
  const notice: RevocationNotice = {};
  if (code.accessTokenHash !== undefined) notice.tokenHashes = [code.accessTokenHash];
  if (code.familyId !== undefined) notice.familyIds = [code.familyId];
  return notice;
}

export function authorizationCodeFields(r: AuthorizationCodeRecord): Fields {
  const f: Fields = {
    codeHash: r.codeHash,
    clientId: r.clientId,
    redirectUri: r.redirectUri,
    codeChallenge: r.codeChallenge,
    resource: r.resource,
    createdAt: String(r.createdAt),
    expiresAt: String(r.expiresAt),
    ...userFields(r.user),
  };
  if (r.scope !== undefined) f.scope = r.scope;
  if (r.consent !== undefined) {
    f.consentBrowser = r.consent.browserHash;
    f.consentKey = r.consent.key;
    f.consentExpiresAt = String(r.consent.expiresAt);
  }
  return f;
}

/** The approval a stored code was issued under, when it names a whole one. */
function consentLinkFromFields(f: Fields): ConsentLink | undefined {
  const expiresAt = Number(f.consentExpiresAt);
  if (!f.consentBrowser || !f.consentKey || !Number.isSafeInteger(expiresAt)) return undefined;
  return { browserHash: f.consentBrowser, key: f.consentKey, expiresAt };
}

/** A sign-in in progress as hash fields: the request, the browser, and what its stage adds. */
export function authorizationRequestFields(r: AuthorizationRequestRecord): Fields {
  if (r.stage === 'account')
    return {
      stage: r.stage,
      browser: r.browserHash,
      nonce: r.nonce,
      codeVerifier: r.codeVerifier,
      ...(r.next !== undefined ? { next: r.next } : {}),
    };
  const f: Fields = {
    stage: r.stage,
    browser: r.browserHash,
    clientId: r.request.clientId,
    redirectUri: r.request.redirectUri,
    codeChallenge: r.request.codeChallenge,
  };
  if (r.request.state !== undefined) f.state = r.request.state;
  if (r.request.scope !== undefined) f.scope = r.request.scope;
  if (r.request.deviceCodeHash !== undefined) f.device = r.request.deviceCodeHash;
  if (r.stage === 'user-consent') Object.assign(f, userFields(r.user));
  if (r.stage === 'idp') {
    f.consent = r.consent;
    if (r.remember) f.remember = 'yes';
    f.nonce = r.nonce;
    f.codeVerifier = r.codeVerifier;
  }
  return f;
}

/**
 * A stored sign-in in progress, or `'corrupt'` without its browser, its request's client, redirect
 * URI or PKCE challenge, a known stage, or what the stage needs (the user; the nonce and verifier).
 */
export function authorizationRequestFromFields(f: Fields): AuthorizationRequestRecord | 'corrupt' {
  if (f.stage === 'account') {
    if (!f.browser || f.nonce === undefined || f.codeVerifier === undefined) return 'corrupt';
    // Only a path of this server: the browser is sent to PUBLIC_URL followed by it.
    if (f.next !== undefined && !/^\/[^/\\]/.test(f.next)) return 'corrupt';
    return {
      stage: 'account',
      browserHash: f.browser,
      nonce: f.nonce,
      codeVerifier: f.codeVerifier,
      ...(f.next !== undefined ? { next: f.next } : {}),
    };
  }
  // A device's sign-in has no redirect URI nor challenge: its device code's hash stands for both.
  if (!f.browser || !f.clientId || (f.device === undefined && (!f.redirectUri || !f.codeChallenge))) return 'corrupt';
  if (f.device !== undefined && !/^[0-9a-f]{64}$/.test(f.device)) return 'corrupt';
  const request: AuthorizationRequest = {
    clientId: f.clientId,
    redirectUri: f.redirectUri ?? '',
    codeChallenge: f.codeChallenge ?? '',
    state: f.state,
    scope: f.scope,
  };
  if (f.device !== undefined) request.deviceCodeHash = f.device;
  const base = { browserHash: f.browser, request };
  switch (f.stage) {
    case 'consent':
      return { ...base, stage: 'consent' };
    case 'user-consent': {
      const user = userFromFields(f);
      return user ? { ...base, stage: 'user-consent', user } : 'corrupt';
    }
    case 'idp':
      if (f.nonce === undefined || f.codeVerifier === undefined) return 'corrupt';
      return {
        ...base,
        stage: 'idp',
        nonce: f.nonce,
        codeVerifier: f.codeVerifier,
        consent: f.consent === 'remembered' ? 'remembered' : 'given',
        remember: f.remember === 'yes',
      };
    default:
      return 'corrupt';
  }
}

/**
 * A stored code, or `'corrupt'` without what its redemption checks: its client, the signed-in user,
 * the redirect URI and the PKCE challenge. Its expiry is the redemption's to check, atomically.
 */
export function authorizationCodeFromFields(f: Fields): StoredAuthorizationCode | 'corrupt' {
  const user = userFromFields(f);
  if (!f.clientId || !user || f.codeChallenge === undefined || f.redirectUri === undefined) return 'corrupt';
  const c: StoredAuthorizationCode = {
    codeHash: f.codeHash ?? '',
    clientId: f.clientId,
    redirectUri: f.redirectUri,
    codeChallenge: f.codeChallenge,
    resource: f.resource ?? '',
    user,
    createdAt: Number(f.createdAt),
    expiresAt: Number(f.expiresAt),
  };
  if (f.scope !== undefined) c.scope = f.scope;
  const consent = consentLinkFromFields(f);
  if (consent !== undefined) c.consent = consent;
  if (f.redeemedAt !== undefined) c.redeemedAt = Number(f.redeemedAt);
  if (f.accessTokenHash !== undefined) c.accessTokenHash = f.accessTokenHash;
  if (f.familyId !== undefined) c.familyId = f.familyId;
  return c;
}

/**
 * The field an approval is kept under in its browser's hash: one per IdP user, client and redirect
 * URI (a SHA-256, so that long ids and URIs make short fields).
 */
export function consentKey(c: Pick<ConsentRecord, 'issuer' | 'subject' | 'clientId' | 'redirectUri'>): string {
  return createHash('sha256')
    .update(JSON.stringify([c.issuer, c.subject, c.clientId, c.redirectUri]))
    .digest('hex');
}

/** An approval as its hash field's value: JSON, `expiresAt` among its members (the Redis script reads it). */
export function consentValue(c: ConsentRecord): string {
  const v: Record<string, string | number> = {
    clientId: c.clientId,
    clientCreatedAt: c.clientCreatedAt,
    redirectUri: c.redirectUri,
    issuer: c.issuer,
    subject: c.subject,
    approvedAt: c.approvedAt,
    expiresAt: c.expiresAt,
  };
  if (c.scope !== undefined) v.scope = c.scope;
  return JSON.stringify(v);
}

/** The approval of a hash field's value, if it is whole and not expired at `now`; otherwise null. */
export function consentFromValue(value: string, now: number): ConsentRecord | null {
  let v: unknown;
  try {
    v = JSON.parse(value);
  } catch {
    return null;
  }
  if (typeof v !== 'object' || v === null) return null;
  const r = v as Record<string, unknown>;
  const texts = ['clientId', 'redirectUri', 'issuer', 'subject'] as const;
  const times = ['clientCreatedAt', 'approvedAt', 'expiresAt'] as const;
  if (!texts.every((k) => typeof r[k] === 'string') || !times.every((k) => Number.isSafeInteger(r[k]))) return null;
  if ((r.expiresAt as number) <= now || (r.scope !== undefined && typeof r.scope !== 'string')) return null;
  const c: ConsentRecord = {
    clientId: r.clientId as string,
    clientCreatedAt: r.clientCreatedAt as number,
    redirectUri: r.redirectUri as string,
    issuer: r.issuer as string,
    subject: r.subject as string,
    approvedAt: r.approvedAt as number,
    expiresAt: r.expiresAt as number,
  };
  if (r.scope !== undefined) c.scope = r.scope as string;
  return c;
}

/**
 * The rule of putConsent, on a browser's hash as it stands after writing `written`: which fields to
 * drop (unreadable or expired at `now`, then the soonest to expire, ties by field, beyond `max`; the
 * approval just given is never the one evicted) and the latest expiry of those kept (0: none kept).
 * The Redis script applies the same rule.
 */
export function consentEviction(fields: Fields, written: string, now: number, max: number): { drop: string[]; latest: number } {
  const live: Array<[string, number]> = [];
  const drop: string[] = [];
  for (const [field, value] of Object.entries(fields)) {
    const c = consentFromValue(value, now);
    if (c) live.push([field, c.expiresAt]);
    else drop.push(field);
  }
  const rank = ([field, at]: [string, number]): [number, number] => [field === written ? 1 : 0, at];
  live.sort((a, b) => rank(a)[0] - rank(b)[0] || rank(a)[1] - rank(b)[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const excess = Math.max(0, live.length - max);
  drop.push(...live.slice(0, excess).map(([f]) => f));
  return { drop, latest: live.slice(excess).reduce((m, [, at]) => Math.max(m, at), 0) };
}

/** The grant ids a revocation notice names (refresh families, token hashes): the approvals they were issued under go. */
export function consentGrantIds(notice: RevocationNotice): string[] {
  return [...(notice.familyIds ?? []), ...(notice.tokenHashes ?? [])];
}

export function refreshTokenFields(r: RefreshTokenRecord): Fields {
  const f: Fields = {
    tokenHash: r.tokenHash,
    clientId: r.clientId,
    familyId: r.familyId,
    createdAt: String(r.createdAt),
    expiresAt: String(r.expiresAt),
  };
  if (r.scope !== undefined) f.scope = r.scope;
  if (r.dpopJkt !== undefined) f.dpopJkt = r.dpopJkt;
  if (r.user !== undefined) Object.assign(f, userFields(r.user));
  return f;
}

/**
 * A stored refresh token, or `'corrupt'` without the fields every use needs: its client, its family
 * and a well-formed expiry. `rotatedAt` and `revokedAt` count by their presence (as the scripts read
 * them), whatever their value.
 */
export function refreshTokenFromFields(f: Fields): StoredRefreshToken | 'corrupt' {
  const expiresAt = parseEpochMs(f.expiresAt);
  if (!f.clientId || !f.familyId || expiresAt === undefined) return 'corrupt';
  const r: StoredRefreshToken = {
    tokenHash: f.tokenHash ?? '',
    clientId: f.clientId,
    familyId: f.familyId,
    createdAt: Number(f.createdAt),
    expiresAt,
  };
  if (f.scope !== undefined) r.scope = f.scope;
  if (f.dpopJkt !== undefined) r.dpopJkt = f.dpopJkt;
  const user = userFromFields(f);
  if (user !== undefined) r.user = user;
  if (f.rotatedAt !== undefined) r.rotatedAt = Number(f.rotatedAt);
  if (f.successor !== undefined) r.successor = f.successor;
  if (f.revokedAt !== undefined) r.revokedAt = Number(f.revokedAt);
  return r;
}

/** A read of one record's fields (null: none stored), parsed by `parse`. */
export function readRecord<T>(fields: Fields | null, parse: (f: Fields) => T | 'corrupt'): T | 'corrupt' | null {
  return fields === null ? null : parse(fields);
}

export function clientFields(c: ClientRecord): Fields {
  const f: Fields = {
    clientId: c.clientId,
    redirectUris: JSON.stringify(c.redirectUris),
    grantTypes: JSON.stringify(c.grantTypes),
    profile: c.profile,
    tokenEndpointAuthMethod: c.tokenEndpointAuthMethod,
    source: c.source,
    createdAt: String(c.createdAt),
  };
  if (c.clientSecretHash !== undefined) f.clientSecretHash = c.clientSecretHash;
  if (c.jwks !== undefined) f.jwks = c.jwks;
  if (c.jwksUri !== undefined) f.jwksUri = c.jwksUri;
  if (c.clientName !== undefined) f.clientName = c.clientName;
  if (c.scope !== undefined) f.scope = c.scope;
  if (c.revokedAt !== undefined) f.revokedAt = String(c.revokedAt);
  return f;
}

/** A JSON list of strings, or undefined when the text is not one (absent, not JSON, another shape). */
function strictStringArray(text: string | undefined): string[] | undefined {
  if (text === undefined) return undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    return Array.isArray(parsed) && parsed.every((x) => typeof x === 'string') ? (parsed as string[]) : undefined;
  } catch {
    return undefined;
  }
}

/** Lenient: what a record's list holds that is a string; [] when unreadable (for records shown, never for decisions). */
function stringArray(text: string | undefined): string[] {
  if (!text) return [];
  try {
    const parsed: unknown = JSON.parse(text);
    return Array.isArray(parsed) ? parsed.filter((x): x is string => typeof x === 'string') : [];
  } catch {
    return [];
  }
}

/** An RFC 7638 SHA-256 thumbprint: 43 base64url characters. */
const JKT_PATTERN = /^[A-Za-z0-9_-]{43}$/;
const SHA256_HEX_PATTERN = /^[0-9a-f]{64}$/;
/** A whole number of seconds as stored: at most 10 digits, nothing else. */
const SECONDS_PATTERN = /^[0-9]{1,10}$/;

/**
 * The binding, email and groups of a token record, added to `into`; false when a field is present
 * and unreadable: a binding that is not a thumbprint cannot be checked (never read as unbound), and a
 * groups field that is not a list of strings is no identity a policy may see half-read.
 */
function tokenClaims(f: Fields, into: { issuer?: string; email?: string; groups?: readonly string[]; dpopJkt?: string }): boolean {
  if (f.dpopJkt !== undefined) {
    if (!JKT_PATTERN.test(f.dpopJkt)) return false;
    into.dpopJkt = f.dpopJkt;
  }
  if (f.issuer) into.issuer = f.issuer;
  if (f.email) into.email = f.email;
  if (f.groups !== undefined) {
    const groups = strictStringArray(f.groups);
    if (groups === undefined) return false;
    into.groups = Object.freeze(groups);
  }
  return true;
}

/**
 * A stored user-grade token, or `'corrupt'`: a `tokenHash` field other than its key's, `revoked`
 * other than exactly "true" or "false", `expiresAt` not an integer, an empty subject, an unreadable
 * binding or groups.
 */
export function userTokenFromFields(f: Fields, tokenHash: string): StoredUserToken | 'corrupt' {
  if (f.tokenHash !== undefined && f.tokenHash !== tokenHash) return 'corrupt';
  if (f.revoked !== 'false' && f.revoked !== 'true') return 'corrupt';
  const expiresAt = parseEpochMs(f.expiresAt);
  if (expiresAt === undefined || !f.subject) return 'corrupt';
  const r: StoredUserToken = { subject: f.subject, revoked: f.revoked === 'true', expiresAt };
  return tokenClaims(f, r) ? r : 'corrupt';
}

/**
 * A stored OAuth access token, or `'corrupt'`: a `tokenHash` field other than its key's, `expiresAt`
 * not an integer, no client, an unreadable binding or groups. `revokedAt` counts by its presence.
 */
export function accessTokenFromFields(f: Fields, tokenHash: string): StoredAccessToken | 'corrupt' {
  if (f.tokenHash !== undefined && f.tokenHash !== tokenHash) return 'corrupt';
  const expiresAt = parseEpochMs(f.expiresAt);
  if (expiresAt === undefined || !f.clientId) return 'corrupt';
  const r: StoredAccessToken = { clientId: f.clientId, revoked: f.revokedAt !== undefined, expiresAt };
  if (f.subject) r.subject = f.subject;
  if (f.scope) r.scope = f.scope;
  if (f.familyId) r.familyId = f.familyId;
  return tokenClaims(f, r) ? r : 'corrupt';
}

/** Both records of a token hash from their raw fields (null: none stored), parsed and frozen. */
export function tokenLookupFromFields(tokenHash: string, user: Fields | null, oauth: Fields | null): TokenLookup {
  return {
    user: user === null ? null : freezeRecord(userTokenFromFields(user, tokenHash)),
    oauth: oauth === null ? null : freezeRecord(accessTokenFromFields(oauth, tokenHash)),
  };
}

function freezeRecord<T extends object>(r: T | 'corrupt'): Readonly<T> | 'corrupt' {
  return r === 'corrupt' ? r : Object.freeze(r);
}

const AUTH_METHODS: ReadonlySet<string> = new Set<TokenEndpointAuthMethod>([
  'client_secret_basic',
  'client_secret_post',
  'private_key_jwt',
  'none',
]);
const CLIENT_SOURCES: ReadonlySet<string> = new Set<ClientRecord['source']>(['admin', 'dcr', 'cimd']);

/**
 * A stored client, or `'corrupt'` when a field every use of it reads is missing or unreadable: its
 * id, redirect URIs and grant types (JSON lists of strings), profile, authentication method, source
 * (which decides whether it expires unused), createdAt, a revokedAt or secret hash that is present
 * but malformed. Nothing is filled in with a default: an unreadable client is refused.
 */
export function clientFromFields(f: Fields): ClientRecord | 'corrupt' {
  const redirectUris = strictStringArray(f.redirectUris);
  const grantTypes = strictStringArray(f.grantTypes);
  const createdAt = parseEpochMs(f.createdAt);
  const revokedAt = parseEpochMs(f.revokedAt);
  if (!f.clientId || redirectUris === undefined || grantTypes === undefined || !f.profile || createdAt === undefined) return 'corrupt';
  if (!AUTH_METHODS.has(f.tokenEndpointAuthMethod ?? '') || !CLIENT_SOURCES.has(f.source ?? '')) return 'corrupt';
  if (f.revokedAt !== undefined && revokedAt === undefined) return 'corrupt';
  if (f.clientSecretHash !== undefined && !SHA256_HEX_PATTERN.test(f.clientSecretHash)) return 'corrupt';
  const c: ClientRecord = {
    clientId: f.clientId,
    redirectUris,
    grantTypes,
    profile: f.profile,
    tokenEndpointAuthMethod: f.tokenEndpointAuthMethod as TokenEndpointAuthMethod,
    source: f.source as ClientRecord['source'],
    createdAt,
  };
  if (f.clientSecretHash !== undefined) c.clientSecretHash = f.clientSecretHash;
  if (f.jwks !== undefined) c.jwks = f.jwks;
  if (f.jwksUri !== undefined) c.jwksUri = f.jwksUri;
  if (f.clientName !== undefined) c.clientName = f.clientName;
  if (f.scope !== undefined) c.scope = f.scope;
  if (revokedAt !== undefined) c.revokedAt = revokedAt;
  return c;
}

export function profileFields(p: ProfileRecord): Fields {
  return {
    name: p.name,
    description: p.description,
    accessTokenLifetimeSeconds: String(p.accessTokenLifetimeSeconds),
    refreshTokenLifetimeSeconds: String(p.refreshTokenLifetimeSeconds),
    grantTypes: JSON.stringify(p.grantTypes),
    createdAt: String(p.createdAt),
  };
}

/**
 * A stored profile, or `'corrupt'` when it lacks a field or holds one unreadable: its name, a
 * description, both lifetimes (whole seconds), its grant types (a JSON list of strings), createdAt.
 * Nothing is filled in with a default: an unreadable profile gives its clients nothing.
 */
export function profileFromFields(f: Fields): ProfileRecord | 'corrupt' {
  const grantTypes = strictStringArray(f.grantTypes);
  const createdAt = parseEpochMs(f.createdAt);
  const access = f.accessTokenLifetimeSeconds ?? '';
  const refresh = f.refreshTokenLifetimeSeconds ?? '';
  if (!f.name || f.description === undefined || grantTypes === undefined || createdAt === undefined) return 'corrupt';
  if (!SECONDS_PATTERN.test(access) || !SECONDS_PATTERN.test(refresh)) return 'corrupt';
  return {
    name: f.name,
    description: f.description,
    accessTokenLifetimeSeconds: Number(access),
    refreshTokenLifetimeSeconds: Number(refresh),
    grantTypes,
    createdAt,
  };
}

/** Empty object from HGETALL means "no such key". */
export function orNull(f: Fields): Fields | null {
  for (const _ in f) return f;
  return null;
}

/** An audit event as flat stream fields (XADD), and back; `detail` travels as one JSON field. */
export function auditFields(e: AuditEvent): Fields {
  const f: Fields = { at: String(e.at), who: e.who, action: e.action, result: e.result };
  if (e.eventId !== undefined) f.eventId = e.eventId;
  if (e.clientId !== undefined) f.clientId = e.clientId;
  if (e.tokenHashPrefix !== undefined) f.tokenHashPrefix = e.tokenHashPrefix;
  if (e.subject !== undefined) f.subject = e.subject;
  if (e.detail !== undefined) f.detail = JSON.stringify(e.detail);
  return f;
}

export function auditFromFields(id: string, f: Fields): StoredAuditEvent {
  const e: StoredAuditEvent = { id, at: Number(f.at), who: f.who ?? '', action: f.action ?? '', result: f.result ?? '' };
  if (f.eventId !== undefined) e.eventId = f.eventId;
  if (f.clientId !== undefined) e.clientId = f.clientId;
  if (f.tokenHashPrefix !== undefined) e.tokenHashPrefix = f.tokenHashPrefix;
  if (f.subject !== undefined) e.subject = f.subject;
  if (f.detail !== undefined) {
    try {
      e.detail = JSON.parse(f.detail) as Record<string, string | number | boolean>;
    } catch {
      // A hand-written entry with a broken detail is still shown, without it.
    }
  }
  return e;
}

/** A published signing key as its hash field's value: `{"expiresAt":<ms>,"jwk":{...}}`. */
export function signingKeyValue(key: PublishedSigningKey): string {
  return `{"expiresAt":${key.expiresAt},"jwk":${key.jwk}}`;
}

/**
 * The published key of a hash field, if it is one that may be listed at `now`: not expired, and a
 * public EC key (an entry carrying a private part, or anything else, is never listed).
 */
export function signingKeyFromValue(kid: string, value: string, now: number): PublishedSigningKey | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return null;
  }
  if (typeof parsed !== 'object' || parsed === null) return null;
  const { expiresAt, jwk } = parsed as { expiresAt?: unknown; jwk?: unknown };
  if (typeof expiresAt !== 'number' || !Number.isSafeInteger(expiresAt) || expiresAt <= now) return null;
  if (typeof jwk !== 'object' || jwk === null || Array.isArray(jwk)) return null;
  const k = jwk as Record<string, unknown>;
  if (k.kty !== 'EC' || k.crv !== 'P-256' || typeof k.x !== 'string' || typeof k.y !== 'string' || 'd' in k || k.kid !== kid) return null;
  return { kid, jwk: JSON.stringify(jwk), expiresAt };
}

/** The keys of a signing-key hash that may be listed at `now`, sorted by kid. */
export function listedSigningKeys(fields: Fields, now: number): PublishedSigningKey[] {
  const out: PublishedSigningKey[] = [];
  for (const kid of Object.keys(fields).sort()) {
    const key = signingKeyFromValue(kid, fields[kid]!, now);
    if (key) out.push(key);
  }
  return out;
}

/** Stream ids (`<ms>-<seq>`) in time order, newest first; ids of two streams interleave by time. */
export function newestAuditFirst(a: StoredAuditEvent, b: StoredAuditEvent): number {
  const [am = 0, as = 0] = a.id.split('-').map(Number);
  const [bm = 0, bs = 0] = b.id.split('-').map(Number);
  return bm - am || bs - as;
}

/** A pending sign-in's member in its holders' sets: 16 hex of its request hash (a collision only merges two counts). */
export function pendingSignInMember(requestHash: string): string {
  return requestHash.slice(0, 16);
}

/** An account-page session as hash fields: the signed-in user, createdAt, expiresAt. */
export function accountSessionFields(s: AccountSession): Fields {
  return { ...userFields(s.user), createdAt: String(s.createdAt), expiresAt: String(s.expiresAt) };
}

/** A stored account-page session, or null without its user or a well-formed expiry, or once expired by `now`. */
export function accountSessionFromFields(f: Fields | null, now: number): AccountSession | null {
  const user = f && userFromFields(f);
  const expiresAt = parseEpochMs(f?.expiresAt);
  if (!f || !user || expiresAt === undefined || expiresAt <= now) return null;
  return { user, createdAt: Number(f.createdAt ?? 0), expiresAt };
}

/** A device authorization as hash fields; it starts pending (the stores' scripts change its status). */
export function deviceAuthorizationFields(r: DeviceAuthorizationRecord): Fields {
  const f: Fields = {
    deviceCodeHash: r.deviceCodeHash,
    userCodeHash: r.userCodeHash,
    clientId: r.clientId,
    status: 'pending',
    interval: String(r.interval),
    createdAt: String(r.createdAt),
    expiresAt: String(r.expiresAt),
  };
  if (r.scope !== undefined) f.scope = r.scope;
  return f;
}

const DEVICE_STATUSES: ReadonlySet<string> = new Set(['pending', 'approved', 'denied', 'redeemed']);

/** A stored device authorization, or `'corrupt'` without its client, a known status, its times, or (approved) its user. */
export function deviceAuthorizationFromFields(f: Fields): StoredDeviceAuthorization | 'corrupt' {
  const status = f.status ?? '';
  const interval = Number(f.interval);
  const createdAt = parseEpochMs(f.createdAt);
  const expiresAt = parseEpochMs(f.expiresAt);
  if (!f.deviceCodeHash || !f.userCodeHash || !f.clientId || !DEVICE_STATUSES.has(status)) return 'corrupt';
  if (!Number.isSafeInteger(interval) || interval < 1 || createdAt === undefined || expiresAt === undefined) return 'corrupt';
  const user = userFromFields(f);
  if (status === 'approved' && !user) return 'corrupt';
  const r: StoredDeviceAuthorization = {
    deviceCodeHash: f.deviceCodeHash,
    userCodeHash: f.userCodeHash,
    clientId: f.clientId,
    status: status as StoredDeviceAuthorization['status'],
    interval,
    createdAt,
    expiresAt,
  };
  if (f.scope !== undefined) r.scope = f.scope;
  if (user) r.user = user;
  const polled = parseEpochMs(f.lastPolledAt);
  if (polled !== undefined) r.lastPolledAt = polled;
  return r;
}

/**
 * What a compare-and-set on one hash decided (the stores' updateHash): its answer, and the fields to
 * set on the hash as it was read (none: nothing is written).
 */
export interface HashUpdate<R> {
  result: R;
  set?: Fields;
}

/**
 * One poll by `clientId` at `now` of the device authorization whose fields are `current`, as an
 * update: the rule is the model's (pollDevice), the fields it changes are written here.
 */
export function devicePollUpdate(clientId: string, now: number): (current: Fields | null) => HashUpdate<DevicePollOutcome> {
  return (current) => {
    const { outcome, change } = pollDevice(current && deviceAuthorizationFromFields(current), clientId, now);
    if (change === undefined) return { result: outcome };
    const set: Fields = {};
    if (change.status !== undefined) set.status = change.status;
    if (change.interval !== undefined) set.interval = String(change.interval);
    if (change.lastPolledAt !== undefined) set.lastPolledAt = String(change.lastPolledAt);
    return { result: outcome, set };
  };
}

/**
 * The user's decision at `now` on the device authorization whose fields are `current`, as an update:
 * the rule is the model's (decideDevice). Its result is the user code whose index the decision
 * forgets (undefined: refused, nothing changed).
 */
export function deviceDecisionUpdate(
  now: number,
  user: SignedInUser | undefined,
): (current: Fields | null) => HashUpdate<string | undefined> {
  return (current) => {
    const stored = current && deviceAuthorizationFromFields(current);
    const change = decideDevice(stored, now, user);
    if (change === undefined || stored === null || stored === 'corrupt') return { result: undefined };
    return {
      result: stored.userCodeHash,
      set: { ...(change.status === 'approved' ? userFields(change.user) : {}), status: change.status },
    };
  };
}

/** The hash field of one kept credential within its user's hash. */
export function upstreamCredentialField(issuer: string, provider: string): string {
  return JSON.stringify([issuer, provider]);
}

/** The stored value of a kept credential: JSON with the identity, key id, ciphertext and times. */
export function upstreamCredentialValue(r: StoredUpstreamCredential): string {
  return JSON.stringify({
    subject: r.subject,
    issuer: r.issuer,
    provider: r.provider,
    keyId: r.keyId,
    sealed: r.sealed,
    ...(r.expiresAt !== undefined ? { expiresAt: r.expiresAt } : {}),
    createdAt: r.createdAt,
  });
}

/** A stored value back into a record; `'corrupt'` when it is not one (a hand edit, another version). */
export function upstreamCredentialFromValue(value: string): StoredUpstreamCredential | 'corrupt' {
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(value) as Record<string, unknown>;
  } catch {
    return 'corrupt';
  }
  if (v === null || typeof v !== 'object') return 'corrupt';
  const texts = ['subject', 'issuer', 'provider', 'keyId', 'sealed'] as const;
  if (!texts.every((k) => typeof v[k] === 'string') || !Number.isSafeInteger(v.createdAt)) return 'corrupt';
  if (v.expiresAt !== undefined && !Number.isSafeInteger(v.expiresAt)) return 'corrupt';
  const record: StoredUpstreamCredential = {
    subject: v.subject as string,
    issuer: v.issuer as string,
    provider: v.provider as string,
    keyId: v.keyId as string,
    sealed: v.sealed as string,
    createdAt: v.createdAt as number,
  };
  if (v.expiresAt !== undefined) record.expiresAt = v.expiresAt as number;
  return record;
}

/**
 * The readable records of one user's hash: a value that does not parse, names another subject or sits
 * under a field other than its own (issuer, provider) is skipped, as a read of it would be corrupt.
 */
export function subjectUpstreamCredentials(fields: Record<string, string>, subject: string): StoredUpstreamCredential[] {
  const out: StoredUpstreamCredential[] = [];
  for (const [field, value] of Object.entries(fields)) {
    const record = upstreamCredentialFromValue(value);
    if (record !== 'corrupt' && record.subject === subject && field === upstreamCredentialField(record.issuer, record.provider))
      out.push(record);
  }
  return out.sort(
    (a, b) =>
      a.createdAt - b.createdAt ||
      upstreamCredentialField(a.issuer, a.provider).localeCompare(upstreamCredentialField(b.issuer, b.provider)),
  );
}

/** A record read under (subject, issuer, provider) must say it is that one: a value copied under another field is corrupt. */
export function sameUpstreamIdentity(
  read: StoredUpstreamCredential | 'corrupt',
  subject: string,
  issuer: string,
  provider: string,
): StoredUpstreamCredential | 'corrupt' {
  if (read === 'corrupt') return read;
  return read.subject === subject && read.issuer === issuer && read.provider === provider ? read : 'corrupt';
}
