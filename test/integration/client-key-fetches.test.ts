// The fetches client authentication causes, against a real https server on loopback (a test
// certificate, private addresses allowed for this test's fetcher only) that counts every request, a
// sidecar on real Redis, and requests from distinct loopback source addresses:
//  - a `jwks_uri` client's /token requests fetch its keys within the per-address fetch budget, not once
//    a request; an address over the failed-authentication limit causes no fetch at all; a URL that
//    fails is fetched once per failure-cache period; one address holding its share of the fetch slots
//    leaves slots for the others;
//  - a refused assertion (over the per-client limit, or a bad signature) leaves no `jti` in Redis;
//  - an unknown `kid` refetches the key set once per cooldown: a key rotated in works at once, a key
//    removed stops working from that refetch on;
//  - a metadata-document client is held to its document's CURRENT method: a document that moved to
//    private_key_jwt refuses its earlier codes and refresh tokens presented with the bare client_id.
// Assertions are signed as RFC 7523 §2.2 clients (ChatGPT's connector is one) sign them: iss = sub =
// client id, aud the issuer, a fresh jti, RS256 with a kid.

import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { Writable } from 'node:stream';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/model/clock.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { createCimdResolver, type CimdResolverOptions } from '../../src/oauth/cimd.ts';
import { JWT_BEARER_ASSERTION } from '../../src/oauth/client-auth.ts';
import { serveOnLoopback } from '../support/fake-upstreams.ts';
import { keysUnder, rawRedis } from '../support/redis.ts';
import {
  approveAndSignIn,
  authorizeUrl,
  CLIENT_REDIRECT,
  clientReceived,
  pkce,
  standardParams,
  startSignInStack,
  tokenRequest,
} from '../support/sign-in.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { createTestCertificate, type TestCertificate } from '../support/test-cert.ts';
import { UserAgent } from '../support/user-agent.ts';
import { formFrom, type Answer } from '../hostile/from-address.ts';

interface Key {
  privateKey: CryptoKey;
  jwk: JWK;
}

let cert: TestCertificate;
let keyServer: { url: string; close: () => Promise<void> };
let origin = '';
/** Requests the key server received, by path. */
const hits = new Map<string, number>();
/** The key set served at /keys/<name>, with its Cache-Control. */
const keySets = new Map<string, { keys: JWK[]; cacheControl: string }>();
/** The method each /doc/<name>.json document asks for; `inline`: private_key_jwt with the keys of /keys/<name> in `jwks`. */
const documentMethods = new Map<string, 'none' | 'private_key_jwt' | 'inline'>();
/** /hold/<name>: answered only when released; `arrived` resolves when the request is in. */
const held = new Map<string, { arrived: () => void; release: Promise<void> }>();
let releaseAll: () => void = () => {};
const released = new Promise<void>((resolve) => {
  releaseAll = resolve;
});
const arrivals = new Map<string, Promise<void>>();

let k1: Key;
let k2: Key;
let k3: Key;
let stranger: Key;

async function keyPair(kid: string): Promise<Key> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  return { privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' } };
}

function serveKeys(req: IncomingMessage, res: ServerResponse): void {
  const path = (req.url ?? '').split('?')[0]!;
  hits.set(path, (hits.get(path) ?? 0) + 1);
  const [, kind, name] = path.split('/');
  if (kind === 'keys' && keySets.has(name!)) {
    const set = keySets.get(name!)!;
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': set.cacheControl }).end(JSON.stringify({ keys: set.keys }));
    return;
  }
  if (kind === 'doc' && documentMethods.has(name!.replace(/\.json$/, ''))) {
    const docName = name!.replace(/\.json$/, '');
    const doc: Record<string, unknown> = {
      client_id: `${origin}${path}`,
      client_name: 'Switching Client',
      redirect_uris: [CLIENT_REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: documentMethods.get(docName) === 'none' ? 'none' : 'private_key_jwt',
    };
    if (documentMethods.get(docName) === 'private_key_jwt') doc.jwks_uri = `${origin}/keys/${docName}`;
    if (documentMethods.get(docName) === 'inline') doc.jwks = { keys: keySets.get(docName)!.keys };
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(doc));
    return;
  }
  if (kind === 'hold') {
    held.get(name!)?.arrived();
    void released.then(() =>
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify({ keys: [k1.jwk] })),
    );
    return;
  }
  // /fail/<name> and anything unknown.
  res.writeHead(500).end();
}

