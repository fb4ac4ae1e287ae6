// Browser sign-in in memory: pending requests, authorization codes, remembered approvals, account sessions.

import { putApproval } from '../../model/consents.ts';
import type { MemoryCore } from '../memory-core.ts';
import { redeemCode } from './redeem.ts';
import {
  accountSessionFields,
  approvalForgetUpdate,
  accountSessionFromFields,
  authorizationCodeFields,
  authorizationCodeFromFields,
  authorizationRequestFields,
  authorizationRequestFromFields,
  approvalExpiries,
  consentFromValue,
  consentKey,
  consentMember,
  consentValue,
  pendingSignInMember,
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

  /** Pending sign-ins by holder key: member -> expiry (the Redis store's sorted sets). */
  readonly #pendingSignIns = new Map<string, Map<string, number>>();

  async putPendingSignIn(
    requestHash: string,
    record: AuthorizationRequestRecord,
    expiresAt: number,
    bounds: PendingSignInBounds,
  ): Promise<PendingSignInOutcome> {
    this.#core.check();
    const held = (['address', 'client'] as const).map((holder) => {
      const key =
        holder === 'address'
          ? this.#core.keys.pendingSignInsByAddress(bounds.address)
          : this.#core.keys.pendingSignInsByClient(bounds.clientId);
      const members = this.#pendingSignIns.get(key) ?? new Map<string, number>();
      for (const [member, until] of members) if (until <= bounds.now) members.delete(member);
      this.#pendingSignIns.set(key, members);
      return { holder, members, bound: holder === 'address' ? bounds.perAddress : bounds.perClient };
    });
    for (const { holder, members, bound } of held) {
      if (bound > 0 && members.size >= bound) return { stored: false, holder, retryAt: Math.min(...members.values()) };
    }
    this.#core.put(this.#core.keys.authorizationRequest(requestHash), authorizationRequestFields(record), expiresAt);
    for (const { members } of held) members.set(pendingSignInMember(requestHash), expiresAt);
    return { stored: true };
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
    this.#core.check();
    const key = this.#core.keys.consents(browserHash);
    const field = consentKey(consent);
    const fields = { ...this.#core.get(key), [field]: consentValue(consent) };
    const member = consentMember(browserHash, field);
    // An index in memory keeps no expiry: the index's top members matter to Redis alone.
    const plan = putApproval(approvalExpiries(fields, now), field, now, maxPerBrowser, { member, top: [] });
    for (const dropped of plan.drop) delete fields[dropped];
    if (plan.expireAt !== undefined) this.#core.put(key, fields, plan.expireAt);
    else this.#core.hashes.delete(key);
    if (plan.index !== undefined) this.#core.indexSubject(consent.subject, member, plan.index.score);
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
