// The request sequences Microsoft Entra ID and Okta send to a SCIM server, replayed as their
// documentation writes them, against a sidecar on real Redis with a real OpenID provider
// (oidc-provider, in this process): create, find by userName, deactivate, reactivate, delete. A person
// the directory makes inactive loses every token at once and is refused at sign-in (browser, device
// page, account page) with a page that says why, until the directory makes them active again.
//
// Sources of the request shapes:
//  - Entra ID: "Tutorial: Develop and plan provisioning for a SCIM endpoint in Microsoft Entra ID",
//    section "User Operations" (https://learn.microsoft.com/en-us/entra/identity/app-provisioning/use-scim-to-provision-users-and-groups#user-operations),
//    and its note that the provisioning service sends booleans as the strings "True"/"False" in PATCH
//    values (section "Known issues", the `aadOptscim062020` flag);
//  - Okta: "Okta and SCIM Version 2.0" (https://developer.okta.com/docs/api/openapi/okta-scim/guides/scim-20),
//    sections "Create Users", "Retrieve Users", "Update a specific User (PUT)", "Update a specific User
//    (PATCH)": Okta deactivates and reactivates with a value-object PATCH and no path.

import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_USER } from '../../demo/idp.ts';
import { generateToken, hashToken, TTL_7_DAYS } from '../../src/model/credentials.ts';
import { decide, enterCode, poll, registerDeviceClient, startDevice } from '../support/device.ts';
import { initializeStatus } from '../support/http.ts';
import { directoryClient, PATCH_OP } from '../support/scim.ts';
import {
  approveAndSignIn,
  authorizeUrl,
  CLIENT_REDIRECT,
  clientReceived,
  pkce,
  registerPublicClient,
  standardParams,
  startSignInStack,
  tokenRequest,
  type SignInStack,
} from '../support/sign-in.ts';
import { UserAgent, type Hop } from '../support/user-agent.ts';

const SCIM_TOKEN = randomBytes(32).toString('hex');
const DEACTIVATED = 'deactivated by your organisation';

let s: SignInStack;
let scim: ReturnType<typeof directoryClient>;

beforeAll(async () => {
  s = await startSignInStack({ config: { scim: { token: SCIM_TOKEN } } });
  const client = directoryClient(s.stack.adminUrl, SCIM_TOKEN);
  // The directory's requests come seconds apart, and so do the person's sign-ins after them.
  scim = (...args) => {
    s.stack.clock.advance(1000);
    return client(...args);
  };
});
afterAll(async () => {
  await s?.close();
});

/** A browser sign-in of the demo user: the hop the sidecar answered the IdP's callback with. */
async function browserSignIn(clientId: string): Promise<{ hop: Hop; verifier: string }> {
  const p = pkce();
  const hop = await approveAndSignIn(new UserAgent(), s.base, authorizeUrl(s.base, standardParams(s.base, clientId, p)));
  return { hop, verifier: p.verifier };
}

/** A browser sign-in that succeeds, its code redeemed: the access and refresh tokens. */
async function tokensOf(clientId: string): Promise<{ access: string; refresh: string }> {
  const { hop, verifier } = await browserSignIn(clientId);
  const code = clientReceived(hop).get('code')!;
  const res = await tokenRequest(s.base, {
    grant_type: 'authorization_code',
    code,
    redirect_uri: CLIENT_REDIRECT,
    client_id: clientId,
    code_verifier: verifier,
  });
  expect(res.status).toBe(200);
  return { access: res.body.access_token as string, refresh: res.body.refresh_token as string };
}

/** A user-grade token of the demo user, as the token exchange stores it. */
async function userToken(): Promise<string> {
  const raw = generateToken();
  const now = s.stack.clock.now();
  await s.stack.store.putUserToken({
    tokenHash: hashToken(raw),
    subject: DEMO_USER.sub,
    issuer: s.idp.issuer,
    createdAt: now,
    expiresAt: now + TTL_7_DAYS,
  });
  return raw;
}

const mcpStatus = (token: string) => initializeStatus({ mcpUrl: `${s.base}/mcp` }, token);

