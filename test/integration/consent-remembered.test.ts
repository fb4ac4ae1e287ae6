// Remembered consent over real HTTP: the sidecar on real Redis, a real OpenID provider (oidc-provider,
// in this process), and a fetch-based user agent whose cookie jar is kept between sign-ins, as one
// browser's is. An approval given with "Remember" checked spares the consent page on the next sign-in
// of the same IdP user, client, redirect URI and scope set; anything else asks again, and a different
// IdP user coming back from the IdP is asked before any code exists.

import { decodeJwt, importPKCS8, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_USER } from '../../demo/idp.ts';
import { hashToken } from '../../src/model/credentials.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import {
  authorizeUrl,
  CLIENT_REDIRECT,
  pkce,
  registerPublicClient,
  standardParams,
  startSignInStack,
  tokenRequest,
  type SignInStack,
} from '../support/sign-in.ts';
import { consentRequestId, UserAgent, type Hop } from '../support/user-agent.ts';
import { readable } from '../support/records.ts';

const OTHER_REDIRECT = 'http://127.0.0.1:7777/other';
const POLICY = {
  default: 'allow',
  rules: [
    {
      name: 'writers',
      effect: 'allow',
      principals: { scopes: ['mcp:read', 'mcp:write'] },
      requests: { methods: ['tools/call'], names: ['echo'] },
    },
  ],
};

/** Re-signs the IdP's next ID token with other claims (its own key: only the user differs). */
async function impersonateNext(s: SignInStack): Promise<(claims: Record<string, unknown> | undefined) => void> {
  let next: Record<string, unknown> | undefined;
  const key = await importPKCS8(s.idp.signingKeyPem, 'RS256');
  s.idp.provider.use(async (ctx, nextMiddleware) => {
    await nextMiddleware();
    const body = ctx.body as { id_token?: string } | undefined;
    if (ctx.path !== '/token' || next === undefined || typeof body?.id_token !== 'string') return;
    const claims = { ...decodeJwt(body.id_token), ...next };
    next = undefined;
    body.id_token = await new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: 'demo-key' }).sign(key);
  });
  return (claims) => {
    next = claims;
  };
}

interface SignIn {
  /** Whether a consent page was shown (before the IdP, or after it). */
  asked: 'before' | 'after' | false;
  /** The last hop: the redirect to the client, or the consent page shown after the IdP. */
  hop: Hop;
  code: string | undefined;
  verifier: string;
}

function isConsentPage(hop: Hop): boolean {
  return hop.status === 200 && hop.body.includes('name="decision" value="approve"');
}

/**
 * One sign-in as a browser does it: /authorize, then the consent page when shown (Approve, with the
 * "remember" checkbox as `remember` says), the IdP (auto-login), and the callback.
 */
async function signIn(
  s: SignInStack,
  agent: UserAgent,
  clientId: string,
  options: { scope?: string; redirectUri?: string; remember?: boolean; decision?: 'approve' | 'deny' } = {},
): Promise<SignIn> {
  const p = pkce();
  const redirectUri = options.redirectUri ?? CLIENT_REDIRECT;
  const params = standardParams(s.base, clientId, p, {
    redirect_uri: redirectUri,
    ...(options.scope !== undefined ? { scope: options.scope } : {}),
  });
  let hop = await agent.request(authorizeUrl(s.base, params));
  let asked: SignIn['asked'] = false;
  const answer = async (page: Hop): Promise<Hop> => {
    const form: Record<string, string> = { request: consentRequestId(page.body), decision: options.decision ?? 'approve' };
    if (options.remember !== false && /<input type="checkbox" name="remember" value="yes" checked>/.test(page.body)) form.remember = 'yes';
    return agent.follow(await agent.request(`${s.base}/authorize/consent`, { form }), redirectUri);
  };
  if (isConsentPage(hop)) {
    asked = 'before';
    hop = await answer(hop);
  } else {
    expect(hop.status, hop.body.slice(0, 200)).toBe(302);
    expect(hop.location!.startsWith(s.idp.issuer)).toBe(true);
    hop = await agent.follow(hop, redirectUri);
    if (isConsentPage(hop)) {
      asked = 'after';
      if (options.decision === undefined) return { asked, hop, code: undefined, verifier: p.verifier };
      hop = await answer(hop);
    }
  }
  const location = hop.location !== undefined && hop.location.startsWith(redirectUri) ? new URL(hop.location) : undefined;
  return { asked, hop, code: location?.searchParams.get('code') ?? undefined, verifier: p.verifier };
}

