// The connect pages: `GET /connect/<link>` sends the browser to the provider (authorization code +
// PKCE, openid-client), `GET /connect/callback` redeems the code and keeps the user's tokens for the
// principal the link was made for. The state is encrypted (jose, dir + A256GCM: the PKCE verifier
// inside never reaches the provider), single use, short lived, and bound to this browser by a cookie.

import { createHash, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { EncryptJWT, jwtDecrypt } from 'jose';
import * as oidc from 'openid-client';
import type { Clock } from '../model/clock.ts';
import type { Logger } from '../observability/logger.ts';
import { isLoopbackHost } from '../http/net-address.ts';
import { messagePage, writePage } from '../oauth/sign-in-pages.ts';
import type { OneTimeValueStorage } from '../store/types.ts';
import { ConnectLinkRefused, CONNECT_LINK_TTL_MS, type ConnectLinks } from './connect-links.ts';
import type { CredentialVault, UpstreamTokens } from './vault.ts';

/** The authorization server the user connects at: the IdP (mode idp) or the third-party provider (mode oauth). */
export interface ConnectProvider {
  /** The record's provider name (`idp`, `oauth:<host>`). */
  name: string;
  /** For people: "GitHub", "your identity provider". */
  label: string;
  scopes: string | undefined;
  /** The ID token's `sub` must be the link's subject (mode idp: the same person signs in again). */
  sameSubject: boolean;
  configuration(): Promise<oidc.Configuration>;
}

/** openid-client's configuration of a provider: discovery from `issuer`, or the two endpoints given. */
export function providerConfiguration(settings: {
  issuer?: string | undefined;
  authorizationEndpoint?: string | undefined;
  tokenEndpoint?: string | undefined;
  clientId: string;
  clientSecret?: string | undefined;
  timeoutMs: number;
}): () => Promise<oidc.Configuration> {
  const loopbackHttp = (url: string) => url.startsWith('http:') && isLoopbackHost(new URL(url).hostname);
  const auth = settings.clientSecret !== undefined ? oidc.ClientSecretBasic(settings.clientSecret) : oidc.None();
  let pending: Promise<oidc.Configuration> | undefined;
  return () => {
    pending ??= (async () => {
      let config: oidc.Configuration;
      if (settings.issuer !== undefined) {
        config = await oidc.discovery(new URL(settings.issuer), settings.clientId, undefined, auth, {
          timeout: settings.timeoutMs / 1000,
          ...(loopbackHttp(settings.issuer) ? { execute: [oidc.allowInsecureRequests] } : {}),
        });
      } else {
        const token = settings.tokenEndpoint!;
        // Not an OpenID provider (GitHub OAuth apps): no discovery, no ID token; its token endpoint
        // answers JSON because openid-client asks with `Accept: application/json`.
        config = new oidc.Configuration(
          { issuer: new URL(token).origin, authorization_endpoint: settings.authorizationEndpoint!, token_endpoint: token },
          settings.clientId,
          undefined,
          auth,
        );
        if (loopbackHttp(token)) oidc.allowInsecureRequests(config);
      }
      config.timeout = settings.timeoutMs / 1000;
      return config;
    })();
    const current = pending;
    current.catch(() => {
      if (pending === current) pending = undefined;
    });
    return current;
  };
}

/** The provider could not be reached (timeout, refused, 5xx). */
export function providerUnavailable(err: unknown): boolean {
  if (err instanceof TypeError) return true;
  if (err instanceof oidc.ResponseBodyError) return err.status >= 500;
  if (err instanceof oidc.ClientError) return err.code === 'OAUTH_TIMEOUT' || err.code === 'OAUTH_ABORT';
  return false;
}

export function tokensOf(tokens: oidc.TokenEndpointResponse, now: number, keptRefreshToken?: string): UpstreamTokens {
  const out: UpstreamTokens = { accessToken: tokens.access_token };
  const refreshToken = tokens.refresh_token ?? keptRefreshToken;
  if (refreshToken !== undefined) out.refreshToken = refreshToken;
  if (typeof tokens.expires_in === 'number' && Number.isFinite(tokens.expires_in))
    out.expiresAt = now + Math.trunc(tokens.expires_in * 1000);
  return out;
}

class ConnectPageError extends Error {
  readonly status: number;
  readonly title: string;
  constructor(status: number, title: string, text: string, options?: ErrorOptions) {
    super(text, options);
    this.status = status;
    this.title = title;
  }
}

const INVALID_LINK = new ConnectPageError(
  400,
  'Link not valid',
  'This link is not valid: it has expired, was altered, or was already used. Retry the request in your MCP client to get a new one.',
);
const STALE_STATE = new ConnectPageError(
  400,
  'Connection not valid',
  'This connection attempt is not valid: it expired, was already completed, or started in another browser. Retry the request in your MCP client to get a new link.',
);

export interface ConnectFlowOptions {
  links: ConnectLinks;
  vault: CredentialVault;
  provider: ConnectProvider;
  /** The issuer users are known by (IDP_ISSUER): the owner of a kept credential, with the subject. */
  issuer: string;
  /** The 32-byte credential key: the state key is derived from it. */
  credentialKey: Buffer;
  used: OneTimeValueStorage;
  clock: Clock;
  logger: Logger;
  publicUrl(): string;
  /** Told of each connected account (audit, metrics): never the token. */
  onConnected?: (subject: string, provider: string) => Promise<void> | void;
}

export class ConnectFlow {
  readonly #o: ConnectFlowOptions;
  readonly #stateKey: Uint8Array;

  constructor(options: ConnectFlowOptions) {
    this.#o = options;
    this.#stateKey = new Uint8Array(hkdfSync('sha256', options.credentialKey, Buffer.alloc(0), 'mcp-bearer-proxy connect state v1', 32));
  }

  #secure(): boolean {
    return this.#o.publicUrl().startsWith('https:');
  }

  #cookieName(): string {
    return this.#secure() ? '__Host-mcp-connect' : 'mcp-connect';
  }

  callbackUrl(): string {
    return `${this.#o.publicUrl()}/connect/callback`;
  }

  /** Every failure is a page a person reads; the log has the cause, never a token. */
  async handle(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    try {
      if (path === '/connect/callback') await this.#callback(req, res);
      else await this.#start(res, path.slice('/connect/'.length));
    } catch (err) {
      if (err instanceof ConnectPageError) {
        if (err.cause !== undefined)
          this.#o.logger.info({ reason: (err.cause as Error).message, provider: this.#o.provider.name }, `connect: ${err.title}`);
        writePage(res, err.status, messagePage(err.title, err.message));
        return;
      }
      throw err;
    }
  }

  async #start(res: ServerResponse, link: string): Promise<void> {
    let claims;
    try {
      claims = await this.#o.links.redeem(decodeURIComponent(link));
    } catch (err) {
      if (err instanceof ConnectLinkRefused) throw INVALID_LINK;
      throw err;
    }
    const config = await this.#provider(() => this.#o.provider.configuration());
    const browser = randomBytes(32).toString('base64url');
    const verifier = oidc.randomPKCECodeVerifier();
    const nonce = oidc.randomNonce();
    const now = this.#o.clock.now();
    const state = await new EncryptJWT({ sub: claims.subject, b: sha256(browser), v: verifier, n: nonce })
      .setProtectedHeader({ alg: 'dir', enc: 'A256GCM' })
      .setJti(randomBytes(16).toString('hex'))
      .setIssuedAt(Math.floor(now / 1000))
      .setExpirationTime(Math.floor((now + CONNECT_LINK_TTL_MS) / 1000))
      .encrypt(this.#stateKey);
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: this.callbackUrl(),
      ...(this.#o.provider.scopes !== undefined ? { scope: this.#o.provider.scopes } : {}),
      state,
      nonce,
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    });
    const attributes = [
      'Path=/',
      'HttpOnly',
      'SameSite=Lax',
      `Max-Age=${CONNECT_LINK_TTL_MS / 1000}`,
      ...(this.#secure() ? ['Secure'] : []),
    ];
    res.writeHead(303, {
      location: url.href,
      'set-cookie': `${this.#cookieName()}=${browser}; ${attributes.join('; ')}`,
      'cache-control': 'no-store',
      'referrer-policy': 'no-referrer',
    });
    res.end();
  }

  async #callback(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const query = new URLSearchParams((req.url ?? '').split('?')[1] ?? '');
    const state = query.get('state');
    if (state === null || state.length > 4096) throw STALE_STATE;
    let claims: { sub: string; b: string; v: string; n: string; jti: string; exp: number };
    try {
      const { payload } = await jwtDecrypt(state, this.#stateKey, { currentDate: new Date(this.#o.clock.now()), clockTolerance: 0 });
      if (
        typeof payload.sub !== 'string' ||
        typeof payload.b !== 'string' ||
        typeof payload.v !== 'string' ||
        typeof payload.n !== 'string' ||
        typeof payload.jti !== 'string' ||
        typeof payload.exp !== 'number'
      )
        throw new Error('claims');
      claims = payload as typeof claims;
    } catch (err) {
      throw new ConnectPageError(STALE_STATE.status, STALE_STATE.title, STALE_STATE.message, { cause: err });
    }
    const browser = cookieOf(req, this.#cookieName());
    if (browser === undefined || !timingSafeEqual(Buffer.from(sha256(browser)), Buffer.from(claims.b.padEnd(64).slice(0, 64))))
      throw STALE_STATE;
    if (!(await this.#o.used.useOnce(`connect-state:${claims.jti}`, claims.exp * 1000))) throw STALE_STATE;
    if (query.get('error') !== null)
      throw new ConnectPageError(
        400,
        'Not connected',
        `${this.#o.provider.label} did not grant access (${query.get('error')!.slice(0, 64)}). Nothing was kept.`,
      );
    const config = await this.#provider(() => this.#o.provider.configuration());
    const current = new URL(this.callbackUrl());
    for (const [k, v] of query) current.searchParams.append(k, v);
    const response = await this.#provider(() =>
      oidc.authorizationCodeGrant(config, current, {
        expectedState: state,
        pkceCodeVerifier: claims.v,
        expectedNonce: claims.n,
        idTokenExpected: this.#o.provider.sameSubject,
      }),
    );
    if (this.#o.provider.sameSubject && response.claims()?.sub !== claims.sub) {
      throw new ConnectPageError(
        403,
        'Another account',
        'You signed in as another user than the one your MCP client acts for. Nothing was kept; sign in as that user.',
      );
    }
    await this.#o.vault.save(
      { subject: claims.sub, issuer: this.#o.issuer, provider: this.#o.provider.name },
      tokensOf(response, this.#o.clock.now()),
    );
    await this.#o.onConnected?.(claims.sub, this.#o.provider.name);
    writePage(
      res,
      200,
      messagePage(
        'Connected',
        `Your account at ${this.#o.provider.label} is connected. Go back to your MCP client and retry: the request will now go through.`,
      ),
    );
  }

  /** A provider call: unreachable is a 503 page, a refusal a 400 page (causes in the log). */
  async #provider<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      if (providerUnavailable(err))
        throw new ConnectPageError(
          503,
          'Provider unavailable',
          `${this.#o.provider.label} cannot be reached right now. Nothing was kept; retry in a moment.`,
          { cause: err },
        );
      throw new ConnectPageError(
        400,
        'Not connected',
        `${this.#o.provider.label} refused the connection. Nothing was kept; retry the request in your MCP client to get a new link.`,
        { cause: err },
      );
    }
  }
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function cookieOf(req: IncomingMessage, name: string): string | undefined {
  const header = req.headers.cookie;
  if (header === undefined || header.length > 8192) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim() !== name) continue;
    const value = part.slice(eq + 1).trim();
    return /^[A-Za-z0-9_-]{43}$/.test(value) ? value : undefined;
  }
  return undefined;
}
