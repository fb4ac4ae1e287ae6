// Property: the subject index stays exact. Random sequences of issuance (sign-in pairs, tokens issued
// alone, user-grade tokens), refresh rotation (and reuse, which revokes the family), single revocations,
// deleteClient, revokeSubject and clock moves run against the real stores (Redis, and the in-memory
// one), and after every sequence each subject's listSubjectTokens equals what a tiny model says it
// holds: every token issued for it that has not expired and has not been revoked. fast-check shrinks a
// divergence to a minimal sequence.

import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { ManualClock } from '../../src/model/clock.ts';
import { generateToken, hashToken } from '../../src/model/credentials.ts';
import { MemoryTokenStore } from '../../src/store/memory.ts';
import type { TokenStore } from '../../src/store/types.ts';
import { deleteUnder, openRedisStore, rawRedis, uniquePrefix } from '../support/redis.ts';

const SUBJECTS = ['alice', 'bob'] as const;
const CLIENTS = ['c-1', 'c-2'] as const;
const ISSUER = 'https://idp.example.com/';
const LIFETIMES = [1_000, 5_000, 3_600_000];

interface ModelToken {
  hash: string;
  subject: string;
  clientId?: string;
  kind: 'user' | 'access' | 'refresh';
  familyId?: string;
  expiresAt: number;
  revoked: boolean;
  rotated?: boolean;
}

type Command =
  | { op: 'signIn'; subject: number; client: number; lifetime: number }
  | { op: 'alone'; subject: number; client: number; lifetime: number }
  | { op: 'user'; subject: number; lifetime: number }
  | { op: 'rotate'; pick: number; lifetime: number }
  | { op: 'revokeAccess'; pick: number }
  | { op: 'deleteClient'; client: number }
  | { op: 'revokeSubject'; subject: number }
  | { op: 'advance'; ms: number };

const command: fc.Arbitrary<Command> = fc.oneof(
  fc.record({ op: fc.constant('signIn' as const), subject: fc.nat(1), client: fc.nat(1), lifetime: fc.nat(2) }),
  fc.record({ op: fc.constant('alone' as const), subject: fc.nat(1), client: fc.nat(1), lifetime: fc.nat(2) }),
  fc.record({ op: fc.constant('user' as const), subject: fc.nat(1), lifetime: fc.nat(2) }),
  fc.record({ op: fc.constant('rotate' as const), pick: fc.nat(50), lifetime: fc.nat(2) }),
  fc.record({ op: fc.constant('revokeAccess' as const), pick: fc.nat(50) }),
  fc.record({ op: fc.constant('deleteClient' as const), client: fc.nat(1) }),
  fc.record({ op: fc.constant('revokeSubject' as const), subject: fc.nat(1) }),
  fc.record({ op: fc.constant('advance' as const), ms: fc.constantFrom(500, 1_000, 4_000) }),
);

