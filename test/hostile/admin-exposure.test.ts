// The admin listener guarded by one secret: failed master-token attempts are throttled per address
// (counted in Redis, so replicas count together), the right token included once an address is
// refused; and a listener reachable on a public address is announced loudly at start-up.

import { afterEach, describe, expect, it } from 'vitest';
import { createSidecar } from '../../src/app.ts';
import { publicReach } from '../../src/model/net-address.ts';
import { openRedisStore } from '../support/redis.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { sendFrom } from './from-address.ts';

const LIMIT = 3;

describe('admin listener exposure', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    while (cleanups.length) await cleanups.pop()!();
  });

  const op = (from: string, adminUrl: string, token: string) =>
    sendFrom(from, `${adminUrl}/oauth/listClients`, {
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: '{}',
    });

  it('failed master-token attempts past the limit: 429 with Retry-After for that address; the right token is still served', async () => {
    const stack: Stack = await startStack({ config: { rateLimits: { adminFailedAuthPerMinute: LIMIT } } });
    cleanups.push(() => stack.close());
    const wrong = 'a'.repeat(64);
    const statuses = [];
    for (let i = 0; i < LIMIT + 2; i++) statuses.push((await op('127.0.0.2', stack.adminUrl, wrong)).status);
    expect(statuses).toEqual([...Array(LIMIT + 1).fill(401), 429]);
    const refused = await op('127.0.0.2', stack.adminUrl, wrong);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(refused.json().error).toBe('too_many_requests');
    // The real admin behind that address is not locked out by someone else's guesses.
    expect((await op('127.0.0.2', stack.adminUrl, stack.masterToken)).status).toBe(200);
    // A refused failure costs no audit line: each of the LIMIT + 1 answered ones has one, the 429s none.
    const audited = stack.logs.filter((l) => l.includes('"msg":"audit"') && l.includes('"who":"anonymous"'));
    expect(audited.filter((l) => l.includes('"result":"unauthorized"'))).toHaveLength(LIMIT + 1);
    expect(audited.filter((l) => l.includes('"result":"too_many_requests"'))).toEqual([]);
    // Another address, and the probes (no token), are unaffected.
    expect((await op('127.0.0.1', stack.adminUrl, stack.masterToken)).status).toBe(200);
    expect((await sendFrom('127.0.0.2', `${stack.adminUrl}/livez`, { method: 'GET' })).status).toBe(200);
    expect(stack.logs.some((l) => l.includes('too many failed authentications') && l.includes('"listener":"admin"'))).toBe(true);

    // A replica on the same Redis counts with it: one more failure there and the address is refused there too.
    const replica = await createSidecar({
      config: stack.sidecar.config,
      store: await openRedisStore(stack.prefix),
      clock: stack.clock,
      logger: stack.sidecar.logger,
      defaultMetrics: false,
    });
    const { adminUrl } = await replica.listen();
    cleanups.push(() => replica.shutdown(1000));
    expect((await op('127.0.0.3', adminUrl, wrong)).status).toBe(401);
    for (let i = 0; i < LIMIT; i++) await op('127.0.0.3', stack.adminUrl, wrong);
    expect((await op('127.0.0.3', adminUrl, wrong)).status).toBe(401);
    expect((await op('127.0.0.3', adminUrl, wrong)).status).toBe(429);
    expect((await op('127.0.0.3', adminUrl, stack.masterToken)).status).toBe(200);

    stack.clock.advance(60_000);
    expect((await op('127.0.0.2', stack.adminUrl, wrong)).status).toBe(401);
  });

  it('start-up warns loudly when the admin listener is reachable on a public address', () => {
    const iface = (address: string, family: 'IPv4' | 'IPv6', internal = false) =>
      ({ address, family, internal, netmask: '', mac: '', cidr: null, ...(family === 'IPv6' ? { scopeid: 0 } : {}) }) as never;
    const pod = {
      lo: [iface('127.0.0.1', 'IPv4', true), iface('::1', 'IPv6', true)],
      eth0: [iface('10.1.2.3', 'IPv4'), iface('fe80::1', 'IPv6')],
    };
    const vm = {
      lo: [iface('127.0.0.1', 'IPv4', true)],
      eth0: [iface('203.0.113.7', 'IPv4'), iface('2001:db8::7', 'IPv6'), iface('192.168.1.5', 'IPv4')],
    };
    expect(publicReach('127.0.0.1', vm)).toEqual([]);
    expect(publicReach('::1', vm)).toEqual([]);
    expect(publicReach('10.0.0.5', vm)).toEqual([]);
    expect(publicReach('fd00::5', vm)).toEqual([]);
    expect(publicReach('203.0.113.7', pod)).toEqual(['203.0.113.7']);
    // The wildcard: in a pod only the private network; on a machine with a public interface, that one.
    expect(publicReach('0.0.0.0', pod)).toEqual([]);
    expect(publicReach('::', pod)).toEqual([]);
    expect(publicReach('0.0.0.0', vm)).toEqual(['203.0.113.7']);
    expect(publicReach('::', vm)).toEqual(['203.0.113.7', '2001:db8::7']);
  });

  it('the warning names the public addresses', async () => {
    // Listening on 127.0.0.1 never warns; the wording of the warning is checked with the addresses of this machine.
    const quiet = await startStack({});
    cleanups.push(() => quiet.close());
    expect(quiet.logs.some((l) => l.includes('ADMIN LISTENER EXPOSED'))).toBe(false);
    const wide = await startStack({ config: { admin: { host: '0.0.0.0' } } });
    cleanups.push(() => wide.close());
    const { networkInterfaces } = await import('node:os');
    const reach = publicReach('0.0.0.0', networkInterfaces());
    const warning = wide.logs.find((l) => l.includes('ADMIN LISTENER EXPOSED'));
    if (reach.length === 0) expect(warning).toBeUndefined();
    else expect(JSON.parse(warning!)).toMatchObject({ level: 40, publicAddresses: reach });
  });
});
