// Model-based test: random sequences of createClient, client_credentials, createAccessToken,
// IdP exchange, refresh, revoke, manual HSET revocation, deleteClient, clock moves and validation run
// against the real sidecar on real Redis, and every answer is compared with a tiny in-memory model of
// the credential state table (issue, expire, revoke, delete the client). fast-check shrinks any divergence to a minimal command sequence.

import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashToken } from '../../src/model/credentials.ts';
import { startEchoUpstream, type FakeUpstream } from '../support/fake-upstreams.ts';
import { rawRedis } from '../support/redis.ts';
import { basic, postForm } from '../support/http.ts';
import { startStack, type Stack } from '../support/stack.ts';

const ISSUER = 'https://idp.model.test/';
const AUDIENCE = 'model';
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

type Kind = 'access' | 'refresh' | 'user';
interface ModelToken {
  raw: string;
  kind: Kind;
  clientIdx?: number;
  family?: number;
  expiresAt: number;
  revoked: boolean;
  /** Model time of a refresh token's first rotation. */
  rotatedAt?: number;
  /** The pair a refresh token's rotation issued: what every presentation within the window gets again. */
  successor?: { access: string; refresh: string };
}
interface ModelClient {
  id: string;
  secret: string;
  deleted: boolean;
}
interface Model {
  now: number;
  clients: ModelClient[];
  tokens: ModelToken[];
  families: number;
}

interface Real {
  stack: Stack;
  sign(now: number): Promise<string>;
  redis: Redis;
}

let stack: Stack;
let echo: FakeUpstream;
let jwks: Server;
let privateKey: CryptoKey;
let redis: Redis;

function pick<T>(list: T[], n: number): T | undefined {
  return list.length === 0 ? undefined : list[n % list.length];
}

function live(t: ModelToken, now: number): boolean {
  return !t.revoked && now < t.expiresAt;
}

function revokeFamily(m: Model, family: number): void {
  for (const t of m.tokens) if (t.family === family) t.revoked = true;
}

// ---- commands ----------------------------------------------------------------------------------

class CreateClient implements fc.AsyncCommand<Model, Real> {
  check = () => true;
  async run(m: Model, r: Real) {
    const res = await r.stack.admin('createClient', { clientName: 'model' });
    expect(res.status).toBe(201);
    m.clients.push({ id: res.body.clientId, secret: res.body.clientSecret, deleted: false });
  }
  toString = () => 'createClient';
}

class ClientCredentials implements fc.AsyncCommand<Model, Real> {
  readonly n: number;
  constructor(n: number) {
    this.n = n;
  }
  check = (m: Readonly<Model>) => m.clients.length > 0;
  async run(m: Model, r: Real) {
    const c = pick(m.clients, this.n)!;
    const res = await postForm(`${r.stack.proxyUrl}/token`, { grant_type: 'client_credentials' }, basic(c.id, c.secret));
    if (c.deleted) {
      expect([res.status, res.body.error]).toEqual([401, 'invalid_client']);
      return;
    }
    expect(res.status).toBe(200);
    const family = ++m.families;
    const clientIdx = m.clients.indexOf(c);
    m.tokens.push({ raw: res.body.access_token, kind: 'access', clientIdx, family, expiresAt: m.now + HOUR, revoked: false });
    m.tokens.push({ raw: res.body.refresh_token, kind: 'refresh', clientIdx, family, expiresAt: m.now + 30 * DAY, revoked: false });
  }
  toString = () => `clientCredentials(${this.n})`;
}

class CreateAccessToken implements fc.AsyncCommand<Model, Real> {
  readonly n: number;
  readonly lifetimeSeconds: number;
  constructor(n: number, lifetimeSeconds: number) {
    this.n = n;
    this.lifetimeSeconds = lifetimeSeconds;
  }
  check = (m: Readonly<Model>) => m.clients.length > 0;
  async run(m: Model, r: Real) {
    const c = pick(m.clients, this.n)!;
    const res = await r.stack.admin('createAccessToken', { clientId: c.id, lifetimeSeconds: this.lifetimeSeconds });
    if (c.deleted) {
      expect(res.status).toBe(400);
      return;
    }
    expect(res.status).toBe(201);
    m.tokens.push({
      raw: res.body.accessToken,
      kind: 'access',
      clientIdx: m.clients.indexOf(c),
      expiresAt: m.now + this.lifetimeSeconds * 1000,
      revoked: false,
    });
  }
  toString = () => `createAccessToken(${this.n}, ${this.lifetimeSeconds}s)`;
}

