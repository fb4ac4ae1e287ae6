// Browser sign-in on Redis: what it does its own way, an approval's member dropped from the subject's
// index in its bucket; everything else is the part both engines share (./part.ts; a redemption issues
// tokens in the same step: ./redeem.ts).

import { approvalForgetUpdate, consentMember } from '../records.ts';
import { KeyspaceSignIn } from './part.ts';
import type { RedisCore } from '../redis-core.ts';

export class RedisSignIn extends KeyspaceSignIn<RedisCore> {
  async forgetConsent(browserHash: string, key: string, subject: string): Promise<boolean> {
    // The approval under the compare-and-set on the browser's approvals, then its index member (a
    // member left behind names nothing, and is dropped when the index is next read).
    if (!(await this.core.updateHash(this.core.keys.consents(browserHash), approvalForgetUpdate(key, subject)))) return false;
    await this.core.redis.zrem(this.core.subjectIndex(subject), consentMember(browserHash, key));
    return true;
  }
}