/** Everything the person holds is refused; every sign-in door answers with the page that says why. */
async function expectLockedOut(held: { access: string; refresh: string; user: string }, clientId: string): Promise<void> {
  expect(await mcpStatus(held.access)).toBe(401);
  expect(await mcpStatus(held.user)).toBe(401);
  expect((await tokenRequest(s.base, { grant_type: 'refresh_token', refresh_token: held.refresh, client_id: clientId })).body.error).toBe(
    'invalid_grant',
  );
  const { hop } = await browserSignIn(clientId);
  expect(hop.status).toBe(403);
  expect(hop.location).toBeUndefined();
  expect(hop.body).toContain(DEACTIVATED);
  // The device page: the code is entered, the person signs in at the IdP, and is refused there.
  const deviceClient = await registerDeviceClient(s.base);
  const device = await startDevice(s.base, deviceClient);
  const agent = new UserAgent();
  const consent = await enterCode(agent, s.base, device.user_code);
  const answered = await decide(agent, s.base, consent, 'approve');
  expect(answered.status).toBe(403);
  expect(answered.body).toContain(DEACTIVATED);
  expect((await poll(s.base, deviceClient, device.device_code)).body.error).toBe('authorization_pending');
  // The account page.
  const account = new UserAgent();
  const page = await account.follow(await account.request(`${s.base}/account`));
  expect(page.status).toBe(403);
  expect(page.body).toContain(DEACTIVATED);
}

/** The person holds a token of each kind, all working. */
async function holdEverything(clientId: string): Promise<{ access: string; refresh: string; user: string }> {
  const tokens = await tokensOf(clientId);
  const user = await userToken();
  expect(await mcpStatus(tokens.access)).toBe(200);
  expect(await mcpStatus(user)).toBe(200);
  return { ...tokens, user };
}

const filterUserName = (userName: string) => `/Users?filter=${encodeURIComponent(`userName eq "${userName}"`)}`;

describe('Microsoft Entra ID: its documented sequence', () => {
  it('create, find by userName, update, disable ("False"), retries, enable ("True"), delete, retries', async () => {
    const clientId = await registerPublicClient(s.base, { client_name: 'Entra person' });
    // "Get User by query - Zero results", then "Create User".
    expect((await scim('GET', filterUserName(DEMO_USER.sub))).body).toMatchObject({ totalResults: 0, Resources: [] });
    const created = await scim('POST', '/Users', {
      schemas: ['urn:ietf:params:scim:schemas:core:2.0:User', 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User'],
      externalId: '0a21f0f2-8d2a-4f8e-bf98-7363c4aed4ef',
      userName: DEMO_USER.sub,
      active: true,
      emails: [{ primary: true, type: 'work', value: 'Test_User_fd0ea19b-0777-472c-9f96-4f70d2226f2e@testuser.com' }],
      meta: { resourceType: 'User' },
      name: { formatted: 'givenName familyName', familyName: 'familyName', givenName: 'givenName' },
      roles: [],
    });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    // "Get User by query".
    const found = await scim('GET', filterUserName(DEMO_USER.sub));
    expect(found.body).toMatchObject({ totalResults: 1, itemsPerPage: 1, startIndex: 1 });
    expect(found.body.Resources[0]).toMatchObject({ id, externalId: '0a21f0f2-8d2a-4f8e-bf98-7363c4aed4ef', active: true });
    // "Update User [Multi-valued properties]".
    const updated = await scim('PATCH', `/Users/${id}`, {
      schemas: [PATCH_OP],
      Operations: [
        { op: 'Replace', path: 'emails[type eq "work"].value', value: 'updatedEmail@microsoft.com' },
        { op: 'Replace', path: 'name.familyName', value: 'updatedFamilyName' },
      ],
    });
    expect(updated.status).toBe(200);
    expect(updated.body).toMatchObject({
      emails: [{ type: 'work', value: 'updatedEmail@microsoft.com', primary: true }],
      name: { familyName: 'updatedFamilyName' },
    });

    const held = await holdEverything(clientId);
    // "Disable User", with the string boolean the provisioning service sends.
    const disable = { schemas: [PATCH_OP], Operations: [{ op: 'Replace', path: 'active', value: 'False' }] };
    const disabled = await scim('PATCH', `/Users/${id}`, disable);
    expect(disabled.status).toBe(200);
    expect(disabled.body).toMatchObject({ active: false, meta: { version: 'W/"3"' } });
    await expectLockedOut(held, clientId);
    // The provisioning service retries: the same answer, nothing changed.
    const again = await scim('PATCH', `/Users/${id}`, disable);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ active: false, meta: { version: 'W/"3"' } });

    // Assigned again: enabled, and the person signs in again.
    const enabled = await scim('PATCH', `/Users/${id}`, {
      schemas: [PATCH_OP],
      Operations: [{ op: 'Replace', path: 'active', value: 'True' }],
    });
    expect(enabled.body.active).toBe(true);
    const after = await holdEverything(clientId);

    // "Delete User" (a hard delete, after the soft delete's 30 days), and its retry.
    expect((await scim('DELETE', `/Users/${id}`)).status).toBe(204);
    expect((await scim('DELETE', `/Users/${id}`)).status).toBe(204);
    expect((await scim('GET', `/Users/${id}`)).status).toBe(404);
    expect((await scim('GET', filterUserName(DEMO_USER.sub))).body.totalResults).toBe(0);
    await expectLockedOut(after, clientId);

    // Provisioned again later: a new user, and the person is back.
    const back = await scim('POST', '/Users', {
      schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'],
      userName: DEMO_USER.sub,
      active: true,
    });
    expect(back.status).toBe(201);
    await holdEverything(clientId);
    expect((await scim('DELETE', `/Users/${back.body.id}`)).status).toBe(204);
  });
});

