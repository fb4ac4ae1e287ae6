// The token transitions (issue, rotate, redeem, a family's revocation: src/store/tokens/transitions.ts
// and its users) raced from 8 sidecars on one real Redis: each has its own connection, so their reads
// and guarded writes interleave, and a transition whose guard no longer holds reads and decides again.
// A client deleted between a transition's read and its write is forced through a keyspace that pauses
// before its first write. The memory engine's transitions interleave at their awaits: raced there too.

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { generateTokenFor, hashToken } from '../../src/model/credentials.ts';
import type { AccessTokenRecord, ClientRecord, RefreshTokenRecord } from '../../src/model/records.ts';
import { systemClock } from '../../src/model/clock.ts';
import { MemoryTokenStore } from '../../src/store/memory.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import type { Keyspace, Plan } from '../../src/store/keyspace.ts';
import { subjectDigest } from '../../src/store/records.ts';
import { RedisKeyspace } from '../../src/store/redis-keyspace.ts';
import { redeemCode } from '../../src/store/sign-in/redeem.ts';
import { rotateRefresh } from '../../src/store/refresh-tokens/transitions.ts';
import { issueTokens, type TokenKeys } from '../../src/store/tokens/transitions.ts';
import type { AuthorizationCodeRecord, TokenStore } from '../../src/store/types.ts';
import { closeRacingStores, openRacingStores } from '../support/redis.ts';

const SIDECARS = 8;
const HOUR = 3_600_000;
const user = { subject: 'idp-user-1', issuer: 'https://idp.example.com/' };

let prefix: string;
let raw: Redis;
let sidecars: RedisTokenStore[];

beforeEach(async () => ({ prefix, raw, sidecars } = await openRacingStores('tokens-races', SIDECARS)));
afterEach(() => closeRacingStores({ prefix, raw, sidecars }));

let clients = 0;
/** A client of the code flow written into `store` (the first sidecar's by default); its id. */
async function newClient(store: TokenStore = sidecars[0]!, clientId = `c-race-${++clients}`): Promise<string> {
  const record: ClientRecord = {
    clientId,
    clientSecretHash: hashToken(generateTokenFor(clientId)),
    clientName: clientId,
    redirectUris: ['http://127.0.0.1:9999/cb'],
    grantTypes: ['authorization_code', 'refresh_token'],
    profile: 'default',
    tokenEndpointAuthMethod: 'client_secret_basic',
    source: 'admin',
    createdAt: Date.now(),
  };
  await store.createClient(record);
  return clientId;
}

/** A pair as the sidecar mints it (in the client's bucket), for a signed-in user. */
function pair(clientId: string, familyId: string, now: number): { access: AccessTokenRecord; refresh: RefreshTokenRecord } {
  const access = { tokenHash: hashToken(generateTokenFor(clientId)), clientId, familyId, user, createdAt: now, expiresAt: now + HOUR };
  const refresh = {
    tokenHash: hashToken(generateTokenFor(clientId)),
    clientId,
    familyId,
    user,
    createdAt: now,
    expiresAt: now + 24 * HOUR,
  };
  return { access, refresh };
}

function codeFor(clientId: string, now: number): AuthorizationCodeRecord {
  return {
    codeHash: hashToken(generateTokenFor(clientId)),
    clientId,
    redirectUri: 'http://127.0.0.1:9999/cb',
    codeChallenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
    resource: 'https://mcp.example.com/mcp',
    user,
    createdAt: now,
    expiresAt: now + 60_000,
  };
}

const members = (clientId: string, familyId: string) => raw.smembers(sidecars[0]!.keys.refreshFamily(clientId, familyId));
const revokedAt = (key: string) => raw.hget(key, 'revokedAt');

describe('one refresh token rotated from 8 sidecars at once', () => {
  it('within the grace window: exactly one rotation stores a pair, the others answer grace', async () => {
    const clientId = await newClient();
    const now = Date.now();
    const first = pair(clientId, 'fam-grace', now);
    expect(await sidecars[0]!.issueTokens(first.access, first.refresh)).toBe('ok');
    const next = sidecars.map(() => pair(clientId, 'fam-grace', now + 1));
    const outcomes = await Promise.all(
      sidecars.map((s, i) =>
        s.rotateRefreshToken(first.refresh.tokenHash, clientId, now + 1, next[i]!.access, next[i]!.refresh, 60_000, `sealed-${i}`),
      ),
    );
    expect(outcomes.filter((o) => o === 'ok')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'grace')).toHaveLength(SIDECARS - 1);
    // The winner's pair alone was stored, and its sealed successor alone kept on the old token.
    const winner = outcomes.indexOf('ok');
    expect(await raw.hget(sidecars[0]!.keys.refreshToken(first.refresh.tokenHash), 'successor')).toBe(`sealed-${winner}`);
    expect(await members(clientId, 'fam-grace')).toHaveLength(4);
    for (const [i, p] of next.entries())
      expect(await raw.exists(sidecars[0]!.keys.refreshToken(p.refresh.tokenHash))).toBe(i === winner ? 1 : 0);
  });

  it('without a grace window: exactly one rotation, then the family revoked (its new pair included)', async () => {
    const clientId = await newClient();
    const now = Date.now();
    const first = pair(clientId, 'fam-reuse', now);
    expect(await sidecars[0]!.issueTokens(first.access, first.refresh)).toBe('ok');
    const next = sidecars.map(() => pair(clientId, 'fam-reuse', now + 1));
    const outcomes = await Promise.all(
      sidecars.map((s, i) => s.rotateRefreshToken(first.refresh.tokenHash, clientId, now + 1, next[i]!.access, next[i]!.refresh, 0)),
    );
    expect(outcomes.filter((o) => o === 'ok')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'reused').length).toBeGreaterThanOrEqual(1);
    for (const o of outcomes) expect(['ok', 'reused', 'invalid']).toContain(o);
    const family = await members(clientId, 'fam-reuse');
    expect(family).toHaveLength(4);
    for (const m of family) {
      const key = m.startsWith('a:') ? sidecars[0]!.keys.accessToken(m.slice(2)) : sidecars[0]!.keys.refreshToken(m.slice(2));
      expect(await revokedAt(key)).not.toBeNull();
    }
  });
});