/** Runs `commands` on `store` and the model side by side, then compares every subject's listing. */
async function runAndCompare(store: TokenStore, clock: ManualClock, commands: Command[]): Promise<void> {
  const tokens: ModelToken[] = [];
  const deleted = new Set<string>();
  let families = 0;
  for (const client of CLIENTS) {
    await store.createClient({
      clientId: client,
      redirectUris: [],
      grantTypes: [],
      profile: 'default',
      tokenEndpointAuthMethod: 'none',
      source: 'admin',
      createdAt: clock.now(),
    });
  }
  const live = (t: ModelToken) => !t.revoked && t.expiresAt > clock.now();
  const newHash = () => hashToken(generateToken());
  for (const c of commands) {
    const now = clock.now();
    switch (c.op) {
      case 'signIn':
      case 'alone': {
        const subject = SUBJECTS[c.subject]!;
        const clientId = CLIENTS[c.client]!;
        const user = { subject, issuer: ISSUER };
        const expiresAt = now + LIFETIMES[c.lifetime]!;
        const access = { tokenHash: newHash(), clientId, user, createdAt: now, expiresAt };
        if (c.op === 'alone') {
          const outcome = await store.issueTokens(access);
          expect(outcome).toBe(deleted.has(clientId) ? 'client_revoked' : 'ok');
          if (outcome === 'ok') tokens.push({ hash: access.tokenHash, subject, clientId, kind: 'access', expiresAt, revoked: false });
          break;
        }
        const familyId = `fam-${families++}`;
        const refresh = { tokenHash: newHash(), clientId, familyId, user, createdAt: now, expiresAt: expiresAt + 1_000 };
        const outcome = await store.issueTokens({ ...access, familyId }, refresh);
        expect(outcome).toBe(deleted.has(clientId) ? 'client_revoked' : 'ok');
        if (outcome === 'ok') {
          tokens.push({ hash: access.tokenHash, subject, clientId, kind: 'access', familyId, expiresAt, revoked: false });
          tokens.push({
            hash: refresh.tokenHash,
            subject,
            clientId,
            kind: 'refresh',
            familyId,
            expiresAt: refresh.expiresAt,
            revoked: false,
          });
        }
        break;
      }
      case 'user': {
        const subject = SUBJECTS[c.subject]!;
        const expiresAt = now + LIFETIMES[c.lifetime]!;
        const tokenHash = newHash();
        await store.putUserToken({ tokenHash, subject, issuer: ISSUER, createdAt: now, expiresAt });
        tokens.push({ hash: tokenHash, subject, kind: 'user', expiresAt, revoked: false });
        break;
      }
      case 'rotate': {
        // A live refresh token of a live client (rotated or not: a rotated one presented again is reuse).
        const candidates = tokens.filter((t) => t.kind === 'refresh' && live(t) && !deleted.has(t.clientId!));
        const old = candidates[c.pick % Math.max(1, candidates.length)];
        if (old === undefined) break;
        const user = { subject: old.subject, issuer: ISSUER };
        const expiresAt = now + LIFETIMES[c.lifetime]!;
        const access = { tokenHash: newHash(), clientId: old.clientId!, familyId: old.familyId!, user, createdAt: now, expiresAt };
        const refresh = {
          tokenHash: newHash(),
          clientId: old.clientId!,
          familyId: old.familyId!,
          user,
          createdAt: now,
          expiresAt: expiresAt + 1_000,
        };
        const outcome = await store.rotateRefreshToken(old.hash, old.clientId!, now, access, refresh, 0);
        if (old.rotated) {
          expect(outcome).toBe('reused');
          for (const t of tokens) if (t.familyId === old.familyId) t.revoked = true;
        } else {
          expect(outcome).toBe('ok');
          old.rotated = true;
          tokens.push({
            hash: access.tokenHash,
            subject: old.subject,
            clientId: old.clientId!,
            kind: 'access',
            familyId: old.familyId!,
            expiresAt,
            revoked: false,
          });
          tokens.push({
            hash: refresh.tokenHash,
            subject: old.subject,
            clientId: old.clientId!,
            kind: 'refresh',
            familyId: old.familyId!,
            expiresAt: refresh.expiresAt,
            revoked: false,
          });
        }
        break;
      }
      case 'revokeAccess': {
        const candidates = tokens.filter((t) => t.kind === 'access' && live(t));
        const target = candidates[c.pick % Math.max(1, candidates.length)];
        if (target === undefined) break;
        expect(await store.revokeAccessToken(target.hash, now)).toBe(true);
        target.revoked = true;
        break;
      }
      case 'deleteClient': {
        const clientId = CLIENTS[c.client]!;
        await store.deleteClient(clientId, now);
        deleted.add(clientId);
        for (const t of tokens) if (t.clientId === clientId) t.revoked = true;
        break;
      }
      case 'revokeSubject': {
        const subject = SUBJECTS[c.subject]!;
        const expected = tokens.filter((t) => t.subject === subject && live(t));
        const result = await store.revokeSubject(subject, undefined, now, 3);
        expect(result.accessTokensRevoked + result.refreshTokensRevoked + result.userTokensRevoked).toBe(expected.length);
        for (const t of expected) t.revoked = true;
        break;
      }
      case 'advance':
        clock.advance(c.ms);
        break;
    }
  }
  for (const subject of SUBJECTS) {
    const listed = (await store.listSubjectTokens(subject, clock.now())).map((t) => t.tokenHash).sort();
    const expected = tokens
      .filter((t) => t.subject === subject && live(t))
      .map((t) => t.hash)
      .sort();
    expect(listed).toEqual(expected);
  }
}

describe('the subject index stays exact under issuance, rotation, reuse, revocation, deleteClient and expiry', () => {
  let raw: Redis;
  beforeAll(async () => {
    raw = await rawRedis();
  });
  afterAll(async () => {
    await raw.quit();
  });

  it('RedisTokenStore', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(command, { minLength: 1, maxLength: 25 }), async (commands) => {
        const prefix = uniquePrefix('subject-index');
        const store = await openRedisStore(prefix);
        try {
          await runAndCompare(store, new ManualClock(Date.now()), commands);
        } finally {
          await store.close();
          await deleteUnder(raw, prefix);
        }
      }),
      { numRuns: 40 },
    );
  }, 120_000);

  it('MemoryTokenStore', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(command, { minLength: 1, maxLength: 25 }), async (commands) => {
        const clock = new ManualClock(Date.now());
        await runAndCompare(new MemoryTokenStore({ clock }), clock, commands);
      }),
      { numRuns: 200 },
    );
  });
});
