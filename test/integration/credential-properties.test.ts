// Credential properties: token generation at scale, the master-token check taking one path
// for every candidate (shown structurally, never by timing), and no raw credential anywhere but the one
// response that delivered it. test/integration/logging.test.ts already checks the logs of a full
// runTraffic() for whole secrets, metrics.test.ts the metrics for whole secrets, audit.test.ts the
// audit stream. This file adds what those do not look at: every key and every value in Redis under the
// sidecar's prefix, every command the sidecar sent to Redis (MONITOR), every error body and header, the
// "returned exactly once" rule for success bodies, misuse traffic (secrets in the wrong field, in the
// query string, in bad JSON, in oversized bodies, the wrong kind of token at each endpoint), and
// 16-hex prefixes of raw secrets, not only whole secrets.
//
// How this was shown to fail (each change made temporarily, run, watched go red, then removed):
//   - vi.mock('../../src/model/credentials.ts') in this file with hashToken returning a 64-hex input as is, so
//     the real sidecar stored and looked up raw tokens: the three Redis checks (values, key names,
//     MONITOR) and the "returned once" check (revokeUserToken's tokenHash) went red, naming each key.
//   - vi.mock('../../src/http/body.ts') with a parseJsonObject whose 400 quoted the first 200 bytes of the
//     bad JSON: the error-body check went red (the master token and a user token in /oauth/* 400s).
//   - vi.mock('../../src/oauth/idp.ts') with a verifier whose IdpRejection message quoted the subject
//     token: the log check went red on "token exchange refused" (a bad JWT, an access token).
//   - in src/model/credentials.ts, `if (text.length !== 64) return false;` before the digest in matches(): the
//     one-path test went red for the 0-, 1-, 65- and 1000-character and non-string candidates.

import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { generateToken, hashToken, MasterToken, type MasterTokenPrimitives } from '../../src/model/credentials.ts';
import { keysUnder, rawRedis } from '../support/redis.ts';
import { basic, initializeStatus, postForm } from '../support/http.ts';
import { runTraffic, startTrafficStack, type TrafficResult, type TrafficStack } from '../support/traffic.ts';

const HEX64 = /^[0-9a-f]{64}$/;
const JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const JWT_TYPE = 'urn:ietf:params:oauth:token-type:jwt';

// ---- 1. generation ---------------------------------------------------------------------------------

describe('generateToken at scale', () => {
  it('100,000 tokens: all distinct, all 64 lowercase hex', () => {
    const count = 100_000;
    const seen = new Set<string>();
    const misshapen: string[] = [];
    for (let i = 0; i < count; i++) {
      const token = generateToken();
      if (!HEX64.test(token)) misshapen.push(token);
      seen.add(token);
    }
    expect(misshapen).toEqual([]);
    expect(seen.size).toBe(count);
  });
});

// ---- 2. the master-token check -----------------------------------------------------------------------

