// The credential sources in-process (src/upstream-credentials/): refreshing a kept token shortly
// before it expires with one refresh at a time across replicas (two sources on one store stand in
// for two replicas), the RFC 8693 exchange cached per user and audience, and what the proxy is told
// to put in the request (header form, service token, unsafe tokens refused).

import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/model/clock.ts';
import { MemoryTokenStore } from '../../src/store/memory.ts';
import { CredentialCipher } from '../../src/upstream-credentials/cipher.ts';
import { MISSING, UpstreamCredentialDelivery, actsForUser } from '../../src/upstream-credentials/delivery.ts';
import { CredentialRefreshUnavailable, RefreshingCredentialSource, REFRESH_AHEAD_MS } from '../../src/upstream-credentials/idp-mode.ts';
import { TokenExchangeSource } from '../../src/upstream-credentials/token-exchange.ts';
import { CredentialVault, type UpstreamTokens } from '../../src/upstream-credentials/vault.ts';

const USER = { subject: 'alice', issuer: 'https://idp.example/' };
const HOUR = 3_600_000;

class Unreachable extends Error {}

function setUp() {
  const clock = new ManualClock(Date.now());
  const store = new MemoryTokenStore({ clock });
  const vault = new CredentialVault({ store, cipher: new CredentialCipher(randomBytes(32)), clock });
  return { clock, store, vault };
}

/** A provider whose refreshes the test answers by hand, in order. */
function manualProvider() {
  const calls: Array<{ refreshToken: string; answer: (t: UpstreamTokens) => void; fail: (e: Error) => void }> = [];
  let arrived: () => void = () => undefined;
  return {
    calls,
    /** Resolves once the next refresh call has arrived. */
    nextCall: () => new Promise<void>((r) => (arrived = r)),
    refresh: (refreshToken: string) =>
      new Promise<UpstreamTokens>((answer, fail) => {
        calls.push({ refreshToken, answer, fail });
        arrived();
      }),
  };
}