describe('Okta: its documented sequence', () => {
  it('list, find by userName, create, get, replace, deactivate (value-object PATCH), reactivate, delete', async () => {
    const clientId = await registerPublicClient(s.base, { client_name: 'Okta person' });
    // "Retrieve Users": Okta lists with startIndex and count.
    const listed = await scim('GET', '/Users?startIndex=1&count=100');
    expect(listed.status).toBe(200);
    expect(listed.body).toMatchObject({ schemas: ['urn:ietf:params:scim:api:messages:2.0:ListResponse'], startIndex: 1 });
    // "Create Users": first the query by userName, then the POST.
    expect((await scim('GET', `${filterUserName(DEMO_USER.sub)}&startIndex=1&count=100`)).body.totalResults).toBe(0);
    const created = await scim('POST', '/Users', {
      schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'],
      userName: DEMO_USER.sub,
      name: { givenName: 'Test', familyName: 'User' },
      emails: [{ primary: true, value: 'test.user@okta.local', type: 'work' }],
      displayName: 'Test User',
      locale: 'en-US',
      externalId: '00ujl29u0le5T6Aj10h7',
      groups: [],
      password: '1mz050nq',
      active: true,
    });
    expect(created.status).toBe(201);
    expect(created.body.password).toBeUndefined();
    const id = created.body.id as string;
    expect((await scim('GET', '/Users?startIndex=1&count=100')).body.Resources.map((r: { id: string }) => r.id)).toContain(id);
    // "Retrieve a specific User".
    expect((await scim('GET', `/Users/${id}`)).body).toMatchObject({ id, userName: DEMO_USER.sub, displayName: 'Test User' });
    // "Update a specific User (PUT)": the whole profile, id and meta included.
    const put = await scim('PUT', `/Users/${id}`, {
      schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'],
      id,
      userName: DEMO_USER.sub,
      name: { givenName: 'Another', familyName: 'User' },
      emails: [{ primary: true, value: 'test.user@okta.local', type: 'work' }],
      displayName: 'Another User',
      locale: 'en-US',
      externalId: '00ujl29u0le5T6Aj10h7',
      groups: [],
      active: true,
      meta: { resourceType: 'User', created: '2020-01-01T00:00:00Z' },
    });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ id, displayName: 'Another User', name: { givenName: 'Another' } });

    const held = await holdEverything(clientId);
    // "Update a specific User (PATCH)": deactivation, a value object and no path.
    const deactivate = { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: false } }] };
    const deactivated = await scim('PATCH', `/Users/${id}`, deactivate);
    expect(deactivated.status).toBe(200);
    expect(deactivated.body.active).toBe(false);
    await expectLockedOut(held, clientId);
    expect((await scim('PATCH', `/Users/${id}`, deactivate)).body).toMatchObject({
      active: false,
      meta: { version: deactivated.body.meta.version },
    });
    // Reactivation.
    const reactivated = await scim('PATCH', `/Users/${id}`, {
      schemas: [PATCH_OP],
      Operations: [{ op: 'replace', value: { active: true } }],
    });
    expect(reactivated.body.active).toBe(true);
    const after = await holdEverything(clientId);
    // Okta deprovisions by deactivating; a DELETE, when an administrator's integration sends one, ends access too.
    expect((await scim('DELETE', `/Users/${id}`)).status).toBe(204);
    await expectLockedOut(after, clientId);
  });
});

describe('the directory and revokeSubject', () => {
  it('a deactivation counts its revocations in the audit trail; a person the directory does not know signs in as before', async () => {
    const events = (await s.stack.admin('listAuditEvents', { count: 200 })).body.events as Array<Record<string, any>>;
    const deactivation = events.find(
      (e) => e.action === 'scim.patchUser' && e.detail?.active === false && e.detail?.accessTokensRevoked > 0,
    );
    expect(deactivation).toMatchObject({ who: 'scim', subject: DEMO_USER.sub, detail: { offboarded: 1 } });
    expect(deactivation!.detail.userTokensRevoked).toBeGreaterThan(0);
    // Nobody in the directory under this name any more (deleted above): the tombstone still refuses,
    // which the sequences checked; a name never provisioned refuses nobody.
    expect((await scim('GET', filterUserName('someone-else'))).body.totalResults).toBe(0);
  });
});
