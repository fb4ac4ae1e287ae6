// The identity provider as an operator sets it up: the start-up check (discovery document, keys,
// client credentials) against the in-process oidc-provider, a wrong client secret on the sign-in
// error page, and a generic OpenID provider that releases email and groups only at userinfo (OpenID
// Connect Core §5.4, oidc-provider's `conformIdTokenClaims`), with the cause logged when the groups
// claim never arrives.

import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildConfig } from '../../src/config/load.ts';
import { startDemoIdp, type DemoIdp } from '../../demo/idp.ts';
import { checkIdentityProvider } from '../../src/oauth/idp-check.ts';
import { freePort } from '../support/redis-server.ts';
import {
  approveAndSignIn,
  authorizeUrl,
  clientReceived,
  pkce,
  registerPublicClient,
  standardParams,
  startSignInStack,
} from '../support/sign-in.ts';
import { consentRequestId, UserAgent } from '../support/user-agent.ts';

const CREDENTIALS_REFUSED = "the identity provider refused the sidecar's client credentials: check IDP_CLIENT_ID / IDP_CLIENT_SECRET";

function configFor(idp: Record<string, unknown>) {
  return buildConfig(
    { masterToken: randomBytes(32).toString('hex'), proxy: { publicUrl: 'http://127.0.0.1:9' }, idp: { requestTimeoutMs: 10_000, ...idp } },
    {},
  );
}

describe('the start-up check of the identity provider', () => {
  let idp: DemoIdp;
  const clientSecret = randomBytes(32).toString('hex');
  beforeAll(async () => {
    idp = await startDemoIdp({ clientId: 'sidecar', clientSecret, redirectUri: () => 'http://127.0.0.1:9/oauth/callback' });
  });
  afterAll(async () => {
    await idp?.close();
  });

  it('a reachable IdP with the right credentials: no problem', async () => {
    expect(await checkIdentityProvider(configFor({ issuer: idp.issuer, clientId: 'sidecar', clientSecret }))).toEqual([]);
  });

  it('an unreachable issuer: the discovery URL tried, and IDP_ISSUER named', async () => {
    const port = await freePort(); // bound and closed again: nothing listens there
    const problems = await checkIdentityProvider(
      configFor({ issuer: `http://127.0.0.1:${port}/realms/main`, clientId: 'sidecar', clientSecret }),
    );
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain(`discovery document at http://127.0.0.1:${port}/realms/main/.well-known/openid-configuration`);
    expect(problems[0]).toContain('IDP_ISSUER');
  });

  it('a mistyped issuer (a path the IdP does not serve): the URL tried', async () => {
    const problems = await checkIdentityProvider(configFor({ issuer: `${idp.issuer}/realms/typo`, clientId: 'sidecar', clientSecret }));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain(`${idp.issuer}/realms/typo/.well-known/openid-configuration`);
  });

  it('a wrong client secret: reported as refused client credentials, the secret not printed', async () => {
    const wrong = randomBytes(32).toString('hex');
    const problems = await checkIdentityProvider(configFor({ issuer: idp.issuer, clientId: 'sidecar', clientSecret: wrong }));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain(CREDENTIALS_REFUSED);
    expect(problems[0]).toContain(`${idp.issuer}/token`);
    expect(problems[0]).not.toContain(wrong);
  });

  it('a wrong client id: the same', async () => {
    const problems = await checkIdentityProvider(configFor({ issuer: idp.issuer, clientId: 'not-registered', clientSecret }));
    expect(problems).toEqual([expect.stringContaining(CREDENTIALS_REFUSED)]);
  });

  it('the token exchange: an unreachable IDP_JWKS_URL is named', async () => {
    const port = await freePort();
    const jwksUrl = `http://127.0.0.1:${port}/jwks`;
    const problems = await checkIdentityProvider(configFor({ issuer: idp.issuer, audience: 'mcp', jwksUrl }));
    expect(problems).toEqual([expect.stringContaining(`keys at ${jwksUrl} (IDP_JWKS_URL)`)]);
    expect(await checkIdentityProvider(configFor({ issuer: idp.issuer, audience: 'mcp', jwksUrl: `${idp.issuer}/jwks` }))).toEqual([]);
  });
});

describe('a wrong client secret at sign-in', () => {
  it('the callback answers a page saying so, and the log says it too; nothing goes to the client', async () => {
    const s = await startSignInStack({ idp: { clientSecret: randomBytes(32).toString('hex') } });
    try {
      const id = await registerPublicClient(s.base);
      const agent = new UserAgent();
      const page = await agent.request(authorizeUrl(s.base, standardParams(s.base, id, pkce())));
      const approved = await agent.request(`${s.base}/authorize/consent`, {
        form: { request: consentRequestId(page.body), decision: 'approve' },
      });
      const hop = await agent.follow(approved, 'http://127.0.0.1:7777');
      expect(hop.status).toBe(502);
      expect(hop.location).toBeUndefined();
      expect(hop.body).toContain(CREDENTIALS_REFUSED.replace("'", '&#39;'));
      expect(s.stack.logs.some((l) => l.includes(CREDENTIALS_REFUSED) && l.includes('"level":50'))).toBe(true);
    } finally {
      await s.close();
    }
  });
});

describe('a generic OpenID provider that releases email and groups only at userinfo', () => {
  async function signIn(options: Parameters<typeof startSignInStack>[0]) {
    const s = await startSignInStack({ genericIdp: true, ...options });
    try {
      const id = await registerPublicClient(s.base);
      const back = clientReceived(
        await approveAndSignIn(new UserAgent(), s.base, authorizeUrl(s.base, standardParams(s.base, id, pkce()))),
      );
      return { back, logs: s.stack.logs };
    } finally {
      await s.close();
    }
  }

  it('with the groups scope asked: the email domain and the required group are read from userinfo, and sign-in works', async () => {
    const { back } = await signIn({
      idp: { scopes: 'openid email profile groups', requiredGroup: 'mcp-users', allowedEmailDomains: ['example.com'] },
    });
    expect(back.get('error')).toBeNull();
    expect(back.get('code')).toMatch(/^[0-9a-f]{64}$/);
  });

  it('without the groups scope: refused, and the log names the cause (scope not asked) and what to set', async () => {
    const { back, logs } = await signIn({ idp: { requiredGroup: 'mcp-users' } });
    expect(back.get('error')).toBe('access_denied');
    const line = logs.find((l) => l.includes('"cause":"scope not asked"'));
    expect(line).toContain('add groups to IDP_SCOPES');
  });

  it('a claim the IdP never releases: the log names the cause (claim not released) and what to set', async () => {
    const { back, logs } = await signIn({
      idp: { scopes: 'openid email profile groups', requiredGroup: 'mcp-users', groupsClaim: 'roles' },
    });
    expect(back.get('error')).toBe('access_denied');
    const line = logs.find((l) => l.includes('"cause":"claim not released"'));
    expect(line).toContain('"roles"');
    expect(line).toContain('idp.groupsClaim');
  });
});