describe('master-token check: the same operations for every candidate', () => {
  const secret = generateToken();
  const flip = (c: string) => (c === '0' ? '1' : '0');

  /** A MasterToken over the real node:crypto primitives, wrapped so that every call is written down. */
  function observedMaster() {
    const trace: string[] = [];
    const hashInputs: string[] = [];
    const digests: Buffer[] = [];
    const primitives: MasterTokenPrimitives = {
      sha256(text) {
        hashInputs.push(text);
        const digest = createHash('sha256').update(text, 'utf8').digest();
        digests.push(digest);
        trace.push(`sha256 -> ${digest.length} B`);
        return digest;
      },
      equal(a, b) {
        // a: the digest of this call's candidate; b: the digest of the secret, made by the constructor.
        const aIsCandidate = a === digests.at(-1) || (digests.length === 1 && a !== digests[0]);
        const bIsSecret = b === digests[0];
        trace.push(`timingSafeEqual(${a.length} B ${aIsCandidate ? 'candidate' : '?'}, ${b.length} B ${bIsSecret ? 'secret' : '?'})`);
        return timingSafeEqual(a, b);
      },
    };
    const master = new MasterToken(secret, primitives);
    expect(trace).toEqual(['sha256 -> 32 B']);
    expect(hashInputs).toEqual([secret]);
    trace.length = 0;
    hashInputs.length = 0;
    return { master, trace, hashInputs };
  }

  const candidates: Array<[label: string, candidate: unknown, matches: boolean]> = [
    ['length 0', '', false],
    ['length 1 (the first character)', secret[0], false],
    ['length 63 (a prefix of the master token)', secret.slice(0, 63), false],
    ['length 64, random', generateToken(), false],
    ['length 65 (the master token and one more)', `${secret}0`, false],
    ['length 1000', 'a'.repeat(1000), false],
    ['the same 63-character prefix, last character differs', `${secret.slice(0, 63)}${flip(secret[63]!)}`, false],
    ['first character differs', `${flip(secret[0]!)}${secret.slice(1)}`, false],
    ['equal to the master token', `${secret}`, true],
    ['the master token in uppercase', secret.toUpperCase(), false],
    ['64 multi-byte characters', 'é'.repeat(64), false],
    ['not a string (undefined)', undefined, false],
    ['not a string (a Buffer of the master token)', Buffer.from(secret), false],
  ];

  it('one SHA-256 of the whole candidate and one timingSafeEqual on two 32-byte buffers; only the result differs', () => {
    const { master, trace, hashInputs } = observedMaster();
    const path = ['sha256 -> 32 B', 'timingSafeEqual(32 B candidate, 32 B secret)'];
    const observed = candidates.map(([label, candidate]) => {
      trace.length = 0;
      hashInputs.length = 0;
      const result = master.matches(candidate);
      return {
        label,
        result,
        path: [...trace],
        hashedWholeCandidate: hashInputs.length === 1 && hashInputs[0] === (typeof candidate === 'string' ? candidate : ''),
      };
    });
    // The whole candidate is hashed (no truncation, no length or prefix test first), the same two
    // operations run in the same order on the same sizes, and only `result` tells the candidates apart.
    expect(observed).toEqual(candidates.map(([label, , matches]) => ({ label, result: matches, path, hashedWholeCandidate: true })));
  });

  it('the hot path (matchesHash on the store key the proxy computed anyway): one timingSafeEqual on 32-byte buffers for every candidate', () => {
    const { master, trace, hashInputs } = observedMaster();
    const observed = candidates
      .filter((c): c is [string, string, boolean] => typeof c[1] === 'string')
      .map(([label, candidate]) => {
        trace.length = 0;
        const result = master.matchesHash(hashToken(candidate));
        return { label, result, path: [...trace] };
      });
    expect(observed).toEqual(
      candidates
        .filter(([, c]) => typeof c === 'string')
        .map(([label, , matches]) => ({ label, result: matches, path: ['timingSafeEqual(32 B candidate, 32 B secret)'] })),
    );
    // No second digest: the proxy hashes each request once.
    expect(hashInputs).toEqual([]);
    // Anything but a hashToken output is a programming error, refused loudly rather than compared.
    expect(() => master.matchesHash(secret.slice(1))).toThrow(/hashToken/);
  });

  it('the production primitives (node:crypto) give the same answers', () => {
    const master = new MasterToken(secret);
    for (const [label, candidate, expected] of candidates) expect(master.matches(candidate), label).toBe(expected);
  });
});

// ---- 3. no raw credential in Redis, error bodies, metrics or logs --------------------------------------

interface Seen {
  what: string;
  status: number;
  /** Response headers and body. */
  text: string;
}

interface Secret {
  label: string;
  value: string;
}

/** What must never show up: the whole secret; for 64-hex secrets also its first 16 hex; for JWTs the signature. */
function needles(secret: string): string[] {
  const out = [secret];
  if (HEX64.test(secret)) out.push(secret.slice(0, 16));
  if (JWT.test(secret)) out.push(secret.slice(secret.lastIndexOf('.') + 1));
  return out;
}

function holds(text: string, secret: string): boolean {
  return needles(secret).some((n) => text.includes(n));
}

/** Every key under `prefix` with everything it holds, one string per key, whatever its type. */
async function dumpRedis(
  client: Redis,
  prefix: string,
): Promise<{ entries: Array<{ key: string; type: string; text: string }>; types: Set<string> }> {
  const entries: Array<{ key: string; type: string; text: string }> = [];
  const types = new Set<string>();
  for (const key of await keysUnder(client, prefix)) {
    const type = await client.type(key);
    let values: unknown;
    if (type === 'string') values = await client.get(key);
    else if (type === 'hash') values = await client.hgetall(key);
    else if (type === 'set') values = await client.smembers(key);
    else if (type === 'zset') values = await client.zrange(key, 0, -1, 'WITHSCORES');
    else if (type === 'list') values = await client.lrange(key, 0, -1);
    else if (type === 'stream') values = await client.xrange(key, '-', '+');
    else if (type === 'none')
      continue; // expired between SCAN and TYPE
    else throw new Error(`unexpected Redis type ${type} at ${key}: teach dumpRedis to read it`);
    types.add(type);
    entries.push({ key, type, text: `${key}\n${JSON.stringify(values)}` });
  }
  return { entries, types };
}

