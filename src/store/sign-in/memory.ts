// Browser sign-in in memory: pending requests, authorization codes, remembered approvals and account
// sessions, read and written on the store's maps; the transitions are the part both engines share (./part.ts).

import type { MemoryCore } from '../memory-core.ts';
import { KeyspaceSignIn } from './part.ts';
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
  StoredAuthorizationCode,
} from '../types.ts';
import type { StoredRead } from '../../model/records.ts';
import type { AccountSessionStorage, AuthorizationCodeStorage, ConsentStorage } from './types.ts';

export class MemorySignIn extends KeyspaceSignIn<MemoryCore> implements AuthorizationCodeStorage, ConsentStorage, AccountSessionStorage {
  async putAuthorizationRequest(requestHash: string, record: AuthorizationRequestRecord, expiresAt: number): Promise<void> {
    this.core.check();
    this.core.put(this.core.keys.authorizationRequest(requestHash), authorizationRequestFields(record), expiresAt);
  }

  async takeAuthorizationRequest(requestHash: string): Promise<StoredRead<AuthorizationRequestRecord>> {
    this.core.check();
    const key = this.core.keys.authorizationRequest(requestHash);
    const fields = this.core.get(key);
    this.core.hashes.delete(key);
    return readRecord(fields, authorizationRequestFromFields);
  }

  async putAuthorizationCode(record: AuthorizationCodeRecord): Promise<void> {
    this.core.check();
    this.core.put(this.core.keys.authorizationCode(record.codeHash), authorizationCodeFields(record), record.expiresAt);
  }

  async getAuthorizationCode(codeHash: string): Promise<StoredRead<StoredAuthorizationCode>> {
    this.core.check();
    return readRecord(this.core.get(this.core.keys.authorizationCode(codeHash)), authorizationCodeFromFields);
  }

  async listConsents(browserHash: string, now: number): Promise<ConsentRecord[]> {
    this.core.check();
    const fields = this.core.get(this.core.keys.consents(browserHash)) ?? {};
    return Object.values(fields).flatMap((value) => consentFromValue(value, now) ?? []);
  }

  async linkConsentGrant(grantId: string, browserHash: string, key: string, expiresAt: number): Promise<void> {
    this.core.check();
    this.core.put(this.core.keys.consentGrant(grantId), { browser: browserHash, consent: key }, expiresAt);
  }

  async forgetConsent(browserHash: string, key: string, subject: string): Promise<boolean> {
    this.core.check();
    if (!this.core.updateHash(this.core.keys.consents(browserHash), approvalForgetUpdate(key, subject))) return false;
    this.core.subjectIndexes.get(this.core.keys.subjectGrants(subjectDigest(subject)))?.delete(consentMember(browserHash, key));
    return true;
  }

  async putAccountSession(sessionHash: string, session: AccountSession): Promise<void> {
    this.core.check();
    this.core.put(this.core.keys.accountSession(sessionHash), accountSessionFields(session), session.expiresAt);
  }

  async getAccountSession(sessionHash: string, now: number): Promise<AccountSession | null> {
    this.core.check();
    return accountSessionFromFields(this.core.get(this.core.keys.accountSession(sessionHash)), now);
  }

  async deleteAccountSession(sessionHash: string): Promise<boolean> {
    this.core.check();
    const key = this.core.keys.accountSession(sessionHash);
    const found = this.core.get(key) !== null;
    this.core.hashes.delete(key);
    return found;
  }
}
