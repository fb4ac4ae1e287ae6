// Browser sign-in on Redis: pending requests, authorization codes (redemption issues tokens in the
// same step: ./redeem.ts), remembered approvals and account-page sessions.

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
import { redeemCode } from './redeem.ts';
import { assertExec, type RedisCore } from '../redis-core.ts';
import { putConsent } from './consents.ts';
import { putPendingSignIn } from './pending.ts';
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

export class RedisSignIn implements AuthorizationCodeStorage, ConsentStorage, AccountSessionStorage {
  readonly #core: RedisCore;

  constructor(core: RedisCore) {
    this.#core = core;
  }

  async putAuthorizationRequest(requestHash: string, record: AuthorizationRequestRecord, expiresAt: number): Promise<void> {
    const key = this.#core.keys.authorizationRequest(requestHash);
    assertExec(await this.#core.redis.multi().hset(key, authorizationRequestFields(record)).pexpireat(key, expiresAt).exec());
  }

  putPendingSignIn(
    requestHash: string,
    record: AuthorizationRequestRecord,
    expiresAt: number,
    bounds: PendingSignInBounds,
  ): Promise<PendingSignInOutcome> {
    return putPendingSignIn(this.#core.keyspace, this.#core.keys, requestHash, record, expiresAt, bounds);
  }

  async takeAuthorizationRequest(requestHash: string): Promise<StoredRead<AuthorizationRequestRecord>> {
    // Read and deleted in one MULTI: a sign-in handle is good for one use.
    const key = this.#core.keys.authorizationRequest(requestHash);
    const taken = await this.#core.redis.multi().hgetall(key).del(key).exec();
    assertExec(taken);
    return readRecord(orNull(taken![0]![1] as Fields), authorizationRequestFromFields);
  }

  async putAuthorizationCode(record: AuthorizationCodeRecord): Promise<void> {
    const key = this.#core.keys.authorizationCode(record.codeHash);
    assertExec(await this.#core.redis.multi().hset(key, authorizationCodeFields(record)).pexpireat(key, record.expiresAt).exec());
  }

  async getAuthorizationCode(codeHash: string): Promise<StoredRead<StoredAuthorizationCode>> {
    return readRecord(orNull(await this.#core.redis.hgetall(this.#core.keys.authorizationCode(codeHash))), authorizationCodeFromFields);
  }

  async redeemAuthorizationCode(
    codeHash: string,
    clientId: string,
    now: number,
    retainMs: number,
    access: AccessTokenRecord,
    refresh?: RefreshTokenRecord,
  ): Promise<RedeemOutcome> {
    if (await this.#core.outsideClientSlot(codeHash, this.#core.keys.authorizationCode(codeHash), clientId)) return 'invalid';
    const { outcome, notice } = await redeemCode(this.#core.keyspace, this.#core, { codeHash, clientId, now, retainMs, access, refresh });
    // What the first redemption issued was revoked with the reuse; its open streams end now.
    if (notice !== undefined) await this.#core.publish(notice);
    return outcome;
  }

  putConsent(browserHash: string, consent: ConsentRecord, now: number, maxPerBrowser: number): Promise<void> {
    return putConsent(this.#core.keyspace, this.#core.keys, browserHash, consent, now, maxPerBrowser);
  }

  async listConsents(browserHash: string, now: number): Promise<ConsentRecord[]> {
    const fields = await this.#core.redis.hgetall(this.#core.keys.consents(browserHash));
    return Object.values(fields).flatMap((value) => consentFromValue(value, now) ?? []);
  }

  async linkConsentGrant(grantId: string, browserHash: string, key: string, expiresAt: number): Promise<void> {
    const link = this.#core.keys.consentGrant(grantId);
    assertExec(await this.#core.redis.multi().hset(link, { browser: browserHash, consent: key }).pexpireat(link, expiresAt).exec());
  }

  async forgetConsent(browserHash: string, key: string, subject: string): Promise<boolean> {
    // The approval under the compare-and-set on the browser's approvals, then its index member (a
    // member left behind names nothing, and is dropped when the index is next read).
    if (!(await this.#core.updateHash(this.#core.keys.consents(browserHash), approvalForgetUpdate(key, subject)))) return false;
    await this.#core.redis.zrem(this.#core.subjectIndex(subject), consentMember(browserHash, key));
    return true;
  }

  async putAccountSession(sessionHash: string, session: AccountSession): Promise<void> {
    const key = this.#core.keys.accountSession(sessionHash);
    assertExec(await this.#core.redis.multi().hset(key, accountSessionFields(session)).pexpireat(key, session.expiresAt).exec());
  }

  async getAccountSession(sessionHash: string, now: number): Promise<AccountSession | null> {
    return accountSessionFromFields(orNull(await this.#core.redis.hgetall(this.#core.keys.accountSession(sessionHash))), now);
  }

  async deleteAccountSession(sessionHash: string): Promise<boolean> {
    return (await this.#core.redis.del(this.#core.keys.accountSession(sessionHash))) === 1;
  }
}
