// Which grants POST /register (RFC 7591) gives: each grant's own rule in the grant list
// (src/oauth/grants): admin-only grants never, the others while this server's configuration enables
// them, the same set discovery advertises. Handler level on the memory store, with every optional
// grant off, then on.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { provisionClient } from '../../src/model/clients.ts';
import { ManualClock } from '../../src/model/clock.ts';
import { GRANT_TYPES, GRANTS, registrationRefusal } from '../../src/oauth/grants/index.ts';
import { defaultProfileRecords } from '../../src/model/profiles.ts';
import { MemoryTokenStore } from '../../src/store/memory.ts';
import { startOAuthEndpoints, type OAuthEndpoints } from '../support/oauth-endpoints.ts';

const CC = 'client_credentials';
const REFRESH = 'refresh_token';
const CODE = 'authorization_code';
const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const DEVICE = 'urn:ietf:params:oauth:grant-type:device_code';
const REDIRECT = 'http://127.0.0.1:7777/callback';

async function register(ep: OAuthEndpoints, body: Record<string, unknown>): Promise<{ status: number; body: any }> {
  const res = await fetch(`${ep.url}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

async function advertised(ep: OAuthEndpoints): Promise<string[]> {
  return ((await (await fetch(`${ep.url}/.well-known/oauth-authorization-server`)).json()) as { grant_types_supported: string[] })
    .grant_types_supported;
}

/** A registration asking for `grantType` alone (with a redirect URI, which the code grant needs). */
const asking = (grantType: string) => ({
  grant_types: [grantType],
  redirect_uris: [REDIRECT],
  ...(grantType === CODE ? { response_types: ['code'] } : {}),
});

let off: OAuthEndpoints;
let on: OAuthEndpoints;

beforeAll(async () => {
  // Sign-in, the IdP (exchange) and ID-JAG all off: only the grants that need no IdP remain. Every
  // registration here comes from one address: the per-address limit is raised so none is a 429.
  const oauth = { registrationRateLimitPerMinute: 1000 };
  off = await startOAuthEndpoints({ config: { oauth } });
  on = await startOAuthEndpoints({
    signIn: true,
    config: {
      oauth,
      idp: { issuer: 'https://idp.example.test', audience: 'mcp-exchange', jwksUrl: 'https://idp.example.test/keys', idJag: true },
    },
  });
});
afterAll(async () => {
  await off?.close();
  await on?.close();
});

describe('POST /register asks each grant its rule', () => {
  it.each<[string, string, number, string | undefined]>([
    ['off', CC, 400, 'client_credentials is only for clients an administrator creates'],
    ['off', REFRESH, 201, undefined],
    ['off', CODE, 400, 'browser sign-in (authorization_code) is not configured on this server'],
    ['off', EXCHANGE, 400, 'token exchange is not configured on this server (no identity provider)'],
    ['off', JWT_BEARER, 400, `${JWT_BEARER} is only for clients an administrator creates`],
    ['on', CC, 400, 'client_credentials is only for clients an administrator creates'],
    ['on', REFRESH, 201, undefined],
    ['on', CODE, 201, undefined],
    ['on', EXCHANGE, 201, undefined],
    // Admin-only even while on: the IdP must be given the client id before it issues ID-JAGs for it.
    ['on', JWT_BEARER, 400, `${JWT_BEARER} is only for clients an administrator creates`],
  ])('with the optional grants %s, asking for %s: %i', async (which, grantType, status, description) => {
    const ep = which === 'on' ? on : off;
    const before = (await ep.store.listClients()).length;
    const res = await register(ep, asking(grantType));
    expect(res.status).toBe(status);
    if (status === 201) {
      expect(res.body.grant_types).toEqual([grantType]);
    } else {
      expect(res.body).toEqual({
        error: 'invalid_client_metadata',
        error_description: `grant_types cannot hold ${grantType}: ${description}`,
      });
      expect((await ep.store.listClients()).length).toBe(before);
    }
  });

  it('a grant refused anywhere in the list refuses the registration', async () => {
    const res = await register(off, { grant_types: [REFRESH, EXCHANGE], redirect_uris: [REDIRECT] });
    expect([res.status, res.body.error]).toEqual([400, 'invalid_client_metadata']);
  });

  it("no grant_types asked: the dynamic profile's default (the token exchange) is given, on or off (unusable while off)", async () => {
    for (const ep of [on, off]) {
      const given = await register(ep, { redirect_uris: [REDIRECT] });
      expect([given.status, given.body.grant_types]).toEqual([201, [EXCHANGE]]);
    }
  });

  it('no grant_types asked, and a dynamic profile edited by hand to give an admin-only grant: refused, nothing stored', async () => {
    const clock = new ManualClock();
    const store = new MemoryTokenStore({ clock });
    const profiles = defaultProfileRecords(clock.now()).map((p) => (p.name === 'dynamic' ? { ...p, grantTypes: [CC, REFRESH] } : p));
    await store.seedProfiles(profiles);
    const refused = provisionClient(store, clock, { redirectUris: [REDIRECT] }, 'dcr', GRANT_TYPES, (g, asked) =>
      registrationRefusal(on.ctx, g, asked),
    );
    await expect(refused).rejects.toMatchObject({
      code: 'invalid_client_metadata',
      description:
        'grant_types were not given, and the default of profile "dynamic" (client_credentials) cannot be given here: client_credentials is only for clients an administrator creates',
    });
    expect(await store.listClients()).toEqual([]);
  });

  it.each([
    ['off', [CC, REFRESH]],
    ['on', [CC, REFRESH, CODE, DEVICE, EXCHANGE, JWT_BEARER]],
  ] as const)(
    'with the optional grants %s, discovery lists exactly the enabled grants, and /register gives exactly the dynamic ones among them',
    async (which, enabled) => {
      const ep = which === 'on' ? on : off;
      expect(await advertised(ep)).toEqual(enabled);
      const registrable: string[] = [];
      for (const grant of GRANTS) if ((await register(ep, asking(grant.grantType))).status === 201) registrable.push(grant.grantType);
      expect(registrable).toEqual(enabled.filter((g) => GRANTS.find((x) => x.grantType === g)!.registration === 'dynamic'));
      // Never one discovery does not list.
      for (const g of registrable) expect(enabled).toContain(g);
    },
  );
});
