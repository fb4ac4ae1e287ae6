// A person's grants as people see them (admin listGrants, the account page): the live tokens of the
// subject index grouped into grants, each named by a stable id that is neither a token nor its hash.

import { createHash } from 'node:crypto';
import { HttpError } from './errors.ts';
import type { ClientRecords, SubjectToken } from './records.ts';
import { clientName } from './clients.ts';

/** Members of a subject's index revoked per batch by revokeSubject (one plan's work each: src/store/subjects/transitions.ts). */
export const SUBJECT_REVOCATION_BATCH = 200;
/** Keys per SCAN step of rebuildSubjectIndex. */
export const REBUILD_BATCH = 500;

/** One grant: a refresh family, an access token issued alone (ID-JAG), or a user-grade token. */
export interface Grant {
  grantId: string;
  subject: string;
  /** The IdP issuer of the person (a person is the subject at this issuer). */
  issuer: string;
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
export async function grantsOf(clients: Pick<ClientRecords, 'getClient'>, tokens: readonly SubjectToken[]): Promise<Grant[]> {
  const grants = groupGrants(tokens).sort((a, b) => a.createdAt - b.createdAt || (a.grantId < b.grantId ? -1 : 1));
  return nameClients(clients, grants);
}

/** A page of grants: at most `limit` of them, and where the next page starts when there are more. */
export interface GrantPage {
  grants: Grant[];
  nextCursor?: string;
}

const CURSOR_FORM = /^g1:[0-9a-f]{32}$/;

/** The opaque cursor of the page after the grant `grantId` (a grant id is 32 hex digits, a family's or a digest). */
function cursorAfter(grantId: string): string {
  return Buffer.from(`g1:${grantId}`, 'utf8').toString('base64url');
}

/** The grant id a cursor continues after; a cursor this server did not give is `invalid_request`. */
function positionOf(cursor: string): string {
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!CURSOR_FORM.test(text) || cursorAfter(text.slice(3)) !== cursor)
    throw new HttpError('invalid_request', 'cursor must be the nextCursor of a previous page');
  return text.slice(3);
}

/**
 * One page of the tokens' grants, in grant id order: a grant's id never changes (a refresh keeps its
 * family, a standalone token is its grant), so a cursor is the last id listed and the next page starts
 * after it. Paging through while tokens are issued, refreshed and revoked lists every grant that
 * exists throughout exactly once (a grant made meanwhile is listed when its id falls after the cursor).
 * Client names are read for the page only.
 */
export async function pageOfGrants(
  clients: Pick<ClientRecords, 'getClient'>,
  tokens: readonly SubjectToken[],
  limit: number,
  cursor: string | undefined,
): Promise<GrantPage> {
  const after = cursor === undefined ? undefined : positionOf(cursor);
  const rest = groupGrants(tokens)
    .filter((g) => after === undefined || g.grantId > after)
    .sort((a, b) => (a.grantId < b.grantId ? -1 : a.grantId > b.grantId ? 1 : 0));
  const grants = await nameClients(clients, rest.slice(0, limit));
  return rest.length > limit ? { grants, nextCursor: cursorAfter(grants.at(-1)!.grantId) } : { grants };
}

/** The tokens grouped by grant (client names not read yet), in no particular order. */
function groupGrants(tokens: readonly SubjectToken[]): Grant[] {
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
        issuer: t.issuer,
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
  return [...byId.values()];
}

/** Sets each grant's client name, read once per client; returns `grants`. */
async function nameClients(clients: Pick<ClientRecords, 'getClient'>, grants: Grant[]): Promise<Grant[]> {
  const names = new Map<string, string | null>();
  for (const grant of grants) {
    if (grant.clientId === null) continue;
    if (!names.has(grant.clientId)) names.set(grant.clientId, clientName(await clients.getClient(grant.clientId)) ?? null);
    grant.clientName = names.get(grant.clientId)!;
  }
  return grants;
}

/** The tokens of one grant of a subject's (what revoking that grant revokes). */
export function tokensOfGrant(tokens: readonly SubjectToken[], grantId: string): SubjectToken[] {
  return tokens.filter((t) => grantIdOf(t) === grantId);
}