async function redeem(s: SignInStack, clientId: string, done: SignIn, redirectUri = CLIENT_REDIRECT) {
  const tokens = await tokenRequest(s.base, {
    grant_type: 'authorization_code',
    code: done.code!,
    redirect_uri: redirectUri,
    client_id: clientId,
    code_verifier: done.verifier,
  });
  expect(tokens.status).toBe(200);
  return tokens.body as { access_token: string; refresh_token: string };
}

async function subjectOf(s: SignInStack, accessToken: string): Promise<string | undefined> {
  return readable((await s.stack.store.lookupToken(hashToken(accessToken))).oauth)?.subject;
}

describe('remembered consent (oauth.consentRememberSeconds, 30 days by default)', () => {
  let s: SignInStack;
  let impersonate: (claims: Record<string, unknown> | undefined) => void;

  beforeAll(async () => {
    s = await startSignInStack({ config: { policy: POLICY } });
    impersonate = await impersonateNext(s);
  });
  afterAll(async () => {
    await s?.close();
  });

  it('the consent page offers "remember", checked; with it, a second sign-in from the same client skips the page', async () => {
    const clientId = await registerPublicClient(s.base);
    const agent = new UserAgent();
    const first = await signIn(s, agent, clientId);
    expect(first.asked).toBe('before');
    await redeem(s, clientId, first);
    const again = await signIn(s, agent, clientId);
    expect(again.asked).toBe(false);
    expect(again.code).toMatch(/^[0-9a-f]{64}$/);
    expect(await subjectOf(s, (await redeem(s, clientId, again)).access_token)).toBe(DEMO_USER.sub);
    // Another browser (no cookie) is asked: the approval is this browser's.
    expect((await signIn(s, new UserAgent(), clientId)).asked).toBe('before');
  });

  it('unchecked, the approval is not remembered: the next sign-in asks again', async () => {
    const clientId = await registerPublicClient(s.base);
    const agent = new UserAgent();
    expect((await signIn(s, agent, clientId, { remember: false })).asked).toBe('before');
    expect((await signIn(s, agent, clientId)).asked).toBe('before');
  });

  it('a wider scope set asks again; the same or a narrower one does not', async () => {
    const clientId = await registerPublicClient(s.base);
    const agent = new UserAgent();
    expect((await signIn(s, agent, clientId, { scope: 'mcp:read' })).asked).toBe('before');
    expect((await signIn(s, agent, clientId, { scope: 'mcp:read' })).asked).toBe(false);
    expect((await signIn(s, agent, clientId, { scope: 'mcp:read mcp:write' })).asked).toBe('before');
    expect((await signIn(s, agent, clientId, { scope: 'mcp:write' })).asked).toBe(false);
    expect((await signIn(s, agent, clientId)).asked).toBe(false);
  });

  it('a different redirect URI of the same client asks again', async () => {
    const clientId = await registerPublicClient(s.base, { redirect_uris: [CLIENT_REDIRECT, OTHER_REDIRECT] });
    const agent = new UserAgent();
    expect((await signIn(s, agent, clientId)).asked).toBe('before');
    expect((await signIn(s, agent, clientId, { redirectUri: OTHER_REDIRECT })).asked).toBe('before');
    expect((await signIn(s, agent, clientId, { redirectUri: OTHER_REDIRECT })).asked).toBe(false);
    expect((await signIn(s, agent, clientId)).asked).toBe(false);
  });

  it('another IdP user in the same browser is asked after the IdP, and no code exists before that user approves', async () => {
    const clientId = await registerPublicClient(s.base);
    const agent = new UserAgent();
    expect((await signIn(s, agent, clientId)).asked).toBe('before');
    const other = { sub: 'someone-else', email: 'someone.else@example.com' };
    impersonate(other);
    const shown = await signIn(s, agent, clientId);
    expect(shown.asked).toBe('after');
    expect(shown.hop.location).toBeUndefined();
    expect(shown.hop.body).toContain('someone.else@example.com');
    // Deny: the client hears access_denied, no code.
    impersonate(other);
    const denied = await signIn(s, agent, clientId, { decision: 'deny' });
    expect(denied.asked).toBe('after');
    expect(new URL(denied.hop.location!).searchParams.get('error')).toBe('access_denied');
    expect(denied.code).toBeUndefined();
    // Approve: the code acts for that user, whose approval is now remembered too.
    impersonate(other);
    const approved = await signIn(s, agent, clientId, { decision: 'approve' });
    expect(approved.asked).toBe('after');
    expect(await subjectOf(s, (await redeem(s, clientId, approved)).access_token)).toBe('someone-else');
    impersonate(other);
    expect((await signIn(s, agent, clientId)).asked).toBe(false);
    expect((await signIn(s, agent, clientId)).asked).toBe(false);
  });

  it('revoking the refresh token at /revoke (its whole family) forgets the approval it was issued under', async () => {
    const clientId = await registerPublicClient(s.base);
    const agent = new UserAgent();
    const tokens = await redeem(s, clientId, await signIn(s, agent, clientId));
    // Revoking an access token alone leaves it: the refresh token still acts under the approval.
    const revokeAccess = await fetch(`${s.base}/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: tokens.access_token, client_id: clientId }),
    });
    expect(revokeAccess.status).toBe(200);
    const stillRemembered = await signIn(s, agent, clientId);
    expect(stillRemembered.asked).toBe(false);
    const latest = await redeem(s, clientId, stillRemembered);
    const revoked = await fetch(`${s.base}/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: latest.refresh_token, client_id: clientId }),
    });
    expect(revoked.status).toBe(200);
    expect((await signIn(s, agent, clientId)).asked).toBe('before');
  });

  it('a client deleted by the administrator is refused outright; a client record made anew under the same id is asked again', async () => {
    const clientId = await registerPublicClient(s.base);
    const agent = new UserAgent();
    await redeem(s, clientId, await signIn(s, agent, clientId));
    expect((await signIn(s, agent, clientId)).asked).toBe(false);
    // The record made anew (a document client's record expired and re-created, say): another createdAt.
    const store = s.stack.store as RedisTokenStore;
    const redis = store.client;
    const key = store.keys.client(clientId);
    await redis.hset(key, 'createdAt', String(Number(await redis.hget(key, 'createdAt')) + 1));
    expect((await signIn(s, agent, clientId)).asked).toBe('before');
    expect((await signIn(s, agent, clientId)).asked).toBe(false);
    expect((await s.stack.admin('deleteClient', { clientId })).status).toBe(200);
    const refused = await agent.request(authorizeUrl(s.base, standardParams(s.base, clientId, pkce())));
    expect(refused.status).toBe(400);
    expect(refused.location).toBeUndefined();
  });

  it('an approval expires after oauth.consentRememberSeconds: then the user is asked again', async () => {
    const clientId = await registerPublicClient(s.base);
    const agent = new UserAgent();
    expect((await signIn(s, agent, clientId)).asked).toBe('before');
    s.stack.clock.advance(30 * 24 * 3600 * 1000 - 1000);
    expect((await signIn(s, agent, clientId)).asked).toBe(false);
    s.stack.clock.advance(1000);
    expect((await signIn(s, agent, clientId)).asked).toBe('before');
  });
});

describe('oauth.consentRememberSeconds: 0', () => {
  let s: SignInStack;
  beforeAll(async () => {
    s = await startSignInStack({ config: { oauth: { consentRememberSeconds: 0 } } });
  });
  afterAll(async () => {
    await s?.close();
  });

  it('every sign-in asks; the page offers no "remember", and one posted anyway is ignored', async () => {
    const clientId = await registerPublicClient(s.base);
    const agent = new UserAgent();
    const page = await agent.request(authorizeUrl(s.base, standardParams(s.base, clientId, pkce())));
    expect(isConsentPage(page)).toBe(true);
    expect(page.body).not.toContain('name="remember"');
    const approved = await agent.follow(
      await agent.request(`${s.base}/authorize/consent`, {
        form: { request: consentRequestId(page.body), decision: 'approve', remember: 'yes' },
      }),
      CLIENT_REDIRECT,
    );
    expect(approved.location).toContain('code=');
    expect([...(agent.jar.get(new URL(s.base).host)?.keys() ?? [])]).not.toContain('mcp-consent');
    expect((await signIn(s, agent, clientId)).asked).toBe('before');
  });
});
