// A connected account is one person's: kept under (subject, issuer, provider), delivered to the
// upstream only for a token of that person. The same `sub` at another identity provider is another
// person and gets nothing; a token whose record was written before issuers were kept belongs to the
// IDP_* provider's person. Real Redis, the real vault (sealed with the credential cipher), the real
// delivery and refreshing source, and connect links naming each person's own issuer.

import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/model/clock.ts';
import type { Principal } from '../../src/model/credentials.ts';
import type { TokenStore } from '../../src/store/types.ts';
import { CredentialCipher } from '../../src/upstream-credentials/cipher.ts';
import { ConnectLinks } from '../../src/upstream-credentials/connect-links.ts';
import { MISSING, UpstreamCredentialDelivery } from '../../src/upstream-credentials/delivery.ts';
import { RefreshingCredentialSource } from '../../src/upstream-credentials/idp-mode.ts';
import { CredentialVault } from '../../src/upstream-credentials/vault.ts';
import { deleteUnder, openRedisStore, rawRedis, uniquePrefix } from '../support/redis.ts';

const ENTRA = 'https://login.microsoftonline.com/72f988bf-86f1-41af-91ab-2d7cd011db47/v2.0';
const OKTA = 'https://fabrikam.okta.com/oauth2/default';
const SUB = 'the-same-sub';

let store: TokenStore;
let prefix: string;
const clock = new ManualClock();

beforeAll(async () => {
  prefix = uniquePrefix('people');
  store = await openRedisStore(prefix);
});
afterAll(async () => {
  await store?.close();
  const raw = await rawRedis();
  await deleteUnder(raw, prefix);
  raw.disconnect();
});

function person(issuer: string | undefined): Principal {
  return { kind: 'oauth', subject: SUB, clientId: 'mcp-client', tokenHash: 'a'.repeat(64), ...(issuer !== undefined ? { issuer } : {}) };
}

describe('connected accounts per person', () => {
  it("delivers a person's connected account to that person only, never to the same sub at another provider", async () => {
    const key = randomBytes(32);
    const vault = new CredentialVault({ store, cipher: new CredentialCipher(key), clock });
    const source = new RefreshingCredentialSource({
      provider: 'oauth:github.com',
      vault,
      locks: store,
      clock,
      refresh: () => Promise.reject(new Error('not refreshed here')),
      isUnavailable: () => false,
    });
    const delivery = new UpstreamCredentialDelivery({ header: 'authorization', issuer: ENTRA, source });
    await vault.save({ subject: SUB, issuer: OKTA, provider: 'oauth:github.com' }, { accessToken: 'okta-persons-github-token' });

    expect(await delivery.headerFor(person(OKTA))).toEqual({ name: 'authorization', value: 'Bearer okta-persons-github-token' });
    expect(await delivery.headerFor(person(ENTRA))).toBe(MISSING);
    // A record without an issuer (written before issuers were kept) is the IDP_* provider's person.
    expect(await delivery.headerFor(person(undefined))).toBe(MISSING);
    await vault.save({ subject: SUB, issuer: ENTRA, provider: 'oauth:github.com' }, { accessToken: 'entra-persons-github-token' });
    expect(await delivery.headerFor(person(undefined))).toEqual({ name: 'authorization', value: 'Bearer entra-persons-github-token' });
    expect(await delivery.headerFor(person(OKTA))).toEqual({ name: 'authorization', value: 'Bearer okta-persons-github-token' });
  });

  it("a connect link names its person's own issuer, and only a configured provider's", async () => {
    const links = new ConnectLinks(randomBytes(32), clock, store, ENTRA, [ENTRA, OKTA]);
    const { link } = await links.mint(person(OKTA));
    expect(await links.verify(link)).toMatchObject({ subject: SUB, issuer: OKTA });
    const { link: old } = await links.mint(person(undefined));
    expect(await links.verify(old)).toMatchObject({ subject: SUB, issuer: ENTRA });
    const stranger = await new ConnectLinks(randomBytes(32), clock, store, ENTRA, [ENTRA, OKTA]).mint(person('https://elsewhere.example'));
    // Another key: refused whatever it names; the same key naming an unknown issuer is refused too.
    await expect(links.verify(stranger.link)).rejects.toThrow();
    const sameKey = randomBytes(32);
    const wide = new ConnectLinks(sameKey, clock, store, ENTRA, [ENTRA, OKTA, 'https://elsewhere.example']);
    const narrow = new ConnectLinks(sameKey, clock, store, ENTRA, [ENTRA, OKTA]);
    await expect(narrow.verify((await wide.mint(person('https://elsewhere.example'))).link)).rejects.toThrow();
  });
});
