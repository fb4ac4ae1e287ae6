// A credential deleted while it is being renewed stays deleted: a person who disconnects, or is
// offboarded, while the IdP answers an exchange is not given the exchanged token back. The kept
// records on real Redis (the vault as the sidecar builds it); the exchange at the IdP is held by the
// test until the deletion is done.

import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/model/clock.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import { CredentialCipher } from '../../src/upstream-credentials/cipher.ts';
import { REFRESH_AHEAD_MS } from '../../src/upstream-credentials/idp-mode.ts';
import { TokenExchangeSource } from '../../src/upstream-credentials/token-exchange.ts';
import { CredentialVault, type UpstreamTokens } from '../../src/upstream-credentials/vault.ts';
import { deleteUnder, openRedisStore, rawRedis, uniquePrefix } from '../support/redis.ts';

const ISSUER = 'https://idp.example';
const AUDIENCE = 'https://api.internal';
const prefix = uniquePrefix('credential-races');
let store: RedisTokenStore;
const clock = new ManualClock(Date.now());
let vault: CredentialVault;

beforeAll(async () => {
  store = await openRedisStore(prefix);
  vault = new CredentialVault({ store, cipher: new CredentialCipher(randomBytes(32)), clock });
});
afterAll(async () => {
  await store?.close();
  const raw = await rawRedis();
  await deleteUnder(raw, prefix);
  await raw.quit();
});

/** An exchange source whose exchanges wait for `release()`; `arrived` resolves when one is asked for. */
function heldExchange() {
  let arrived!: () => void;
  let release!: () => void;
  const arrivedP = new Promise<void>((r) => (arrived = r));
  const released = new Promise<void>((r) => (release = r));
  const source = new TokenExchangeSource({
    idpTokens: { usable: async (user) => vault.load({ ...user, provider: 'idp' }) },
    vault,
    clock,
    audience: AUDIENCE,
    exchange: async (): Promise<UpstreamTokens> => {
      arrived();
      await released;
      return { accessToken: `exchanged-${randomBytes(6).toString('hex')}`, expiresAt: clock.now() + 300_000 };
    },
    isUnavailable: () => false,
  });
  return { source, arrived: arrivedP, release };
}

async function user(withExchanged: boolean) {
  const subject = `user-${randomBytes(4).toString('hex')}`;
  await vault.save({ subject, issuer: ISSUER, provider: 'idp' }, { accessToken: 'idp-access', expiresAt: clock.now() + 3_600_000 });
  // A kept exchanged token about to lapse: the next use exchanges again.
  if (withExchanged)
    await vault.save(
      { subject, issuer: ISSUER, provider: `exchange:${AUDIENCE}` },
      { accessToken: 'old-exchanged', expiresAt: clock.now() + REFRESH_AHEAD_MS / 2 },
    );
  return { subject, issuer: ISSUER };
}

describe('token exchange: a deletion during the exchange', () => {
  it('the exchanged record renewed while the person disconnects it: not written back', async () => {
    const who = await user(true);
    const { source, arrived, release } = heldExchange();
    const pending = source.usable(who);
    await arrived;
    expect(await vault.delete({ ...who, provider: `exchange:${AUDIENCE}` })).toBe(true);
    release();
    expect(await pending).toBeUndefined();
    expect((await store.listSubjectUpstreamCredentials(who.subject)).map((r) => r.provider)).toEqual(['idp']);
  });

  it('the first exchange of a person offboarded meanwhile (every record deleted): nothing is left', async () => {
    const who = await user(false);
    const { source, arrived, release } = heldExchange();
    const pending = source.usable(who);
    await arrived;
    expect(await vault.forget(who.subject)).toBe(1);
    release();
    expect(await pending).toBeUndefined();
    expect(await store.listSubjectUpstreamCredentials(who.subject)).toEqual([]);
  });

  it('without a deletion, the exchanged token is kept and answered', async () => {
    const who = await user(true);
    const { source, arrived, release } = heldExchange();
    const pending = source.usable(who);
    await arrived;
    release();
    const got = await pending;
    expect(got?.accessToken).toMatch(/^exchanged-/);
    expect(await vault.load({ ...who, provider: `exchange:${AUDIENCE}` })).toEqual(got);
  });
});
