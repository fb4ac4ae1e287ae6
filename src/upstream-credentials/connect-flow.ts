// The connect pages. Mode `oauth`: `GET /connect/<link>` first has the person sign in at the IdP (the
// account page's sign-in and session) and refuses anyone but the person the link was made for; that
// person sees what is being connected (the MCP client, the provider) and confirms with a POST carrying
// a CSRF token bound to their session and the link, which alone uses the link up and sends the browser
// to the provider (authorization code + PKCE, openid-client). Without that, a link opened by anyone
// would connect their provider account to the link's owner (an attacker's link in a victim's browser,
// where the provider approves silently, or a leaked link). Mode `idp`: the connect round trip is
// itself a sign-in at the IdP, whose ID token must name the link's subject, so the link goes straight
// there. `GET /connect/callback` redeems the code and keeps the user's tokens for the person named in
// the state, only while this browser still holds that person's session (mode oauth). The state is
// encrypted (jose, dir + A256GCM: the PKCE verifier inside never reaches the provider), single use,
// short lived, and bound to this browser by a cookie.

import { createHash, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { EncryptJWT, jwtDecrypt } from 'jose';
import * as oidc from 'openid-client';
import { displayableName } from '../model/clients.ts';
import type { Clock } from '../model/clock.ts';
import { revokedSince } from '../model/offboarding.ts';
import type { Logger } from '../observability/logger.ts';
import { isLoopbackHost } from '../model/net-address.ts';
import { AccountPageError, csrfMatches, sessionForm, type AccountSessions } from '../oauth/account.ts';
import { escapeHtml, messagePage, page, writePage } from '../web/pages.ts';
import { readCookie } from '../web/cookies.ts';
import type { AccountSession, OneTimeValueStorage, SubjectCutoffStorage } from '../store/types.ts';
import { ConnectLinkRefused, CONNECT_LINK_TTL_MS, type ConnectLinkClaims, type ConnectLinks } from './connect-links.ts';
import type { CredentialVault, UpstreamTokens } from './vault.ts';

/** The authorization server the user connects at: the IdP (mode idp) or the third-party provider (mode oauth). */
export interface ConnectProvider {
  /** The record's provider name (`idp`, `oauth:<host>`). */
  name: string;
  /** For people: "GitHub", "your identity provider". */
  label: string;
  scopes: string | undefined;
  /**
   * The provider speaks OpenID Connect for this connection (`openid` is among the scopes asked): a nonce
   * is sent and an ID token required. Plain OAuth providers (GitHub) issue none.
   */
  openid: boolean;
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
  /** The client secret as form parameters (client_secret_post) instead of HTTP Basic. */
  secretInForm?: boolean;
  timeoutMs: number;
}): () => Promise<oidc.Configuration> {
  const loopbackHttp = (url: string) => url.startsWith('http:') && isLoopbackHost(new URL(url).hostname);
  const secret = settings.clientSecret;
  const auth = secret === undefined ? oidc.None() : settings.secretInForm ? oidc.ClientSecretPost(secret) : oidc.ClientSecretBasic(secret);
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
        // answers JSON because openid-client asks with `Accept: application/json` (GitHub's default
        // answer is form-encoded, which openid-client does not read).
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
const ANOTHER_PERSON = new ConnectPageError(
  403,
  'Another account',
  'This link was made for another person than the one signed in here. Nothing was connected. Open the link signed in as the person your MCP client acts for (sign out on the account page first).',
);
const FORGED = new ConnectPageError(
  403,
  'Request refused',
  'This confirmation did not come from the connect page (or your session has ended). Open the link again.',
);
const BAD_FORM = new ConnectPageError(400, 'Bad request', 'The form is incomplete or malformed. Open the link again.');
/** The confirm form is a CSRF token: anything bigger is refused before it is parsed. */
const FORM_MAX_BODY_BYTES = 1024;
const OFFBOARDED = new ConnectPageError(
  403,
  'Not connected',
  'Your access to this server was revoked while this connection was in progress. Nothing was kept.',
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
  /** Single use of connect states; offboarding's cut-offs (a flow begun before its person was offboarded keeps nothing). */
  used: OneTimeValueStorage & Pick<SubjectCutoffStorage, 'subjectRevokedAt'>;
  clock: Clock;
  logger: Logger;
  publicUrl(): string;
  /**
   * The account page's sign-in and session (mode oauth): who opens a link must sign in and be the
   * person it was made for before anything goes to the provider. Absent: mode idp, whose connect round
   * trip is itself that check.
   */
  sessions?: AccountSessions | undefined;
  /** The registered name of an MCP client, when it has one (shown on the confirm page). */
  clientName?: (clientId: string) => Promise<string | undefined>;
  /** Told of each connected account (audit, metrics): never the token. */
  onConnected?: (subject: string, provider: string) => Promise<void> | void;
}

export class ConnectFlow {
  readonly #o: ConnectFlowOptions;
  readonly #stateKey: Uint8Array;

  constructor(options: ConnectFlowOptions) {
    this.#o = options;
    this.#stateKey = new Uint8Array(hkdfSync('sha256', options.credentialKey, Buffer.alloc(0), 'mcp-bearer-proxy connect state v1', 32));
    if (!options.provider.sameSubject && options.sessions?.available !== true)
      options.logger.warn(
        'UPSTREAM_CREDENTIALS is oauth but browser sign-in is not configured (IDP_ISSUER, IDP_CLIENT_ID, IDP_CLIENT_SECRET): connect links are refused, since who opens one must sign in as the person it was made for',
      );
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
      else if (req.method === 'POST') await this.#confirm(req, res, path.slice('/connect/'.length));
      else await this.#start(req, res, path.slice('/connect/'.length));
    } catch (err) {
      if (err instanceof ConnectPageError) {
        if (err.cause !== undefined)
          this.#o.logger.info({ reason: (err.cause as Error).message, provider: this.#o.provider.name }, `connect: ${err.title}`);
        writePage(res, err.status, messagePage(err.title, err.message));
        return;
      }
      if (err instanceof AccountPageError) {
        writePage(res, err.status, messagePage(err.title, err.message));
        return;
      }
      throw err;
    }
  }

  /** The link's claims (not used up); any fault is the one INVALID_LINK page. */
  async #link(segment: string, use: boolean): Promise<ConnectLinkClaims> {
    try {
      const link = decodeURIComponent(segment);
      return await (use ? this.#o.links.redeem(link) : this.#o.links.verify(link));
    } catch (err) {
      if (err instanceof ConnectLinkRefused || err instanceof URIError) throw INVALID_LINK;
      throw err;
    }
  }

  /** The person signed in here is the one the link (or state) names, by IdP subject and issuer; else ANOTHER_PERSON. */
  #samePerson(session: AccountSession, named: { subject: string; issuer: string }): void {
    if (session.user.subject === named.subject && session.user.issuer === named.issuer) return;
    this.#o.logger.info(
      { subject: named.subject, signedInAs: session.user.subject, provider: this.#o.provider.name },
      'connect: a link was opened by another person than the one it was made for: refused, nothing connected',
    );
    throw ANOTHER_PERSON;
  }

  #sessions(): AccountSessions {
    const sessions = this.#o.sessions;
    if (sessions === undefined || !sessions.available)
      throw new ConnectPageError(404, 'Not available', 'Browser sign-in is not configured on this server: nobody can connect an account.');
    return sessions;
  }

  /** The confirm form's CSRF token: bound to the session's cookie value (only this browser holds it) and to the link. */
  #csrf(sessionValue: string, linkId: string): string {
    return createHash('sha256').update(`mcp-bearer-proxy connect csrf\0${sessionValue}\0${linkId}`).digest('hex');
  }

  /** GET /connect/<link>: mode idp, off to the IdP; mode oauth, sign-in, the person check, then the confirm page. */
  async #start(req: IncomingMessage, res: ServerResponse, segment: string): Promise<void> {
    if (this.#o.provider.sameSubject) {
      await this.#toProvider(res, await this.#link(segment, true));
      return;
    }
    const claims = await this.#link(segment, false);
    const sessions = this.#sessions();
    const current = await sessions.current(req);
    if (current === undefined) {
      // Back here once signed in; the link is not used up until the person confirms.
      await sessions.startSignIn(res, `/connect/${segment}`, sessions.choiceFor(claims.issuer));
      return;
    }
    this.#samePerson(current.session, claims);
    const clientName = claims.clientId === undefined ? undefined : await this.#o.clientName?.(claims.clientId);
    writePage(
      res,
      200,
      confirmPage({
        action: `${this.#o.publicUrl()}/connect/${segment}`,
        csrf: this.#csrf(current.value, claims.linkId),
        who: current.session.user.email ?? current.session.user.subject,
        provider: this.#o.provider.label,
        clientId: claims.clientId,
        clientName,
      }),
    );
  }

  /** POST /connect/<link> (mode oauth): the person confirms; the link is used up and the browser goes to the provider. */
  async #confirm(req: IncomingMessage, res: ServerResponse, segment: string): Promise<void> {
    if (this.#o.provider.sameSubject) throw INVALID_LINK;
    // Over the bound: 413; not a form: 400.
    const { form, ...current } = await sessionForm(req, this.#sessions(), this.#o.publicUrl(), {
      forged: FORGED,
      malformed: BAD_FORM,
      maxBytes: FORM_MAX_BODY_BYTES,
    });
    const seen = await this.#link(segment, false);
    if (!csrfMatches(form.get('csrf'), this.#csrf(current.value, seen.linkId))) throw FORGED;
    this.#samePerson(current.session, seen);
    await this.#toProvider(res, await this.#link(segment, true));
  }

  /** The redirect to the provider: code + PKCE (+ a nonce for OpenID), the state naming the person, a browser cookie. */
  async #toProvider(res: ServerResponse, claims: ConnectLinkClaims): Promise<void> {
    const config = await this.#provider(() => this.#o.provider.configuration());
    const browser = randomBytes(32).toString('base64url');
    const verifier = oidc.randomPKCECodeVerifier();
    const nonce = this.#o.provider.openid ? oidc.randomNonce() : undefined;
    const now = this.#o.clock.now();
    const state = await new EncryptJWT({
      sub: claims.subject,
      iss: claims.issuer,
      b: sha256(browser),
      v: verifier,
      ...(nonce !== undefined ? { n: nonce } : {}),
    })
      .setProtectedHeader({ alg: 'dir', enc: 'A256GCM' })
      .setJti(randomBytes(16).toString('hex'))
      .setIssuedAt(Math.floor(now / 1000))
      .setExpirationTime(Math.floor((now + CONNECT_LINK_TTL_MS) / 1000))
      .encrypt(this.#stateKey);
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: this.callbackUrl(),
      ...(this.#o.provider.scopes !== undefined ? { scope: this.#o.provider.scopes } : {}),
      state,
      ...(nonce !== undefined ? { nonce } : {}),
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
    let claims: { sub: string; iss: string; b: string; v: string; n?: string; jti: string; iat: number; exp: number };
    try {
      const { payload } = await jwtDecrypt(state, this.#stateKey, { currentDate: new Date(this.#o.clock.now()), clockTolerance: 0 });
      if (
        typeof payload.sub !== 'string' ||
        typeof payload.iss !== 'string' ||
        typeof payload.b !== 'string' ||
        typeof payload.v !== 'string' ||
        (payload.n !== undefined && typeof payload.n !== 'string') ||
        typeof payload.jti !== 'string' ||
        typeof payload.iat !== 'number' ||
        typeof payload.exp !== 'number'
      )
        throw new Error('claims');
      claims = payload as typeof claims;
    } catch (err) {
      throw new ConnectPageError(STALE_STATE.status, STALE_STATE.title, STALE_STATE.message, { cause: err });
    }
    const browser = readCookie(req, this.#cookieName(), isBrowserIdShaped);
    if (browser === undefined || !timingSafeEqual(Buffer.from(sha256(browser)), Buffer.from(claims.b.padEnd(64).slice(0, 64))))
      throw STALE_STATE;
    if (!this.#o.provider.sameSubject) {
      // The person who confirmed must still be the one signed in here: a session ended, or replaced by
      // another person's, connects nothing.
      const current = await this.#sessions().current(req);
      if (current === undefined) throw STALE_STATE;
      this.#samePerson(current.session, { subject: claims.sub, issuer: claims.iss });
    }
    if (!(await this.#o.used.useOnce(`connect-state:${claims.jti}`, claims.exp * 1000))) throw STALE_STATE;
    if (await this.#offboardedSince(claims)) throw OFFBOARDED;
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
        ...(claims.n !== undefined ? { expectedNonce: claims.n } : {}),
        idTokenExpected: this.#o.provider.openid,
      }),
    );
    if (this.#o.provider.sameSubject && response.claims()?.sub !== claims.sub) {
      throw new ConnectPageError(
        403,
        'Another account',
        'You signed in as another user than the one your MCP client acts for. Nothing was kept; sign in as that user.',
      );
    }
    // The person the link was made for: the subject at their own provider.
    const who = { subject: claims.sub, issuer: claims.iss, provider: this.#o.provider.name };
    await this.#o.vault.save(who, tokensOf(response, this.#o.clock.now()));
    // Offboarded while the browser was at the provider: what was just written is deleted again. The
    // cut-off is written before offboarding deletes credentials, and read here after the write, so one
    // of the two always removes it (model/offboarding.ts).
    if (await this.#offboardedSince(claims)) {
      await this.#o.vault.delete(who);
      throw OFFBOARDED;
    }
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

  /** Whether the flow's person was offboarded since it began (its state's issue time, in whole seconds). */
  async #offboardedSince(claims: { sub: string; iss: string; iat: number }): Promise<boolean> {
    return revokedSince(this.#o.used, { subject: claims.sub, issuer: claims.iss }, claims.iat * 1000);
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

/** The confirm page (mode oauth): who is signed in, which MCP client will act with which provider account; no script. */
function confirmPage(view: {
  action: string;
  csrf: string;
  who: string;
  provider: string;
  clientId: string | undefined;
  clientName: string | undefined;
}): string {
  const client =
    view.clientId === undefined
      ? 'a user token'
      : `${view.clientName ? `<bdi>${escapeHtml(displayableName(view.clientName))}</bdi>` : 'an unnamed application'} <span class="note mono">(${escapeHtml(view.clientId)})</span>`;
  const provider = `<bdi>${escapeHtml(view.provider)}</bdi>`;
  return page(
    `Connect your ${view.provider} account`,
    `<h1>Connect your ${provider} account</h1>
<p>Signed in as <strong>${escapeHtml(view.who)}</strong>.</p>
<p>Requests you make through ${client} will reach the MCP server's tools with your ${provider} account. You will be sent to ${provider} to approve.</p>
<form method="post" action="${escapeHtml(view.action)}"><input type="hidden" name="csrf" value="${escapeHtml(view.csrf)}"><button type="submit">Connect</button></form>
<p class="note">If you did not ask for this, close this page: nothing is connected.</p>`,
  );
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** The connect flow's browser cookie: 32 random bytes as base64url (43 characters). */
function isBrowserIdShaped(value: string): boolean {
  return /^[A-Za-z0-9_-]{43}$/.test(value);
}