/** A held path whose arrival at the key server the test can await. */
function holdPath(name: string): string {
  arrivals.set(
    name,
    new Promise<void>((arrived) => {
      held.set(name, { arrived, release: released });
    }),
  );
  return `/hold/${name}`;
}

beforeAll(async () => {
  cert = createTestCertificate();
  keyServer = await serveOnLoopback(createHttpsServer({ cert: cert.cert, key: cert.key }, serveKeys));
  origin = new URL(keyServer.url).origin;
  [k1, k2, k3, stranger] = await Promise.all([keyPair('k1'), keyPair('k2'), keyPair('k3'), keyPair('k1')]);
}, 60_000);
afterAll(async () => {
  releaseAll();
  await keyServer?.close();
});

const quiet = createLogger('error', new Writable({ write: (_c, _e, done) => done() }));

function resolver(clock: ManualClock, options: Partial<CimdResolverOptions> = {}) {
  return createCimdResolver({
    timeoutMs: 10_000,
    maxBytes: 5120,
    cacheTtlMs: 600_000,
    maxCacheEntries: 100,
    allowPrivateAddresses: true,
    clock,
    logger: quiet,
    ca: cert.cert,
    ...options,
  });
}

/** A client assertion: iss = sub = the client id, aud the issuer, a fresh jti. */
async function assertion(stack: Stack, clientId: string, key: Key, kid = key.jwk.kid!): Promise<string> {
  const now = Math.floor(stack.clock.now() / 1000);
  return new SignJWT({})
    .setProtectedHeader({ alg: 'RS256', kid })
    .setIssuer(clientId)
    .setSubject(clientId)
    .setAudience(stack.sidecar.publicUrl())
    .setIssuedAt(now)
    .setExpirationTime(now + 60)
    .setJti(randomUUID())
    .sign(key.privateKey);
}

