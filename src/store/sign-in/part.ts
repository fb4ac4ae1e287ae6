// Browser sign-in, the part both engines share: the transitions on the core's keyspace (a pending
// request under its bounds: ./pending.ts; a code redeemed: ./redeem.ts; an approval remembered:
// ./consents.ts). The plain reads and writes are each engine's own (memory.ts, redis.ts).

import type { KeyspaceCore } from '../keyspace-core.ts';
import type { AuthorizationRequestRecord, ConsentRecord, PendingSignInBounds, PendingSignInOutcome, RedeemOutcome } from '../types.ts';
import type { AccessTokenRecord, RefreshTokenRecord } from '../../model/records.ts';
import { putConsent } from './consents.ts';
import { putPendingSignIn } from './pending.ts';
import { redeemCode } from './redeem.ts';
import type { AuthorizationCodeStorage, ConsentStorage } from './types.ts';

export class KeyspaceSignIn<Core extends KeyspaceCore = KeyspaceCore>
  implements Pick<AuthorizationCodeStorage, 'putPendingSignIn' | 'redeemAuthorizationCode'>, Pick<ConsentStorage, 'putConsent'>
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
}
