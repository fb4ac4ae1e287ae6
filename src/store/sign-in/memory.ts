// Browser sign-in in memory: what it does its own way, an approval's index member forgotten from the
// store's own person index; everything else is the part both engines share (./part.ts).

import type { MemoryCore } from '../memory-core.ts';
import { KeyspaceSignIn } from './part.ts';
import { approvalForgetUpdate, consentMember, subjectDigest } from '../records.ts';

export class MemorySignIn extends KeyspaceSignIn<MemoryCore> {
  async forgetConsent(browserHash: string, key: string, subject: string): Promise<boolean> {
    this.core.check();
    if (!this.core.updateHash(this.core.keys.consents(browserHash), approvalForgetUpdate(key, subject))) return false;
    this.core.subjectIndexes.get(this.core.keys.subjectGrants(subjectDigest(subject)))?.delete(consentMember(browserHash, key));
    return true;
  }
}
