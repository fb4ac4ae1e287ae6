// Flushing the audit trail: the capped stream keeps what was done with a credential, so a flood of
// what anyone can cause (revocations that revoke nothing, open registrations, refusals) cannot push
// an earlier admin event out of it; and /revoke, /introspect and /register are rate limited per
// address, counted in Redis so that every replica counts together.

import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { createSidecar } from '../../src/app.ts';
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
    const revoke = () => formFrom('127.0.0.2', `${stack.proxyUrl}/revoke`, { token: randomBytes(32).toString('hex') }, basicAuth(flooder.client_id, flooder.client_secret));
    const batch = async (n: number, send: () => Promise<{ status: number }>) => {
      for (let i = 0; i < n; i++) expect((await send()).status).toBeLessThan(300);
    };
    // One after the other: the point is the count, not load (a loaded Redis would answer 503 and prove nothing).
    await batch(400, revoke);
    await batch(150, () => register(stack, '127.0.0.3'));

    const events = (await stack.admin('listAuditEvents', { count: 1000 })).body.events as Array<{ action: string; clientId?: string; who: string }>;
    expect(events.find((e) => e.action === 'createClient' && e.clientId === created.body.clientId)).toMatchObject({ who: 'master' });
    expect(events.filter((e) => e.action === 'revoke' || e.action === 'register')).toEqual([]);
    // Still the complete trail in the log.
    const logged = stack.logs.filter((l) => l.includes('"msg":"audit"'));
    expect(logged.filter((l) => l.includes('"result":"nothing_revoked"')).length).toBe(400);
    expect(logged.filter((l) => l.includes('"action":"register"')).length).toBe(151);
  });

  it('/revoke and /introspect are limited per address: 429 with Retry-After, other addresses unaffected', async () => {
    const stack = await stackWith({ rateLimits: { revocationRequestsPerMinute: 3, introspectionRequestsPerMinute: 2 } });
    const client = (await stack.admin('createClient', { clientName: 'rs' })).body;
    const revoke = (from: string) => formFrom(from, `${stack.proxyUrl}/revoke`, { token: randomBytes(32).toString('hex') });
    const introspect = (from: string) => formFrom(from, `${stack.proxyUrl}/introspect`, { token: randomBytes(32).toString('hex') }, basicAuth(client.clientId, client.clientSecret));
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
    const replica = await createSidecar({ config: stack.sidecar.config, store: await openRedisStore(stack.prefix), clock: stack.clock, logger: stack.sidecar.logger, defaultMetrics: false });
    const { proxyUrl } = await replica.listen();
    cleanups.push(() => replica.shutdown(1000));
    expect((await register(stack, '127.0.0.2')).status).toBe(201);
    expect((await register(stack, '127.0.0.2')).status).toBe(201);
    const third = await sendFrom('127.0.0.2', `${proxyUrl}/register`, { headers: { 'content-type': 'application/json' }, body: '{"client_name":"x"}' });
    expect(third.status).toBe(429);
    expect(Number(third.headers['retry-after'])).toBeGreaterThan(0);
    expect((await register(stack, '127.0.0.3')).status).toBe(201);
  });
});
