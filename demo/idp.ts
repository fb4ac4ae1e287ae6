// DEMO ONLY, never for production: a development OpenID provider (panva's `oidc-provider`, a dev
// dependency) running in-process, with ONE hard-coded test user and a generated signing key held
// in memory. `npm run demo` and the tests use it so that browser sign-in works with no setup. It
// knows one client, the sidecar itself, and skips its own consent screen: the sidecar shows one.

import { generateKeyPairSync } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { escapeHtml, writePage } from '../src/web/pages.ts';

/** The demo's only user. The password is printed by `npm run demo`: it protects nothing. */
export const DEMO_USER = Object.freeze({
  username: 'demo',
  password: 'demo',
  sub: 'demo-user-0001',
  email: 'demo@example.com',
  name: 'Demo User',
  groups: ['mcp-users'],
});

export interface DemoIdpOptions {
  host?: string;
  port?: number;
  clientId: string;
  clientSecret: string;
  /**
   * Behave as many generic OpenID providers do (tests): profile claims only at userinfo, never in the
   * ID token, and the groups claim only for a `groups` scope.
   */
  generic?: boolean;
  /** The sidecar's callback, PUBLIC_URL/oauth/callback (known late when the sidecar binds port 0). */
  redirectUri: () => string;
  /** More redirect URIs of the same client (the sidecar's connect callback, PUBLIC_URL/connect/callback). */
  moreRedirectUris?: () => string[];
  /** Sign the demo user in without showing the login form (non-browser tests). */
  autoLogin?: boolean;
  /** Claims released for the demo user instead of its own (tests: an unverified email, say); `undefined` drops one. */
  userClaims?: Record<string, unknown>;
  /** More claims put in the ID token with `openid` (tests shaping a provider's tokens: Entra ID's `tid`, `oid`). */
  idTokenClaims?: string[];
  /** The login page's heading (tests telling two providers' pages apart); default `Sign in`. */
  loginTitle?: string;
}

/** The slice of oidc-provider's Provider used here (the package ships no types). */
export interface OidcProvider {
  callback(): (req: IncomingMessage, res: ServerResponse) => void;
  use(middleware: (ctx: { path: string; method: string; body: unknown; status: number }, next: () => Promise<void>) => Promise<void>): void;
  interactionDetails(
    req: IncomingMessage,
    res: ServerResponse,
  ): Promise<{
    uid: string;
    prompt: { name: string; details: Record<string, unknown> };
    params: Record<string, unknown>;
    session?: { accountId?: string };
  }>;
  interactionFinished(
    req: IncomingMessage,
    res: ServerResponse,
    result: Record<string, unknown>,
    options?: { mergeWithLastSubmission?: boolean },
  ): Promise<void>;
  Grant: new (init: { accountId: string; clientId: string }) => {
    addOIDCScope(scope: string): void;
    addOIDCClaims(claims: string[]): void;
    save(): Promise<string>;
  };
}

export interface DemoIdp {
  issuer: string;
  provider: OidcProvider;
  /** The RSA key the provider signs ID tokens with (PKCS#8 PEM), for tests that forge tokens. */
  signingKeyPem: string;
  close(): Promise<void>;
}

