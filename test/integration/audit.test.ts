// The audit trail over real traffic and a real Redis: one event per admin operation, issuance,
// revocation and registration, in the log and in the capped stream read by `listAuditEvents`; refusals
// of unauthenticated callers in the log only; never a secret or a full token hash.

import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashToken } from '../../src/model/credentials.ts';
import type { StoredAuditEvent } from '../../src/store/types.ts';
import { startStack } from '../support/stack.ts';
import { keysUnder, rawRedis } from '../support/redis.ts';
import { basic, postForm } from '../support/http.ts';
import { runTraffic, startTrafficStack, type TrafficResult, type TrafficStack } from '../support/traffic.ts';

function auditLines(logs: string[]): Array<{ level: number; audit: StoredAuditEvent }> {
  return logs.map((l) => JSON.parse(l) as { level: number; msg: string; audit: StoredAuditEvent }).filter((e) => e.msg === 'audit');
}

describe('audit events of a full run', () => {
  let t: TrafficStack;
  let traffic: TrafficResult;
  let events: StoredAuditEvent[];

  beforeAll(async () => {
    t = await startTrafficStack();
    traffic = await runTraffic(t);
    const listed = await t.stack.admin('listAuditEvents', { count: 1000 });
    expect(listed.status).toBe(200);
    events = listed.body.events;
  });
  afterAll(async () => {
    await t?.close();
  });

  const find = (action: string, result = 'ok') => events.filter((e) => e.action === action && e.result === result);

  it('the stream holds every admin operation, issuance and revocation, newest first', () => {
    const id = traffic.clientId;
    expect(find('seedDefaultProfiles')[0]).toMatchObject({ who: 'master' });
    expect(find('createClient')[0]).toMatchObject({ who: 'master', clientId: id, detail: { status: 201 } });
    expect(find('token.client_credentials')).toHaveLength(2);
    expect(find('token.client_credentials')[0]).toMatchObject({ who: `client:${id}`, clientId: id, detail: { refreshToken: true } });
    expect(find('token.refresh_token')[0]).toMatchObject({ who: `client:${id}`, clientId: id });
    expect(find('token.refresh_token').filter((e) => e.detail?.graceReuse === true)).toHaveLength(2);
    expect(find('token.refresh_token', 'reuse_detected')[0]).toMatchObject({ who: `client:${id}`, detail: { familyRevoked: true } });
    expect(find('createAccessToken')[0]).toMatchObject({ who: 'master', clientId: id, detail: { status: 201, lifetimeSeconds: 600 } });
    expect(find('revoke.access_token')[0]).toMatchObject({ who: `client:${id}`, clientId: id });
    expect(
      find('token.token_exchange')
        .map((e) => e.subject)
        .sort(),
    ).toEqual(['alice', 'bob']);
    expect(find('token.token_exchange')[0]).toMatchObject({ who: 'user' });
    expect(find('revokeUserToken')[0]).toMatchObject({ who: 'master' });
    expect(find('revoke.user_token')[0]).toMatchObject({ who: 'user' });
    expect(find('listClients')[0]).toMatchObject({ who: 'master' });
    expect(find('deleteClient')[0]).toMatchObject({
      who: 'master',
      clientId: id,
      detail: { status: 200, accessTokensRevoked: expect.any(Number) },
    });
    // Newest first: the traffic ended with deleteClient, then a listAuditEvents of its own.
    expect(events.slice(0, 2).map((e) => e.action)).toEqual(['listAuditEvents', 'deleteClient']);
    for (let i = 1; i < events.length; i++) expect(events[i - 1]!.at).toBeGreaterThanOrEqual(events[i]!.at);
  });

  it('token hashes appear as 8-hex prefixes only, and name the right tokens', () => {
    for (const e of events) {
      if (e.tokenHashPrefix !== undefined) expect(e.tokenHashPrefix).toMatch(/^[0-9a-f]{8}$/);
    }
    const prefixes = new Set(events.map((e) => e.tokenHashPrefix));
    expect(traffic.hashes.filter((h) => prefixes.has(h.slice(0, 8))).length).toBeGreaterThanOrEqual(6);
    const text = JSON.stringify(events);
    for (const secret of traffic.secrets) expect(text.includes(secret)).toBe(false);
    for (const hash of traffic.hashes) expect(text.includes(hash)).toBe(false);
  });

  it('refusals of unauthenticated callers and open registrations are in the log, not in the stream', () => {
    const logged = auditLines(t.stack.logs).map((l) => l.audit);
    expect(logged.find((e) => e.action === 'register' && e.result === 'ok')).toMatchObject({ who: 'anonymous', detail: { public: false } });
    expect(find('register')).toEqual([]);
    const wrongSecret = logged.find((e) => e.action === 'token.client_credentials' && e.result === 'invalid_client');
    expect(wrongSecret).toMatchObject({ who: 'anonymous', clientId: traffic.clientId, detail: { status: 401 } });
    expect(logged.find((e) => e.action === 'listClients' && e.result === 'unauthorized')).toMatchObject({ who: 'anonymous' });
    expect(logged.find((e) => e.action === 'token.token_exchange' && e.result === 'invalid_grant')).toMatchObject({ who: 'anonymous' });
    expect(events.some((e) => e.who === 'anonymous')).toBe(false);
    // Every stream event was logged too (the log is the complete trail).
    const loggedKeys = new Set(logged.map((e) => `${e.at}/${e.action}/${e.result}`));
    for (const e of events) expect(loggedKeys.has(`${e.at}/${e.action}/${e.result}`)).toBe(true);
  });

  it('a client id a refused request presents is written down only when shaped like an issued one', async () => {
    // A token pasted as the Basic user name of a /token request: refused, audited, never recorded.
    const pasted = randomBytes(32).toString('hex');
    const res = await postForm(`${t.stack.proxyUrl}/token`, { grant_type: 'client_credentials' }, basic(pasted, 'x'));
    expect(res.status).toBe(401);
    const refused = auditLines(t.stack.logs)
      .map((l) => l.audit)
      .filter((e) => e.action === 'token.client_credentials' && e.result === 'invalid_client');
    expect(refused.length).toBeGreaterThanOrEqual(2); // this one and runTraffic's wrong secret
    const last = refused.at(-1)!;
    expect(last.clientId).toBeUndefined();
    expect(JSON.stringify(t.stack.logs)).not.toContain(pasted.slice(0, 16));
  });

  it('a refresh-token reuse is logged at warn', () => {
    const reuse = auditLines(t.stack.logs).find((l) => l.audit.result === 'reuse_detected');
    expect(reuse?.level).toBe(40);
  });

  it('the trail is two Redis streams: <prefix>audit:admin for the master token, <prefix>audit for the rest', async () => {
    const raw = await rawRedis();
    try {
      const key = `${t.stack.prefix}audit`;
      const admin = `${t.stack.prefix}audit:admin`;
      expect(await raw.type(key)).toBe('stream');
      expect(await raw.type(admin)).toBe('stream');
      expect((await raw.xlen(key)) + (await raw.xlen(admin))).toBeGreaterThanOrEqual(events.length);
      const whoIn = async (k: string) => new Set((await raw.xrange(k, '-', '+')).map(([, f]) => f[f.indexOf('who') + 1]));
      expect(await whoIn(admin)).toEqual(new Set(['master']));
      expect((await whoIn(key)).has('master')).toBe(false);
      expect((await keysUnder(raw, t.stack.prefix)).filter((k) => k.includes('audit')).sort()).toEqual([key, admin]);
    } finally {
      await raw.quit();
    }
  });
});