class Exchange implements fc.AsyncCommand<Model, Real> {
  check = () => true;
  async run(m: Model, r: Real) {
    const res = await postForm(`${r.stack.proxyUrl}/token`, {
      grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
      subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
      subject_token: await r.sign(m.now),
    });
    expect(res.status).toBe(200);
    m.tokens.push({ raw: res.body.access_token, kind: 'user', expiresAt: m.now + 7 * DAY, revoked: false });
  }
  toString = () => 'exchange';
}

class Refresh implements fc.AsyncCommand<Model, Real> {
  readonly n: number;
  constructor(n: number) {
    this.n = n;
  }
  check = (m: Readonly<Model>) => m.tokens.some((t) => t.kind === 'refresh');
  async run(m: Model, r: Real) {
    const old = pick(
      m.tokens.filter((t) => t.kind === 'refresh'),
      this.n,
    )!;
    const c = m.clients[old.clientIdx!]!;
    const res = await postForm(`${r.stack.proxyUrl}/token`, { grant_type: 'refresh_token', refresh_token: old.raw }, basic(c.id, c.secret));
    if (c.deleted) {
      expect([res.status, res.body.error]).toEqual([401, 'invalid_client']);
      return;
    }
    if (!live(old, m.now)) {
      expect([res.status, res.body.error]).toEqual([400, 'invalid_grant']);
      return;
    }
    // Presented again after the grace window (counted from the first rotation): theft, the family goes.
    if (old.rotatedAt !== undefined && m.now - old.rotatedAt >= r.stack.sidecar.config.oauth.refreshReuseGraceSeconds * 1000) {
      expect([res.status, res.body.error]).toEqual([400, 'invalid_grant']);
      revokeFamily(m, old.family!);
      return;
    }
    // Within the window, a rotated token gets the same pair its rotation issued, however often:
    // nothing new exists.
    if (old.rotatedAt !== undefined) {
      expect(res.status).toBe(200);
      expect({ access: res.body.access_token, refresh: res.body.refresh_token }).toEqual(old.successor);
      return;
    }
    // First rotation: a new pair in the family.
    expect(res.status).toBe(200);
    old.rotatedAt = m.now;
    old.successor = { access: res.body.access_token, refresh: res.body.refresh_token };
    m.tokens.push({
      raw: res.body.access_token,
      kind: 'access',
      clientIdx: old.clientIdx,
      family: old.family,
      expiresAt: m.now + HOUR,
      revoked: false,
    });
    m.tokens.push({
      raw: res.body.refresh_token,
      kind: 'refresh',
      clientIdx: old.clientIdx,
      family: old.family,
      expiresAt: m.now + 30 * DAY,
      revoked: false,
    });
  }
  toString = () => `refresh(${this.n})`;
}

class Revoke implements fc.AsyncCommand<Model, Real> {
  readonly n: number;
  constructor(n: number) {
    this.n = n;
  }
  check = (m: Readonly<Model>) => m.tokens.length > 0;
  async run(m: Model, r: Real) {
    const t = pick(m.tokens, this.n)!;
    const res = await postForm(`${r.stack.proxyUrl}/revoke`, { token: t.raw }, { authorization: `Bearer ${r.stack.masterToken}` });
    expect(res.status).toBe(200);
    if (t.kind === 'refresh') {
      t.revoked = true;
      revokeFamily(m, t.family!);
    } else {
      t.revoked = true;
    }
  }
  toString = () => `revoke(${this.n})`;
}

class ManualRevoke implements fc.AsyncCommand<Model, Real> {
  readonly n: number;
  constructor(n: number) {
    this.n = n;
  }
  check = (m: Readonly<Model>) => m.tokens.some((t) => t.kind === 'user');
  async run(m: Model, r: Real) {
    const t = pick(
      m.tokens.filter((t) => t.kind === 'user'),
      this.n,
    )!;
    await r.redis.hset(`${r.stack.prefix}userBearerTokens:${hashToken(t.raw)}`, 'revoked', 'true');
    t.revoked = true;
  }
  toString = () => `HSET revoked true (${this.n})`;
}

