// The plans of changes to several keys (src/model/consents.ts putApproval, src/model/handles.ts):
// pure decisions over what was read, the same in both stores.

import { describe, expect, it } from 'vitest';
import { putApproval } from '../../src/model/consents.ts';
import { indexedHandlesToForget } from '../../src/model/handles.ts';

describe('putApproval', () => {
  const none = { member: 'c:given', top: [] };

  it('drops unreadable and expired approvals first, then the soonest to expire beyond max (ties by field)', () => {
    const plan = putApproval(
      [
        ['bad', undefined],
        ['old', 10],
        ['b', 200],
        ['a', 200],
        ['late', 900],
        ['given', 100],
      ],
      'given',
      10,
      3,
      none,
    );
    expect(plan).toEqual({ drop: ['bad', 'old', 'a'], expireAt: 900, index: { score: 100, expireAt: 100 } });
  });

  it('never evicts the approval just given while it can stay; with max 0 or expired, it goes, unlisted', () => {
    expect(
      putApproval(
        [
          ['x', 50],
          ['given', 20],
        ],
        'given',
        0,
        1,
        none,
      ),
    ).toEqual({ drop: ['x'], expireAt: 20, index: { score: 20, expireAt: 20 } });
    expect(putApproval([['given', 20]], 'given', 0, 0, none)).toEqual({ drop: ['given'] });
    expect(
      putApproval(
        [
          ['x', 50],
          ['given', 5],
        ],
        'given',
        5,
        20,
        none,
      ),
    ).toEqual({ drop: ['given'], expireAt: 50 });
  });

  it("the person's index expires with its longest-lived member, the given one at its new score", () => {
    const top = [
      ['c:given', 500],
      ['c:other', 300],
    ] as const;
    expect(putApproval([['given', 200]], 'given', 0, 20, { member: 'c:given', top }).index).toEqual({ score: 200, expireAt: 300 });
    expect(putApproval([['given', 200]], 'given', 0, 20, { member: 'c:new', top }).index).toEqual({ score: 200, expireAt: 500 });
    expect(putApproval([['given', 800]], 'given', 0, 20, { member: 'c:given', top }).index).toEqual({ score: 800, expireAt: 800 });
  });
});

describe('indexedHandlesToForget', () => {
  it("forgets the handles still the owner's; one gone or someone else's by now stays", () => {
    expect(
      indexedHandlesToForget(
        [
          ['session:a', 'c-1'],
          ['session:b', null],
          ['task:c', 'c-2'],
          ['task:d', undefined],
          ['session:e', 'c-1'],
        ],
        'c-1',
      ),
    ).toEqual(['session:a', 'session:e']);
  });
});