function loginForm(uid: string, failed: boolean, title = 'Sign in'): string {
  const error = failed ? '<p style="color:#b00">Wrong user name or password.</p>' : '';
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Demo identity provider</title>
<style>body{font-family:system-ui,sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem}label{display:block;margin:.8rem 0}
input{font-size:1rem;padding:.3rem;width:100%}button{font-size:1rem;padding:.5rem 1.5rem;margin-right:1rem}
.banner{background:#fee;border:1px solid #c00;padding:.5rem 1rem}</style></head><body>
<p class="banner"><strong>DEMO identity provider</strong> (mcp-bearer-proxy <code>npm run demo</code>): not for production.</p>
<h1>${escapeHtml(title)}</h1>${error}
<form method="post" action="/interaction/${escapeHtml(uid)}/login">
<label>User name <input name="username" autocomplete="username" value="${DEMO_USER.username}"></label>
<label>Password <input name="password" type="password" autocomplete="current-password"></label>
<button type="submit" name="action" value="login">Sign in</button><button type="submit" name="action" value="cancel">Cancel</button>
</form><p>Test user: <code>${DEMO_USER.username}</code> / <code>${DEMO_USER.password}</code></p></body></html>`;
}

async function readForm(req: IncomingMessage): Promise<URLSearchParams> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > 4096) throw new Error('form too large');
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

/** The demo provider's settings: the sidecar as its one client, in-memory keys, the demo user's claims. */
function providerConfig(options: DemoIdpOptions, jwk: Record<string, unknown>, cookieKey: string): Record<string, unknown> {
  return {
    clients: [
      {
        client_id: options.clientId,
        client_secret: options.clientSecret,
        redirect_uris: [options.redirectUri(), ...(options.moreRedirectUris?.() ?? [])],
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
    ],
    jwks: { keys: [jwk] },
    cookies: { keys: [cookieKey] },
    claims: options.generic
      ? { openid: ['sub', ...(options.idTokenClaims ?? [])], email: ['email', 'email_verified'], profile: ['name'], groups: ['groups'] }
      : { openid: ['sub', ...(options.idTokenClaims ?? [])], email: ['email', 'email_verified'], profile: ['name', 'groups'] },
    // Claims in the ID token itself, as Keycloak, Entra ID, Okta and Google put them there; a generic
    // provider follows OpenID Connect Core §5.4 to the letter and releases them at userinfo only.
    conformIdTokenClaims: options.generic === true,
    features: { devInteractions: { enabled: false } },
    interactions: { url: (_ctx: unknown, interaction: { uid: string }) => `/interaction/${interaction.uid}` },
    async findAccount(_ctx: unknown, sub: string) {
      if (sub !== DEMO_USER.sub) return undefined;
      return {
        accountId: sub,
        claims: async () => ({
          sub,
          email: DEMO_USER.email,
          email_verified: true,
          name: DEMO_USER.name,
          groups: [...DEMO_USER.groups],
          ...options.userClaims,
        }),
      };
    },
  };
}

export async function startDemoIdp(options: DemoIdpOptions): Promise<DemoIdp> {
  let Provider: new (issuer: string, config: Record<string, unknown>) => OidcProvider;
  try {
    // A dev dependency: present after `npm install`, absent from the production image.
    Provider = (await import('oidc-provider')).default as typeof Provider;
  } catch {
    throw new Error('the demo identity provider needs the dev dependency oidc-provider: run `npm install`');
  }
  const server: Server = createServer();
  server.listen(options.port ?? 0, options.host ?? '127.0.0.1');
  await once(server, 'listening');
  const address = server.address() as AddressInfo;
  const issuer = `http://${options.host ?? '127.0.0.1'}:${address.port}`;
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'demo-key', alg: 'RS256', use: 'sig' };

  // Built on first use: the sidecar's callback (the client's redirect URI) may be known only after
  // the sidecar has bound its port, which it does after learning this issuer.
  let built: OidcProvider | undefined;
  const build = (): OidcProvider =>
    new Provider(issuer, providerConfig(options, jwk, privateKey.export({ format: 'pem', type: 'pkcs8' }).toString().slice(-64)));
  const providerOf = (): OidcProvider => (built ??= build());

  async function interaction(req: IncomingMessage, res: ServerResponse, uid: string, action: string | undefined): Promise<void> {
    const provider = providerOf();
    const details = await provider.interactionDetails(req, res);
    if (details.uid !== uid) throw new Error('interaction mismatch');
    if (details.prompt.name === 'consent') {
      const grant = new provider.Grant({ accountId: details.session!.accountId!, clientId: options.clientId });
      grant.addOIDCScope(String(details.params.scope ?? 'openid'));
      const grantId = await grant.save();
      await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
      return;
    }
    if (action === undefined && !options.autoLogin) {
      writePage(res, 200, loginForm(uid, false, options.loginTitle));
      return;
    }
    if (action === undefined) {
      await provider.interactionFinished(req, res, { login: { accountId: DEMO_USER.sub } }, { mergeWithLastSubmission: false });
      return;
    }
    const form = await readForm(req);
    if (form.get('action') === 'cancel') {
      await provider.interactionFinished(
        req,
        res,
        { error: 'access_denied', error_description: 'the user cancelled sign-in' },
        { mergeWithLastSubmission: false },
      );
      return;
    }
    if (form.get('username') !== DEMO_USER.username || form.get('password') !== DEMO_USER.password) {
      writePage(res, 200, loginForm(uid, true, options.loginTitle));
      return;
    }
    await provider.interactionFinished(req, res, { login: { accountId: DEMO_USER.sub } }, { mergeWithLastSubmission: false });
  }

  let handleProvider: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const match = /^\/interaction\/([A-Za-z0-9_-]+)(\/login)?$/.exec((req.url ?? '').split('?')[0]!);
    if (!match) {
      handleProvider ??= providerOf().callback();
      handleProvider(req, res);
      return;
    }
    const isPost = req.method === 'POST' && match[2] !== undefined;
    interaction(req, res, match[1]!, isPost ? 'submit' : undefined).catch((err: unknown) => {
      if (!res.headersSent) writePage(res, 400, `<p>Demo identity provider: ${escapeHtml((err as Error).message)}</p>`);
    });
  });

  return {
    issuer,
    get provider() {
      return providerOf();
    },
    signingKeyPem: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