describe('a refresh family revoked while its token is rotated', () => {
  it('leaves no live member: a pair added meanwhile is revoked too, or the rotation is refused', async () => {
    for (let round = 0; round < 12; round++) {
      const clientId = await newClient();
      const now = Date.now();
      const familyId = `fam-revoke-${round}`;
      const first = pair(clientId, familyId, now);
      expect(await sidecars[0]!.issueTokens(first.access, first.refresh)).toBe('ok');
      const next = sidecars.map(() => pair(clientId, familyId, now + 1));
      const [revoked, ...outcomes] = await Promise.all([
        sidecars[round % SIDECARS]!.revokeRefreshFamily(first.refresh.tokenHash, now + 1),
        ...sidecars.map((s, i) =>
          s.rotateRefreshToken(first.refresh.tokenHash, clientId, now + 1, next[i]!.access, next[i]!.refresh, 60_000),
        ),
      ]);
      expect(revoked).toBe(true);
      expect(outcomes.filter((o) => o === 'ok').length).toBeLessThanOrEqual(1);
      for (const m of await members(clientId, familyId)) {
        const key = m.startsWith('a:') ? sidecars[0]!.keys.accessToken(m.slice(2)) : sidecars[0]!.keys.refreshToken(m.slice(2));
        expect(await revokedAt(key)).not.toBeNull();
      }
    }
  });
});

describe('one authorization code redeemed from 8 sidecars at once', () => {
  it('exactly one redemption stores its tokens; the others answer reused and what the first issued is revoked', async () => {
    const clientId = await newClient();
    const now = Date.now();
    const code = codeFor(clientId, now);
    await sidecars[0]!.putAuthorizationCode(code);
    const pairs = sidecars.map((_, i) => pair(clientId, `fam-code-${i}`, now));
    const outcomes = await Promise.all(
      sidecars.map((s, i) => s.redeemAuthorizationCode(code.codeHash, clientId, now + 1, HOUR, pairs[i]!.access, pairs[i]!.refresh)),
    );
    expect(outcomes.filter((o) => o === 'ok')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'reused')).toHaveLength(SIDECARS - 1);
    const winner = pairs[outcomes.indexOf('ok')]!;
    expect(await revokedAt(sidecars[0]!.keys.accessToken(winner.access.tokenHash))).not.toBeNull();
    expect(await revokedAt(sidecars[0]!.keys.refreshToken(winner.refresh.tokenHash))).not.toBeNull();
    // The losers stored nothing.
    for (const p of pairs.filter((p) => p !== winner)) expect(await raw.exists(sidecars[0]!.keys.accessToken(p.access.tokenHash))).toBe(0);
  });
});

describe('tokens issued and rotated from 8 sidecars while the client is deleted', () => {
  it('never leaves a live token of the deleted client', async () => {
    for (let round = 0; round < 6; round++) {
      const clientId = await newClient();
      const now = Date.now();
      const seed = pair(clientId, `fam-seed-${round}`, now);
      expect(await sidecars[0]!.issueTokens(seed.access, seed.refresh)).toBe('ok');
      // Opens the deleting sidecar's transaction connection, so the race is between the operations.
      expect(await sidecars[round % SIDECARS]!.deleteClient(`c-warm-up-${round}`, now)).toBeNull();
      const issued: Array<ReturnType<typeof pair>> = [];
      let deleting: Promise<unknown> | undefined;
      let deleted = false;
      // Each sidecar issues one pair after another until the delete is done (and once more): every
      // step of the delete has issuances in flight on every side of it.
      const worker = async (s: RedisTokenStore, w: number) => {
        for (let n = 0; !deleted || n % 2 === 1; n++) {
          if (w === 0 && n === round) deleting = sidecars[round % SIDECARS]!.deleteClient(clientId, now).finally(() => (deleted = true));
          const p = pair(clientId, `fam-${round}-${w}-${n}`, now);
          issued.push(p);
          expect(['ok', 'client_revoked']).toContain(await s.issueTokens(p.access, p.refresh));
        }
      };
      const rotated = pair(clientId, `fam-seed-${round}`, now + 1);
      await Promise.all([
        ...sidecars.map(worker),
        sidecars[(round + 1) % SIDECARS]!.rotateRefreshToken(seed.refresh.tokenHash, clientId, now + 1, rotated.access, rotated.refresh, 0),
      ]);
      await deleting;
      for (const p of [seed, rotated, ...issued]) {
        for (const key of [sidecars[0]!.keys.accessToken(p.access.tokenHash), sidecars[0]!.keys.refreshToken(p.refresh.tokenHash)]) {
          // Either never stored, or stored and revoked with the client.
          if ((await raw.exists(key)) === 1) expect(await revokedAt(key)).not.toBeNull();
        }
      }
    }
  });
});

