// Offboarding a person in one call (admin listGrants, revokeSubject, rebuildSubjectIndex) over real
// HTTP: the sidecar on real Redis, a real OpenID provider (oidc-provider, in this process) for browser
// sign-ins, and tokens of every kind a person can hold, from several clients.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_USER } from '../../demo/idp.ts';
import { initializeStatus } from '../support/http.ts';
import { generateToken, hashToken, TTL_7_DAYS } from '../../src/model/credentials.ts';
import { grantIdOf } from '../../src/model/person-grants.ts';
import { rawRedis } from '../support/redis.ts';
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
import { decide, enterCode, poll, registerDeviceClient, startDevice } from '../support/device.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';

let s: SignInStack;

beforeAll(async () => {
  s = await startSignInStack();
});
afterAll(async () => {
  await s?.close();
});

const ZERO = {
  accessTokensRevoked: 0,
  refreshTokensRevoked: 0,
  userTokensRevoked: 0,
  consentsForgotten: 0,
  connectedAccountsDeleted: 0,
  handlesForgotten: 0,
  approvalsCancelled: 0,
};

/** A browser sign-in of the demo user through `clientId`, and the code redeemed as the client does: its access and refresh tokens. */
async function signIn(clientId: string): Promise<{ access: string; refresh: string }> {
  const p = pkce();
  const hop = await approveAndSignIn(new UserAgent(), s.base, authorizeUrl(s.base, standardParams(s.base, clientId, p)));
  const code = clientReceived(hop).get('code')!;
  const tokens = await tokenRequest(s.base, {
    grant_type: 'authorization_code',
    code,
    redirect_uri: CLIENT_REDIRECT,
    client_id: clientId,
    code_verifier: p.verifier,
  });
  expect(tokens.status).toBe(200);
  return { access: tokens.body.access_token as string, refresh: tokens.body.refresh_token as string };
}

/** A user-grade token as the token exchange stores it (subject and issuer of the IdP JWT, seven days). */
async function userToken(subject: string, issuer = s.idp.issuer): Promise<string> {
  const raw = generateToken();
  const now = s.stack.clock.now();
  await s.stack.store.putUserToken({ tokenHash: hashToken(raw), subject, issuer, createdAt: now, expiresAt: now + TTL_7_DAYS });
  return raw;
}

/** The status of an MCP initialize with `token` (what an MCP client sends first), through the sidecar. */
const mcpStatus = (token: string): Promise<number> => initializeStatus({ mcpUrl: `${s.base}/mcp` }, token);