describe('no raw credential in Redis, error bodies, metrics or logs', () => {
  let t: TrafficStack;
  let gracePair: TrafficResult['gracePair'] = { tokens: [], deliveries: 1 };
  let raw: Redis;
  let monitor: Redis;
  const commands: string[] = [];
  const responses: Seen[] = [];
  const secrets: Secret[] = [];
  let metricsText = '';
  let redis: Awaited<ReturnType<typeof dumpRedis>>;
  let allKeyNames: string[] = [];
  /** Hashes of tokens known to be stored (the checks looked at real data). */
  const storedHashes: string[] = [];

  const secret = (label: string, value: string): string => {
    secrets.push({ label, value });
    return value;
  };

  beforeAll(async () => {
    t = await startTrafficStack();
    const { stack } = t;
    raw = await rawRedis();
    monitor = await raw.monitor();
    monitor.on('monitor', (_time: string, args: unknown[]) => commands.push(args.map(String).join(' ')));

    // Every response from the sidecar's two listeners is recorded (headers and body) on its way back.
    const realFetch = globalThis.fetch;
    const origins = [new URL(stack.proxyUrl).origin, new URL(stack.adminUrl).origin];
    vi.stubGlobal('fetch', async (input: string | URL | Request, init?: RequestInit) => {
      const res = await realFetch(input, init);
      const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
      if (!origins.includes(url.origin)) return res;
      const body = await res.text();
      const headers = [...res.headers].map(([k, v]) => `${k}: ${v}`).join('\n');
      responses.push({
        what: `${init?.method ?? 'GET'} ${url.pathname} -> ${res.status}`,
        status: res.status,
        text: `${headers}\n\n${body}`,
      });
      return new Response([204, 205, 304].includes(res.status) ? null : body, {
        status: res.status,
        statusText: res.statusText,
        headers: res.headers,
      });
    });

    try {
      // Everything logging.test.ts runs: every grant, refresh reuse, /revoke, /introspect, /register, refusals.
      const traffic = await runTraffic(t);
      traffic.secrets.forEach((s, i) => secret(s === stack.masterToken ? 'the master token' : `runTraffic secret #${i}`, s));
      storedHashes.push(...traffic.hashes);
      gracePair = traffic.gracePair;
      await misuse(t, secret, storedHashes);
      const scrape = await fetch(`${stack.adminUrl}/metrics`);
      expect(scrape.status).toBe(200);
      metricsText = await scrape.text();
    } finally {
      vi.unstubAllGlobals();
    }

    // MONITOR output is in order: once our marker arrives, every command the sidecar sent has too.
    const marker = `properties-marker-${randomBytes(8).toString('hex')}`;
    const seen = new Promise<void>((resolve) =>
      monitor.on('monitor', (_time: string, args: unknown[]) => String(args[1]) === marker && resolve()),
    );
    await raw.echo(marker);
    await seen;
    monitor.disconnect();

    redis = await dumpRedis(raw, stack.prefix);
    allKeyNames = await keysUnder(raw, '');
  });

  afterAll(async () => {
    vi.unstubAllGlobals();
    monitor?.disconnect();
    await raw?.quit();
    await t?.close();
  });

  function leaks(places: Array<{ where: string; text: string }>): string[] {
    const found: string[] = [];
    for (const s of secrets)
      for (const p of places) if (holds(p.text, s.value)) found.push(`${s.label} (${s.value.slice(0, 4)}…) in ${p.where}`);
    return found;
  }

  it('the traffic used many secrets of every kind', () => {
    expect(secrets.length).toBeGreaterThan(20);
    expect(secrets.some((s) => s.value === t.stack.masterToken)).toBe(true);
    expect(secrets.filter((s) => HEX64.test(s.value)).length).toBeGreaterThan(18);
    expect(secrets.filter((s) => JWT.test(s.value)).length).toBeGreaterThanOrEqual(3);
  });

  it('Redis: no key name and no value under the prefix holds a raw secret or its first 16 hex', () => {
    // The dump saw the real data: records of every kind, keyed by the hashes of the issued tokens.
    expect(redis.entries.length).toBeGreaterThan(20);
    for (const type of ['hash', 'set', 'stream']) expect(redis.types).toContain(type);
    const keyText = redis.entries.map((e) => e.key).join('\n');
    expect(storedHashes.filter((h) => keyText.includes(h)).length).toBeGreaterThan(10);
    expect(leaks(redis.entries.map((e) => ({ where: `Redis ${e.type} ${e.key}`, text: e.text })))).toEqual([]);
  });

  it('Redis: no key anywhere in the database is named after a secret', () => {
    expect(allKeyNames.length).toBeGreaterThanOrEqual(redis.entries.length);
    expect(leaks([{ where: 'the key names of the whole database', text: allKeyNames.join('\n') }])).toEqual([]);
  });

  it('Redis: no command the sidecar sent (MONITOR) carried a raw secret, not even a lookup', () => {
    expect(commands.length).toBeGreaterThan(100);
    // Lookups went by hash: the commands name the stored hashes.
    const all = commands.join('\n');
    expect(storedHashes.filter((h) => all.includes(h)).length).toBeGreaterThan(10);
    expect(leaks(commands.map((c, i) => ({ where: `Redis command #${i} (${c.split(' ')[0]})`, text: c })))).toEqual([]);
  });

  it('error responses: no body or header holds a raw secret', () => {
    const errors = responses.filter((r) => r.status >= 400);
    expect(errors.length).toBeGreaterThan(25);
    for (const status of [400, 401, 404, 405, 413])
      expect(
        errors.some((r) => r.status === status),
        `a ${status} response`,
      ).toBe(true);
    expect(leaks(errors.map((r) => ({ where: r.what, text: r.text })))).toEqual([]);
  });

  it('success responses: an issued secret appears once, in the response that issued it; nothing else is echoed', () => {
    const issuing = /^POST \/(token|register|oauth\/createClient|oauth\/createAccessToken) -> 20[01]$/;
    const found: string[] = [];
    for (const s of secrets) {
      const hits = responses.filter((r) => r.status < 400 && holds(r.text, s.value));
      const issuedBy = hits.filter((r) => issuing.test(r.what) && r.text.includes(s.value));
      const elsewhere = hits.filter((r) => !issuedBy.includes(r));
      // Parallel sessions: the rotated token presented again within the grace window gets the pair
      // its rotation issued again (the traffic does so twice), and nothing else is delivered twice.
      const deliveries = gracePair.tokens.includes(s.value) ? gracePair.deliveries : 1;
      if (issuedBy.length > deliveries)
        found.push(`${s.label} delivered ${issuedBy.length} times: ${issuedBy.map((r) => r.what).join(', ')}`);
      for (const r of elsewhere) found.push(`${s.label} (${s.value.slice(0, 4)}…) in ${r.what}`);
      if (s.value === t.stack.masterToken && hits.length > 0) found.push('the master token in a response');
    }
    expect(found).toEqual([]);
    // The rule had something to hold: tokens and client secrets were delivered.
    expect(responses.filter((r) => issuing.test(r.what)).length).toBeGreaterThan(10);
  });

  it('metrics: the /metrics scrape holds no raw secret nor its first 16 hex', () => {
    expect(metricsText).toContain('mcp_auth_tokens_issued_total');
    expect(metricsText).toContain('mcp_auth_requests_total');
    expect(leaks([{ where: 'GET /metrics', text: metricsText }])).toEqual([]);
  });

  it('logs: no line holds a raw secret nor its first 16 hex, misuse traffic included', () => {
    const logs = t.stack.logs;
    expect(logs.length).toBeGreaterThan(60);
    expect(leaks(logs.map((line, i) => ({ where: `log line #${i}: ${(JSON.parse(line) as { msg: string }).msg}`, text: line })))).toEqual(
      [],
    );
  });
});

