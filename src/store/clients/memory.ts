// OAuth clients in memory: what they do their own way, a client deleted with its tokens and handles in
// one step; everything else is the part both engines share (./part.ts).

import type { MemoryCore } from '../memory-core.ts';
import { ACCESS_MEMBER, REFRESH_MEMBER } from '../records.ts';
import { forgetIndexedHandles } from '../handles/transitions.ts';
import type { DeleteClientResult } from '../types.ts';
import { KeyspaceClients } from './part.ts';

export class MemoryClients extends KeyspaceClients<MemoryCore> {
  async deleteClient(clientId: string, now: number): Promise<DeleteClientResult | null> {
    this.core.check();
    const client = this.core.get(this.core.keys.client(clientId));
    if (!client) return null;
    const revokedAt = client.revokedAt !== undefined ? Number(client.revokedAt) : now;
    client.revokedAt = String(revokedAt);
    let accessTokensRevoked = 0;
    let refreshTokensRevoked = 0;
    const members = this.core.set(this.core.keys.clientTokens(clientId));
    for (const member of members) {
      const hash = member.slice(2);
      const isAccess = member.startsWith(ACCESS_MEMBER);
      const fields = this.core.get(isAccess ? this.core.keys.accessToken(hash) : this.core.keys.refreshToken(hash));
      if (fields && fields.revokedAt === undefined) {
        fields.revokedAt = String(revokedAt);
        if (isAccess) accessTokensRevoked++;
        else if (member.startsWith(REFRESH_MEMBER)) refreshTokensRevoked++;
      }
    }
    members.clear();
    await forgetIndexedHandles(this.core.keyspace, this.core.keys, this.core.keys.handlesByClient(clientId), 'clientId', clientId);
    this.core.notify({ clientIds: [clientId] });
    return { clientId, revokedAt, accessTokensRevoked, refreshTokensRevoked };
  }
}
