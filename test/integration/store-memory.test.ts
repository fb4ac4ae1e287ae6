// MemoryTokenStore held to the store contract (test/integration/store-contract.ts).

import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/model/clock.ts';
import { generateToken, hashToken } from '../../src/model/credentials.ts';
import { MemoryTokenStore } from '../../src/store/memory.ts';
import { keyLayout } from '../../src/store/records.ts';
import { runStoreContract } from './store-contract.ts';
import { readable } from '../support/records.ts';

runStoreContract('MemoryTokenStore', async (clock) => {
  const prefix = 'mcpauth-memory:';
  const store = new MemoryTokenStore({ clock, keyPrefix: prefix });
  return {
    store,
    rawHash: async (key) => store.rawHash(key),
    setRawField: async (key, field, value) => store.setRawField(key, field, value),
    keys: keyLayout(prefix),
    cleanup: async () => {
      await store.close();
    },
  };
});

describe('MemoryTokenStore specifics', () => {
  it('drops a record once the injected clock reaches its expiresAt, as Redis PEXPIREAT would', async () => {
    const clock = new ManualClock(Date.now());
    const store = new MemoryTokenStore({ clock });
    const tokenHash = hashToken(generateToken());
    await store.putUserToken({ tokenHash, subject: 's', issuer: 'i', createdAt: clock.now(), expiresAt: clock.now() + 1000 });
    const key = keyLayout('mcpauth:').userToken(tokenHash);
    clock.advance(999);
    expect(store.rawHash(key)?.revoked).toBe('false');
    clock.advance(1);
    expect(store.rawHash(key)).toBeNull();
    expect(await store.revokeUserToken(tokenHash)).toBe(false);
  });

  it("a person's index given an approval's expiry lives on with a token indexed after it: the token stays listed", async () => {
    const clock = new ManualClock(Date.now());
    const store = new MemoryTokenStore({ clock });
    const issuer = 'https://idp.example.com/';
    const approval = { clientId: 'c-1', clientCreatedAt: 1, redirectUri: 'http://127.0.0.1:9999/cb', issuer, subject: 'alice' };
    await store.putConsent(
      hashToken(generateToken()),
      { ...approval, approvedAt: clock.now(), expiresAt: clock.now() + 3_600_000 },
      clock.now(),
      20,
    );
    const tokenHash = hashToken(generateToken());
    await store.putUserToken({ tokenHash, subject: 'alice', issuer, createdAt: clock.now(), expiresAt: clock.now() + 3 * 3_600_000 });
    clock.advance(2 * 3_600_000);
    // The next approval reads the index through the keyspace, which drops an expired index whole.
    await store.putConsent(
      hashToken(generateToken()),
      { ...approval, approvedAt: clock.now(), expiresAt: clock.now() + 3_600_000 },
      clock.now(),
      20,
    );
    expect((await store.listSubjectTokens('alice', clock.now())).map((t) => t.tokenHash)).toEqual([tokenHash]);
  });

  it('a one-time value is kept until the injected clock reaches its expiry, then the name is usable again', async () => {
    const clock = new ManualClock(Date.now());
    const store = new MemoryTokenStore({ clock });
    expect(await store.useOnce('jti-1', clock.now() + 1000)).toBe(true);
    clock.advance(999);
    expect(await store.useOnce('jti-1', clock.now() + 1000)).toBe(false);
    clock.advance(1);
    expect(await store.useOnce('jti-1', clock.now() + 1000)).toBe(true);
  });

  it('expired records that are never read again are swept as more are written (bounded memory)', async () => {
    const clock = new ManualClock(Date.now());
    const store = new MemoryTokenStore({ clock });
    const issue = (lifetimeMs: number) =>
      store.putUserToken({
        tokenHash: hashToken(generateToken()),
        subject: 's',
        issuer: 'i',
        createdAt: clock.now(),
        expiresAt: clock.now() + lifetimeMs,
      });
    for (let i = 0; i < 1000; i++) await issue(1000);
    const kept = hashToken(generateToken());
    await store.putUserToken({ tokenHash: kept, subject: 's', issuer: 'i', createdAt: clock.now(), expiresAt: clock.now() + 60_000 });
    expect(store.recordCount).toBe(1001);
    clock.advance(1000);
    // Enough writes to reach the next sweep: the thousand expired tokens are gone, live ones stay.
    for (let i = 0; i < 1024; i++) await issue(60_000);
    expect(store.recordCount).toBeLessThanOrEqual(1025);
    expect(store.recordCount).toBeGreaterThan(0);
    expect(readable((await store.lookupToken(kept)).user)?.revoked).toBe(false);
  });

  it('lookupToken returns parsed, frozen records: a result cannot be changed, nor can the stored record through it', async () => {
    const clock = new ManualClock(Date.now());
    const store = new MemoryTokenStore({ clock });
    const tokenHash = hashToken(generateToken());
    await store.putUserToken({
      tokenHash,
      subject: 's',
      issuer: 'i',
      createdAt: clock.now(),
      expiresAt: clock.now() + 1000,
      groups: ['g'],
    });
    const found = readable((await store.lookupToken(tokenHash)).user)!;
    expect(() => Object.assign(found, { revoked: true })).toThrow(TypeError);
    expect(() => (found.groups as string[]).push('admin')).toThrow(TypeError);
    expect(readable((await store.lookupToken(tokenHash)).user)).toMatchObject({ revoked: false, groups: ['g'] });
  });
});