describe('refreshing source (modes idp and oauth)', () => {
  it('a token far from expiry is used as kept, with no call to the provider', async () => {
    const { clock, store, vault } = setUp();
    const provider = manualProvider();
    await vault.save({ ...USER, provider: 'idp' }, { accessToken: 'at-1', refreshToken: 'rt-1', expiresAt: clock.now() + HOUR });
    const source = new RefreshingCredentialSource({
      provider: 'idp',
      vault,
      locks: store,
      clock,
      refresh: provider.refresh,
      isUnavailable: (e) => e instanceof Unreachable,
    });
    expect(await source.usable(USER)).toMatchObject({ accessToken: 'at-1' });
    expect(provider.calls).toHaveLength(0);
  });

  it('within the refresh margin: refreshed once, saved (the old refresh token kept when none is returned), and used', async () => {
    const { clock, store, vault } = setUp();
    const provider = manualProvider();
    await vault.save(
      { ...USER, provider: 'idp' },
      { accessToken: 'at-1', refreshToken: 'rt-1', expiresAt: clock.now() + REFRESH_AHEAD_MS - 1 },
    );
    const results: string[] = [];
    const source = new RefreshingCredentialSource({
      provider: 'idp',
      vault,
      locks: store,
      clock,
      refresh: provider.refresh,
      isUnavailable: () => false,
      onRefresh: (r, who) => results.push(`${r} ${who.subject} ${who.issuer} ${who.provider}`),
    });
    const called = provider.nextCall();
    const pending = source.usable(USER);
    await called;
    expect(provider.calls[0]!.refreshToken).toBe('rt-1');
    provider.calls[0]!.answer({ accessToken: 'at-2', expiresAt: clock.now() + HOUR });
    expect(await pending).toMatchObject({ accessToken: 'at-2', refreshToken: 'rt-1' });
    expect(await vault.load({ ...USER, provider: 'idp' })).toMatchObject({ accessToken: 'at-2', refreshToken: 'rt-1' });
    // Whose credential was refreshed, for the audit event; never its tokens.
    expect(results).toEqual([`ok alice ${USER.issuer} idp`]);
  });

  it('two replicas at once: one refreshes, the other waits for its result instead of refreshing too', async () => {
    const { clock, store, vault } = setUp();
    const provider = manualProvider();
    await vault.save({ ...USER, provider: 'idp' }, { accessToken: 'at-1', refreshToken: 'rt-1', expiresAt: clock.now() + 1000 });
    // The waiting replica's pause: resolved by the test, after the winner has written.
    let wake: () => void = () => undefined;
    const waiting = new Promise<void>((r) => (wake = r));
    let slept = 0;
    const replica = (sleep?: (ms: number) => Promise<void>) =>
      new RefreshingCredentialSource({
        provider: 'idp',
        vault,
        locks: store,
        clock,
        refresh: provider.refresh,
        isUnavailable: () => false,
        ...(sleep ? { sleep } : {}),
      });
    const called = provider.nextCall();
    const winner = replica().usable(USER);
    await called;
    const loser = replica(async () => {
      slept++;
      await waiting;
    }).usable(USER);
    provider.calls[0]!.answer({ accessToken: 'at-2', refreshToken: 'rt-2', expiresAt: clock.now() + HOUR });
    expect(await winner).toMatchObject({ accessToken: 'at-2' });
    wake();
    expect(await loser).toMatchObject({ accessToken: 'at-2' });
    expect(provider.calls).toHaveLength(1);
    expect(slept).toBeGreaterThan(0);
  });

  it('the provider unreachable: a token still valid is used; an expired one is CredentialRefreshUnavailable (a 503, never forwarded without)', async () => {
    const { clock, store, vault } = setUp();
    const source = new RefreshingCredentialSource({
      provider: 'idp',
      vault,
      locks: store,
      clock,
      refresh: () => Promise.reject(new Unreachable('down')),
      isUnavailable: (e) => e instanceof Unreachable,
    });
    await vault.save({ ...USER, provider: 'idp' }, { accessToken: 'at-1', refreshToken: 'rt-1', expiresAt: clock.now() + 1000 });
    expect(await source.usable(USER)).toMatchObject({ accessToken: 'at-1' });
    await vault.save(
      { ...USER, subject: 'bob', provider: 'idp' },
      { accessToken: 'at-b', refreshToken: 'rt-b', expiresAt: clock.now() - 1 },
    );
    await expect(source.usable({ ...USER, subject: 'bob' })).rejects.toBeInstanceOf(CredentialRefreshUnavailable);
  });

  it('a refresh the provider refuses, or an expired token with no refresh token: no credential (the user is asked to authorize)', async () => {
    const { clock, store, vault } = setUp();
    const source = new RefreshingCredentialSource({
      provider: 'idp',
      vault,
      locks: store,
      clock,
      refresh: () => Promise.reject(new Error('invalid_grant')),
      isUnavailable: () => false,
    });
    await vault.save({ ...USER, provider: 'idp' }, { accessToken: 'at-1', refreshToken: 'rt-1', expiresAt: clock.now() - 1 });
    expect(await source.usable(USER)).toBeUndefined();
    await vault.save({ ...USER, subject: 'carol', provider: 'idp' }, { accessToken: 'at-c', expiresAt: clock.now() - 1 });
    expect(await source.usable({ ...USER, subject: 'carol' })).toBeUndefined();
    expect(await source.usable({ ...USER, subject: 'nobody' })).toBeUndefined();
  });
});

