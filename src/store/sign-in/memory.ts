// Browser sign-in in memory: pending requests, authorization codes, remembered approvals, account sessions.

import type { MemoryCore } from '../memory-core.ts';
import { putConsent } from './consents.ts';
import { putPendingSignIn } from './pending.ts';
import {
  accountSessionFields,
  approvalForgetUpdate,
  accountSessionFromFields,
  authorizationCodeFields,
  authorizationCodeFromFields,
  authorizationRequestFields,
  authorizationRequestFromFields,
  consentFromValue,
  consentMember,
  readRecord,
  reuseNotice,
  subjectDigest,
} from '../records.ts';
import type {
  AccountSession,
  AuthorizationCodeRecord,
  AuthorizationRequestRecord,
  ConsentRecord,
  PendingSignInBounds,
  PendingSignInOutcome,
  RedeemOutcome,
  StoredAuthorizationCode,
} from '../types.ts';
import type { AccessTokenRecord, RefreshTokenRecord, StoredRead } from '../../model/records.ts';
import type { AccountSessionStorage, AuthorizationCodeStorage, ConsentStorage } from './types.ts';
import { indexSubjectPlan } from '../subjects/transitions.ts';

export class MemorySignIn implements AuthorizationCodeStorage, ConsentStorage, AccountSessionStorage {
  readonly #core: MemoryCore;

  constructor(core: MemoryCore) {
    this.#core = core;
  }

  async putAuthorizationRequest(requestHash: string, record: AuthorizationRequestRecord, expiresAt: number): Promise<void> {
    this.#core.check();
    this.#core.put(this.#core.keys.authorizationRequest(requestHash), authorizationRequestFields(record), expiresAt);
  }

  async putPendingSignIn(
    requestHash: string,
    record: AuthorizationRequestRecord,
    expiresAt: number,
    bounds: PendingSignInBounds,
  ): Promise<PendingSignInOutcome> {
    return putPendingSignIn(this.#core.keyspace, this.#core.keys, requestHash, record, expiresAt, bounds);
  }

  async takeAuthorizationRequest(requestHash: string): Promise<StoredRead<AuthorizationRequestRecord>> {
    this.#core.check();
    const key = this.#core.keys.authorizationRequest(requestHash);
    const fields = this.#core.get(key);
    this.#core.hashes.delete(key);
    return readRecord(fields, authorizationRequestFromFields);
  }

  async putAuthorizationCode(record: AuthorizationCodeRecord): Promise<void> {
    this.#core.check();
    this.#core.put(this.#core.keys.authorizationCode(record.codeHash), authorizationCodeFields(record), record.expiresAt);
  }

  async getAuthorizationCode(codeHash: string): Promise<StoredRead<StoredAuthorizationCode>> {
    this.#core.check();
    return readRecord(this.#core.get(this.#core.keys.authorizationCode(codeHash)), authorizationCodeFromFields);
  }

  async redeemAuthorizationCode(
    codeHash: string,
    clientId: string,
    now: number,
    retainMs: number,
    access: AccessTokenRecord,
    refresh?: RefreshTokenRecord,
  ): Promise<RedeemOutcome> {
    this.#core.check();
    const key = this.#core.keys.authorizationCode(codeHash);
    const code = this.#core.get(key);
    if (!code || code.clientId !== clientId) return 'invalid';
    if (code.redeemedAt !== undefined) {
      if (code.accessTokenHash !== undefined) {
        const issued = this.#core.get(this.#core.keys.accessToken(code.accessTokenHash));
        if (issued) issued.revokedAt ??= String(now);
      }
      if (code.familyId !== undefined) this.#core.revokeFamily(code.clientId, code.familyId, now, false);
      this.#core.notify(reuseNotice(code));
      return 'reused';
    }
    if (!(Number(code.expiresAt) > now)) return 'invalid';
    const state = this.#core.clientState(clientId);
    if (state === 'client_not_found') return 'invalid';
    if (state === 'client_revoked') return 'client_revoked';
    code.redeemedAt = String(now);
    code.accessTokenHash = access.tokenHash;
    if (refresh) code.familyId = refresh.familyId;
    this.#core.hashes.get(key)!.expiresAt = now + retainMs;
    this.#core.storeAccess(access);
    if (refresh) this.#core.storeRefresh(refresh);
    return 'ok';
  }

  async putConsent(browserHash: string, consent: ConsentRecord, now: number, maxPerBrowser: number): Promise<void> {
    return putConsent(this.#core.keyspace, this.#core.keys, browserHash, consent, now, maxPerBrowser);
  }

  async listConsents(browserHash: string, now: number): Promise<ConsentRecord[]> {
    this.#core.check();
    const fields = this.#core.get(this.#core.keys.consents(browserHash)) ?? {};
    return Object.values(fields).flatMap((value) => consentFromValue(value, now) ?? []);
  }

  async linkConsentGrant(grantId: string, browserHash: string, key: string, expiresAt: number): Promise<void> {
    this.#core.check();
    this.#core.put(this.#core.keys.consentGrant(grantId), { browser: browserHash, consent: key }, expiresAt);
  }

  async forgetConsent(browserHash: string, key: string, subject: string): Promise<boolean> {
    this.#core.check();
    if (!this.#core.updateHash(this.#core.keys.consents(browserHash), approvalForgetUpdate(key, subject))) return false;
    this.#core.subjectIndexes.get(this.#core.keys.subjectGrants(subjectDigest(subject)))?.delete(consentMember(browserHash, key));
    return true;
  }

  async putAccountSession(sessionHash: string, session: AccountSession): Promise<void> {
    this.#core.check();
    this.#core.put(this.#core.keys.accountSession(sessionHash), accountSessionFields(session), session.expiresAt);
  }

  async getAccountSession(sessionHash: string, now: number): Promise<AccountSession | null> {
    this.#core.check();
    return accountSessionFromFields(this.#core.get(this.#core.keys.accountSession(sessionHash)), now);
  }

  async deleteAccountSession(sessionHash: string): Promise<boolean> {
    this.#core.check();
    const key = this.#core.keys.accountSession(sessionHash);
    const found = this.#core.get(key) !== null;
    this.#core.hashes.delete(key);
    return found;
  }
}
