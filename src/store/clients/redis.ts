// OAuth clients on Redis: what they do their own way, deleteClient, one MULTI/EXEC over the client and
// its tokens (one slot: the client's bucket) on the transaction connection, then its handles
// forgotten; everything else is the part both engines share (./part.ts).

import { Cluster } from 'ioredis';
import { StoreUnavailableError } from '../shared.ts';
import { ACCESS_MEMBER, clientBucket, hashBucket, REFRESH_MEMBER, revocationUpdate } from '../records.ts';
import { assertExec, type RedisCore } from '../redis-core.ts';
import { RedisKeyspace } from '../redis-keyspace.ts';
import { forgetIndexedHandles } from '../handles/transitions.ts';
import { memberKey } from '../tokens/transitions.ts';
import type { DeleteClientResult } from '../types.ts';
import { KeyspaceClients } from './part.ts';

const MAX_TRANSACTION_ATTEMPTS = 16;

export class RedisClients extends KeyspaceClients<RedisCore> {
  async deleteClient(clientId: string, now: number): Promise<DeleteClientResult | null> {
    const deleted = await this.#deleteClient(clientId, now);
    if (deleted) {
      // The client's session and task handles (under {oauth}, not the client's bucket); a member
      // whose handle is now someone else's is stale and left alone. Repeating the delete repeats this.
      await forgetIndexedHandles(this.core.keyspace, this.core.keys, this.core.keys.handlesByClient(clientId), 'clientId', clientId);
      await this.core.publish({ clientIds: [clientId] });
    }
    return deleted;
  }

  /**
   * On Cluster, a token outside the client's bucket (one minted before the bucketed layout, brought
   * over by the migration to the bucket its own hash names) cannot join the client's MULTI: it is
   * revoked on its own just before, and counted once however many attempts the MULTI takes.
   */
  async #revokeStrays(keys: string[], revokedAt: number, done: Set<string>): Promise<void> {
    const pending = keys.filter((key) => !done.has(key));
    const states = await Promise.all(pending.map((key) => this.core.redis.hmget(key, 'expiresAt', 'revokedAt')));
    await Promise.all(
      pending.map(async (key, i) => {
        const [expiresAt, revoked] = states[i]!;
        if (expiresAt == null || revoked != null) return;
        if (await this.core.updateHash(key, revocationUpdate(revokedAt))) done.add(key);
      }),
    );
  }

  #deleteClient(clientId: string, now: number): Promise<DeleteClientResult | null> {
    return this.core.transaction(async (tx) => {
      const clientKey = this.core.keys.client(clientId);
      const setKey = this.core.keys.clientTokens(clientId);
      const bucket = clientBucket(clientId);
      const onCluster = this.core.redis instanceof Cluster;
      const strays = new Set<string>();
      for (let attempt = 0; attempt < MAX_TRANSACTION_ATTEMPTS; attempt++) {
        await tx.watch(clientKey, setKey);
        const [revokedAtText, exists] = await Promise.all([tx.hget(clientKey, 'revokedAt'), tx.exists(clientKey)]);
        if (!exists) {
          // UNWATCH names no key: on Cluster it alone would go to any node, not necessarily the one
          // holding this WATCH. Pipelined with a command on the watched key, it goes to that node.
          assertExec(await tx.pipeline().exists(clientKey).unwatch().exec());
          return null;
        }
        const revokedAt = revokedAtText !== null ? Number(revokedAtText) : now;
        const all = await tx.smembers(setKey);
        const stray = (m: string) => onCluster && hashBucket(m.slice(2)) !== bucket;
        const keyOf = (m: string) => memberKey(this.core.keys, m);
        await this.#revokeStrays(all.filter(stray).map(keyOf), revokedAt, strays);
        const members = all.filter((m) => !stray(m));
        const tokenKeys = members.map(keyOf);
        // Only live, not yet revoked tokens are touched; the expiry is re-applied so a token that
        // expires between this read and EXEC is deleted again rather than left behind without a TTL.
        const states = await Promise.all(tokenKeys.map((k) => tx.hmget(k, 'expiresAt', 'revokedAt')));
        const multi = tx.multi();
        if (revokedAtText === null) multi.hset(clientKey, 'revokedAt', String(revokedAt));
        let accessTokensRevoked = 0;
        let refreshTokensRevoked = 0;
        members.forEach((member, i) => {
          const [expiresAt, alreadyRevoked] = states[i]!;
          if (expiresAt === null || alreadyRevoked !== null) return;
          const key = tokenKeys[i]!;
          multi.hset(key, 'revokedAt', String(revokedAt));
          multi.pexpireat(key, Number(expiresAt));
          if (member.startsWith(ACCESS_MEMBER)) accessTokensRevoked++;
          else if (member.startsWith(REFRESH_MEMBER)) refreshTokensRevoked++;
        });
        multi.del(setKey);
        const result = await multi.exec();
        if (result === null) {
          // A watched key changed (e.g. a token was created): retry. A steady stream of new tokens
          // would abort every attempt, so first mark the client revoked on its own (the same rule as
          // for one access token, revocationUpdate): from then on no token can be added to its set
          // and the next attempt revokes every remaining token.
          if (revokedAtText === null) await this.core.updateHash(clientKey, revocationUpdate(revokedAt), new RedisKeyspace(tx));
          continue;
        }
        assertExec(result);
        if (await this.core.replicas.hasReplicas()) await this.core.replicas.waitForReplica(tx);
        for (const key of strays) {
          if (this.core.keys.accessTokenHashOf(key) !== undefined) accessTokensRevoked++;
          else refreshTokensRevoked++;
        }
        return { clientId, revokedAt, accessTokensRevoked, refreshTokensRevoked };
      }
      throw new StoreUnavailableError('deleteClient: too much contention, gave up');
    });
  }
}
