// Quotas (policy.quotas) on real Redis, through two sidecars sharing it as two replicas do: exactly
// `limit` requests pass in a window whatever the interleaving, the refusal names the reset time (a
// tool error for tools/call, a 429 with Retry-After otherwise), windows roll with the injected clock,
// forward-auth counts from the mirror headers, a Redis that cannot answer fails closed (503), and a
// request answered with the link to connect an upstream account (the user has no usable credential)
// takes nothing from a quota.
// The request bodies are the JSON-RPC a Streamable HTTP client POSTs (MCP 2025-06-18, tools/call and
// prompts/get); the upstream is the echo upstream, which counts what it was sent.

import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/model/clock.ts';
import { generateToken, hashToken } from '../../src/model/credentials.ts';
import { CredentialCipher } from '../../src/upstream-credentials/cipher.ts';
import { CredentialVault } from '../../src/upstream-credentials/vault.ts';
import { startEchoUpstream, type FakeUpstream } from '../support/fake-upstreams.ts';
import { startRedisServer, type RedisServer } from '../support/redis-server.ts';
import { startSignInStack, type SignInStack } from '../support/sign-in.ts';
import { startStack, type Stack } from '../support/stack.ts';

const WINDOW_SECONDS = 60;
const WINDOW_MS = WINDOW_SECONDS * 1000;
const LIMIT = 4;
const QUOTAS = [
  { name: 'search', match: { tools: ['search'] }, per: 'subject', limit: LIMIT, windowSeconds: WINDOW_SECONDS },
  { name: 'prompts', match: { methods: ['prompts/get'] }, per: 'client', limit: 1, windowSeconds: WINDOW_SECONDS },
];
const AUTHORIZATION = 'io.modelcontextprotocol/authorization';
/** The first MCP revision whose clients mirror the method and name into headers (forward-auth decides on them). */
const MIRROR_REVISION = '2026-07-28';

/** A window start well ahead of the real time (Redis expiry runs on its own clock). */
function windowStart(n: number): number {
  return (Math.floor(Date.now() / WINDOW_MS) + 10 + n) * WINDOW_MS;
}

async function post(stack: Stack, token: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(stack.mcpUrl, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...headers,
    },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

const search = (id: number | string) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'search', arguments: { q: 'x' } } });

