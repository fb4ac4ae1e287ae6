// Remembering and forgetting an approval on the keyspace port (src/store/keyspace.ts), transitions both
// stores run: the browser's approvals and its person's home index (both under {oauth}: one slot) are
// read, the model decides (src/model/consents.ts), and one plan guarded by what the decision read writes.

import { putApproval, type ApprovalPut } from '../../model/consents.ts';
import { fieldArgs, fieldsOf, scoredOf, transition, updateHash, type Command, type Guard, type Keyspace, type Reply } from '../keyspace.ts';
import {
  approvalExpiries,
  approvalForgetUpdate,
  consentKey,
  consentMember,
  consentValue,
  subjectDigest,
  type KeyLayout,
} from '../records.ts';
import type { ConsentRecord } from './types.ts';

/**
 * Records `consent` for the browser (putConsent of ConsentStorage): the approvals as read with this
 * one written, those putApproval drops gone, the hash expiring with the last one kept, and the one
 * given listed in its person's home index, which expires with its longest-lived member. Reads: the
 * approvals (HGETALL) and the index's two highest members (the longest-lived other than this one is
 * among them). Guards: every approval as read (the count and each value: the decision depends on
 * every expiry), and, when the index is written, the longest-lived other member as read.
 */
export function putConsent(
  keyspace: Keyspace,
  keys: KeyLayout,
  browserHash: string,
  consent: ConsentRecord,
  now: number,
  maxPerBrowser: number,
): Promise<void> {
  const key = keys.consents(browserHash);
  const index = keys.subjectGrants(subjectDigest(consent.subject));
  const field = consentKey(consent);
  const value = consentValue(consent);
  const member = consentMember(browserHash, field);
  return transition(keyspace, 'putConsent', async (ks) => {
    const [approvals, highest] = await ks.read([
      ['HGETALL', key],
      ['ZRANGE', index, -2, -1, 'WITHSCORES'],
    ]);
    const current = fieldsOf(approvals!) ?? {};
    const top = scoredOf(highest!);
    const plan = putApproval(approvalExpiries({ ...current, [field]: value }, now), field, now, maxPerBrowser, { member, top });
    const guards: Guard[] = [
      { command: ['HLEN', key], equals: Object.keys(current).length },
      ...Object.entries(current).map(([f, v]): Guard => ({ command: ['HGET', key, f], equals: v })),
    ];
    if (plan.index !== undefined) guards.push(...longestOtherGuards(index, member, highest!));
    return { result: undefined, plan: { guards, steps: approvalSteps(key, index, field, value, member, plan) } };
  });
}

/**
 * Guards that the index's longest-lived member other than `member` is still the one read, with its
 * score: that member still has it, and nothing but `member` scores above it. With no other member
 * read, the index still holds what was read (at most `member`).
 */
function longestOtherGuards(index: string, member: string, highest: Reply): Guard[] {
  const raw = Array.isArray(highest) ? highest : [];
  const read: Array<[string, string]> = [];
  for (let i = 0; i + 1 < raw.length; i += 2) read.push([String(raw[i]), String(raw[i + 1])]);
  const others = read.filter(([m]) => m !== member);
  const longest = others[others.length - 1];
  if (longest === undefined) return [{ command: ['ZCARD', index], equals: read.length }];
  const [other, score] = longest;
  const above = read.filter(([m, s]) => m === member && Number(s) > Number(score)).length;
  return [
    { command: ['ZSCORE', index, other], equals: score },
    { command: ['ZCOUNT', index, `(${score}`, '+inf'], equals: above },
  ];
}

/** What putApproval's plan writes: the approvals (or their deletion when none is kept), then the index member. */
function approvalSteps(key: string, index: string, field: string, value: string, member: string, plan: ApprovalPut): Command[] {
  if (plan.expireAt === undefined) return [['DEL', key]];
  const steps: Command[] = [];
  if (!plan.drop.includes(field)) steps.push(['HSET', key, ...fieldArgs({ [field]: value })]);
  if (plan.drop.length > 0) steps.push(['HDEL', key, ...plan.drop]);
  steps.push(['PEXPIREAT', key, plan.expireAt]);
  if (plan.index !== undefined) steps.push(['ZADD', index, plan.index.score, member], ['PEXPIREAT', index, plan.index.expireAt]);
  return steps;
}

/**
 * Forgets one remembered approval of `subject` (forgetConsent of ConsentStorage): the model's rule
 * (approvalForgetUpdate) on the browser's approvals as read, and in the same step its member in the
 * person's home index, guarded by the approvals as read. Written apart, a sign-in remembering the same
 * approval in between would keep an approval that offboarding no longer finds.
 */
export function forgetConsent(keyspace: Keyspace, keys: KeyLayout, browserHash: string, field: string, subject: string): Promise<boolean> {
  return updateHash(keyspace, keys.consents(browserHash), approvalForgetUpdate(field, subject), () => [
    ['ZREM', keys.subjectGrants(subjectDigest(subject)), consentMember(browserHash, field)],
  ]);
}
