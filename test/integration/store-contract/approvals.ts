// The store contract's slice for approvals: held calls found again by their digest, decided once,
// used once (also when two retries race), expired, listed and cancelled by offboarding.

import { randomBytes } from 'node:crypto';
import { beforeEach, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../../src/model/clock.ts';
import { approvalDigest, canonicalJson, type ApprovalRecord } from '../../../src/model/approvals.ts';
import type { TokenStore } from '../../../src/store/types.ts';
import type { Contract, StoreHarness } from './context.ts';

export function approvalsContract(contract: Contract): void {
  let clock: ManualClock;
  let h: StoreHarness;
  let store: TokenStore;
  beforeEach(() => {
    ({ clock, h, store } = contract);
  });

  describe('approvals', () => {
    const RETAIN = 3_600_000;
    function approval(overrides: Partial<ApprovalRecord> = {}, args: unknown = { repo: 'a' }): ApprovalRecord {
      const call = { issuer: 'https://idp.example/', subject: 'ada', clientId: 'c-1', tool: 'delete_repo', arguments: args };
      return {
        approvalId: randomBytes(16).toString('hex'),
        argumentsDigest: approvalDigest(call),
        rule: 'deletes',
        subject: 'ada',
        issuer: 'https://idp.example/',
        clientId: 'c-1',
        tool: 'delete_repo',
        arguments: canonicalJson(args),
        approvers: 'self',
        notSelf: false,
        state: 'pending',
        requestedAt: clock.now(),
        expiresAt: clock.now() + 600_000,
        ...overrides,
      };
    }

    it('pending until decided; approved, it is used once; a second retry finds nothing usable', async () => {
      const a = approval();
      await store.putApproval(a, RETAIN);
      expect(await store.getApproval(a.approvalId)).toEqual(a);
      expect(await store.useApproval(a.argumentsDigest, clock.now())).toEqual({ outcome: 'pending', approval: a });
      expect(await store.decideApproval(a.approvalId, clock.now(), { approve: true, by: 'bob' })).toEqual({ state: 'approved' });
      expect(await store.decideApproval(a.approvalId, clock.now(), { approve: false, by: 'eve' })).toEqual({ refusal: 'not_pending' });
      expect(await store.useApproval(a.argumentsDigest, clock.now())).toMatchObject({
        outcome: 'forward',
        approval: { state: 'approved' },
      });
      expect(await store.useApproval(a.argumentsDigest, clock.now())).toEqual({ outcome: 'none' });
      expect(await h.rawHash(h.keys.approval(a.approvalId))).toMatchObject({ state: 'used', decidedBy: 'bob' });
    });

    it('two concurrent retries of an approved call: exactly one is forwarded', async () => {
      const a = approval();
      await store.putApproval(a, RETAIN);
      await store.decideApproval(a.approvalId, clock.now(), { approve: true, by: 'bob' });
      const uses = await Promise.all(Array.from({ length: 8 }, () => store.useApproval(a.argumentsDigest, clock.now())));
      expect(uses.filter((u) => u.outcome === 'forward')).toHaveLength(1);
      expect(uses.filter((u) => u.outcome === 'none')).toHaveLength(7);
    });

    it('other arguments have another digest and find nothing', async () => {
      const a = approval();
      await store.putApproval(a, RETAIN);
      await store.decideApproval(a.approvalId, clock.now(), { approve: true, by: 'bob' });
      expect(await store.useApproval(approval({}, { repo: 'b' }).argumentsDigest, clock.now())).toEqual({ outcome: 'none' });
      expect(approval({}, { b: 1, a: 2 }).argumentsDigest).toBe(approval({}, { a: 2, b: 1 }).argumentsDigest);
    });

    it('a denial stands, with its reason, until it expires', async () => {
      const a = approval();
      await store.putApproval(a, RETAIN);
      expect(await store.decideApproval(a.approvalId, clock.now(), { approve: false, by: 'bob', reason: 'not today' })).toEqual({
        state: 'denied',
      });
      expect(await store.useApproval(a.argumentsDigest, clock.now())).toMatchObject({
        outcome: 'denied',
        approval: { reason: 'not today', decidedBy: 'bob' },
      });
      clock.advance(600_000);
      expect(await store.useApproval(a.argumentsDigest, clock.now())).toEqual({ outcome: 'none' });
    });

    it('past its time: an approved approval expires unused, a pending one can no longer be decided', async () => {
      const a = approval();
      const b = approval({}, { repo: 'b' });
      await store.putApproval(a, RETAIN);
      await store.putApproval(b, RETAIN);
      await store.decideApproval(a.approvalId, clock.now(), { approve: true, by: 'bob' });
      clock.advance(600_000);
      expect(await store.useApproval(a.argumentsDigest, clock.now())).toMatchObject({
        outcome: 'none',
        expired: { approvalId: a.approvalId },
      });
      expect(await store.getApproval(a.approvalId)).toMatchObject({ state: 'expired' });
      expect(await store.decideApproval(b.approvalId, clock.now(), { approve: true, by: 'bob' })).toEqual({ refusal: 'expired' });
      expect(await store.getApproval(b.approvalId)).toMatchObject({ state: 'expired' });
      expect(await store.decideApproval('0'.repeat(32), clock.now(), { approve: true, by: 'bob' })).toEqual({ refusal: 'not_found' });
    });

    it('listed newest first; offboarding denies the pending and approved ones of that person only', async () => {
      const a = approval();
      clock.advance(1);
      const b = approval({}, { repo: 'b' });
      clock.advance(1);
      const other = approval({ subject: 'bob' });
      for (const r of [a, b, other]) await store.putApproval(r, RETAIN);
      await store.decideApproval(b.approvalId, clock.now(), { approve: true, by: 'bob' });
      expect((await store.listApprovals(clock.now(), 10)).map((r) => r.approvalId)).toEqual([other.approvalId, b.approvalId, a.approvalId]);
      expect(await store.cancelSubjectApprovals('ada', 'https://idp.example/', clock.now())).toBe(2);
      expect(await store.cancelSubjectApprovals('ada', undefined, clock.now())).toBe(0);
      expect(await store.getApproval(a.approvalId)).toMatchObject({ state: 'denied', decidedBy: 'offboarding' });
      expect(await store.useApproval(b.argumentsDigest, clock.now())).toMatchObject({ outcome: 'denied' });
      expect(await store.getApproval(other.approvalId)).toMatchObject({ state: 'pending' });
      clock.advance(600_000 + RETAIN);
      expect(await store.listApprovals(clock.now(), 10)).toEqual([]);
    });
  });
}