/** A keyspace on `raw` that runs `between` once, after the transition's reads and before its first write. */
function pausing(between: () => Promise<unknown>): Keyspace {
  const inner = new RedisKeyspace(raw);
  let paused = false;
  return {
    read: (commands) => inner.read(commands),
    async apply(plan: Plan) {
      if (!paused) {
        paused = true;
        await between();
      }
      return inner.apply(plan);
    },
  };
}

describe("a client deleted between a transition's read and its write (from another sidecar)", () => {
  const layout = (): TokenKeys => ({
    keys: sidecars[0]!.keys,
    subjectIndex: (s, b) => sidecars[0]!.keys.subjectGrants(subjectDigest(s), b),
  });
  const stored = async (p: ReturnType<typeof pair>) =>
    (await raw.exists(sidecars[0]!.keys.accessToken(p.access.tokenHash))) +
    (await raw.exists(sidecars[0]!.keys.refreshToken(p.refresh.tokenHash)));

  it('issuing reads the client again and stores nothing', async () => {
    const clientId = await newClient();
    const p = pair(clientId, 'fam-issue', Date.now());
    const keyspace = pausing(() => sidecars[1]!.deleteClient(clientId, Date.now()));
    expect(await issueTokens(keyspace, layout(), p.access, p.refresh)).toBe('client_revoked');
    expect(await stored(p)).toBe(0);
  });

  it('a rotation reads the token again (revoked with its client) and stores nothing', async () => {
    const clientId = await newClient();
    const now = Date.now();
    const first = pair(clientId, 'fam-rotate', now);
    expect(await sidecars[0]!.issueTokens(first.access, first.refresh)).toBe('ok');
    const next = pair(clientId, 'fam-rotate', now + 1);
    const keyspace = pausing(() => sidecars[1]!.deleteClient(clientId, now));
    const r = { oldHash: first.refresh.tokenHash, clientId, now: now + 1, ...next, graceMs: 0, successor: undefined };
    expect(await rotateRefresh(keyspace, layout(), r)).toBe('invalid');
    expect(await stored(next)).toBe(0);
  });

  it('a redemption reads the client again and stores nothing (the code stays unredeemed)', async () => {
    const clientId = await newClient();
    const now = Date.now();
    const code = codeFor(clientId, now);
    await sidecars[0]!.putAuthorizationCode(code);
    const p = pair(clientId, 'fam-redeem', now);
    const keyspace = pausing(() => sidecars[1]!.deleteClient(clientId, now));
    const r = { codeHash: code.codeHash, clientId, now: now + 1, retainMs: HOUR, ...p };
    expect((await redeemCode(keyspace, layout(), r)).outcome).toBe('client_revoked');
    expect(await stored(p)).toBe(0);
    expect(await raw.hget(sidecars[0]!.keys.authorizationCode(code.codeHash), 'redeemedAt')).toBeNull();
  });
});

describe('on the memory engine, whose transitions interleave at their awaits', () => {
  it('one rotation of a token from 8 callers at once: one ok, the others grace', async () => {
    const store = new MemoryTokenStore({ clock: systemClock });
    const clientId = await newClient(store, 'c-memory');
    const now = Date.now();
    const first = pair(clientId, 'fam-memory', now);
    expect(await store.issueTokens(first.access, first.refresh)).toBe('ok');
    const next = Array.from({ length: SIDECARS }, () => pair(clientId, 'fam-memory', now + 1));
    const rotations = next.map((p) => store.rotateRefreshToken(first.refresh.tokenHash, clientId, now + 1, p.access, p.refresh, 60_000));
    const outcomes = await Promise.all(rotations);
    expect(outcomes.filter((o) => o === 'ok')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'grace')).toHaveLength(SIDECARS - 1);
    const code = codeFor(clientId, now);
    await store.putAuthorizationCode(code);
    const issued = Array.from({ length: SIDECARS }, (_, i) => pair(clientId, `fam-memory-code-${i}`, now));
    const redeemed = await Promise.all(
      issued.map((p) => store.redeemAuthorizationCode(code.codeHash, clientId, now + 1, HOUR, p.access, p.refresh)),
    );
    expect(redeemed.filter((o) => o === 'ok')).toHaveLength(1);
    expect(redeemed.filter((o) => o === 'reused')).toHaveLength(SIDECARS - 1);
    await store.close();
  });
});
