// Refresh tokens as transitions on the keyspace port, written once for both engines: rotation (with
// the grace window and reuse detection: refreshUse in src/model/credentials.ts decides) and the
// revocation of a token's family. The keys are all in the client's bucket (one Cluster slot); on
// Cluster a presented token outside it never gets here (RedisCore.outsideClientSlot).

import { refreshUse } from '../../model/credentials.ts';
import { transition, type Command, type Keyspace } from '../keyspace.ts';
import type { KeyLayout } from '../records.ts';
import type { RotateOutcome } from '../types.ts';
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
import type { AccessTokenRecord, RefreshTokenRecord } from '../../model/records.ts';

const DECIDING_FIELDS = ['clientId', 'revokedAt', 'rotatedAt', 'familyId'] as const;

export interface Rotation {
  oldHash: string;
  clientId: string;
  now: number;
  access: AccessTokenRecord;
  refresh: RefreshTokenRecord;
  graceMs: number;
  successor: string | undefined;
}

/**
 * Rotates a refresh token, answers a second use within the grace window, or revokes the family of a
 * token used again after it. The old token's four deciding fields and the client's state are read in
 * one go; every plan is guarded by those fields as read, so of concurrent rotations of one token
 * exactly one writes `rotatedAt` (the others read again and find it: `grace` or `reused`), and a
 * rotation also pins its client (clientGuards). A reuse revokes the family whatever the client's state.
 */
export function rotateRefresh(keyspace: Keyspace, layout: TokenKeys, r: Rotation): Promise<RotateOutcome> {
  const { keys } = layout;
  const oldKey = keys.refreshToken(r.oldHash);
  return transition(keyspace, 'rotateRefreshToken', async (ks) => {
    const read = await ks.read([['HMGET', oldKey, ...DECIDING_FIELDS], ...clientReads(keys, r.clientId)]);
    const values = fieldsRead(read[0]!);
    const [clientId, revokedAt, rotatedAt, familyId] = values;
    const old = { clientId: clientId ?? null, revokedAt: revokedAt ?? null, rotatedAt: rotatedAt ?? null, familyId: familyId ?? null };
    const use = refreshUse(old, r.clientId, r.refresh.familyId, r.now, r.graceMs);
    if (use === 'invalid') return { result: 'invalid' };
    const pinned = fieldGuards(oldKey, DECIDING_FIELDS, values);
    if (use === 'reused') {
      const revocation = await familyRevocation(ks, keys, { clientId: r.clientId, familyId: r.refresh.familyId }, r.now);
      return { result: 'reused', plan: { guards: [...pinned, ...revocation.guards], steps: revocation.steps } };
    }
    const state = clientState(read.slice(1));
    if (state !== 'ok') return { result: state === 'client_not_found' ? 'invalid' : state };
    // Within the window: nothing new; the caller answers with the successor the rotation sealed.
    if (use === 'grace') return { result: 'grace' };
    const steps: Command[] = [
      ['HSET', oldKey, 'rotatedAt', String(r.now), ...(r.successor === undefined ? [] : ['successor', r.successor])],
    ];
    steps.push(...storeTokensSteps(layout, r.access, r.refresh));
    return { result: 'ok', plan: { guards: [...pinned, ...clientGuards(keys, r.clientId)], steps } };
  });
}

/**
 * Revokes a refresh token and every token of its family; false when the token is unknown (or holds
 * no client or family). The token's client and family are read first (they name the family's key),
 * and guarded as read.
 */
export function revokeFamily(keyspace: Keyspace, keys: KeyLayout, tokenHash: string, now: number): Promise<{ familyId: string } | null> {
  const key = keys.refreshToken(tokenHash);
  return transition(keyspace, 'revokeRefreshFamily', async (ks) => {
    const [read] = await ks.read([['HMGET', key, 'clientId', 'familyId']]);
    const [clientId, familyId] = fieldsRead(read!);
    if (clientId == null || familyId == null) return { result: null };
    const revocation = await familyRevocation(ks, keys, { clientId, familyId }, now, [key]);
    const guards = [...fieldGuards(key, ['clientId', 'familyId'], [clientId, familyId]), ...revocation.guards];
    return { result: { familyId }, plan: { guards, steps: revocation.steps } };
  });
}
