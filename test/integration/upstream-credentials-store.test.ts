// Kept upstream credentials at rest on a real Redis (src/upstream-credentials/vault.ts): what an
// operator's dump or MONITOR sees holds no token; a record that cannot be decrypted is absent and
// logged without its token; rotation keeps old records readable and re-encryption moves them over.

import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { ManualClock } from '../../src/model/clock.ts';
import { createLogger } from '../../src/observability/logger.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import { CredentialCipher } from '../../src/upstream-credentials/cipher.ts';
import { CredentialVault } from '../../src/upstream-credentials/vault.ts';
import { adminOperations } from '../../src/admin/operations.ts';
import { Metrics } from '../../src/observability/metrics.ts';
import { deleteUnder, keysUnder, openRedisStore, rawRedis, uniquePrefix } from '../support/redis.ts';

const ALICE = { subject: 'alice', issuer: 'https://idp.example/', provider: 'idp' };
// Distinctive strings: any appearance of them in Redis or a log line is a leak.
const ACCESS = `ya29.ACCESS-${randomBytes(8).toString('hex')}`;
const REFRESH = `1//REFRESH-${randomBytes(8).toString('hex')}`;

function captureLogs(): { lines: string[]; logger: ReturnType<typeof createLogger> } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk));
      done();
    },
  });
  return { lines, logger: createLogger('debug', stream, 'json') };
}