/** An anonymous registration (POST /register) with private_key_jwt and a jwks_uri of its choosing. */
async function registerWithKeysAt(stack: Stack, path: string): Promise<string> {
  const res = await fetch(`${stack.proxyUrl}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      redirect_uris: ['http://127.0.0.1/cb'],
      grant_types: ['refresh_token'],
      token_endpoint_auth_method: 'private_key_jwt',
      jwks_uri: `${origin}${path}`,
    }),
  });
  const body = (await res.json()) as { client_id?: string };
  if (res.status !== 201 || !body.client_id) throw new Error(`register: ${res.status} ${JSON.stringify(body)}`);
  return body.client_id;
}

/** A client an administrator made: client_credentials, private_key_jwt with its keys at `path`. */
async function machineClientWithKeysAt(stack: Stack, path: string): Promise<string> {
  const clientId = `mcp_${randomUUID().replace(/-/g, '')}`;
  await stack.store.createClient({
    clientId,
    redirectUris: [],
    grantTypes: ['client_credentials'],
    profile: 'default',
    tokenEndpointAuthMethod: 'private_key_jwt',
    jwksUri: `${origin}${path}`,
    source: 'admin',
    createdAt: stack.clock.now(),
  });
  return clientId;
}

/** POST /token from `from` with a client assertion (a refresh_token grant with a made-up token). */
async function tokenWith(
  stack: Stack,
  from: string,
  jwt: string,
  grant: Record<string, string> = { grant_type: 'refresh_token', refresh_token: 'a'.repeat(64) },
): Promise<Answer> {
  return formFrom(from, `${stack.proxyUrl}/token`, { ...grant, client_assertion_type: JWT_BEARER_ASSERTION, client_assertion: jwt });
}

const CLIENT_CREDENTIALS = { grant_type: 'client_credentials' };

describe('jwks_uri fetches are bounded per client address', () => {
  it('N /token requests from one address cause at most fetchesPerMinutePerAddress fetches, then 429 without a fetch', async () => {
    keySets.set('budget', { keys: [k1.jwk], cacheControl: 'no-store' });
    const clock = new ManualClock();
    const stack = await startStack({
      clock,
      cimd: resolver(clock),
      config: { oauth: { clientMetadataDocuments: { fetchesPerMinutePerAddress: 5 } } },
    });
    try {
      const clientId = await registerWithKeysAt(stack, '/keys/budget');
      const statuses: number[] = [];
      // Forged assertions (another key under the same kid): what an attacker sends for free.
      for (let i = 0; i < 20; i++) statuses.push((await tokenWith(stack, '127.0.0.2', await assertion(stack, clientId, stranger))).status);
      expect(hits.get('/keys/budget')).toBe(5);
      expect(statuses).toEqual([...Array(5).fill(401), ...Array(15).fill(429)]);
      const over = await tokenWith(stack, '127.0.0.2', await assertion(stack, clientId, stranger));
      expect(over.json().error_description).toMatch(/too many client metadata documents and key sets fetched for this address/);
      expect(Number(over.headers['retry-after'])).toBeGreaterThan(0);
      // Another address has its own budget.
      expect((await tokenWith(stack, '127.0.0.3', await assertion(stack, clientId, stranger))).status).toBe(401);
      expect(hits.get('/keys/budget')).toBe(6);
      // The next window: fetches again.
      clock.advance(60_000);
      expect((await tokenWith(stack, '127.0.0.2', await assertion(stack, clientId, stranger))).status).toBe(401);
      expect(hits.get('/keys/budget')).toBe(7);
    } finally {
      await stack.close();
    }
  });

  it('an address over the failed-authentication limit causes no fetch: it gets the bare 429 of its failures', async () => {
    keySets.set('lockout', { keys: [k1.jwk], cacheControl: 'no-store' });
    const clock = new ManualClock();
    const stack = await startStack({
      clock,
      cimd: resolver(clock),
      config: { rateLimits: { failedAuthPerMinute: 3 }, oauth: { clientMetadataDocuments: { fetchesPerMinutePerAddress: 1000 } } },
    });
    try {
      const clientId = await registerWithKeysAt(stack, '/keys/lockout');
      const answers: Answer[] = [];
      for (let i = 0; i < 12; i++) answers.push(await tokenWith(stack, '127.0.0.4', await assertion(stack, clientId, stranger)));
      const statuses = answers.map((a) => a.status);
      // Three failures answered, the fourth tips the address over and is answered too; then 429s.
      expect(statuses).toEqual([...Array(4).fill(401), ...Array(8).fill(429)]);
      expect(Number(answers[4]!.headers['retry-after'])).toBeGreaterThan(0);
      expect(hits.get('/keys/lockout')).toBe(4);
      // A good assertion from the locked-out address needs a fetch too (no-store): refused before it.
      expect((await tokenWith(stack, '127.0.0.4', await assertion(stack, clientId, k1))).status).toBe(429);
      expect(hits.get('/keys/lockout')).toBe(4);
      // Another address is not locked out: fetched, verified.
      expect((await tokenWith(stack, '127.0.0.5', await assertion(stack, clientId, k1))).json().error).toBe('invalid_grant');
      expect(hits.get('/keys/lockout')).toBe(5);
    } finally {
      await stack.close();
    }
  });

  it('a jwks_uri that fails is fetched once per failure-cache period, however often it is named', async () => {
    const clock = new ManualClock();
    const stack = await startStack({
      clock,
      cimd: resolver(clock, { failureCacheMs: 30_000 }),
      config: { oauth: { clientMetadataDocuments: { fetchesPerMinutePerAddress: 1000 } } },
    });
    try {
      const clientId = await registerWithKeysAt(stack, '/fail/negative');
      for (let i = 0; i < 10; i++) expect((await tokenWith(stack, '127.0.0.6', await assertion(stack, clientId, k1))).status).toBe(401);
      expect(hits.get('/fail/negative')).toBe(1);
      clock.advance(30_000);
      expect((await tokenWith(stack, '127.0.0.6', await assertion(stack, clientId, k1))).status).toBe(401);
      expect(hits.get('/fail/negative')).toBe(2);
    } finally {
      await stack.close();
    }
  });

  it("one address holding its share of the fetch slots: its next fetch waits (then 503), another address's is served", async () => {
    keySets.set('other-address', { keys: [k1.jwk], cacheControl: 'no-store' });
    const clock = new ManualClock();
    const cimd = resolver(clock, { maxConcurrentFetches: 2, maxConcurrentFetchesPerAddress: 1, fetchQueueWaitMs: 300 });
    const stack = await startStack({ clock, cimd, config: { oauth: { clientMetadataDocuments: { fetchesPerMinutePerAddress: 1000 } } } });
    try {
      const first = await registerWithKeysAt(stack, holdPath('share-1'));
      const second = await registerWithKeysAt(stack, holdPath('share-2'));
      const innocent = await registerWithKeysAt(stack, '/keys/other-address');
      const holding = tokenWith(stack, '127.0.0.7', await assertion(stack, first, k1));
      await arrivals.get('share-1');
      // The same address's second fetch: over its share, it does not reach the key server.
      const over = tokenWith(stack, '127.0.0.7', await assertion(stack, second, k1));
      const outcome = await Promise.race([over.then((a) => a.status), arrivals.get('share-2')!.then(() => 'fetched' as const)]);
      expect(outcome).toBe(503);
      // Another address finds the slot the first one may not take.
      const other = await tokenWith(stack, '127.0.0.8', await assertion(stack, innocent, k1));
      expect(other.json().error).toBe('invalid_grant');
      expect(hits.get('/keys/other-address')).toBe(1);
      releaseAll();
      expect((await holding).json().error).toBe('invalid_grant');
    } finally {
      await stack.close();
    }
  });
});

describe('a refused client assertion leaves nothing in Redis', () => {
  it('over the per-client limit or with a bad signature: no jti key; the assertions let through are the only ones kept', async () => {
    keySets.set('jti', { keys: [k1.jwk], cacheControl: 'max-age=600' });
    const clock = new ManualClock();
    const stack = await startStack({ clock, cimd: resolver(clock), config: { rateLimits: { tokenRequestsPerMinute: 3 } } });
    const redis = await rawRedis();
    try {
      const clientId = await machineClientWithKeysAt(stack, '/keys/jti');
      const usedOnceKeys = async () => (await keysUnder(redis, stack.prefix)).filter((k) => k.includes(':usedOnce:'));
      expect(await usedOnceKeys()).toEqual([]);
      const statuses: number[] = [];
      for (let i = 0; i < 10; i++)
        statuses.push((await tokenWith(stack, '127.0.0.9', await assertion(stack, clientId, k1), CLIENT_CREDENTIALS)).status);
      expect(statuses).toEqual([...Array(3).fill(200), ...Array(7).fill(429)]);
      expect(await usedOnceKeys()).toHaveLength(3);
      for (let i = 0; i < 5; i++)
        expect((await tokenWith(stack, '127.0.0.10', await assertion(stack, clientId, stranger), CLIENT_CREDENTIALS)).status).toBe(401);
      expect(await usedOnceKeys()).toHaveLength(3);
    } finally {
      await redis.quit();
      await stack.close();
    }
  });
});

describe('an unknown kid refetches the key set, at most once per cooldown', () => {
  it('a key rotated in works at once (one refetch); a removed key stops working; a second unknown kid within the cooldown fetches nothing', async () => {
    keySets.set('rotating', { keys: [k1.jwk], cacheControl: 'max-age=600' });
    const clock = new ManualClock();
    const stack = await startStack({ clock, cimd: resolver(clock, { refetchCooldownMs: 30_000 }) });
    try {
      const clientId = await machineClientWithKeysAt(stack, '/keys/rotating');
      const token = async (key: Key, kid?: string) =>
        (await tokenWith(stack, '127.0.0.11', await assertion(stack, clientId, key, kid), CLIENT_CREDENTIALS)).status;
      expect(await token(k1)).toBe(200);
      expect(hits.get('/keys/rotating')).toBe(1);
      clock.advance(30_000);
      // The client replaces k1 with k2 (the cached set, valid for ten minutes, still says k1).
      keySets.set('rotating', { keys: [k2.jwk], cacheControl: 'max-age=600' });
      expect(await token(k2)).toBe(200);
      expect(hits.get('/keys/rotating')).toBe(2);
      // k1 is gone from the set fetched: refused, and its kid, now unknown, fetches nothing within the cooldown.
      expect(await token(k1)).toBe(401);
      expect(await token(k3)).toBe(401);
      expect(hits.get('/keys/rotating')).toBe(2);
      // After the cooldown a new kid is fetched for again.
      keySets.set('rotating', { keys: [k2.jwk, k3.jwk], cacheControl: 'max-age=600' });
      clock.advance(30_000);
      expect(await token(k3)).toBe(200);
      expect(await token(k2)).toBe(200);
      expect(hits.get('/keys/rotating')).toBe(3);
    } finally {
      await stack.close();
    }
  });
});

describe('an unknown kid re-reads a document whose keys are inline, at most once per cooldown', () => {
  it('the document is fetched again for a new kid; within the cooldown another unknown kid fetches nothing', async () => {
    documentMethods.set('inline-keys', 'inline');
    keySets.set('inline-keys', { keys: [k1.jwk], cacheControl: 'unused' });
    const clock = new ManualClock();
    const stack = await startStack({ clock, cimd: resolver(clock, { refetchCooldownMs: 30_000 }) });
    try {
      // The record a document's client gets when its first code is issued (SignInClients.remember, src/oauth/sign-in/clients.ts).
      const clientId = `${origin}/doc/inline-keys.json`;
      await stack.store.createClient({
        clientId,
        redirectUris: [CLIENT_REDIRECT],
        grantTypes: ['authorization_code', 'refresh_token'],
        profile: 'interactive',
        tokenEndpointAuthMethod: 'none',
        source: 'cimd',
        createdAt: clock.now(),
      });
      // Client authentication passes: the made-up refresh token is then invalid_grant.
      const outcome = async (key: Key) => (await tokenWith(stack, '127.0.0.12', await assertion(stack, clientId, key))).json().error;
      expect(await outcome(k1)).toBe('invalid_grant');
      expect(hits.get('/doc/inline-keys.json')).toBe(1);
      clock.advance(30_000);
      keySets.set('inline-keys', { keys: [k2.jwk], cacheControl: 'unused' });
      expect(await outcome(k2)).toBe('invalid_grant');
      expect(hits.get('/doc/inline-keys.json')).toBe(2);
      expect(await outcome(k1)).toBe('invalid_client');
      expect(await outcome(k3)).toBe('invalid_client');
      expect(hits.get('/doc/inline-keys.json')).toBe(2);
    } finally {
      await stack.close();
    }
  });
});

describe("a metadata-document client is held to its document's current method", () => {
  it('after the document moved to private_key_jwt, earlier codes and refresh tokens need an assertion: the bare client_id is invalid_client', async () => {
    documentMethods.set('switching', 'none');
    keySets.set('switching', { keys: [k1.jwk], cacheControl: 'max-age=600' });
    const clock = new ManualClock();
    const s = await startSignInStack({ clock, cimd: resolver(clock, { cacheTtlMs: 10_000 }) });
    try {
      const clientId = `${origin}/doc/switching.json`;
      const signIn = async () => {
        const p = pkce();
        const hop = await approveAndSignIn(new UserAgent(), s.base, authorizeUrl(s.base, standardParams(s.base, clientId, p)));
        return { code: clientReceived(hop).get('code')!, verifier: p.verifier };
      };
      const first = await signIn();
      const issued = await tokenRequest(s.base, {
        grant_type: 'authorization_code',
        code: first.code,
        redirect_uri: CLIENT_REDIRECT,
        client_id: clientId,
        code_verifier: first.verifier,
      });
      expect(issued.status).toBe(200);
      const refreshToken = issued.body.refresh_token as string;
      const second = await signIn();

      documentMethods.set('switching', 'private_key_jwt');
      // The cached document (10 s) expires: the next use reads the document anew.
      clock.advance(10_000);
      const codeGrant = {
        grant_type: 'authorization_code',
        code: second.code,
        redirect_uri: CLIENT_REDIRECT,
        code_verifier: second.verifier,
      };
      const refreshGrant = { grant_type: 'refresh_token', refresh_token: refreshToken };
      for (const grant of [codeGrant, refreshGrant]) {
        const bare = await tokenRequest(s.base, { ...grant, client_id: clientId });
        expect([bare.status, bare.body.error]).toEqual([401, 'invalid_client']);
      }
      const revoke = await fetch(`${s.base}/revoke`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token: refreshToken, client_id: clientId }).toString(),
      });
      expect(revoke.status).toBe(401);
      // With an assertion signed by the document's key, both work.
      for (const grant of [codeGrant, refreshGrant]) {
        const signed = await tokenRequest(s.base, {
          ...grant,
          client_id: clientId,
          client_assertion_type: JWT_BEARER_ASSERTION,
          client_assertion: await assertion(s.stack, clientId, k1),
        });
        expect(signed.status, JSON.stringify(signed.body)).toBe(200);
      }
    } finally {
      await s.close();
    }
  });
});