describe('quotas: two sidecars on one Redis', () => {
  let echo: FakeUpstream;
  let a: Stack;
  let b: Stack;
  let token: string;
  let clientId: string;
  const clock = new ManualClock(windowStart(0));

  beforeAll(async () => {
    echo = await startEchoUpstream();
    const config = { policy: { quotas: QUOTAS }, proxy: { forwardAuth: true } };
    a = await startStack({ upstreamUrl: echo.url, config, clock });
    b = await startStack({ upstreamUrl: echo.url, config, clock, prefix: a.prefix });
    ({ token, clientId } = await a.issueOAuthToken(7 * 24 * 3600));
  });
  afterAll(async () => {
    await b?.sidecar.shutdown(1000);
    await a?.close();
    await echo?.close();
  });

  it('exactly `limit` tools/call pass in a window, whatever the interleaving over the two replicas; the rest get the tool error', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        // Each call: which replica, and which wave it is sent in (calls of a wave are concurrent).
        fc.array(fc.record({ replica: fc.integer({ min: 0, max: 1 }), wave: fc.integer({ min: 0, max: 2 }) }), {
          minLength: 1,
          maxLength: 3 * LIMIT,
        }),
        async (calls) => {
          // A fresh window per run: the count starts at 0.
          clock.set(windowStart(1 + run++) + 1234);
          const forwardedBefore = echo.seen.length;
          const answers: Array<{ status: number; text: string }> = [];
          for (let wave = 0; wave <= 2; wave++) {
            const inWave = calls.map((c, i) => ({ ...c, i })).filter((c) => c.wave === wave);
            answers.push(...(await Promise.all(inWave.map((c) => post(c.replica === 0 ? a : b, token, search(c.i))))));
          }
          expect(answers.every((r) => r.status === 200)).toBe(true);
          const refused = answers.filter((r) => r.text.includes('"isError":true'));
          expect(answers.length - refused.length).toBe(Math.min(LIMIT, calls.length));
          expect(echo.seen.length - forwardedBefore).toBe(Math.min(LIMIT, calls.length));
          for (const r of refused) {
            const meta = JSON.parse(r.text).result._meta[AUTHORIZATION];
            expect(meta).toMatchObject({
              reason: 'quota_exceeded',
              remediation: 'unavailable',
              resetAt: new Date(Math.ceil(clock.now() / WINDOW_MS) * WINDOW_MS).toISOString(),
            });
          }
        },
      ),
      { numRuns: 25 },
    );
  }, 120_000);

  it('the refusal names the reset time in its text and _meta; the window rolls at its end, not a ms before', async () => {
    const start = windowStart(200);
    clock.set(start + 15_000);
    for (let i = 0; i < LIMIT; i++) expect((await post(i % 2 ? a : b, token, search(i))).text).not.toContain('isError');
    const refused = await post(a, token, search('over'));
    expect(refused.status).toBe(200);
    expect(refused.headers.get('content-type')).toContain('application/json');
    const body = JSON.parse(refused.text);
    const reset = new Date(start + WINDOW_MS).toISOString();
    expect(body.id).toBe('over');
    expect(body.result.isError).toBe(true);
    expect(body.result.content[0].text).toContain(
      `The tool "search" has reached its usage limit for you (${LIMIT} per ${WINDOW_SECONDS} s). It resets at ${reset} (in 45 s).`,
    );
    expect(body.result._meta[AUTHORIZATION]).toEqual({
      reason: 'quota_exceeded',
      remediation: 'unavailable',
      resetAt: reset,
      retryAfterSeconds: 45,
      authorizationContextId: expect.stringMatching(/^[0-9a-f-]{36}$/),
    });
    // The reference is the id of the audit event that records this kind of refusal (repeats are aggregated).
    const event = a.logs
      .map((l) => JSON.parse(l))
      .find((l) => l.audit?.eventId === body.result._meta[AUTHORIZATION].authorizationContextId);
    expect(event?.audit).toMatchObject({
      action: 'quota.refuse',
      result: 'quota_exceeded',
      clientId,
      detail: { method: 'tools/call', name: 'search', rule: 'search' },
    });

    clock.set(start + WINDOW_MS - 1);
    expect((await post(b, token, search('edge'))).text).toContain('"isError":true');
    clock.set(start + WINDOW_MS);
    expect((await post(b, token, search('rolled'))).text).not.toContain('isError');
  });

  it('other requests over their quota get 429 with Retry-After; a batch is refused whole', async () => {
    const start = windowStart(300);
    clock.set(start + 50_500);
    const prompt = (id: number) => ({ jsonrpc: '2.0', id, method: 'prompts/get', params: { name: 'greet' } });
    expect((await post(a, token, prompt(1))).status).toBe(200);
    const over = await post(b, token, prompt(2));
    expect(over.status).toBe(429);
    expect(over.headers.get('retry-after')).toBe('10');
    expect(JSON.parse(over.text).error).toBe('too_many_requests');
    expect(over.text).toContain(`resets at ${new Date(start + WINDOW_MS).toISOString()}`);

    // A batch of LIMIT + 1 searches: all or nothing, so nothing is forwarded and nothing counted.
    const forwarded = echo.seen.length;
    const batch = await post(
      a,
      token,
      Array.from({ length: LIMIT + 1 }, (_, i) => search(i)),
    );
    expect(batch.status).toBe(429);
    expect(echo.seen.length).toBe(forwarded);
    expect((await post(a, token, search('after-batch'))).text).not.toContain('isError');

    // Counted by each replica for what it refused, labelled by the rule's name.
    expect(await (await fetch(`${a.adminUrl}/metrics`)).text()).toMatch(/mcp_auth_quota_refusals_total\{rule="search"\} [1-9]/);
    const metricsB = await (await fetch(`${b.adminUrl}/metrics`)).text();
    expect(metricsB).toMatch(/mcp_auth_quota_refusals_total\{rule="prompts"\} 1\n/);
    // Each refusal is one request outcome, refused for its quota: never a policy denial, never counted twice.
    const outcome = (text: string) =>
      Number(/mcp_auth_requests_total\{outcome="refused",reason="quota_exceeded"\} (\d+)/.exec(text)?.[1] ?? 0);
    const refusals = (text: string) =>
      [...text.matchAll(/mcp_auth_quota_refusals_total\{rule="[^"]+"\} (\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
    const metricsA = await (await fetch(`${a.adminUrl}/metrics`)).text();
    for (const text of [metricsA, metricsB]) {
      expect(outcome(text)).toBeGreaterThan(0);
      expect(outcome(text)).toBe(refusals(text));
      expect(text).not.toMatch(
        /mcp_auth_requests_total\{outcome="refused",reason="(insufficient_authorization|too_many_requests)"\} [1-9]/,
      );
    }
  });

  it('forward-auth counts from Mcp-Method / Mcp-Name: 200 within the quota, then 429 with Retry-After', async () => {
    const start = windowStart(400);
    clock.set(start);
    const ask = (s: Stack) =>
      fetch(`${s.proxyUrl}/authz`, {
        headers: {
          authorization: `Bearer ${token}`,
          'x-original-uri': '/mcp',
          'x-original-method': 'POST',
          'mcp-protocol-version': MIRROR_REVISION,
          'mcp-method': 'tools/call',
          'mcp-name': 'search',
        },
      });
    for (let i = 0; i < LIMIT; i++) expect((await ask(i % 2 ? a : b)).status).toBe(200);
    const over = await ask(a);
    expect(over.status).toBe(429);
    expect(over.headers.get('retry-after')).toBe(String(WINDOW_SECONDS));
    expect(over.headers.get('x-mcp-auth-subject')).toBeNull();
  });

  it('explainPolicy shows the quota that applies and what is left', async () => {
    const start = windowStart(500);
    clock.set(start + 30_000);
    await post(a, token, search(1));
    const explained = await a.admin('explainPolicy', { token, method: 'tools/call', name: 'search' });
    expect(explained.status).toBe(200);
    expect(explained.body.quota).toEqual({
      rule: 'search',
      per: 'subject',
      limit: LIMIT,
      windowSeconds: WINDOW_SECONDS,
      used: 1,
      remaining: LIMIT - 1,
      resetAt: new Date(start + WINDOW_MS).toISOString(),
    });
    const none = await a.admin('explainPolicy', { token, method: 'tools/call', name: 'other' });
    expect(none.body.quota).toBeUndefined();
  });
});

