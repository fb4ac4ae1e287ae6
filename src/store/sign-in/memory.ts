// Browser sign-in in memory: pending requests, authorization codes, remembered approvals, account sessions.

import type { MemoryCore } from '../memory-core.ts';
import { putConsent } from './consents.ts';
import { putPendingSignIn } from './pending.ts';
import { redeemCode } from './redeem.ts';
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
    const { outcome, notice } = await redeemCode(this.#core.keyspace, this.#core, { codeHash, clientId, now, retainMs, access, refresh });
    if (notice !== undefined) this.#core.notify(notice);
    return outcome;
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
