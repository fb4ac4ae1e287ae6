// A sidecar with browser sign-in through a real OpenID provider (the demo's oidc-provider, in this
// process, on port 0), plus the steps of the flow as a client and a browser take them.

import { randomBytes, hash } from 'node:crypto';
import { startDemoIdp, type DemoIdp } from '../../demo/idp.ts';
import { startStack, type Stack, type StackOptions } from './stack.ts';
import { consentRequestId, UserAgent, type Hop } from './user-agent.ts';

export const CLIENT_REDIRECT = 'http://127.0.0.1:7777/callback';

export interface SignInStack {
  stack: Stack;
  idp: DemoIdp;
  /** PUBLIC_URL of the sidecar (http://localhost:<port>). */
  base: string;
  close(): Promise<void>;
}

export async function startSignInStack(
  options: {
    autoLogin?: boolean;
    idp?: Record<string, unknown>;
    store?: StackOptions['store'];
    config?: Record<string, unknown>;
    cimd?: StackOptions['cimd'];
    clock?: StackOptions['clock'];
    userClaims?: Record<string, unknown>;
    genericIdp?: boolean;
    upstreamUrl?: string;
    connectCallback?: boolean;
  } = {},
): Promise<SignInStack> {
  let base = '';
  const clientId = 'mcp-bearer-proxy';
  const clientSecret = randomBytes(32).toString('hex');
  const idp = await startDemoIdp({
    clientId,
    clientSecret,
    redirectUri: () => `${base}/oauth/callback`,
    ...(options.connectCallback ? { moreRedirectUris: () => [`${base}/connect/callback`] } : {}),
    autoLogin: options.autoLogin ?? true,
    generic: options.genericIdp === true,
    ...(options.userClaims ? { userClaims: options.userClaims } : {}),
  });
  const stack = await startStack({
    ...(options.store ? { store: options.store } : {}),
    ...(options.cimd ? { cimd: options.cimd } : {}),
    ...(options.upstreamUrl ? { upstreamUrl: options.upstreamUrl } : {}),
    ...(options.clock ? { clock: options.clock } : {}),
    config: { ...options.config, idp: { issuer: idp.issuer, clientId, clientSecret, requestTimeoutMs: 10_000, ...options.idp } },
  });
  base = stack.sidecar.publicUrl();
  return {
    stack,
    idp,
    base,
    async close() {
      await stack.close();
      await idp.close();
    },
  };
}

export interface Pkce {
  verifier: string;
  challenge: string;
}

export function pkce(): Pkce {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: hash('sha256', verifier, 'base64url') };
}

/** POST /register of a public client that signs users in (what MCP clients send). */
export async function registerPublicClient(base: string, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await fetch(`${base}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      client_name: 'Sign-in test client',
      redirect_uris: [CLIENT_REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      ...extra,
    }),
  });
  const body = (await res.json()) as { client_id?: string };
  if (res.status !== 201 || !body.client_id) throw new Error(`register: ${res.status} ${JSON.stringify(body)}`);
  return body.client_id;
}

export function authorizeUrl(base: string, params: Record<string, string | undefined>): string {
  const url = new URL(`${base}/authorize`);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.append(k, v);
  return url.href;
}

export function standardParams(
  base: string,
  clientId: string,
  p: Pkce,
  extra: Record<string, string | undefined> = {},
): Record<string, string | undefined> {
  return {
    response_type: 'code',
    client_id: clientId,
    redirect_uri: CLIENT_REDIRECT,
    code_challenge: p.challenge,
    code_challenge_method: 'S256',
    state: `state-${randomBytes(4).toString('hex')}`,
    resource: `${base}/mcp`,
    ...extra,
  };
}

/** Consent page -> Approve -> the IdP (auto-login) -> the sidecar's callback: the hop that redirects to the client. */
export async function approveAndSignIn(agent: UserAgent, base: string, authorizeHref: string, redirectUri = CLIENT_REDIRECT): Promise<Hop> {
  const page = await agent.request(authorizeHref);
  if (page.status !== 200) throw new Error(`authorize: ${page.status} ${page.location ?? page.body.slice(0, 200)}`);
  const approved = await agent.request(`${base}/authorize/consent`, {
    form: { request: consentRequestId(page.body), decision: 'approve' },
  });
  return agent.follow(approved, redirectUri);
}

/** The authorization code (and the rest of the query) the client receives. */
export function clientReceived(hop: Hop): URLSearchParams {
  if (hop.location === undefined) throw new Error(`no redirect to the client: ${hop.status} ${hop.body.slice(0, 300)}`);
  return new URL(hop.location).searchParams;
}

export async function tokenRequest(base: string, params: Record<string, string>, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(params).toString(),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
}
