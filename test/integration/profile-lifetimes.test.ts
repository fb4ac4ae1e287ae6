// Token lifetimes of the built-in profiles come from configuration (oauth.profiles); what an admin
// wrote into Redis for those profiles and the sidecar does not use is said in the log at start-up:
// a hash written with HSET for a profile that was never seeded (not a readable profile: refused) and
// stored lifetimes that differ from the configured ones. seedDefaultProfiles stores the configured
// lifetimes, so a seeded store raises no such warning.

import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyLayout } from '../../src/store/records.ts';
import { rawRedis, uniquePrefix } from '../support/redis.ts';
import { startStack, type Stack } from '../support/stack.ts';

const CONFIG = { oauth: { profiles: { interactive: { accessTokenLifetimeSeconds: 900, refreshTokenLifetimeSeconds: 86400 } } } };
const warnings = (stack: Stack) => stack.logs.filter((l) => l.includes('"level":40') && l.includes('profile \\"'));

describe('profile lifetimes: stored edits the sidecar does not use are logged at start-up', () => {
  let redis: Redis;
  const stacks: Stack[] = [];
  beforeAll(async () => {
    redis = await rawRedis();
  });
  afterAll(async () => {
    for (const s of stacks) await s.close();
    redis?.disconnect();
  });

  it('a hand-written hash for a never-seeded profile, and stored lifetimes other than the configured ones, are named; the configured ones apply', async () => {
    const prefix = uniquePrefix('profiles');
    const keys = keyLayout(prefix);
    // As an operator would: HSET on a profile that was never seeded.
    await redis.hset(keys.profile('interactive'), 'accessTokenLifetimeSeconds', '600');
    // A seeded `default` profile whose lifetimes were edited by hand.
    await redis.hset(keys.profile('default'), {
      name: 'default',
      description: 'edited',
      accessTokenLifetimeSeconds: '60',
      refreshTokenLifetimeSeconds: '2592000',
      grantTypes: '["client_credentials","refresh_token"]',
      createdAt: '1',
    });
    const stack = await startStack({ prefix, config: CONFIG });
    stacks.push(stack);
    const logged = warnings(stack);
    expect(logged).toHaveLength(2);
    expect(logged.find((l) => l.includes('profile \\"interactive\\"'))).toMatch(
      /not a readable profile.*its clients get no tokens.*oauth\.profiles\.interactive\.accessTokenLifetimeSeconds.*\(900 s \/ 86400 s\)/,
    );
    // Such a hash is no profile, and never read as the built-in one: no client is created with it.
    const refused = await stack.admin('createClient', {
      clientName: 'browser',
      profile: 'interactive',
      redirectUris: ['http://127.0.0.1:9/cb'],
    });
    expect(refused.status).toBe(400);
    expect(refused.body.error_description).toMatch(/profile "interactive" is unreadable/);
    expect(logged.find((l) => l.includes('profile \\"default\\"'))).toMatch(
      /stored with token lifetimes \\"60\\" s \/ \\"2592000\\" s, which are not used: oauth\.profiles\.default\..*\(3600 s \/ 2592000 s\)/,
    );

    // The configured lifetime is what a client of the profile gets.
    const created = await stack.admin('createClient', { clientName: 'machine' });
    const res = await fetch(`${stack.proxyUrl}/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${created.body.clientId}:${created.body.clientSecret}`).toString('base64')}`,
      },
      body: 'grant_type=client_credentials',
    });
    expect(((await res.json()) as { expires_in: number }).expires_in).toBe(3600);
  });

  it('seedDefaultProfiles stores the configured lifetimes, and a sidecar started on that store warns of nothing', async () => {
    const prefix = uniquePrefix('profiles');
    const first = await startStack({ prefix, config: CONFIG });
    stacks.push(first);
    expect(warnings(first)).toEqual([]);
    const seeded = await first.admin('seedDefaultProfiles');
    const interactive = (
      seeded.body.profiles as Array<{ name: string; accessTokenLifetimeSeconds: number; refreshTokenLifetimeSeconds: number }>
    ).find((p) => p.name === 'interactive');
    expect(interactive).toMatchObject({ accessTokenLifetimeSeconds: 900, refreshTokenLifetimeSeconds: 86400 });
    const second = await startStack({ prefix, config: CONFIG });
    stacks.push(second);
    expect(warnings(second)).toEqual([]);
  });
});
