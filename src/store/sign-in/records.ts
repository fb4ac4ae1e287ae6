// Sign-ins in progress, authorization codes and account-page sessions as hash fields and back.

import { parseEpochMs } from '../../model/credentials.ts';
import { type Fields, userFields, userFromFields } from '../codec.ts';
import type {
  AccountSession,
  AuthorizationRequest,
  AuthorizationCodeRecord,
  AuthorizationRequestRecord,
  ConsentLink,
  RevocationNotice,
  StoredAuthorizationCode,
} from '../types.ts';

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
      ...(r.provider !== undefined ? { provider: r.provider } : {}),
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
  if (r.request.provider !== undefined) f.idp = r.request.provider;
  if (r.request.loginHint !== undefined) f.loginHint = r.request.loginHint;
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
      ...(f.provider !== undefined ? { provider: f.provider } : {}),
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
  if (f.idp !== undefined) request.provider = f.idp;
  if (f.loginHint !== undefined) request.loginHint = f.loginHint;
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
