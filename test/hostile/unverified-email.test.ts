// A user who can set their own address at the IdP (a self-service profile, a social or guest account)
// must not get another domain's tools: an IdP `email` counts for `principals.emailDomains` and
// `idp.allowedEmailDomains` only when the IdP says it verified it. The IdP here is the in-process
// oidc-provider releasing the user's claims as configured (`email_verified` false, absent, true), in
// the ID token as Keycloak, Okta and Google put it. The exchange's rows are in
// test/integration/oauth.test.ts (claim rules).

import { afterEach, describe, expect, it } from 'vitest';
import { DEMO_USER } from '../../demo/idp.ts';
import {
  approveAndSignIn,
  authorizeUrl,
  clientReceived,
  pkce,
  registerPublicClient,
  standardParams,
  startSignInStack,
  tokenRequest,
  CLIENT_REDIRECT,
  type SignInStack,
} from '../support/sign-in.ts';
import { UserAgent } from '../support/user-agent.ts';

/** Allows tools/call only to people at the demo user's domain. */
const POLICY = {
  default: 'deny',
  rules: [
    {
      name: 'example-staff',
      effect: 'allow',
      principals: { kinds: ['oauth', 'user'], emailDomains: ['example.com'] },
      requests: { methods: ['tools/call'] },
    },
  ],
};

describe('browser sign-in: the IdP email counts only when verified', () => {
  let s: SignInStack | undefined;
  afterEach(async () => {
    await s?.close();
    s = undefined;
  });

  /** Signs the demo user in and returns the access token, or the error the client was sent. */
  async function signIn(stack: SignInStack): Promise<{ token?: string; error?: string }> {
    const p = pkce();
    const clientId = await registerPublicClient(stack.base);
    const back = clientReceived(
      await approveAndSignIn(new UserAgent(), stack.base, authorizeUrl(stack.base, standardParams(stack.base, clientId, p))),
    );
    const code = back.get('code');
    if (code === null) return { error: back.get('error') ?? 'none' };
    const res = await tokenRequest(stack.base, {
      grant_type: 'authorization_code',
      code,
      redirect_uri: CLIENT_REDIRECT,
      client_id: clientId,
      code_verifier: p.verifier,
    });
    return { token: res.body.access_token as string };
  }

  async function decision(stack: SignInStack, token: string) {
    return (await stack.stack.admin('explainPolicy', { token, method: 'tools/call', name: 'delete_repo' })).body as {
      effect: string;
      principal: { email?: string };
    };
  }

  it.each([
    ['email_verified: false', { email_verified: false }, {}, 'deny'],
    ['no email_verified claim', { email_verified: undefined }, {}, 'deny'],
    ['email_verified: "true" (a string, not the boolean)', { email_verified: 'true' }, {}, 'deny'],
    ['email_verified: true', {}, {}, 'allow'],
    [
      'no email_verified claim, the IdP trusted with requireVerifiedEmail: false',
      { email_verified: undefined },
      { requireVerifiedEmail: false },
      'allow',
    ],
    ['email_verified: false, even with requireVerifiedEmail: false', { email_verified: false }, { requireVerifiedEmail: false }, 'deny'],
  ])('%s', async (_name, userClaims, idp, effect) => {
    s = await startSignInStack({ userClaims, idp, config: { policy: POLICY } });
    const { token } = await signIn(s);
    const explained = await decision(s, token!);
    expect(explained.effect).toBe(effect);
    // An email that does not count is not kept either (nor sent on in the caller assertion or logs).
    expect(explained.principal.email).toBe(effect === 'allow' ? DEMO_USER.email : undefined);
  });

  it('idp.allowedEmailDomains refuses a sign-in whose email is not verified (nothing issued)', async () => {
    s = await startSignInStack({ userClaims: { email_verified: false }, idp: { allowedEmailDomains: ['example.com'] } });
    expect(await signIn(s)).toEqual({ error: 'access_denied' });
    expect(s.stack.logs.some((l) => l.includes('email not verified'))).toBe(true);
  });
});
