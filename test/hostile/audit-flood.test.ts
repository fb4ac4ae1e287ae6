// Flushing the audit trail: the capped stream keeps what was done with a credential, so a flood of
// what anyone can cause (revocations that revoke nothing, open registrations, refusals) cannot push
// an earlier admin event out of it; what a credential can cause in bulk (policy denials) is
// aggregated, and admin events live in a stream of their own that no request writes; and /revoke,
// /introspect and /register are rate limited per address, counted in Redis so that every replica
// counts together.

import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { createSidecar } from '../../src/app.ts';
import { REPEAT_WINDOW_MS } from '../../src/observability/audit.ts';
import { openRedisStore } from '../support/redis.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { basicAuth, formFrom, sendFrom } from './from-address.ts';

describe('audit flooding and the OAuth endpoints’ rate limits', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    while (cleanups.length) await cleanups.pop()!();
  });
  async function stackWith(config: Record<string, unknown>): Promise<Stack> {
    const stack = await startStack({ config });
    cleanups.push(() => stack.close());
    return stack;
  }
  const register = (stack: Stack, from: string, body: Record<string, unknown> = { client_name: 'flood' }) =>
    sendFrom(from, `${stack.proxyUrl}/register`, { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

  it('a flood of unknown-token revocations and open registrations does not evict an earlier admin event', async () => {
    // The smallest stream there is, and no rate limits: only what goes into the stream protects it here.
    const stack = await stackWith({ audit: { maxLen: 100 }, oauth: { registrationRateLimitPerMinute: 100_000 } });
    const created = await stack.admin('createClient', { clientName: 'precious' });
    expect(created.status).toBe(201);
    const flooder = (await register(stack, '127.0.0.2')).json();
    const revoke = () =>
      formFrom(
        '127.0.0.2',
        `${stack.proxyUrl}/revoke`,
        { token: randomBytes(32).toString('hex') },
        basicAuth(flooder.client_id, flooder.client_secret),
      );
    const batch = async (n: number, send: () => Promise<{ status: number }>) => {
      for (let i = 0; i < n; i++) expect((await send()).status).toBeLessThan(300);
    };
    // One after the other: the point is the count, not load (a loaded Redis would answer 503 and prove nothing).
    await batch(400, revoke);
    await batch(150, () => register(stack, '127.0.0.3'));

    const events = (await stack.admin('listAuditEvents', { count: 1000 })).body.events as Array<{
      action: string;
      clientId?: string;
      who: string;
    }>;
    expect(events.find((e) => e.action === 'createClient' && e.clientId === created.body.clientId)).toMatchObject({ who: 'master' });
    expect(events.filter((e) => e.action === 'revoke' || e.action === 'register')).toEqual([]);
    // Still the complete trail in the log.
    const logged = stack.logs.filter((l) => l.includes('"msg":"audit"'));
    expect(logged.filter((l) => l.includes('"result":"nothing_revoked"')).length).toBe(400);
    expect(logged.filter((l) => l.includes('"action":"register"')).length).toBe(151);
  });

  it('a flood of policy denials is aggregated and cannot evict an earlier admin event', async () => {
    const stack = await stackWith({
      audit: { maxLen: 100 },
      policy: { default: 'deny', rules: [{ name: 'echo', effect: 'allow', requests: { methods: ['tools/call'], names: ['echo'] } }] },
    });
    const created = await stack.admin('createClient', { clientName: 'precious' });
    expect(created.status).toBe(201);
    const { token, clientId } = await stack.issueOAuthToken();
    const call = (name: string) =>
      sendFrom('127.0.0.2', stack.mcpUrl, {
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: {} } }),
      });
    // One after the other, as in the flood it reproduces (the count matters, not the load): one tool
    // denied 300 times, then 100 different tool names. No scope would allow them: each is answered as a
    // tool error at 200, nothing forwarded.
    for (let i = 0; i < 300; i++) expect((await call('delete_repo')).status).toBe(200);
    for (let i = 0; i < 100; i++) expect((await call(`tool_${i}`)).status).toBe(200);
    const denials = async () =>
      (
        (await stack.admin('listAuditEvents', { count: 1000 })).body.events as Array<{
          action: string;
          clientId?: string;
          who: string;
          detail?: Record<string, unknown>;
        }>
      ).filter((e) => e.action === 'policy.deny');
    // The first of each kind is recorded at once: 20 kinds a principal (delete_repo and the first 19
    // other names), the other 81 names folded into one kind named `*`.
    const first = await denials();
    expect(first.filter((e) => e.detail?.name === 'delete_repo')).toHaveLength(1);
    expect(first.length).toBe(20 + 1);
    expect(first.some((e) => e.detail?.name === '*')).toBe(true);
    // The window ends: the counts are recorded, one event a kind.
    stack.clock.advance(REPEAT_WINDOW_MS);
    await stack.sidecar.audit.flushRepeated(stack.clock.now());
    const after = await denials();
    expect(after.find((e) => e.detail?.name === 'delete_repo' && e.detail.repeated !== undefined)?.detail).toMatchObject({
      repeated: 299,
      rule: 'default',
    });
    expect(after.find((e) => e.detail?.name === '*' && e.detail.repeated !== undefined)?.detail).toMatchObject({ repeated: 81 - 1 });
    expect(after.every((e) => e.clientId === clientId)).toBe(true);
    // The admin event is still there.
    const events = (await stack.admin('listAuditEvents', { count: 1000 })).body.events as Array<{
      action: string;
      clientId?: string;
      who: string;
    }>;
    expect(events.find((e) => e.action === 'createClient' && e.clientId === created.body.clientId)).toMatchObject({ who: 'master' });
  });

  it('the admin trail survives a flood of request events that fills the capped stream', async () => {
    const stack = await stackWith({ audit: { maxLen: 100 } });
    const created = await stack.admin('createClient', { clientName: 'precious' });
    const client = (await stack.admin('createClient', { clientName: 'busy' })).body;
    // Successful issuances: each one an event of the requests trail, as it must be.
    for (let i = 0; i < 250; i++)
      expect(
        (
          await formFrom(
            `127.0.${1 + (i % 200)}.9`,
            `${stack.proxyUrl}/token`,
            { grant_type: 'client_credentials' },
            basicAuth(client.clientId, client.clientSecret),
          )
        ).status,
      ).toBe(200);
    const events = (await stack.admin('listAuditEvents', { count: 1000 })).body.events as Array<{
      action: string;
      clientId?: string;
      who: string;
    }>;
    expect(events.filter((e) => e.action === 'token.client_credentials').length).toBeLessThan(250);
    expect(events.find((e) => e.action === 'createClient' && e.clientId === created.body.clientId)).toMatchObject({ who: 'master' });
  });

  it('/revoke and /introspect are limited per address: 429 with Retry-After, other addresses unaffected', async () => {
    const stack = await stackWith({ rateLimits: { revocationRequestsPerMinute: 3, introspectionRequestsPerMinute: 2 } });
    const client = (await stack.admin('createClient', { clientName: 'rs' })).body;
    const revoke = (from: string) => formFrom(from, `${stack.proxyUrl}/revoke`, { token: randomBytes(32).toString('hex') });
    const introspect = (from: string) =>
      formFrom(
        from,
        `${stack.proxyUrl}/introspect`,
        { token: randomBytes(32).toString('hex') },
        basicAuth(client.clientId, client.clientSecret),
      );
    const revoked = [];
    for (let i = 0; i < 4; i++) revoked.push(await revoke('127.0.0.2'));
    expect(revoked.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    expect(Number(revoked[3]!.headers['retry-after'])).toBeGreaterThan(0);
    expect(revoked[3]!.json().error).toBe('too_many_requests');
    expect((await revoke('127.0.0.3')).status).toBe(200);
    const introspected = [];
    for (let i = 0; i < 3; i++) introspected.push((await introspect('127.0.0.4')).status);
    expect(introspected).toEqual([200, 200, 429]);
    stack.clock.advance(60_000);
    expect((await revoke('127.0.0.2')).status).toBe(200);
  });

  it('the registration limit is counted across replicas', async () => {
    const stack = await stackWith({ oauth: { registrationRateLimitPerMinute: 2 } });
    const replica = await createSidecar({
      config: stack.sidecar.config,
      store: await openRedisStore(stack.prefix),
      clock: stack.clock,
      logger: stack.sidecar.logger,
      defaultMetrics: false,
    });
    const { proxyUrl } = await replica.listen();
    cleanups.push(() => replica.shutdown(1000));
    expect((await register(stack, '127.0.0.2')).status).toBe(201);
    expect((await register(stack, '127.0.0.2')).status).toBe(201);
    const third = await sendFrom('127.0.0.2', `${proxyUrl}/register`, {
      headers: { 'content-type': 'application/json' },
      body: '{"client_name":"x"}',
    });
    expect(third.status).toBe(429);
    expect(Number(third.headers['retry-after'])).toBeGreaterThan(0);
    expect((await register(stack, '127.0.0.3')).status).toBe(201);
  });
});
