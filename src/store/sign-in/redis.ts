// Browser sign-in on Redis: pending requests, authorization codes, remembered approvals and account-page
// sessions, read and written with plain commands and MULTIs; the transitions (a redemption issues
// tokens in the same step: ./redeem.ts) are the part both engines share (./part.ts).

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
  type Fields,
  orNull,
  readRecord,
} from '../records.ts';
import { KeyspaceSignIn } from './part.ts';
import { assertExec, type RedisCore } from '../redis-core.ts';
import type {
  AccountSession,
  AuthorizationCodeRecord,
  AuthorizationRequestRecord,
  ConsentRecord,
  StoredAuthorizationCode,
} from '../types.ts';
import type { StoredRead } from '../../model/records.ts';
import type { AccountSessionStorage, AuthorizationCodeStorage, ConsentStorage } from './types.ts';

export class RedisSignIn extends KeyspaceSignIn<RedisCore> implements AuthorizationCodeStorage, ConsentStorage, AccountSessionStorage {
  async putAuthorizationRequest(requestHash: string, record: AuthorizationRequestRecord, expiresAt: number): Promise<void> {
    const key = this.core.keys.authorizationRequest(requestHash);
    assertExec(await this.core.redis.multi().hset(key, authorizationRequestFields(record)).pexpireat(key, expiresAt).exec());
  }

  async takeAuthorizationRequest(requestHash: string): Promise<StoredRead<AuthorizationRequestRecord>> {
    // Read and deleted in one MULTI: a sign-in handle is good for one use.
    const key = this.core.keys.authorizationRequest(requestHash);
    const taken = await this.core.redis.multi().hgetall(key).del(key).exec();
    assertExec(taken);
    return readRecord(orNull(taken![0]![1] as Fields), authorizationRequestFromFields);
  }

  async putAuthorizationCode(record: AuthorizationCodeRecord): Promise<void> {
    const key = this.core.keys.authorizationCode(record.codeHash);
    assertExec(await this.core.redis.multi().hset(key, authorizationCodeFields(record)).pexpireat(key, record.expiresAt).exec());
  }

  async getAuthorizationCode(codeHash: string): Promise<StoredRead<StoredAuthorizationCode>> {
    return readRecord(orNull(await this.core.redis.hgetall(this.core.keys.authorizationCode(codeHash))), authorizationCodeFromFields);
  }

  async listConsents(browserHash: string, now: number): Promise<ConsentRecord[]> {
    const fields = await this.core.redis.hgetall(this.core.keys.consents(browserHash));
    return Object.values(fields).flatMap((value) => consentFromValue(value, now) ?? []);
  }

  async linkConsentGrant(grantId: string, browserHash: string, key: string, expiresAt: number): Promise<void> {
    const link = this.core.keys.consentGrant(grantId);
    assertExec(await this.core.redis.multi().hset(link, { browser: browserHash, consent: key }).pexpireat(link, expiresAt).exec());
  }

  async forgetConsent(browserHash: string, key: string, subject: string): Promise<boolean> {
    // The approval under the compare-and-set on the browser's approvals, then its index member (a
    // member left behind names nothing, and is dropped when the index is next read).
    if (!(await this.core.updateHash(this.core.keys.consents(browserHash), approvalForgetUpdate(key, subject)))) return false;
    await this.core.redis.zrem(this.core.subjectIndex(subject), consentMember(browserHash, key));
    return true;
  }

  async putAccountSession(sessionHash: string, session: AccountSession): Promise<void> {
    const key = this.core.keys.accountSession(sessionHash);
    assertExec(await this.core.redis.multi().hset(key, accountSessionFields(session)).pexpireat(key, session.expiresAt).exec());
  }

  async getAccountSession(sessionHash: string, now: number): Promise<AccountSession | null> {
    return accountSessionFromFields(orNull(await this.core.redis.hgetall(this.core.keys.accountSession(sessionHash))), now);
  }

  async deleteAccountSession(sessionHash: string): Promise<boolean> {
    return (await this.core.redis.del(this.core.keys.accountSession(sessionHash))) === 1;
  }
}