/**
 * Issues more credentials of every kind, then misuses them: secrets in bad JSON, in oversized bodies,
 * in the wrong field, in the query string, as the wrong kind of credential at each endpoint, after
 * their client was deleted. Every step must answer as expected, so the checks above see real refusals.
 */
async function misuse(t: TrafficStack, secret: (label: string, value: string) => string, storedHashes: string[]): Promise<void> {
  const { stack } = t;
  const base = stack.proxyUrl;
  const master = stack.masterToken;
  const step = async (name: string, expected: number, request: Promise<number> | Promise<{ status: number }>) => {
    const result = await request;
    const status = typeof result === 'number' ? result : result.status;
    if (status !== expected) throw new Error(`misuse step "${name}": expected ${expected}, got ${status}`);
  };
  const send = async (url: string, init: RequestInit) => {
    const res = await fetch(url, init);
    await res.arrayBuffer();
    return res.status;
  };
  const adminRaw = (op: string, body: string, headers: Record<string, string> = {}, method = 'POST') =>
    send(`${stack.adminUrl}/oauth/${op}`, {
      method,
      headers: { 'content-type': 'application/json', ...headers },
      ...(method === 'POST' ? { body } : {}),
    });
  const issued = (label: string, value: string) => {
    storedHashes.push(hashToken(value));
    return secret(label, value);
  };

  // Fresh credentials of every kind.
  const created = await stack.admin('createClient', { clientName: 'properties', grantTypes: ['client_credentials', 'refresh_token'] });
  await step('createClient', 201, Promise.resolve(created));
  const clientId = created.body.clientId as string;
  const clientSecret = secret('client secret (createClient)', created.body.clientSecret);
  const cc = await postForm(`${base}/token`, { grant_type: 'client_credentials' }, basic(clientId, clientSecret));
  await step('client_credentials', 200, Promise.resolve(cc));
  const access = issued('access token (client_credentials)', cc.body!.access_token);
  const refresh = issued('refresh token (client_credentials)', cc.body!.refresh_token);
  const rotated = await postForm(`${base}/token`, { grant_type: 'refresh_token', refresh_token: refresh }, basic(clientId, clientSecret));
  await step('refresh_token', 200, Promise.resolve(rotated));
  issued('access token (refresh)', rotated.body!.access_token);
  const refresh2 = issued('refresh token (refresh)', rotated.body!.refresh_token);
  const adminIssued = await stack.admin('createAccessToken', { clientId, lifetimeSeconds: 3600 });
  await step('createAccessToken', 201, Promise.resolve(adminIssued));
  const adminToken = issued('access token (createAccessToken)', adminIssued.body.accessToken);
  const jwt = secret('IdP JWT (carol)', await t.idToken('carol'));
  const exchanged = await postForm(`${base}/token`, { grant_type: EXCHANGE, subject_token: jwt, subject_token_type: JWT_TYPE });
  await step('token exchange', 200, Promise.resolve(exchanged));
  const user = issued('user-grade token (exchange)', exchanged.body!.access_token);
  const unknown = secret('unknown token', generateToken());
  await step('mcp user', 200, initializeStatus(stack, user));
  await step('mcp admin-issued', 200, initializeStatus(stack, adminToken));

  // Admin listener: bad JSON, wrong master, unknown operation, bad arguments, wrong method, oversized body.
  await step('admin bad JSON with the master token', 400, adminRaw('listClients', `{"callerToken":"${master}",`));
  await step('admin bad JSON with a token', 400, adminRaw('revokeUserToken', `{"callerToken":"${master}","token":"${user}"`));
  await step(
    'admin a token as the master token',
    401,
    adminRaw('listClients', JSON.stringify({ callerToken: access }), { authorization: `Bearer ${adminToken}` }),
  );
  await step('admin the uppercase master token', 401, adminRaw('listClients', JSON.stringify({ callerToken: master.toUpperCase() })));
  await step('admin unknown operation', 404, adminRaw('noSuchOperation', JSON.stringify({ callerToken: master, token: user })));
  await step('admin unauthenticated unknown operation', 401, adminRaw('noSuchOperation', JSON.stringify({ callerToken: user })));
  await step(
    'createAccessToken bad lifetime',
    400,
    stack.admin('createAccessToken', { clientId, lifetimeSeconds: 'forever', token: access }),
  );
  await step(
    'createAccessToken unknown client',
    404,
    stack.admin('createAccessToken', { clientId: `mcp_${randomBytes(16).toString('hex')}`, lifetimeSeconds: 60 }),
  );
  await step('revokeUserToken uppercase token', 400, stack.admin('revokeUserToken', { token: user.toUpperCase() }));
  await step('revokeUserToken an OAuth token', 404, stack.admin('revokeUserToken', { token: access }));
  await step('revokeUserToken an unknown token', 404, stack.admin('revokeUserToken', { token: unknown }));
  await step('revokeUserToken token and tokenHash', 400, stack.admin('revokeUserToken', { token: user, tokenHash: hashToken(user) }));
  await step('admin GET', 405, adminRaw('listClients', '', { authorization: `Bearer ${master}` }, 'GET'));
  await step(
    'admin body over 64 KiB',
    413,
    adminRaw('listClients', JSON.stringify({ callerToken: master, token: user, padding: 'x'.repeat(70_000) })),
  );

  // /token with the wrong kind of credential in each place.
  await step(
    'refresh grant with an access token',
    400,
    postForm(`${base}/token`, { grant_type: 'refresh_token', refresh_token: access }, basic(clientId, clientSecret)),
  );
  await step(
    'refresh grant with an unknown token',
    400,
    postForm(`${base}/token`, { grant_type: 'refresh_token', refresh_token: unknown }, basic(clientId, clientSecret)),
  );
  await step(
    'client_credentials with a token as the secret',
    401,
    postForm(`${base}/token`, { grant_type: 'client_credentials' }, basic(clientId, access)),
  );
  await step(
    'client_credentials with the master token as the secret',
    401,
    postForm(`${base}/token`, { grant_type: 'client_credentials', client_id: clientId, client_secret: master }),
  );
  await step(
    'exchange of an access token',
    400,
    postForm(`${base}/token`, { grant_type: EXCHANGE, subject_token: access, subject_token_type: JWT_TYPE }),
  );
  await step(
    'exchange with a JWT as the wrong type',
    400,
    postForm(`${base}/token`, { grant_type: EXCHANGE, subject_token: jwt, subject_token_type: 'urn:x' }),
  );
  await step(
    'unsupported grant with a token aside',
    400,
    postForm(`${base}/token`, { grant_type: 'password', refresh_token: refresh2, password: clientSecret }),
  );

  // /introspect and /revoke.
  await step(
    'introspect with a token as the caller',
    401,
    postForm(`${base}/introspect`, { token: refresh2 }, { authorization: `Bearer ${access}` }),
  );
  await step(
    'introspect of an uppercase token',
    200,
    postForm(`${base}/introspect`, { token: user.toUpperCase() }, { authorization: `Bearer ${master}` }),
  );
  await step('introspect of a refresh token', 200, postForm(`${base}/introspect`, { token: refresh2 }, basic(clientId, clientSecret)));
  await step('revoke an unknown token', 200, postForm(`${base}/revoke`, { token: unknown }));
  await step(
    'revoke an access token anonymously (same 200 as an unknown token, nothing revoked)',
    200,
    postForm(`${base}/revoke`, { token: adminToken }),
  );

  // /mcp, /health and unknown paths: tokens in the query string, in the wrong scheme, misshapen.
  const jsonHeaders = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  await step(
    'mcp token in the query string',
    401,
    send(`${base}/mcp?access_token=${access}`, { method: 'POST', headers: jsonHeaders, body: '{}' }),
  );
  await step(
    'mcp uppercase token',
    401,
    send(`${base}/mcp`, { method: 'POST', headers: { ...jsonHeaders, authorization: `Bearer ${access.toUpperCase()}` }, body: '{}' }),
  );
  await step(
    'mcp token with a trailing character',
    401,
    send(`${base}/mcp`, { method: 'POST', headers: { ...jsonHeaders, authorization: `Bearer ${access}0` }, body: '{}' }),
  );
  await step(
    'mcp Basic client credentials',
    401,
    send(`${base}/mcp`, { method: 'POST', headers: { ...jsonHeaders, ...basic(clientId, clientSecret) }, body: '{}' }),
  );
  await step('mcp the refresh token', 401, initializeStatus(stack, refresh2));
  await step(
    'mcp a JWT',
    401,
    send(`${base}/mcp`, { method: 'POST', headers: { ...jsonHeaders, authorization: `Bearer ${jwt}` }, body: '{}' }),
  );
  await step('health unknown token', 401, send(`${base}/health`, { headers: { authorization: `Bearer ${unknown}` } }));
  await step(
    'unknown path with a token',
    404,
    send(`${base}/nothing-here?token=${user}`, { headers: { authorization: `Bearer ${user}` } }),
  );

  // Revocation, then every revoked credential used again.
  await step('revoke the user token by its holder', 200, postForm(`${base}/revoke`, { token: user }));
  await step('mcp revoked user token', 401, initializeStatus(stack, user));
  await step('deleteClient', 200, stack.admin('deleteClient', { clientId }));
  await step('mcp after deleteClient', 401, initializeStatus(stack, adminToken));
  await step(
    'client_credentials after deleteClient',
    401,
    postForm(`${base}/token`, { grant_type: 'client_credentials' }, basic(clientId, clientSecret)),
  );
  await step(
    'refresh after deleteClient',
    401,
    postForm(`${base}/token`, { grant_type: 'refresh_token', refresh_token: refresh2 }, basic(clientId, clientSecret)),
  );
}
