// Browser sign-in, written once for both engines on the core's keyspace: the transitions (a pending
// request under its bounds: ./pending.ts; a code redeemed: ./redeem.ts; an approval remembered or
// forgotten: ./consents.ts) and the plain reads and writes.

import type { KeyspaceCore } from '../keyspace-core.ts';
import { fieldsOf, putHashSteps, readOne } from '../keyspace.ts';
import {
  accountSessionFields,
  accountSessionFromFields,
  authorizationCodeFields,
  authorizationCodeFromFields,
  authorizationRequestFields,
  authorizationRequestFromFields,
  consentFromValue,
  readRecord,
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
import { forgetConsent, putConsent } from './consents.ts';
import { putPendingSignIn } from './pending.ts';
import { redeemCode } from './redeem.ts';
import type { AccountSessionStorage, AuthorizationCodeStorage, ConsentStorage } from './types.ts';

export class KeyspaceSignIn<Core extends KeyspaceCore = KeyspaceCore>
  implements AuthorizationCodeStorage, ConsentStorage, AccountSessionStorage
{
  /** The engine's core (its own part reads what only that engine has from it). */
  protected readonly core: Core;

  constructor(core: Core) {
    this.core = core;
  }

  putPendingSignIn(
    requestHash: string,
    record: AuthorizationRequestRecord,
    expiresAt: number,
    bounds: PendingSignInBounds,
  ): Promise<PendingSignInOutcome> {
    return putPendingSignIn(this.core.keyspace, this.core.keys, requestHash, record, expiresAt, bounds);
  }

  async redeemAuthorizationCode(
    codeHash: string,
    clientId: string,
    now: number,
    retainMs: number,
    access: AccessTokenRecord,
    refresh?: RefreshTokenRecord,
  ): Promise<RedeemOutcome> {
    if (await this.core.outsideClientSlot(codeHash, this.core.keys.authorizationCode(codeHash), clientId)) return 'invalid';
    const { outcome, notice } = await redeemCode(this.core.keyspace, this.core, { codeHash, clientId, now, retainMs, access, refresh });
    // What the first redemption issued was revoked with the reuse; its open streams end now.
    if (notice !== undefined) await this.core.publish(notice);
    return outcome;
  }

  putConsent(browserHash: string, consent: ConsentRecord, now: number, maxPerBrowser: number): Promise<void> {
    return putConsent(this.core.keyspace, this.core.keys, browserHash, consent, now, maxPerBrowser);
  }

  forgetConsent(browserHash: string, key: string, subject: string): Promise<boolean> {
    return forgetConsent(this.core.keyspace, this.core.keys, browserHash, key, subject);
  }

  async putAuthorizationRequest(requestHash: string, record: AuthorizationRequestRecord, expiresAt: number): Promise<void> {
    const key = this.core.keys.authorizationRequest(requestHash);
    await this.core.keyspace.apply({ guards: [], steps: putHashSteps(key, authorizationRequestFields(record), expiresAt) });
  }

  async takeAuthorizationRequest(requestHash: string): Promise<StoredRead<AuthorizationRequestRecord>> {
    // Read and deleted in one step: a sign-in handle is good for one use.
    const key = this.core.keys.authorizationRequest(requestHash);
    const taken = await this.core.keyspace.apply({
      guards: [],
      steps: [
        ['HGETALL', key],
        ['DEL', key],
      ],
    });
    return readRecord(fieldsOf(taken![0]!), authorizationRequestFromFields);
  }

  async putAuthorizationCode(record: AuthorizationCodeRecord): Promise<void> {
    const key = this.core.keys.authorizationCode(record.codeHash);
    await this.core.keyspace.apply({ guards: [], steps: putHashSteps(key, authorizationCodeFields(record), record.expiresAt) });
  }

  async getAuthorizationCode(codeHash: string): Promise<StoredRead<StoredAuthorizationCode>> {
    return readRecord(
      fieldsOf(await readOne(this.core.keyspace, ['HGETALL', this.core.keys.authorizationCode(codeHash)])),
      authorizationCodeFromFields,
    );
  }

  async listConsents(browserHash: string, now: number): Promise<ConsentRecord[]> {
    const fields = fieldsOf(await readOne(this.core.keyspace, ['HGETALL', this.core.keys.consents(browserHash)])) ?? {};
    return Object.values(fields).flatMap((value) => consentFromValue(value, now) ?? []);
  }

  async linkConsentGrant(grantId: string, browserHash: string, key: string, expiresAt: number): Promise<void> {
    const link = this.core.keys.consentGrant(grantId);
    await this.core.keyspace.apply({ guards: [], steps: putHashSteps(link, { browser: browserHash, consent: key }, expiresAt) });
  }

  async putAccountSession(sessionHash: string, session: AccountSession): Promise<void> {
    const key = this.core.keys.accountSession(sessionHash);
    await this.core.keyspace.apply({ guards: [], steps: putHashSteps(key, accountSessionFields(session), session.expiresAt) });
  }

  async getAccountSession(sessionHash: string, now: number): Promise<AccountSession | null> {
    return accountSessionFromFields(
      fieldsOf(await readOne(this.core.keyspace, ['HGETALL', this.core.keys.accountSession(sessionHash)])),
      now,
    );
  }

  async deleteAccountSession(sessionHash: string): Promise<boolean> {
    const [deleted] = (await this.core.keyspace.apply({ guards: [], steps: [['DEL', this.core.keys.accountSession(sessionHash)]] }))!;
    return deleted === 1;
  }
}