describe('listGrants and revokeSubject', () => {
  it('a person with tokens of every kind from several clients is listed completely and revoked completely in one call; another person keeps working', async () => {
    const first = await registerPublicClient(s.base, { client_name: 'Editor one' });
    const second = await registerPublicClient(s.base, { client_name: 'Editor two' });
    const one = await signIn(first);
    const two = await signIn(second);
    // A refresh: the rotated pair belongs to the same grant (its family).
    const refreshed = await tokenRequest(s.base, { grant_type: 'refresh_token', refresh_token: two.refresh, client_id: second });
    expect(refreshed.status).toBe(200);
    const twoNow = { access: refreshed.body.access_token as string, refresh: refreshed.body.refresh_token as string };
    // An ID-JAG grant is an access token alone, acting for the user (as src/oauth/grants/id-jag.ts issues it).
    const jag = generateToken();
    const now = s.stack.clock.now();
    expect(
      await s.stack.store.createAccessToken({
        tokenHash: hashToken(jag),
        clientId: first,
        user: { subject: DEMO_USER.sub, issuer: s.idp.issuer },
        createdAt: now,
        expiresAt: now + 600_000,
      }),
    ).toBe('ok');
    const exchanged = await userToken(DEMO_USER.sub);
    const handEdited = await userToken(DEMO_USER.sub);
    // Someone else, through the same clients.
    const bobUser = await userToken('bob-0002');
    const bobJag = generateToken();
    expect(
      await s.stack.store.createAccessToken({
        tokenHash: hashToken(bobJag),
        clientId: first,
        user: { subject: 'bob-0002', issuer: s.idp.issuer },
        createdAt: now,
        expiresAt: now + 600_000,
      }),
    ).toBe('ok');

    for (const token of [one.access, twoNow.access, jag, exchanged, handEdited, bobUser, bobJag]) expect(await mcpStatus(token)).toBe(200);

    // Last use: noted by the proxy on each request, written when the recorder flushes (at most once a minute per token).
    await s.stack.sidecar.lastUse.flush();
    const listed = await s.stack.admin('listGrants', { subject: DEMO_USER.sub });
    expect(listed.status).toBe(200);
    const exchangedGrant = listed.body.grants.find(
      (g: { grantId: string }) => g.grantId === grantIdOf({ tokenHash: hashToken(exchanged) }),
    );
    expect(exchangedGrant.lastUsedAt).toBe(s.stack.clock.now());
    expect(exchangedGrant.clientId).toBeNull();
    // Five grants: two sign-in families (the refreshed one counted once), the ID-JAG token, two user-grade tokens.
    expect(listed.body.grants).toHaveLength(5);
    for (const g of listed.body.grants) {
      expect(Object.keys(g).sort()).toEqual([
        'clientId',
        'clientName',
        'createdAt',
        'expiresAt',
        'grantId',
        'issuer',
        'lastUsedAt',
        'scope',
        'subject',
      ]);
      expect(g.subject).toBe(DEMO_USER.sub);
    }
    expect(listed.body.grants.map((g: { clientName: string | null }) => g.clientName).sort()).toEqual([
      'Editor one',
      'Editor one',
      'Editor two',
      null,
      null,
    ]);
    const text = JSON.stringify(listed.body);
    for (const raw of [one.access, one.refresh, twoNow.access, twoNow.refresh, jag, exchanged, handEdited]) {
      expect(text).not.toContain(raw);
      expect(text).not.toContain(hashToken(raw));
    }
    expect(listed.body.grants.map((g: { grantId: string }) => g.grantId)).toContain(grantIdOf({ tokenHash: hashToken(jag) }));
    // By client: the grants it holds, of every person.
    const byClient = await s.stack.admin('listGrants', { clientId: first });
    expect(byClient.body.grants.map((g: { subject: string }) => g.subject).sort()).toEqual(['bob-0002', DEMO_USER.sub, DEMO_USER.sub]);
    const both = await s.stack.admin('listGrants', { subject: DEMO_USER.sub, clientId: second });
    expect(both.body.grants).toHaveLength(1);

    // The documented hand edit, before offboarding: it keeps working as documented.
    const raw = await rawRedis();
    const handKey = (s.stack.store as RedisTokenStore).keys.userToken(hashToken(handEdited));
    await raw.hset(handKey, 'revoked', 'true');
    expect(await mcpStatus(handEdited)).toBe(401);

    // A credential kept for the person at the upstream (a connected account: sealed, never in clear).
    const kept = {
      subject: DEMO_USER.sub,
      issuer: s.idp.issuer,
      provider: 'oauth:github',
      keyId: 'k1',
      sealed: 'c2VhbGVk',
      createdAt: Date.now(),
    };
    await s.stack.store.putUpstreamCredential(kept);
    await s.stack.store.putUpstreamCredential({ ...kept, subject: 'bob-0002' });

    const revoked = await s.stack.admin('revokeSubject', { subject: DEMO_USER.sub });
    expect(revoked.status).toBe(200);
    // Access: one per sign-in, the refreshed one, the ID-JAG one. Refresh: the first family's, and the
    // second's rotated one and its successor. User: the one not already revoked by hand. Handles: the
    // MCP sessions the five initialize calls above opened with the person's tokens.
    expect(revoked.body).toEqual({
      subject: DEMO_USER.sub,
      accessTokensRevoked: 4,
      refreshTokensRevoked: 3,
      userTokensRevoked: 1,
      consentsForgotten: 0,
      connectedAccountsDeleted: 1,
      handlesForgotten: 5,
      approvalsCancelled: 0,
    });
    expect(await s.stack.store.getUpstreamCredential(DEMO_USER.sub, s.idp.issuer, 'oauth:github')).toBeNull();
    expect(await s.stack.store.getUpstreamCredential('bob-0002', s.idp.issuer, 'oauth:github')).toMatchObject({ subject: 'bob-0002' });
    for (const token of [one.access, two.access, twoNow.access, jag, exchanged, handEdited]) expect(await mcpStatus(token)).toBe(401);
    for (const refresh of [one.refresh, twoNow.refresh]) {
      expect(
        (
          await tokenRequest(s.base, {
            grant_type: 'refresh_token',
            refresh_token: refresh,
            client_id: refresh === one.refresh ? first : second,
          })
        ).status,
      ).toBe(400);
    }
    expect(await raw.hget(handKey, 'revoked')).toBe('true');
    expect(await mcpStatus(bobUser)).toBe(200);
    expect(await mcpStatus(bobJag)).toBe(200);
    expect((await s.stack.admin('listGrants', { subject: DEMO_USER.sub })).body.grants).toEqual([]);
    expect((await s.stack.admin('listGrants', { subject: 'bob-0002' })).body.grants).toHaveLength(2);

    // Harmless again; an unknown person is zeros too.
    expect((await s.stack.admin('revokeSubject', { subject: DEMO_USER.sub })).body).toEqual({ subject: DEMO_USER.sub, ...ZERO });
    expect((await s.stack.admin('revokeSubject', { subject: 'nobody-ever' })).body).toEqual({ subject: 'nobody-ever', ...ZERO });
    // A hand edit after offboarding still works as documented (the record stays revoked).
    await raw.hset(handKey, 'revoked', 'true');
    expect(await mcpStatus(handEdited)).toBe(401);
    await raw.quit();

    const events = await s.stack.admin('listAuditEvents', { count: 20 });
    // Newest first: the first call's event is the older of the two.
    const event = events.body.events
      .filter((e: { action: string; subject?: string }) => e.action === 'revokeSubject' && e.subject === DEMO_USER.sub)
      .at(-1);
    expect(event).toMatchObject({
      who: 'master',
      result: 'ok',
      subject: DEMO_USER.sub,
      detail: { accessTokensRevoked: 4, userTokensRevoked: 1 },
    });
  });

  it("issuer narrows revokeSubject to that IdP's subject", async () => {
    const here = await userToken('carol-0003');
    const elsewhere = await userToken('carol-0003', 'https://other-idp.example.com/');
    const result = await s.stack.admin('revokeSubject', { subject: 'carol-0003', issuer: s.idp.issuer });
    expect(result.body).toMatchObject({ userTokensRevoked: 1 });
    expect(await mcpStatus(here)).toBe(401);
    expect(await mcpStatus(elsewhere)).toBe(200);
  });

  it('rebuildSubjectIndex finds a user-grade record written before the index existed, so revokeSubject reaches it', async () => {
    const raw = await rawRedis();
    const token = generateToken();
    const now = s.stack.clock.now();
    const key = (s.stack.store as RedisTokenStore).keys.userToken(hashToken(token));
    // The documented layout, written as an older version wrote it (no index member).
    await raw.hset(key, {
      tokenHash: hashToken(token),
      subject: 'dave-0004',
      issuer: s.idp.issuer,
      revoked: 'false',
      createdAt: String(now),
      expiresAt: String(now + TTL_7_DAYS),
    });
    await raw.pexpireat(key, now + TTL_7_DAYS);
    expect(await mcpStatus(token)).toBe(200);
    expect((await s.stack.admin('revokeSubject', { subject: 'dave-0004' })).body.userTokensRevoked).toBe(0);
    const rebuilt = await s.stack.admin('rebuildSubjectIndex');
    expect(rebuilt.status).toBe(200);
    expect(rebuilt.body.indexed).toBeGreaterThanOrEqual(1);
    expect((await s.stack.admin('revokeSubject', { subject: 'dave-0004' })).body.userTokensRevoked).toBe(1);
    expect(await mcpStatus(token)).toBe(401);
    await raw.quit();
  });

  it('bad arguments are 400 with the field named; an unknown client 404; no master token 401', async () => {
    expect((await s.stack.admin('listGrants', {})).body).toEqual({
      error: 'invalid_request',
      error_description: 'subject or clientId (or both) is required',
    });
    expect((await s.stack.admin('listGrants', { subject: '' })).status).toBe(400);
    expect((await s.stack.admin('listGrants', { subject: 'x'.repeat(1025) })).body.error_description).toBe(
      'subject must be a non-empty string of at most 1024 characters',
    );
    expect((await s.stack.admin('listGrants', { subject: 42 })).status).toBe(400);
    expect((await s.stack.admin('revokeSubject', {})).body.error_description).toBe(
      'subject must be a non-empty string of at most 1024 characters',
    );
    expect((await s.stack.admin('revokeSubject', { subject: ['a'] })).status).toBe(400);
    expect((await s.stack.admin('revokeSubject', { subject: 'a', issuer: '' })).status).toBe(400);
    expect((await s.stack.admin('listGrants', { clientId: 'mcp_unknown' })).status).toBe(404);
    const res = await fetch(`${s.stack.adminUrl}/oauth/revokeSubject`, {
      method: 'POST',
      body: JSON.stringify({ subject: DEMO_USER.sub }),
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(401);
  });
});

describe('revokeSubject voids what is pending for the person', () => {
  /** Offboards the demo user; the stack's clock then moves on, as time does after the call. */
  async function offboard(args: Record<string, string> = {}): Promise<void> {
    expect((await s.stack.admin('revokeSubject', { subject: DEMO_USER.sub, ...args })).status).toBe(200);
    s.stack.clock.advance(1);
  }

  /** A sign-in through `clientId` up to the code the client received, not yet redeemed. */
  async function codeNotRedeemed(clientId: string) {
    const p = pkce();
    const hop = await approveAndSignIn(new UserAgent(), s.base, authorizeUrl(s.base, standardParams(s.base, clientId, p)));
    const code = clientReceived(hop).get('code')!;
    const redeem = () =>
      tokenRequest(s.base, {
        grant_type: 'authorization_code',
        code,
        redirect_uri: CLIENT_REDIRECT,
        client_id: clientId,
        code_verifier: p.verifier,
      });
    return { redeem };
  }

  it('an authorization code issued before and redeemed after gives nothing; a sign-in after the call works', async () => {
    const clientId = await registerPublicClient(s.base, { client_name: 'Pending code' });
    const pending = await codeNotRedeemed(clientId);
    await offboard();
    const late = await pending.redeem();
    expect(late.status).toBe(400);
    expect(late.body.error).toBe('invalid_grant');
    // What the redemption wrote before it found the cut-off is revoked: the person holds no grant.
    expect((await s.stack.admin('listGrants', { subject: DEMO_USER.sub })).body.grants).toEqual([]);
    // The person may sign in again afterwards.
    const again = await (await codeNotRedeemed(clientId)).redeem();
    expect(again.status).toBe(200);
    expect(await mcpStatus(again.body.access_token as string)).toBe(200);
    await offboard();
  });

  it('a device code approved before and polled after gives nothing (it needs no IdP after approval)', async () => {
    const clientId = await registerDeviceClient(s.base);
    const d = await startDevice(s.base, clientId);
    const agent = new UserAgent();
    const done = await decide(agent, s.base, await enterCode(agent, s.base, d.user_code), 'approve');
    expect(done.status).toBe(200);
    await offboard();
    const late = await poll(s.base, clientId, d.device_code);
    expect(late.status).toBe(400);
    expect(late.body.access_token).toBeUndefined();
    expect(late.body.error).toBe('invalid_grant');
    expect((await s.stack.admin('listGrants', { subject: DEMO_USER.sub })).body.grants).toEqual([]);
    // A device approved after the call works.
    const next = await startDevice(s.base, clientId);
    const agent2 = new UserAgent();
    expect((await decide(agent2, s.base, await enterCode(agent2, s.base, next.user_code), 'approve')).status).toBe(200);
    const ok = await poll(s.base, clientId, next.device_code);
    expect(ok.status).toBe(200);
    await offboard();
  });

  it('an account-page session signed in before is signed out: the page sends the browser to the IdP again', async () => {
    const agent = new UserAgent();
    const open = async (): Promise<Hop> => agent.request(`${s.base}/account`);
    const first = await open();
    expect(first.status).toBe(303);
    const page = await agent.follow(first);
    expect(page.status).toBe(200);
    expect((await open()).status).toBe(200);
    await offboard();
    const after = await open();
    expect(after.status).toBe(303);
    expect(after.location!.startsWith(s.idp.issuer)).toBe(true);
    // Signing in again gives a new session, which works.
    expect((await agent.follow(after)).status).toBe(200);
    expect((await open()).status).toBe(200);
  });

  it("another issuer's cut-off leaves the person's pending code at this issuer working", async () => {
    const clientId = await registerPublicClient(s.base, { client_name: 'Other issuer' });
    const pending = await codeNotRedeemed(clientId);
    await offboard({ issuer: 'https://another-idp.example' });
    const redeemed = await pending.redeem();
    expect(redeemed.status).toBe(200);
    await offboard();
  });
});