describe('quotas: a Redis that cannot answer', () => {
  let redis: RedisServer;
  let echo: FakeUpstream;
  let stack: Stack;

  beforeAll(async () => {
    redis = await startRedisServer();
    echo = await startEchoUpstream();
    stack = await startStack({ upstreamUrl: echo.url, redisUrl: redis.url, config: { policy: { quotas: QUOTAS } } });
  });
  afterAll(async () => {
    await stack?.close();
    await echo?.close();
    await redis?.stop();
  });

  it('fails closed: 503, nothing forwarded (the master token needs no lookup: the quota is the only store call)', async () => {
    expect((await post(stack, stack.masterToken, search(1))).status).toBe(200);
    expect(echo.seen.length).toBe(1);
    await redis.kill();
    const answer = await post(stack, stack.masterToken, search(2));
    expect(answer.status).toBe(503);
    expect(echo.seen.length).toBe(1);
    // A request no quota counts needs no store: it is forwarded.
    expect(
      (await post(stack, stack.masterToken, { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'uncounted' } })).status,
    ).toBe(200);
    expect(echo.seen.length).toBe(2);
  });
});

describe('quotas: a user without a usable upstream credential', () => {
  const KEY = randomBytes(32).toString('hex');
  const clock = new ManualClock(windowStart(1000));
  let echo: FakeUpstream;
  let s: SignInStack;
  let vault: CredentialVault;

  beforeAll(async () => {
    echo = await startEchoUpstream();
    s = await startSignInStack({
      upstreamUrl: echo.url,
      clock,
      config: {
        policy: { quotas: [{ name: 'search', match: { tools: ['search'] }, per: 'subject', limit: 2, windowSeconds: WINDOW_SECONDS }] },
        proxy: { forwardAuth: true },
        upstream: { credentials: { mode: 'idp', key: KEY } },
      },
    });
    vault = new CredentialVault({ store: s.stack.store, cipher: new CredentialCipher(Buffer.from(KEY, 'hex')), clock });
  });
  afterAll(async () => {
    await s?.close();
    await echo?.close();
  });

  it('the answers carrying the link to connect take nothing from the quota, on /mcp and /authz: once connected, all of it is there', async () => {
    const subject = `quota-user-${randomBytes(4).toString('hex')}`;
    const token = generateToken();
    await s.stack.store.putUserToken({
      tokenHash: hashToken(token),
      subject,
      issuer: s.idp.issuer,
      createdAt: clock.now(),
      expiresAt: clock.now() + 3_600_000,
    });
    const authz = () =>
      fetch(`${s.base}/authz`, {
        headers: {
          authorization: `Bearer ${token}`,
          'x-original-uri': '/mcp',
          'x-original-method': 'POST',
          'mcp-protocol-version': MIRROR_REVISION,
          'mcp-method': 'tools/call',
          'mcp-name': 'search',
        },
      });
    // No IdP token kept for this user: more calls than the quota allows, each answered with the link.
    for (let i = 0; i < 3; i++) {
      const answer = await post(s.stack, token, search(i));
      expect(answer.status).toBe(200);
      const body = JSON.parse(answer.text) as { result: { isError: boolean; content: Array<{ text: string }> } };
      expect(body.result.isError).toBe(true);
      expect(body.result.content[0]!.text).toContain(`${s.base}/connect/`);
      expect(body.result.content[0]!.text).not.toContain('usage limit');
      const checked = await authz();
      await checked.text();
      expect(checked.status).toBe(401);
      expect(checked.headers.get('x-mcp-auth-connect')).toBe('1');
    }
    expect(echo.seen.length).toBe(0);
    const explained = await s.stack.admin('explainPolicy', { token, method: 'tools/call', name: 'search' });
    expect(explained.body.quota).toMatchObject({ used: 0, remaining: 2 });
    // The user's IdP tokens are kept (as a sign-in does): the whole quota is there, then it is refused.
    await vault.save(
      { subject, issuer: s.idp.issuer, provider: 'idp' },
      { accessToken: `idp-access-${randomBytes(8).toString('hex')}`, expiresAt: clock.now() + 3_600_000 },
    );
    expect((await post(s.stack, token, search(10))).status).toBe(200);
    expect(echo.seen.length).toBe(1);
    const allowed = await authz();
    await allowed.text();
    expect(allowed.status).toBe(200);
    const over = JSON.parse((await post(s.stack, token, search(11))).text) as { result: { content: Array<{ text: string }> } };
    expect(over.result.content[0]!.text).toContain('usage limit');
    expect(echo.seen.length).toBe(1);
  });
});
