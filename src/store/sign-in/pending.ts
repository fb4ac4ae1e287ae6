// A browser sign-in's first step stored on the keyspace port (src/store/keyspace.ts), the one
// transition both stores run: bounded per client address and per client (src/store/pending-holders.ts).
// It is reached by unauthenticated /authorize requests: it runs on the main connection, never queued
// behind the transaction connection's revocations.

import { boundHeld } from '../../model/pending-bounds.ts';
import { fieldArgs, transition, type Keyspace } from '../keyspace.ts';
import { droppingExpired, heldFrom, holding, holdingGuards, holdingReads, type Holder } from '../pending-holders.ts';
import { authorizationRequestFields, pendingSignInMember } from './records.ts';
import type { KeyLayout } from '../records.ts';
import type { AuthorizationRequestRecord, PendingSignInBounds, PendingSignInOutcome } from './types.ts';

/**
 * Stores the request only while its client address and its client each hold fewer than their bound
 * (0: none) of pending sign-ins not expired at `bounds.now`; refused, nothing is written and the full
 * holder's oldest expiry is the time to retry. Stored: each holder's expired sign-ins are dropped, the
 * request written until `expiresAt`, and listed by both holders. Atomic because the plan is guarded by
 * what the decision needed, each bounded holder's count still below its bound (holdingGuards): one
 * that another request filled meanwhile makes this one decide again, and is then refused.
 */
export function putPendingSignIn(
  keyspace: Keyspace,
  keys: KeyLayout,
  requestHash: string,
  record: AuthorizationRequestRecord,
  expiresAt: number,
  bounds: PendingSignInBounds,
): Promise<PendingSignInOutcome> {
  const { now } = bounds;
  const until = Math.trunc(expiresAt);
  const request = keys.authorizationRequest(requestHash);
  const holders: Array<Holder<'address' | 'client'>> = [
    { holder: 'address', key: keys.pendingSignInsByAddress(bounds.address), bound: bounds.perAddress },
    { holder: 'client', key: keys.pendingSignInsByClient(bounds.clientId), bound: bounds.perClient },
  ];
  return transition<PendingSignInOutcome>(keyspace, 'putPendingSignIn', async (ks) => {
    const held = heldFrom(holders, await ks.read(holdingReads(holders, now)));
    const full = boundHeld(held, now);
    if (full !== undefined) return { result: { stored: false, ...full } };
    return {
      result: { stored: true },
      plan: {
        guards: holdingGuards(held, now),
        steps: [
          ...droppingExpired(holders, now),
          ['HSET', request, ...fieldArgs(authorizationRequestFields(record))],
          ['PEXPIREAT', request, until],
          ...holding(holders, pendingSignInMember(requestHash), until),
        ],
      },
    };
  });
}