class DeleteClient implements fc.AsyncCommand<Model, Real> {
  readonly n: number;
  constructor(n: number) {
    this.n = n;
  }
  check = (m: Readonly<Model>) => m.clients.length > 0;
  async run(m: Model, r: Real) {
    const c = pick(m.clients, this.n)!;
    const res = await r.stack.admin('deleteClient', { clientId: c.id });
    expect(res.status).toBe(200);
    const idx = m.clients.indexOf(c);
    const live = (k: Kind) => m.tokens.filter((t) => t.clientIdx === idx && t.kind === k && !t.revoked && m.now < t.expiresAt).length;
    if (!c.deleted) {
      // Expired-but-present tokens are counted by the store too (they still exist in Redis); compare only a lower bound.
      expect(res.body.accessTokensRevoked).toBeGreaterThanOrEqual(live('access'));
      expect(res.body.refreshTokensRevoked).toBeGreaterThanOrEqual(live('refresh'));
    } else {
      expect([res.body.accessTokensRevoked, res.body.refreshTokensRevoked]).toEqual([0, 0]);
    }
    c.deleted = true;
    for (const t of m.tokens) if (t.clientIdx === idx) t.revoked = true;
  }
  toString = () => `deleteClient(${this.n})`;
}

class Advance implements fc.AsyncCommand<Model, Real> {
  readonly ms: number;
  constructor(ms: number) {
    this.ms = ms;
  }
  check = () => true;
  async run(m: Model, r: Real) {
    m.now += this.ms;
    r.stack.clock.advance(this.ms);
  }
  toString = () => `advance(${this.ms / 1000}s)`;
}

class Validate implements fc.AsyncCommand<Model, Real> {
  readonly n: number;
  constructor(n: number) {
    this.n = n;
  }
  check = (m: Readonly<Model>) => m.tokens.length > 0;
  async run(m: Model, r: Real) {
    const t = pick(m.tokens, this.n)!;
    const res = await fetch(r.stack.mcpUrl, { method: 'POST', headers: { authorization: `Bearer ${t.raw}` }, body: '{}' });
    await res.arrayBuffer();
    // A refresh token never opens /mcp; access and user-grade tokens do while live.
    const expected = t.kind !== 'refresh' && live(t, m.now) ? 200 : 401;
    expect(res.status).toBe(expected);
  }
  toString = () => `validate(${this.n})`;
}

const allCommands = [
  fc.constant(new CreateClient()),
  fc.nat(7).map((n) => new ClientCredentials(n)),
  fc.tuple(fc.nat(7), fc.constantFrom(1, 60, 3600, 86400)).map(([n, s]) => new CreateAccessToken(n, s)),
  fc.constant(new Exchange()),
  fc.nat(15).map((n) => new Refresh(n)),
  fc.nat(31).map((n) => new Revoke(n)),
  fc.nat(7).map((n) => new ManualRevoke(n)),
  fc.nat(7).map((n) => new DeleteClient(n)),
  fc.constantFrom(1000, 59_000, HOUR, DAY, 8 * DAY).map((ms) => new Advance(ms)),
  fc.nat(31).map((n) => new Validate(n)),
  fc.nat(31).map((n) => new Validate(n)),
];

describe('credential state machine (model-based, real Redis)', () => {
  beforeAll(async () => {
    const pair = await generateKeyPair('ES256');
    privateKey = pair.privateKey;
    const jwk = { ...(await exportJWK(pair.publicKey)), kid: 'model', alg: 'ES256' };
    jwks = createServer((_req, res) => res.end(JSON.stringify({ keys: [jwk] })));
    jwks.listen(0, '127.0.0.1');
    await once(jwks, 'listening');
    echo = await startEchoUpstream();
    stack = await startStack({
      upstreamUrl: echo.url,
      config: {
        idp: {
          issuer: ISSUER,
          audience: AUDIENCE,
          jwksUrl: `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/`,
          algorithms: ['ES256'],
        },
      },
    });
    redis = await rawRedis();
    // The model's clock runs ahead of real time, so Redis's own PEXPIREAT (real time) never drops a
    // record the model still considers live; expiry is then decided by the sidecar's clock alone.
    stack.clock.set(Date.now() + 365 * DAY);
  });
  afterAll(async () => {
    await redis?.quit();
    await stack?.close();
    await echo?.close();
    await new Promise((r) => jwks?.close(r));
  });

  it('every answer matches the model of the credential state table', async () => {
    const sign = (now: number) => {
      const s = Math.floor(now / 1000);
      return new SignJWT({ iss: ISSUER, aud: AUDIENCE, sub: `user-${s}`, iat: s, exp: s + 300 })
        .setProtectedHeader({ alg: 'ES256', kid: 'model' })
        .sign(privateKey);
    };
    await fc.assert(
      fc.asyncProperty(fc.commands(allCommands, { maxCommands: 40, size: 'large' }), async (cmds) => {
        const model: Model = { now: stack.clock.now(), clients: [], tokens: [], families: 0 };
        await fc.asyncModelRun(() => ({ model, real: { stack, sign, redis } }), cmds);
      }),
      { numRuns: 150, interruptAfterTimeLimit: 60_000, markInterruptAsFailure: true },
    );
  }, 90_000);
});
