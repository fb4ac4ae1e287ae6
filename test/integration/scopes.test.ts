// Scopes as real clients ask for them: `scopes_supported` is always published, and /authorize grants
// only scopes this server defines (those the policy names). mcp-remote falls back to
// `openid email profile` when metadata names none (its `coerceScope`/`DEFAULT_SCOPE`): such scopes
// are neither shown as access on the consent page nor granted, so they never reach the upstream.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashToken } from '../../src/model/credentials.ts';
import {
  approveAndSignIn,
  authorizeUrl,
  clientReceived,
  CLIENT_REDIRECT,
  pkce,
  registerPublicClient,
  standardParams,
  startSignInStack,
  tokenRequest,
  type SignInStack,
} from '../support/sign-in.ts';
import { UserAgent } from '../support/user-agent.ts';
import { readable } from '../support/records.ts';

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

async function metadata(base: string) {
  const resource = (await (await fetch(`${base}/.well-known/oauth-protected-resource/mcp`)).json()) as Record<string, unknown>;
  const server = (await (await fetch(`${base}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
  return { resource, server };
}

/** Signs in asking for `scope`; the granted scope as the token response and the stored token say it. */
async function grantedScope(s: SignInStack, scope: string | undefined, registered: Record<string, unknown> = {}) {
  const clientId = await registerPublicClient(s.base, registered);
  const p = pkce();
  const received = clientReceived(
    await approveAndSignIn(new UserAgent(), s.base, authorizeUrl(s.base, standardParams(s.base, clientId, p, { scope }))),
  );
  const tokens = await tokenRequest(s.base, {
    grant_type: 'authorization_code',
    code: received.get('code')!,
    redirect_uri: CLIENT_REDIRECT,
    client_id: clientId,
    code_verifier: p.verifier,
  });
  expect(tokens.status).toBe(200);
  const record = await s.stack.store.lookupToken(hashToken(tokens.body.access_token as string));
  return { response: tokens.body.scope, stored: readable(record.oauth)?.scope };
}

describe('without a policy naming scopes', () => {
  let s: SignInStack;
  beforeAll(async () => {
    s = await startSignInStack();
  });
  afterAll(async () => {
    await s?.close();
  });

  it('scopes_supported is published, empty, in both metadata documents', async () => {
    const { resource, server } = await metadata(s.base);
    expect(resource.scopes_supported).toEqual([]);
    expect(server.scopes_supported).toEqual([]);
  });

  it("mcp-remote's openid email profile: named as not granted on the consent page, and no scope granted", async () => {
    const clientId = await registerPublicClient(s.base);
    const page = await new UserAgent().request(
      authorizeUrl(s.base, standardParams(s.base, clientId, pkce(), { scope: 'openid email profile' })),
    );
    expect(page.status).toBe(200);
    expect(page.body).not.toContain('<code>openid</code>');
    expect(page.body).toContain('not defined by this server and not granted: openid, email, profile');
    expect(page.body).toContain('no narrower scope asked');
    expect(await grantedScope(s, 'openid email profile')).toEqual({ response: undefined, stored: undefined });
  });
});

describe('with a policy naming scopes', () => {
  let s: SignInStack;
  beforeAll(async () => {
    s = await startSignInStack({ config: { policy: POLICY } });
  });
  afterAll(async () => {
    await s?.close();
  });

  it('scopes_supported lists them', async () => {
    const { resource, server } = await metadata(s.base);
    expect(resource.scopes_supported).toEqual(['mcp:read', 'mcp:write']);
    expect(server.scopes_supported).toEqual(['mcp:read', 'mcp:write']);
  });

  it('the consent page shows the defined scopes as access and the others as ignored', async () => {
    const clientId = await registerPublicClient(s.base);
    const page = await new UserAgent().request(
      authorizeUrl(s.base, standardParams(s.base, clientId, pkce(), { scope: 'openid mcp:read email' })),
    );
    expect(page.body).toContain('<code>mcp:read</code>');
    expect(page.body).not.toContain('<code>openid</code>');
    expect(page.body).toContain('not granted: openid, email.');
  });

  it('a requested scope outside scopes_supported is not granted (a client registered without a scope asks for admin)', async () => {
    expect(await grantedScope(s, 'openid email profile mcp:read admin')).toEqual({ response: 'mcp:read', stored: 'mcp:read' });
    expect(await grantedScope(s, 'mcp:write admin')).toEqual({ response: 'mcp:write', stored: 'mcp:write' });
    expect(await grantedScope(s, 'admin')).toEqual({ response: undefined, stored: undefined });
  });

  it("a client's registered scope is its default, limited the same way", async () => {
    expect(await grantedScope(s, undefined, { scope: 'openid mcp:read' })).toEqual({ response: 'mcp:read', stored: 'mcp:read' });
  });
});