describe('upstream credentials at rest (Redis)', () => {
  let prefix: string;
  let store: RedisTokenStore;
  let raw: Redis;
  const clock = new ManualClock(Date.now());

  beforeEach(async () => {
    prefix = uniquePrefix('upstream-credentials');
    store = await openRedisStore(prefix);
    raw = await rawRedis();
  });
  afterEach(async () => {
    try {
      await deleteUnder(raw, prefix);
    } finally {
      await store.close();
      await raw.quit();
    }
  });

  /** Every byte Redis holds under the prefix: each key's DUMP (the RDB serialization) and its fields. */
  async function dumpAll(): Promise<string> {
    const parts: string[] = [];
    for (const key of await keysUnder(raw, prefix)) {
      parts.push(key, ((await raw.dumpBuffer(key)) ?? Buffer.alloc(0)).toString('latin1'));
      if ((await raw.type(key)) === 'hash') parts.push(JSON.stringify(await raw.hgetall(key)));
    }
    return parts.join('\n');
  }

  it('neither a dump of every key nor MONITOR during a save and a load shows a token in clear', async () => {
    const vault = new CredentialVault({ store, cipher: new CredentialCipher(randomBytes(32)), clock });
    const monitor = await raw.duplicate().monitor();
    const seen: string[] = [];
    monitor.on('monitor', (_time: string, args: string[]) => seen.push(args.join(' ')));
    await vault.save(ALICE, { accessToken: ACCESS, refreshToken: REFRESH, expiresAt: clock.now() + 3_600_000 });
    expect(await vault.load(ALICE)).toEqual({ accessToken: ACCESS, refreshToken: REFRESH, expiresAt: clock.now() + 3_600_000 });
    // A command sent after ours, seen by MONITOR: every earlier one has been seen by then.
    await raw.ping('monitor-fence');
    await new Promise<void>((resolve) => {
      const check = () => (seen.some((l) => l.includes('monitor-fence')) ? resolve() : setImmediate(check));
      check();
    });
    monitor.disconnect();
    expect(seen.some((l) => /hset/i.test(l) && l.includes(prefix))).toBe(true);
    expect(seen.join('\n')).not.toContain('ACCESS-');
    expect(seen.join('\n')).not.toContain('REFRESH-');
    const dump = await dumpAll();
    expect(dump).toContain('upstreamCredentials:');
    expect(dump).not.toContain('ACCESS-');
    expect(dump).not.toContain('REFRESH-');
  });

  it('a record under a key this process does not hold is absent, logged by identity and key id, never with the token', async () => {
    const oldKey = randomBytes(32);
    await new CredentialVault({ store, cipher: new CredentialCipher(oldKey), clock }).save(ALICE, {
      accessToken: ACCESS,
      refreshToken: REFRESH,
    });
    const { lines, logger } = captureLogs();
    const wrong = new CredentialVault({ store, cipher: new CredentialCipher(randomBytes(32)), clock, logger });
    expect(await wrong.load(ALICE)).toBeUndefined();
    const log = lines.join('');
    expect(log).toContain('cannot be decrypted: treated as absent');
    expect(log).toContain('"subject":"alice"');
    expect(log).not.toContain('ACCESS-');
    expect(log).not.toContain('REFRESH-');
    expect(log).not.toContain(oldKey.toString('hex'));
  });

  it('a ciphertext copied onto another user by hand does not open for that user', async () => {
    const cipher = new CredentialCipher(randomBytes(32));
    const vault = new CredentialVault({ store, cipher, clock });
    await vault.save(ALICE, { accessToken: ACCESS });
    const stored = (await store.getUpstreamCredential('alice', ALICE.issuer, 'idp')) as {
      sealed: string;
      keyId: string;
      createdAt: number;
    };
    // The attacker writes alice's ciphertext into mallory's record, identity fields and all consistent.
    await store.putUpstreamCredential({ ...stored, subject: 'mallory', issuer: ALICE.issuer, provider: 'idp' });
    expect(await vault.load({ ...ALICE, subject: 'mallory' })).toBeUndefined();
    expect(await vault.load(ALICE)).toMatchObject({ accessToken: ACCESS });
  });

  it('rotation: records under the previous key still load; re-encryption (the admin operation) moves them to the new key', async () => {
    const oldKey = randomBytes(32);
    const newKey = randomBytes(32);
    await new CredentialVault({ store, cipher: new CredentialCipher(oldKey), clock }).save(ALICE, {
      accessToken: ACCESS,
      refreshToken: REFRESH,
    });
    await new CredentialVault({ store, cipher: new CredentialCipher(oldKey), clock }).save(
      { ...ALICE, subject: 'bob' },
      { accessToken: 'bob-token' },
    );
    const rotated = new CredentialVault({ store, cipher: new CredentialCipher(newKey, [oldKey]), clock });
    expect(await rotated.load(ALICE)).toMatchObject({ accessToken: ACCESS, refreshToken: REFRESH });
    // A record already under the new key, and one under a key nobody holds any more.
    await rotated.save({ ...ALICE, subject: 'carol' }, { accessToken: 'carol-token' });
    await new CredentialVault({ store, cipher: new CredentialCipher(randomBytes(32)), clock }).save(
      { ...ALICE, subject: 'dave' },
      { accessToken: 'dave-token' },
    );
    const ctx = { store, clock, metrics: new Metrics({ defaultMetrics: false }), upstreamCredentials: rotated };
    const answer = await adminOperations.reencryptUpstreamCredentials!(ctx, {});
    expect(answer).toMatchObject({ status: 200, body: { rewritten: 2, alreadyCurrent: 1, unreadable: 1, changedMeanwhile: 0 } });
    expect(JSON.stringify(answer)).not.toMatch(/ACCESS-|REFRESH-|bob-token/);
    const newOnly = new CredentialVault({ store, cipher: new CredentialCipher(newKey), clock });
    expect(await newOnly.load(ALICE)).toMatchObject({ accessToken: ACCESS, refreshToken: REFRESH });
    expect(await newOnly.load({ ...ALICE, subject: 'bob' })).toMatchObject({ accessToken: 'bob-token' });
    expect(await adminOperations.reencryptUpstreamCredentials!(ctx, {})).toMatchObject({
      body: { rewritten: 0, alreadyCurrent: 3, unreadable: 1 },
    });
  });

  it('re-encryption with upstream credentials off is a clear 400', async () => {
    const ctx = { store, clock, metrics: new Metrics({ defaultMetrics: false }) };
    await expect(adminOperations.reencryptUpstreamCredentials!(ctx, {})).rejects.toMatchObject({
      code: 'invalid_request',
      message: expect.stringContaining('upstream credentials are off'),
    });
  });
});