describe('listAuditEvents', () => {
  it('count bounds the answer (default 100, 1..1000) and is checked', async () => {
    const stack = await startStack();
    try {
      for (let i = 0; i < 3; i++) expect((await stack.admin('createClient', { clientName: `c${i}` })).status).toBe(201);
      const two = await stack.admin('listAuditEvents', { count: 2 });
      expect(two.status).toBe(200);
      expect(two.body.events).toHaveLength(2);
      expect(two.body.events.map((e: StoredAuditEvent) => e.action)).toEqual(['createClient', 'createClient']);
      const all = await stack.admin('listAuditEvents');
      expect(all.body.events.map((e: StoredAuditEvent) => e.action)).toEqual([
        'listAuditEvents',
        'createClient',
        'createClient',
        'createClient',
      ]);
      for (const count of [0, 1001, 1.5, '5', -1]) {
        const bad = await stack.admin('listAuditEvents', { count });
        expect(bad.status).toBe(400);
        expect(bad.body.error).toBe('invalid_request');
      }
      // A refused operation by the master is in the stream, with what it was about.
      const nobody = `mcp_${'0'.repeat(32)}`;
      const missing = await stack.admin('deleteClient', { clientId: nobody });
      expect(missing.status).toBe(404);
      const latest = (await stack.admin('listAuditEvents', { count: 1 })).body.events[0];
      expect(latest).toMatchObject({
        who: 'master',
        action: 'deleteClient',
        result: 'not_found',
        clientId: nobody,
        detail: { status: 404 },
      });
      // A clientId that is not shaped like one (an operator pasted a token there) is not written down.
      const pasted = randomBytes(32).toString('hex');
      expect((await stack.admin('deleteClient', { clientId: pasted })).status).toBe(404);
      const refused = (await stack.admin('listAuditEvents', { count: 1 })).body.events[0];
      expect(refused).toMatchObject({ who: 'master', action: 'deleteClient', result: 'not_found' });
      expect(refused.clientId).toBeUndefined();
      expect(JSON.stringify(refused)).not.toContain(pasted.slice(0, 16));
    } finally {
      await stack.close();
    }
  });

  it('is master only, like every admin operation', async () => {
    const stack = await startStack();
    try {
      const res = await fetch(`${stack.adminUrl}/oauth/listAuditEvents`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ callerToken: randomBytes(32).toString('hex') }),
      });
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ error: 'unauthorized' });
    } finally {
      await stack.close();
    }
  });

  it('with audit.stream: false, events go to the log only', async () => {
    const stack = await startStack({ config: { audit: { stream: false } } });
    try {
      const created = await stack.admin('createClient', {});
      expect(created.status).toBe(201);
      expect((await stack.admin('listAuditEvents')).body).toEqual({ events: [] });
      const raw = await rawRedis();
      expect(await raw.exists(`${stack.prefix}audit`)).toBe(0);
      await raw.quit();
      expect(auditLines(stack.logs).some((l) => l.audit.action === 'createClient' && l.audit.clientId === created.body.clientId)).toBe(
        true,
      );
    } finally {
      await stack.close();
    }
  });

  it('works on the in-memory store too (the demo)', async () => {
    const stack = await startStack({ store: 'memory' });
    try {
      const token = randomBytes(32).toString('hex');
      const now = stack.clock.now();
      await stack.store.putUserToken({ tokenHash: hashToken(token), subject: 's', issuer: 'i', createdAt: now, expiresAt: now + 60_000 });
      expect((await stack.admin('revokeUserToken', { token })).status).toBe(200);
      const events = (await stack.admin('listAuditEvents')).body.events;
      expect(events[0]).toMatchObject({
        who: 'master',
        action: 'revokeUserToken',
        result: 'ok',
        tokenHashPrefix: hashToken(token).slice(0, 8),
      });
    } finally {
      await stack.close();
    }
  });
});