describe('token exchange source', () => {
  it('exchanges the user IdP token once for the audience, reuses it until shortly before expiry, then exchanges again', async () => {
    const { clock, store, vault } = setUp();
    await vault.save({ ...USER, provider: 'idp' }, { accessToken: 'idp-at', expiresAt: clock.now() + 24 * HOUR });
    const idpTokens = new RefreshingCredentialSource({
      provider: 'idp',
      vault,
      locks: store,
      clock,
      refresh: () => Promise.reject(new Error('x')),
      isUnavailable: () => false,
    });
    const exchanged: string[] = [];
    const source = new TokenExchangeSource({
      idpTokens,
      vault,
      clock,
      audience: 'https://api.internal',
      exchange: async (subjectToken) => {
        exchanged.push(subjectToken);
        return { accessToken: `api-${exchanged.length}`, expiresAt: clock.now() + HOUR };
      },
      isUnavailable: () => false,
    });
    expect(await source.usable(USER)).toMatchObject({ accessToken: 'api-1' });
    expect(await source.usable(USER)).toMatchObject({ accessToken: 'api-1' });
    expect(exchanged).toEqual(['idp-at']);
    clock.advance(HOUR - REFRESH_AHEAD_MS + 1);
    expect(await source.usable(USER)).toMatchObject({ accessToken: 'api-2' });
    // Kept encrypted per user and audience, beside the IdP token.
    expect(await store.getUpstreamCredential('alice', USER.issuer, 'exchange:https://api.internal')).toMatchObject({
      keyId: expect.any(String),
    });
  });

  it('no IdP token: no credential; the IdP refusing: none; the IdP unreachable: CredentialRefreshUnavailable', async () => {
    const { clock, store, vault } = setUp();
    const idpTokens = new RefreshingCredentialSource({
      provider: 'idp',
      vault,
      locks: store,
      clock,
      refresh: () => Promise.reject(new Error('x')),
      isUnavailable: () => false,
    });
    const make = (exchange: () => Promise<UpstreamTokens>) =>
      new TokenExchangeSource({ idpTokens, vault, clock, audience: 'api', exchange, isUnavailable: (e) => e instanceof Unreachable });
    expect(await make(async () => ({ accessToken: 'x' })).usable(USER)).toBeUndefined();
    await vault.save({ ...USER, provider: 'idp' }, { accessToken: 'idp-at', expiresAt: clock.now() + HOUR });
    expect(await make(() => Promise.reject(new Error('invalid_target'))).usable(USER)).toBeUndefined();
    await expect(make(() => Promise.reject(new Unreachable('down'))).usable(USER)).rejects.toBeInstanceOf(CredentialRefreshUnavailable);
  });
});

describe('delivery', () => {
  const source = (tokens: UpstreamTokens | undefined) => ({ usable: async () => tokens });
  const user = { kind: 'oauth' as const, subject: 'alice', clientId: 'mcp_client' };
  const machine = { kind: 'oauth' as const, subject: 'mcp_client', clientId: 'mcp_client' };

  it('authorization gets Bearer <token>; another header the raw token', async () => {
    expect(
      await new UpstreamCredentialDelivery({ header: 'authorization', issuer: 'i', source: source({ accessToken: 'tok' }) }).headerFor(
        user,
      ),
    ).toEqual({ name: 'authorization', value: 'Bearer tok' });
    expect(
      await new UpstreamCredentialDelivery({ header: 'x-github-token', issuer: 'i', source: source({ accessToken: 'tok' }) }).headerFor(
        user,
      ),
    ).toEqual({ name: 'x-github-token', value: 'tok' });
  });

  it('callers without a user: the service token when set, else nothing; never a user lookup', async () => {
    const never = { usable: async () => Promise.reject(new Error('looked up')) };
    expect(actsForUser(machine)).toBe(false);
    expect(actsForUser({ kind: 'master', subject: 'master' })).toBe(false);
    expect(actsForUser({ kind: 'user', subject: 'bob' })).toBe(true);
    expect(await new UpstreamCredentialDelivery({ header: 'authorization', issuer: 'i', source: never }).headerFor(machine)).toBeNull();
    expect(
      await new UpstreamCredentialDelivery({ header: 'authorization', issuer: 'i', serviceToken: 'svc', source: never }).headerFor({
        kind: 'master',
        subject: 'master',
      }),
    ).toEqual({ name: 'authorization', value: 'Bearer svc' });
  });

  it('a user with none, or with a token that could split a header, is MISSING', async () => {
    expect(await new UpstreamCredentialDelivery({ header: 'authorization', issuer: 'i', source: source(undefined) }).headerFor(user)).toBe(
      MISSING,
    );
    expect(
      await new UpstreamCredentialDelivery({
        header: 'authorization',
        issuer: 'i',
        source: source({ accessToken: 'a\r\nx-evil: 1' }),
      }).headerFor(user),
    ).toBe(MISSING);
  });
});
