// Registrations that are never used go quickly: Claude Code registers a new client by DCR on every
// sign-in, so records would pile up for oauth.unusedClientTtlSeconds (30 days). A /register client
// lives oauth.neverUsedClientTtlSeconds until its first grant, which keeps it for the longer idle TTL.
// Read as the Redis key's own TTL (Redis expires it in real time, not on the test clock).

import { keyLayout } from '../../src/store/records.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { rawRedis } from '../support/redis.ts';
import { startStack, type Stack } from '../support/stack.ts';

describe('a registration never used', () => {
  let stack: Stack;
  let redis: Redis;
  beforeAll(async () => {
    stack = await startStack({ config: { oauth: { neverUsedClientTtlSeconds: 1800 } } });
    redis = await rawRedis();
  });
  afterAll(async () => {
    await redis?.quit();
    await stack?.close();
  });

  it('expires after oauth.neverUsedClientTtlSeconds, not the 30-day idle TTL', async () => {
    const res = await fetch(`${stack.proxyUrl}/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'claude-code-like', token_endpoint_auth_method: 'client_secret_basic' }),
    });
    expect(res.status).toBe(201);
    const { client_id: clientId } = (await res.json()) as { client_id: string };
    const ttl = await redis.pttl(keyLayout(stack.prefix).client(clientId));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(1800 * 1000);
  });
});
