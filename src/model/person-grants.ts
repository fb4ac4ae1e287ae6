// A person's grants as people see them (admin listGrants, the account page): the live tokens of the
// subject index grouped into grants, each named by a stable id that is neither a token nor its hash.

import { createHash } from 'node:crypto';
import type { ClientStorage, SubjectToken } from '../store/types.ts';
import { clientName } from './clients.ts';

/** Members of a subject's index revoked per batch by revokeSubject (one script's work each). */
export const SUBJECT_REVOCATION_BATCH = 200;
/** Keys per SCAN step of rebuildSubjectIndex. */
export const REBUILD_BATCH = 500;

/** One grant: a refresh family, an access token issued alone (ID-JAG), or a user-grade token. */
export interface Grant {
  grantId: string;
  subject: string;
  clientId: string | null;
  clientName: string | null;
  scope: string | null;
  createdAt: number;
  lastUsedAt: number | null;
  expiresAt: number;
}

/**
 * A grant's id: the refresh family id (random, never a secret) for a family's tokens; for a token
 * issued alone, a digest of its hash under a label of its own, so the id names the grant without
 * being the hash a lookup could use.
 */
export function grantIdOf(token: Pick<SubjectToken, 'familyId' | 'tokenHash'>): string {
  if (token.familyId !== undefined) return token.familyId;
  return createHash('sha256').update(`mcp-bearer-proxy grant\0${token.tokenHash}`).digest('hex').slice(0, 32);
}

/**
 * The tokens grouped by grant, oldest first: created when its first live token was, expiring with its
 * last, last used when any of its tokens was; the client's name read once per client.
 */
export async function grantsOf(clients: Pick<ClientStorage, 'getClient'>, tokens: readonly SubjectToken[]): Promise<Grant[]> {
  const byId = new Map<string, Grant>();
  /** When the token whose scope a grant shows was created: a refresh may narrow the scope, the newest token's is what the grant gives now. */
  const scopeAt = new Map<string, number>();
  for (const t of tokens) {
    const grantId = grantIdOf(t);
    const grant = byId.get(grantId);
    if (grant === undefined) {
      scopeAt.set(grantId, t.createdAt);
      byId.set(grantId, {
        grantId,
        subject: t.subject,
        clientId: t.clientId ?? null,
        clientName: null,
        scope: t.scope ?? null,
        createdAt: t.createdAt,
        lastUsedAt: t.lastUsedAt ?? null,
        expiresAt: t.expiresAt,
      });
      continue;
    }
    grant.createdAt = Math.min(grant.createdAt, t.createdAt);
    grant.expiresAt = Math.max(grant.expiresAt, t.expiresAt);
    if (t.lastUsedAt !== undefined) grant.lastUsedAt = Math.max(grant.lastUsedAt ?? 0, t.lastUsedAt);
    if (t.createdAt > scopeAt.get(grantId)!) {
      scopeAt.set(grantId, t.createdAt);
      grant.scope = t.scope ?? null;
    }
  }
  const names = new Map<string, string | null>();
  for (const grant of byId.values()) {
    if (grant.clientId === null) continue;
    if (!names.has(grant.clientId)) names.set(grant.clientId, clientName(await clients.getClient(grant.clientId)) ?? null);
    grant.clientName = names.get(grant.clientId)!;
  }
  return [...byId.values()].sort((a, b) => a.createdAt - b.createdAt || (a.grantId < b.grantId ? -1 : 1));
}

/** The tokens of one grant of a subject's (what revoking that grant revokes). */
export function tokensOfGrant(tokens: readonly SubjectToken[], grantId: string): SubjectToken[] {
  return tokens.filter((t) => grantIdOf(t) === grantId);
}
