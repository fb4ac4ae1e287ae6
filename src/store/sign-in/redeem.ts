// The redemption of an authorization code as a transition on the keyspace port, written once for
// both engines: single use and issuing its tokens in one step (codeUse in src/model/credentials.ts
// decides). The code is in its client's bucket (on Cluster one outside it never gets here:
// RedisCore.outsideClientSlot), with every other key the step touches: one slot.

import { codeUse } from '../../model/credentials.ts';
import { transition, type Command, type Keyspace } from '../keyspace.ts';
import { reuseNotice } from '../records.ts';
import {
  clientGuards,
  clientReads,
  clientState,
  familyRevocation,
  fieldGuards,
  fieldsRead,
  storeTokensSteps,
  type TokenKeys,
} from '../tokens/transitions.ts';
import type { RedeemOutcome, RevocationNotice } from '../types.ts';
import type { AccessTokenRecord, RefreshTokenRecord } from '../../model/records.ts';

const CODE_FIELDS = ['clientId', 'expiresAt', 'redeemedAt', 'accessTokenHash', 'familyId'] as const;

export interface Redemption {
  codeHash: string;
  clientId: string;
  now: number;
  retainMs: number;
  access: AccessTokenRecord;
  refresh: RefreshTokenRecord | undefined;
}

/** A redemption's outcome and, for a reuse, what it revoked (to announce). */
export interface Redeemed {
  outcome: RedeemOutcome;
  notice?: RevocationNotice;
}

/**
 * Redeems a code once: the code's fields and its client's state are read in one go, and every plan is
 * guarded by the fields it decided on, so of concurrent redemptions exactly one stores its tokens (it
 * pins `redeemedAt` absent, and its client as `ok`); the others read again, find the code redeemed
 * and revoke what the first issued (pinned: what the code names, and the family's size).
 */
export function redeemCode(keyspace: Keyspace, layout: TokenKeys, r: Redemption): Promise<Redeemed> {
  const { keys } = layout;
  const codeKey = keys.authorizationCode(r.codeHash);
  return transition<Redeemed>(keyspace, 'redeemAuthorizationCode', async (ks) => {
    const read = await ks.read([['HMGET', codeKey, ...CODE_FIELDS], ...clientReads(keys, r.clientId)]);
    const values = fieldsRead(read[0]!);
    const [clientId = null, expiresAt = null, redeemedAt = null, accessTokenHash = null, familyId = null] = values;
    const use = codeUse({ clientId, expiresAt, redeemedAt }, r.clientId, r.now);
    if (use === 'invalid') return { result: { outcome: 'invalid' } };
    const pinned = fieldGuards(codeKey, CODE_FIELDS, values);
    if (use === 'reused') {
      const issued = accessTokenHash === null ? [] : [keys.accessToken(accessTokenHash)];
      const family = familyId === null ? undefined : { clientId: r.clientId, familyId };
      const revocation = await familyRevocation(ks, keys, family, r.now, issued);
      const notice = reuseNotice({ ...(accessTokenHash === null ? {} : { accessTokenHash }), ...(familyId === null ? {} : { familyId }) });
      return { result: { outcome: 'reused', notice }, plan: { guards: [...pinned, ...revocation.guards], steps: revocation.steps } };
    }
    const state = clientState(read.slice(1));
    if (state !== 'ok') return { result: { outcome: state === 'client_not_found' ? 'invalid' : state } };
    const remember = ['redeemedAt', String(r.now), 'accessTokenHash', r.access.tokenHash];
    if (r.refresh !== undefined) remember.push('familyId', r.refresh.familyId);
    const steps: Command[] = [
      ['HSET', codeKey, ...remember],
      ['PEXPIRE', codeKey, r.retainMs],
      ...storeTokensSteps(layout, r.access, r.refresh),
    ];
    return { result: { outcome: 'ok' }, plan: { guards: [...pinned, ...clientGuards(keys, r.clientId)], steps } };
  });
}
