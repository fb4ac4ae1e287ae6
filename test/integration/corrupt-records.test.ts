// Client and profile records edited by hand into something unreadable, in a real Redis: the request
// that uses one is refused (the answer an unknown client or a broken profile gets) and the refusal is
// logged without a secret. Nothing unreadable is read as a default: a corrupt `source` used to read as
// `admin` (a dynamically registered client then stopped expiring), a corrupt auth method as
// client_secret_basic, a missing profile name as the built-in profile.

import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyLayout } from '../../src/store/records.ts';
import { basic } from '../support/http.ts';
import { rawRedis } from '../support/redis.ts';
import { startStack, type Stack } from '../support/stack.ts';

describe('corrupt client and profile records are refused, never defaulted', () => {
  let redis: Redis;
  let stack: Stack;
  beforeAll(async () => {
    redis = await rawRedis();
    stack = await startStack();
    expect((await stack.admin('seedDefaultProfiles')).status).toBe(200);
  });
  afterAll(async () => {
    await stack?.close();
    redis?.disconnect();
  });

  async function machineClient(): Promise<{ clientId: string; clientSecret: string }> {
    const created = await stack.admin('createClient', { clientName: 'machine', grantTypes: ['client_credentials'] });
    expect(created.status).toBe(201);
    return created.body as { clientId: string; clientSecret: string };
  }

  async function token(c: { clientId: string; clientSecret: string }): Promise<{ status: number; body: Record<string, unknown> }> {
    const res = await fetch(`${stack.proxyUrl}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...basic(c.clientId, c.clientSecret) },
      body: 'grant_type=client_credentials',
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  /** A field set to `value`, or deleted (null), as an operator would with HSET / HDEL. */
  async function edit(key: string, field: string, value: string | null): Promise<void> {
    if (value === null) await redis.hdel(key, field);
    else await redis.hset(key, field, value);
  }

  it.each([
    ['source', 'operator'],
    ['source', null],
    ['tokenEndpointAuthMethod', 'basic'],
    ['tokenEndpointAuthMethod', null],
    ['grantTypes', '["client_credentials",1]'],
    ['redirectUris', '["https://app.example/cb",{}]'],
    ['redirectUris', null],
    ['profile', null],
    ['createdAt', 'yesterday'],
  ])('a client whose %s is %j is refused at the token endpoint as an unknown client, and logged', async (field, value) => {
    const c = await machineClient();
    expect((await token(c)).status).toBe(200);
    await edit(keyLayout(stack.prefix).client(c.clientId), field, value);
    const refused = await token(c);
    expect(refused).toEqual({ status: 401, body: expect.objectContaining({ error: 'invalid_client' }) });
    const logged = stack.logs.filter((l) => l.includes('the client record is unreadable') && l.includes(c.clientId));
    expect(logged).toHaveLength(1);
    expect(logged[0]).not.toContain(c.clientSecret);
  });

  it.each([
    ['name', null],
    ['description', null],
    ['accessTokenLifetimeSeconds', 'an hour'],
    ['refreshTokenLifetimeSeconds', '1.5'],
    ['grantTypes', '["client_credentials",1]'],
    ['createdAt', null],
  ])('a stored profile whose %s is %j gives its clients nothing (never the built-in profile in its place)', async (field, value) => {
    const c = await machineClient();
    const key = keyLayout(stack.prefix).profile('default');
    const before = await redis.hgetall(key);
    try {
      expect((await token(c)).status).toBe(200);
      await edit(key, field, value);
      const refused = await token(c);
      expect(refused).toEqual({ status: 400, body: expect.objectContaining({ error: 'unauthorized_client' }) });
      expect(stack.logs.some((l) => l.includes('a stored profile is unreadable'))).toBe(true);
      // Nor is a client created with it.
      const created = await stack.admin('createClient', { clientName: 'another' });
      expect(created.status).toBe(400);
      expect(created.body.error_description).toMatch(/profile "default" is unreadable/);
    } finally {
      await redis.del(key);
      await redis.hset(key, before);
    }
  });
});
