// Browser sign-in, the authorization endpoint side (OAuth 2.1 §4.1, RFC 7636, RFC 9207):
//   GET  /authorize          checks client_id and redirect_uri first (wrong: an error page, never a
//                            redirect), then the rest of the request (wrong: an error redirect with
//                            state and iss), then shows the consent page, or, when this browser holds
//                            a remembered approval of this client, redirect URI and scope set, goes
//                            straight to the IdP;
//   POST /authorize/consent  Approve sends the browser to the IdP (or, after it, issues the code),
//                            Deny back with access_denied;
//   GET  /oauth/callback     the IdP's answer becomes a single-use authorization code for the client,
//                            unless consent was skipped and no approval of THIS user is remembered:
//                            then the consent page is shown for that user first;
//   GET  /device, POST /device   device sign-in (RFC 8628): the user types the code a device shows,
//                            then the same consent page and IdP round trip; the decision goes to the
//                            device's authorization (its client polls /token) instead of a redirect.
//                            Entries are limited per address, and failed ones server-wide.
// Between the steps the request lives in the store under the SHA-256 of a random handle, for ten
// minutes and one use per step, bound to this browser by an HttpOnly SameSite cookie: a handle
// replayed, expired, or carried to another browser gets an error page and nothing is issued.
// Remembered approvals (ConsentStorage) live under the SHA-256 of a second, long-lived cookie.

import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseForm, readBody } from '../http/body.ts';
import { checkScope, clientName, redirectUriMatches, scopeWithin, splitScopes } from '../model/clients.ts';
import { generateToken, hashToken, isTokenShaped } from '../model/credentials.ts';
import { HttpError, httpErrorFor, tooManyRequests } from '../http/errors.ts';
import { consentKey } from '../store/records.ts';
import {
  DuplicateRecordError,
  type AuthorizationRequest,
  type AuthorizationRequestRecord,
  type ConsentLink,
  type ConsentRecord,
  type SignedInUser,
} from '../store/types.ts';
import { isClientIdMetadataUrl, type ResolveOptions } from './cimd.ts';
import type { Route } from '../http/serve.ts';
import { describe } from '../observability/logger.ts';
import { limitKey } from '../http/net-address.ts';
import { clientAddresses } from '../proxy/client-address.ts';
import { FailedAuthLimiter, WindowLimit } from '../http/rate-limits.ts';
import { GRANT_AUTHORIZATION_CODE } from '../model/profiles.ts';
import type { ClientRecord } from '../store/types.ts';
import { fetchAdmission, resourceOf, type OAuthContext } from './context.ts';
import { IdpRejection } from './idp.ts';
import { IdpAuthorizationError, IdpClientRefused, IdpUnavailable, type IdpSignIn } from './oidc-client.ts';
import { normaliseUserCode } from './device.ts';
import { consentPage, deviceCodePage, messagePage, writePage, type ConsentView } from './sign-in-pages.ts';
import { AccountPageError, AccountPages } from './account.ts';
import { readCookie } from './cookies.ts';

/** How long a sign-in may take, from /authorize to the IdP's callback, per step. */
export const SIGN_IN_STEP_TTL_MS = 10 * 60 * 1000;
/** RFC 6749 §4.1.2: short lived; OAuth 2.1 recommends at most ten minutes, this is one. */
export const CODE_TTL_MS = 60 * 1000;
const CONSENT_MAX_BODY_BYTES = 4096;
/** Remembered approvals one browser may hold (one per IdP user, client and redirect URI). */
export const MAX_CONSENTS_PER_BROWSER = 20;
const MAX_STATE_LENGTH = 1024;
/** base64url of a SHA-256: what an S256 code_challenge is. */
const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

/** A problem that is safe to report to the client at its (validated) redirect URI. */
class RedirectableError extends Error {
  readonly error: string;
  readonly description: string;
  constructor(error: string, description: string) {
    super(description);
    this.error = error;
    this.description = description;
  }
}

/** A problem reported on a page, never by redirect (the redirect target is not trusted, or unknown). */
class PageError extends Error {
  readonly status: number;
  readonly title: string;
  readonly text: string;
  readonly headers: Record<string, string>;
  constructor(status: number, title: string, text: string, headers: Record<string, string> = {}) {
    super(text);
    this.status = status;
    this.title = title;
    this.text = text;
    this.headers = headers;
  }
}

const SIGN_IN_OFF = new PageError(404, 'Sign-in is not available', 'Browser sign-in is not configured on this server.');
const STALE = new PageError(
  400,
  'This sign-in link has expired',
  'This sign-in request has expired or was already used. Go back to your application and start signing in again.',
);
const OTHER_BROWSER = new PageError(
  403,
  'Sign-in refused',
  'This sign-in was started in another browser (or its cookie was blocked). Start signing in again from your application, in this browser.',
);

/** Device codes one client address may enter per minute (a person needs one or two; a guesser many). */
export const DEVICE_ENTRIES_PER_MINUTE_PER_ADDRESS = 10;
/**
 * Failed device-code entries the whole server accepts per minute, from every address together: the
 * bound on guessing from many addresses. Past it, entries are refused until the minute ends.
 */
export const DEVICE_FAILED_ENTRIES_PER_MINUTE = 300;
const FORM_MAX_BODY_BYTES = 4096;

/** The browser endpoints of sign-in, as routes of the proxy listener. */
export function signInRoutes(ctx: OAuthContext, signIn: IdpSignIn | undefined): Route[] {
  const account = new AccountPages(ctx, signIn);
  const flow = new SignInFlow(ctx, signIn, account);
  /** Every failure of these endpoints is answered with a page, never JSON: a person reads it. */
  const page =
    (handler: (req: IncomingMessage, res: ServerResponse) => Promise<void>): Route['handler'] =>
    async (req, res) => {
      try {
        await handler(req, res);
      } catch (err) {
        writePage(res, ...pageFor(ctx, err));
      }
    };
  return [
    { path: '/authorize', methods: ['GET'], handler: page((req, res) => flow.authorize(req, res)) },
    { path: '/authorize/consent', methods: ['POST'], handler: page((req, res) => flow.consent(req, res)) },
    { path: '/oauth/callback', methods: ['GET'], handler: page((req, res) => flow.callback(req, res)) },
    {
      path: '/device',
      methods: ['GET', 'POST'],
      handler: page((req, res) => (req.method === 'POST' ? flow.deviceEntry(req, res) : flow.devicePage(req, res))),
    },
    { path: '/account', methods: ['GET'], handler: page((req, res) => account.show(req, res)) },
    { path: '/account/revoke', methods: ['POST'], handler: page((req, res) => account.revoke(req, res)) },
    { path: '/account/forget', methods: ['POST'], handler: page((req, res) => account.forget(req, res)) },
    { path: '/account/disconnect', methods: ['POST'], handler: page((req, res) => account.disconnect(req, res)) },
    { path: '/account/sign-out', methods: ['POST'], handler: page((req, res) => account.signOut(req, res)) },
  ];
}

/** Sign-in for one sidecar: the browser binding, the client lookup, and the three steps. */
class SignInFlow {
  readonly #secureCookie: boolean;
  readonly #cookieName: string;
  readonly #consentCookieName: string;
  readonly #rememberMs: number;
  readonly #idpHost: string;
  private readonly ctx: OAuthContext;
  private readonly signIn: IdpSignIn | undefined;
  /** Metadata-document fetches a client address may cause (cache hits are free), and their share of the slots. */
  readonly #documentFetches: (address: string) => ResolveOptions;
  /** GET /authorize requests for a known client, per client address and minute. */
  readonly #authorizeRequests: WindowLimit;
  /**
   * GET /authorize requests naming no known client, per client address and minute: counted apart,
   * and refused apart (remembered in this process once over), so that junk from an address shared
   * with real users (a NAT, an office) never uses up their sign-ins.
   */
  readonly #unknownClients: FailedAuthLimiter | undefined;
  readonly #addresses: ReturnType<typeof clientAddresses>;
  /** Device codes entered per client address and minute, and failed entries server-wide. */
  readonly #deviceEntries: WindowLimit;
  readonly #failedDeviceEntries: WindowLimit;
  /** Until when (epoch ms) this process refuses device-code entries: the server-wide failures ran out. */
  #deviceGuessingBlockedUntil = 0;

  readonly #account: AccountPages;

  constructor(ctx: OAuthContext, signIn: IdpSignIn | undefined, account: AccountPages) {
    this.ctx = ctx;
    this.signIn = signIn;
    this.#account = account;
    this.#documentFetches = fetchAdmission(ctx, 'too many application metadata documents fetched for this address; try again in a minute');
    this.#addresses = clientAddresses(ctx.config.proxy.trustedProxies);
    this.#authorizeRequests = new WindowLimit(ctx.store, ctx.clock, 'authorize', ctx.config.rateLimits.authorizeRequestsPerMinute);
    this.#deviceEntries = new WindowLimit(ctx.store, ctx.clock, 'deviceentry', DEVICE_ENTRIES_PER_MINUTE_PER_ADDRESS);
    this.#failedDeviceEntries = new WindowLimit(ctx.store, ctx.clock, 'devicemiss', DEVICE_FAILED_ENTRIES_PER_MINUTE);
    const { authorizeUnknownClientsPerMinute: unknownPerMinute, ipv6PrefixLength } = ctx.config.rateLimits;
    this.#unknownClients =
      unknownPerMinute > 0
        ? new FailedAuthLimiter(
            new WindowLimit(ctx.store, ctx.clock, 'authorizeunknown', unknownPerMinute),
            ctx.clock,
            ctx.logger,
            'proxy /authorize',
            ipv6PrefixLength,
            'too many sign-in requests for unknown applications from this address; try again in a minute',
          )
        : undefined;
    this.#secureCookie = ctx.publicUrl().startsWith('https:');
    // __Host-: only settable by this origin over https, path /; tossing from a sibling host is refused.
    this.#cookieName = this.#secureCookie ? '__Host-mcp-sign-in' : 'mcp-sign-in';
    this.#consentCookieName = this.#secureCookie ? '__Host-mcp-consent' : 'mcp-consent';
    this.#rememberMs = ctx.config.oauth.consentRememberSeconds * 1000;
    this.#idpHost = signIn ? new URL(signIn.issuer).host : '';
  }

  issuer(): string {
    return this.ctx.publicUrl();
  }

  /** What the per-address limits count a request under: its client address, an IPv6 one as its network. */
  clientKey(req: IncomingMessage): string {
    return limitKey(this.#addresses.client(req), this.ctx.config.rateLimits.ipv6PrefixLength);
  }

  /** The random value that binds sign-in steps to this browser (reused across tabs), and its Set-Cookie. */
  browserBinding(req: IncomingMessage): { value: string; setCookie: string } {
    return this.#cookie(req, this.#cookieName, SIGN_IN_STEP_TTL_MS / 1000);
  }

  /** The random value whose SHA-256 keys this browser's remembered approvals, and its Set-Cookie. */
  consentBinding(req: IncomingMessage): { value: string; setCookie: string } {
    return this.#cookie(req, this.#consentCookieName, this.#rememberMs / 1000);
  }

  #cookie(req: IncomingMessage, name: string, maxAgeSeconds: number): { value: string; setCookie: string } {
    const value = readCookie(req, name) ?? generateToken();
    const attributes = ['Path=/', 'HttpOnly', 'SameSite=Lax', `Max-Age=${maxAgeSeconds}`];
    if (this.#secureCookie) attributes.push('Secure');
    return { value, setCookie: `${name}=${value}; ${attributes.join('; ')}` };
  }

  /**
   * This browser's remembered approval of the request, if one holds: the same client (its record not
   * deleted, nor created anew since), the exact redirect URI, a scope set that covers the one asked,
   * given less than oauth.consentRememberSeconds ago, and, once the IdP has answered, by that user.
   */
  async rememberedApproval(req: IncomingMessage, request: AuthorizationRequest, user?: SignedInUser): Promise<ConsentRecord | undefined> {
    if (this.#rememberMs === 0) return undefined;
    const cookie = readCookie(req, this.#consentCookieName);
    if (cookie === undefined) return undefined;
    const client = await this.ctx.store.getClient(request.clientId);
    if (!client || client === 'corrupt' || client.revokedAt !== undefined) return undefined;
    const now = this.ctx.clock.now();
    const approvals = await this.ctx.store.listConsents(hashToken(cookie), now);
    return approvals.find(
      (c) =>
        c.clientId === request.clientId &&
        c.clientCreatedAt === client.createdAt &&
        c.redirectUri === request.redirectUri &&
        c.approvedAt + this.#rememberMs > now &&
        // No scope asked is nothing beyond the MCP server itself, within any approval.
        (request.scope === undefined || scopeWithin(request.scope, c.scope ?? '')) &&
        (user === undefined || (c.issuer === user.issuer && c.subject === user.subject)),
    );
  }

  /** Records the approval `user` just gave in this browser (its cookie set on `res`); where it lives. */
  async rememberApproval(
    req: IncomingMessage,
    res: ServerResponse,
    request: AuthorizationRequest,
    user: SignedInUser,
  ): Promise<ConsentLink | undefined> {
    const client = await this.ctx.store.getClient(request.clientId);
    if (this.#rememberMs === 0 || !client || client === 'corrupt' || client.revokedAt !== undefined) return undefined;
    const binding = this.consentBinding(req);
    const now = this.ctx.clock.now();
    const approval: ConsentRecord = {
      clientId: request.clientId,
      clientCreatedAt: client.createdAt,
      redirectUri: request.redirectUri,
      issuer: user.issuer,
      subject: user.subject,
      approvedAt: now,
      expiresAt: now + this.#rememberMs,
    };
    if (request.scope !== undefined) approval.scope = request.scope;
    const browserHash = hashToken(binding.value);
    await this.ctx.store.putConsent(browserHash, approval, now, MAX_CONSENTS_PER_BROWSER);
    res.setHeader('set-cookie', binding.setCookie);
    return { browserHash, key: consentKey(approval), expiresAt: approval.expiresAt };
  }

  sameBrowser(req: IncomingMessage, stored: string | undefined): boolean {
    const presented = readCookie(req, this.#cookieName);
    if (presented === undefined || stored === undefined || !isTokenShaped(stored)) return false;
    return timingSafeEqual(Buffer.from(hashToken(presented), 'hex'), Buffer.from(stored, 'hex'));
  }

  /** RFC 6749 §4.1.2.1 with RFC 9207 `iss`: the error goes back to the client, which can show it. */
  redirectBack(
    res: ServerResponse,
    request: Pick<AuthorizationRequest, 'redirectUri' | 'state'>,
    params: Record<string, string>,
    status = 303,
  ): void {
    const url = new URL(request.redirectUri);
    for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
    if (request.state !== undefined) url.searchParams.set('state', request.state);
    url.searchParams.set('iss', this.issuer());
    res.statusCode = status;
    res.setHeader('location', url.href);
    res.setHeader('cache-control', 'no-store');
    res.setHeader('referrer-policy', 'no-referrer');
    res.setHeader('content-length', '0');
    res.end();
  }

  /**
   * A registered client, or one described by its own metadata document (its id is the document's
   * URL). A client an administrator deleted stays refused, whatever its document says.
   */
  async lookUpClient(
    clientId: string,
    req: IncomingMessage,
  ): Promise<{ client: ClientRecord; metadataHost?: string; stored: boolean } | null> {
    if (clientId.length === 0 || clientId.length > 2048) return null;
    const stored = await this.ctx.store.getClient(clientId);
    if (stored === 'corrupt') {
      this.ctx.logger.warn({ clientId: clientId.slice(0, 200) }, 'client record unreadable: the request is refused');
      return null;
    }
    if (stored?.revokedAt !== undefined) return null;
    if (!this.ctx.cimd || !isClientIdMetadataUrl(clientId)) return stored ? { client: stored, stored: true } : null;
    let doc;
    try {
      // Only a fetch that goes out counts towards the address's limit: a cached document is free.
      const address = this.clientKey(req);
      doc = await this.ctx.cimd.resolve(clientId, this.#documentFetches(address));
    } catch (err) {
      if (err instanceof HttpError && err.code === 'invalid_client') {
        throw new PageError(
          400,
          'Unknown application',
          `The application's metadata document cannot be used: ${err.description ?? 'it is not valid'}.`,
        );
      }
      throw err;
    }
    const client: ClientRecord = {
      clientId,
      redirectUris: doc.redirectUris,
      grantTypes: doc.grantTypes,
      profile: 'interactive',
      tokenEndpointAuthMethod: doc.tokenEndpointAuthMethod,
      source: 'cimd',
      createdAt: this.ctx.clock.now(),
    };
    if (doc.clientName !== undefined) client.clientName = doc.clientName;
    if (doc.scope !== undefined) client.scope = doc.scope;
    return { client, metadataHost: doc.host, stored: stored !== null };
  }

  /**
   * A document's client gets a record when it is first issued a code (after the user approved and
   * signed in), so that its tokens can be issued, listed and revoked (deleteClient) like any other;
   * unused, it expires like a registration. Requests that stop at the consent page leave no record.
   */
  async rememberDocumentClient(client: ClientRecord): Promise<void> {
    try {
      await this.ctx.store.createClient(client);
    } catch (err) {
      if (!(err instanceof DuplicateRecordError)) throw err;
    }
    await this.ctx.store.touchClient(client.clientId, this.ctx.config.oauth.unusedClientTtlSeconds * 1000);
  }

  /**
   * GET /authorize: client and redirect URI first, then the rest, then the consent page. A request
   * that names no known client counts towards its own per-address limit (past it: a 429 page instead
   * of the error page); one for a known client towards the sign-in limit, before anything is fetched
   * from the IdP or stored. The client lookup before either is one store read (a metadata document's
   * fetch has its own per-address limit, and a cached document costs none).
   */
  async authorize(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const address = this.clientKey(req);
    const unknown = async (err: PageError): Promise<never> => {
      await this.#unknownClients?.failed(address);
      throw err;
    };
    const query = new URLSearchParams((req.url ?? '').split('?')[1] ?? '');
    const single = (name: string): string | undefined => {
      const all = query.getAll(name);
      if (all.length > 1) throw new RedirectableError('invalid_request', `${name} was sent more than once`);
      return all[0] === '' ? undefined : all[0];
    };
    const clientIds = query.getAll('client_id');
    const redirectUris = query.getAll('redirect_uri');
    if (clientIds.length !== 1 || clientIds[0] === '')
      return unknown(new PageError(400, 'Unknown application', 'The sign-in request names no application (client_id), or names several.'));
    let found;
    try {
      found = await this.lookUpClient(clientIds[0]!, req);
    } catch (err) {
      // A metadata document that cannot be used names no client either.
      if (err instanceof PageError) return unknown(err);
      throw err;
    }
    if (!found)
      return unknown(
        new PageError(
          400,
          'Unknown application',
          'The application (client_id) of this sign-in request is not registered with this server, or was removed.',
        ),
      );
    // A known client: a 429 page with Retry-After past the limit, before anything is stored or sent to the IdP.
    await this.#authorizeRequests.take(address, 'too many sign-in requests from this address; try again in a minute');
    if (redirectUris.length !== 1 || redirectUris[0] === '')
      throw new PageError(400, 'Invalid redirect URI', 'The sign-in request must name exactly one redirect_uri.');
    const { client } = found;
    const redirectUri = redirectUris[0]!;
    if (!redirectUriMatches(client.redirectUris, redirectUri)) {
      throw new PageError(
        400,
        'Invalid redirect URI',
        'The redirect_uri of this sign-in request is not one the application registered. Nothing was sent to it.',
      );
    }
    // From here on the client and its redirect URI are trusted: errors go back to it.
    const stateValues = query.getAll('state');
    const state =
      stateValues.length === 1 && stateValues[0] !== '' && stateValues[0]!.length <= MAX_STATE_LENGTH ? stateValues[0] : undefined;
    const back = { redirectUri, state };
    try {
      if (stateValues.length > 1 || (stateValues[0]?.length ?? 0) > MAX_STATE_LENGTH)
        throw new RedirectableError('invalid_request', 'state must be sent once, at most 1024 characters');
      if (!this.signIn) throw new RedirectableError('unsupported_response_type', 'browser sign-in is not configured on this server');
      if (!client.grantTypes.includes(GRANT_AUTHORIZATION_CODE))
        throw new RedirectableError('unauthorized_client', 'this client may not use the authorization code grant');
      const responseType = single('response_type');
      if (responseType === undefined) throw new RedirectableError('invalid_request', 'response_type is required');
      if (responseType !== 'code') throw new RedirectableError('unsupported_response_type', 'only response_type=code is supported');
      const method = single('code_challenge_method');
      const challenge = single('code_challenge');
      if (challenge === undefined)
        throw new RedirectableError('invalid_request', 'PKCE is required: code_challenge and code_challenge_method=S256');
      if (method !== 'S256') throw new RedirectableError('invalid_request', 'code_challenge_method must be S256 (plain is not accepted)');
      if (!S256_CHALLENGE.test(challenge))
        throw new RedirectableError('invalid_request', 'code_challenge must be a base64url SHA-256 (43 characters)');
      const resource = single('resource');
      const expected = resourceOf(this.ctx);
      if (resource !== undefined && resource !== expected && resource !== `${expected}/`) {
        throw new RedirectableError('invalid_target', `this server only issues tokens for ${expected}`);
      }
      let scope: string | undefined;
      try {
        scope = checkScope(single('scope'));
      } catch {
        throw new RedirectableError('invalid_scope', 'scope must be a space-separated list of scope tokens');
      }
      if (scope !== undefined && client.scope !== undefined && !scopeWithin(scope, client.scope)) {
        throw new RedirectableError('invalid_scope', 'the requested scope exceeds what this client was granted');
      }
      const { granted, ignored } = splitScopes(scope ?? client.scope, this.ctx.config.policy.rules?.scopes ?? []);
      scope = granted;
      const request: AuthorizationRequest = { clientId: client.clientId, redirectUri, codeChallenge: challenge, state, scope };
      const browser = this.browserBinding(req);
      if (await this.rememberedApproval(req, request)) {
        // Approved before in this browser: straight to the IdP; the callback checks that the user who
        // comes back is the one who approved, and asks that user otherwise.
        res.setHeader('set-cookie', browser.setCookie);
        await this.toIdp(res, request, hashToken(browser.value), { consent: 'remembered', remember: false }, 302, address);
        return;
      }
      const requestId = generateToken();
      await this.holdPendingSignIn(
        hashToken(requestId),
        { stage: 'consent', request, browserHash: hashToken(browser.value) },
        address,
        client.clientId,
      );
      const html = consentPage({
        ...this.consentView(request, requestId, client.clientName),
        ...(found.metadataHost !== undefined ? { metadataHost: found.metadataHost } : {}),
        ignoredScopes: ignored,
      });
      writePage(res, 200, html, { 'set-cookie': browser.setCookie });
    } catch (err) {
      if (err instanceof RedirectableError) {
        this.redirectBack(res, back, { error: err.error, error_description: err.description }, 302);
        return;
      }
      throw err;
    }
  }

  /**
   * Stores the request /authorize starts (for the consent page, or for the IdP when consent is
   * remembered), unless its client address or its client already holds its bound of pending
   * sign-ins (rateLimits.pendingSignInsPerAddress, ...PerClient): then a 429 page with Retry-After
   * (until the oldest expires) and nothing is stored, so a flood of /authorize from one address, or
   * for one client, cannot grow Redis without end.
   */
  async holdPendingSignIn(requestHash: string, record: AuthorizationRequestRecord, address: string, clientId: string): Promise<void> {
    const now = this.ctx.clock.now();
    const { pendingSignInsPerAddress: perAddress, pendingSignInsPerClient: perClient } = this.ctx.config.rateLimits;
    const outcome = await this.ctx.store.putPendingSignIn(requestHash, record, now + SIGN_IN_STEP_TTL_MS, {
      address,
      clientId,
      perAddress,
      perClient,
      now,
    });
    if (outcome.stored) return;
    const holder = outcome.holder === 'address' ? 'this address has' : 'this application has';
    throw tooManyRequests(
      Math.ceil((outcome.retryAt - now) / 1000),
      `${holder} too many sign-ins in progress; finish one or try again later`,
    );
  }

  /** POST /authorize/consent: one use of the pending request, from the browser it was shown to. */
  async consent(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!this.signIn) throw SIGN_IN_OFF;
    const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (type !== 'application/x-www-form-urlencoded') throw new PageError(400, 'Bad request', 'The consent form must be posted as a form.');
    // A cross-site POST (CSRF) carries the other site's Origin; the SameSite cookie check below
    // would refuse it too, this only answers earlier and more clearly.
    const origin = req.headers.origin;
    if (origin !== undefined && origin !== 'null' && origin !== new URL(this.ctx.publicUrl()).origin) throw OTHER_BROWSER;
    const form = parseForm(req, await readBody(req, CONSENT_MAX_BODY_BYTES));
    const requestId = form.get('request');
    const decision = form.get('decision');
    if (requestId === undefined || !isTokenShaped(requestId))
      throw new PageError(400, 'Bad request', 'The consent form is incomplete: start signing in again from your application.');
    if (decision !== 'approve' && decision !== 'deny') throw new PageError(400, 'Bad request', 'Choose Approve or Deny.');
    const stored = await this.ctx.store.takeAuthorizationRequest(hashToken(requestId));
    if (!stored || stored === 'corrupt' || stored.stage === 'idp' || stored.stage === 'account') throw STALE;
    if (!this.sameBrowser(req, stored.browserHash)) throw OTHER_BROWSER;
    const { request } = stored;
    const user = stored.stage === 'user-consent' ? stored.user : undefined;
    if (decision === 'deny') {
      await this.ctx.audit.record({
        who: user ? 'user' : 'anonymous',
        action: 'authorize',
        result: 'access_denied',
        clientId: request.clientId,
        ...(user ? { subject: user.subject } : {}),
        detail: { by: 'user', ...(request.deviceCodeHash !== undefined ? { device: true } : {}) },
      });
      if (request.deviceCodeHash !== undefined) {
        // The device's client learns it at its next poll (access_denied).
        await this.ctx.store.decideDeviceAuthorization(request.deviceCodeHash, this.ctx.clock.now(), undefined);
        writePage(res, 200, messagePage('Access denied', 'You denied access: the device is not signed in. You can close this window.'));
        return;
      }
      this.redirectBack(res, request, { error: 'access_denied', error_description: 'the user denied access' });
      return;
    }
    // A device's approval is never remembered: each device code is approved on its own.
    const remember = form.get('remember') === 'yes' && this.#rememberMs > 0 && request.deviceCodeHash === undefined;
    if (user) {
      // Asked after the IdP: the approval is this user's own; the code follows at once.
      await this.issueCode(req, res, request, user, { remember });
      return;
    }
    await this.toIdp(res, request, stored.browserHash, { consent: 'given', remember }, 303);
  }

  /**
   * Sends the browser to the IdP; the request waits for its answer under the login's `state`.
   * `startedBy`: the client address of an /authorize that skips the consent page (its request is then
   * bounded as a pending sign-in).
   */
  async toIdp(
    res: ServerResponse,
    request: AuthorizationRequest,
    browserHash: string,
    approval: { consent: 'given' | 'remembered'; remember: boolean },
    status: number,
    startedBy?: string,
  ): Promise<void> {
    const { url, login } = await this.signIn!.start();
    const record: AuthorizationRequestRecord = {
      stage: 'idp',
      request,
      browserHash,
      ...approval,
      nonce: login.nonce,
      codeVerifier: login.codeVerifier,
    };
    if (startedBy !== undefined) await this.holdPendingSignIn(hashToken(login.state), record, startedBy, request.clientId);
    else await this.ctx.store.putAuthorizationRequest(hashToken(login.state), record, this.ctx.clock.now() + SIGN_IN_STEP_TTL_MS);
    res.statusCode = status;
    res.setHeader('location', url.href);
    res.setHeader('cache-control', 'no-store');
    res.setHeader('referrer-policy', 'no-referrer');
    res.setHeader('content-length', '0');
    res.end();
  }

  /** What the consent page shows of a request (the page before the IdP, or after it with `user`). */
  consentView(request: AuthorizationRequest, requestId: string, clientName: string | undefined, user?: SignedInUser): ConsentView {
    const device = request.deviceCodeHash !== undefined;
    const target = device ? undefined : new URL(request.redirectUri);
    return {
      clientName,
      clientId: request.clientId,
      redirectHost: target ? `${target.protocol}//${target.host}` : '',
      ...(device ? { device: true } : {}),
      scopes: request.scope ? request.scope.split(' ') : [],
      idpHost: this.#idpHost,
      requestId,
      action: `${this.ctx.publicUrl()}/authorize/consent`,
      ...(this.#rememberMs > 0 && !device ? { rememberDays: Math.max(1, Math.round(this.#rememberMs / 86_400_000)) } : {}),
      ...(user ? { signedInAs: user.email ?? user.subject } : {}),
    };
  }

  /** GET /device: the form for the code a device shows, prefilled from `verification_uri_complete`. */
  async devicePage(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!this.signIn) throw SIGN_IN_OFF;
    const typed = new URLSearchParams((req.url ?? '').split('?')[1] ?? '').get('user_code') ?? '';
    writePage(res, 200, deviceCodePage({ action: `${this.ctx.publicUrl()}/device`, userCode: typed.slice(0, 20) }));
  }

  /**
   * POST /device: the code typed. Every entry counts towards its address's limit, each failed one
   * towards the server-wide one, before a code is looked up. A code that names a pending device
   * authorization shows the consent page (a pending sign-in like one of /authorize, bounded alike).
   */
  async deviceEntry(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!this.signIn) throw SIGN_IN_OFF;
    const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (type !== 'application/x-www-form-urlencoded') throw new PageError(400, 'Bad request', 'The code must be posted as a form.');
    // A cross-site POST would only spend the address's entries; refused early, as at the consent form.
    const origin = req.headers.origin;
    if (origin !== undefined && origin !== 'null' && origin !== new URL(this.ctx.publicUrl()).origin) throw OTHER_BROWSER;
    const address = this.clientKey(req);
    const now = this.ctx.clock.now();
    if (now < this.#deviceGuessingBlockedUntil) {
      throw tooManyRequests(
        Math.ceil((this.#deviceGuessingBlockedUntil - now) / 1000),
        'too many wrong device codes were entered on this server; try again in a minute',
      );
    }
    await this.#deviceEntries.take(address, 'too many device codes entered from this address; try again in a minute');
    const form = parseForm(req, await readBody(req, FORM_MAX_BODY_BYTES));
    const typed = form.get('user_code') ?? '';
    const code = normaliseUserCode(typed);
    const found = code === undefined ? null : await this.ctx.store.findDeviceAuthorization(hashToken(code));
    const action = `${this.ctx.publicUrl()}/device`;
    if (!found || found === 'corrupt' || found.status !== 'pending' || found.expiresAt <= now) {
      const retryAfter = await this.#failedDeviceEntries.hit('all');
      if (retryAfter > 0) {
        this.#deviceGuessingBlockedUntil = now + retryAfter * 1000;
        this.ctx.logger.warn({ address }, 'device-code entries refused server-wide for the rest of the minute: too many wrong codes');
      }
      this.ctx.logger.info({ address }, 'a device code was entered that names no waiting device');
      writePage(
        res,
        400,
        deviceCodePage({
          action,
          userCode: typed.slice(0, 20),
          error: 'That code is not valid: it may be mistyped, expired or already used. Check the code on your device.',
        }),
      );
      return;
    }
    const looked = await this.lookUpClient(found.clientId, req);
    if (!looked) throw new PageError(400, 'Unknown application', 'The application of this device was removed from this server.');
    const request: AuthorizationRequest = {
      clientId: found.clientId,
      redirectUri: '',
      codeChallenge: '',
      state: undefined,
      scope: found.scope,
      deviceCodeHash: found.deviceCodeHash,
    };
    const browser = this.browserBinding(req);
    const requestId = generateToken();
    await this.holdPendingSignIn(
      hashToken(requestId),
      { stage: 'consent', request, browserHash: hashToken(browser.value) },
      address,
      found.clientId,
    );
    const view = {
      ...this.consentView(request, requestId, looked.client.clientName),
      ...(looked.metadataHost !== undefined ? { metadataHost: looked.metadataHost } : {}),
    };
    writePage(res, 200, consentPage(view), { 'set-cookie': browser.setCookie });
  }

  /** GET /oauth/callback: the IdP's answer, checked by openid-client, becomes a code for the client. */
  async callback(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!this.signIn) throw SIGN_IN_OFF;
    const query = new URLSearchParams((req.url ?? '').split('?')[1] ?? '');
    const state = query.get('state');
    if (state === null || state.length === 0 || state.length > 512) throw STALE;
    const stored = await this.ctx.store.takeAuthorizationRequest(hashToken(state));
    // A sign-in to the account page comes back through the same callback (the one the IdP knows).
    if (stored && stored !== 'corrupt' && stored.stage === 'account') return this.#account.callback(req, res, query, state, stored);
    if (!stored || stored === 'corrupt' || stored.stage !== 'idp') throw STALE;
    if (!this.sameBrowser(req, stored.browserHash)) throw OTHER_BROWSER;
    const { request } = stored;
    let user;
    try {
      let tokens;
      ({ user, tokens } = await this.signIn.finish(query, { state, nonce: stored.nonce, codeVerifier: stored.codeVerifier }));
      // The IdP's tokens belong to this user (IdP sub + issuer): kept, encrypted, when the upstream is
      // to receive them (upstream.credentials idp or token-exchange); otherwise dropped here.
      await this.ctx.keepIdpTokens?.(user, tokens);
    } catch (err) {
      if (err instanceof IdpUnavailable) throw err;
      const error =
        err instanceof IdpAuthorizationError ? relayedIdpError(err.error) : err instanceof IdpRejection ? 'access_denied' : undefined;
      if (error === undefined) throw err;
      this.ctx.logger.info(
        { clientId: request.clientId, reason: (err as Error).message },
        'sign-in at the identity provider refused: nothing issued',
      );
      await this.ctx.audit.record({
        who: 'anonymous',
        action: 'authorize',
        result: error,
        clientId: request.clientId,
        detail: { by: 'idp' },
      });
      if (request.deviceCodeHash !== undefined) {
        // No redirect to send the error to; the device keeps waiting until its code expires.
        writePage(
          res,
          403,
          messagePage('Sign-in did not succeed', 'Sign-in at the identity provider did not succeed: the device is not signed in.'),
        );
        return;
      }
      this.redirectBack(res, request, { error, error_description: 'sign-in at the identity provider did not succeed' });
      return;
    }
    if (stored.consent === 'remembered') {
      const approval = await this.rememberedApproval(req, request, user);
      if (!approval) {
        // Consent was skipped for an approval of another user (or one revoked meanwhile): this user
        // has approved nothing, so this user is asked now, and no code exists before Approve.
        const requestId = generateToken();
        const record: AuthorizationRequestRecord = { stage: 'user-consent', request, browserHash: stored.browserHash, user };
        await this.ctx.store.putAuthorizationRequest(hashToken(requestId), record, this.ctx.clock.now() + SIGN_IN_STEP_TTL_MS);
        const client = await this.ctx.store.getClient(request.clientId);
        writePage(res, 200, consentPage(this.consentView(request, requestId, clientName(client), user)));
        return;
      }
      await this.issueCode(req, res, request, user, {
        remembered: {
          browserHash: hashToken(readCookie(req, this.#consentCookieName)!),
          key: consentKey(approval),
          expiresAt: approval.expiresAt,
        },
      });
      return;
    }
    await this.issueCode(req, res, request, user, { remember: stored.remember });
  }

  /**
   * The single-use code for the client, tied to the approval it was issued under: one remembered, or
   * the one just given (recorded here when the user asked to remember it).
   */
  async issueCode(
    req: IncomingMessage,
    res: ServerResponse,
    request: AuthorizationRequest,
    user: SignedInUser,
    approval: { remembered: ConsentLink } | { remember: boolean },
  ): Promise<void> {
    if (this.ctx.cimd && isClientIdMetadataUrl(request.clientId)) {
      // The document is looked up again (cached, as a rule): a client an administrator deleted since
      // the consent page, or whose document went bad, gets no code.
      const found = await this.lookUpClient(request.clientId, req);
      if (!found)
        throw new PageError(
          400,
          'Unknown application',
          'The application of this sign-in was removed from this server. Nothing was issued.',
        );
      if (found.client.source === 'cimd' && !found.stored) await this.rememberDocumentClient(found.client);
    }
    if (request.deviceCodeHash !== undefined) {
      // The approval goes to the device's authorization (taken once, while pending and unexpired):
      // its client's next poll gets the tokens.
      if (!(await this.ctx.store.decideDeviceAuthorization(request.deviceCodeHash, this.ctx.clock.now(), user))) {
        throw new PageError(
          400,
          'This code has expired',
          'The device code expired or was already decided. Start signing in again on your device.',
        );
      }
      await this.ctx.audit.record({
        who: 'user',
        action: 'authorize',
        result: 'ok',
        clientId: request.clientId,
        subject: user.subject,
        detail: { consent: 'given', device: true },
      });
      writePage(
        res,
        200,
        messagePage('Device signed in', 'You approved the device: it is signed in within a few seconds. You can close this window.'),
      );
      return;
    }
    const consent =
      'remembered' in approval ? approval.remembered : approval.remember ? await this.rememberApproval(req, res, request, user) : undefined;
    const code = generateToken();
    const now = this.ctx.clock.now();
    await this.ctx.store.putAuthorizationCode({
      codeHash: hashToken(code),
      clientId: request.clientId,
      redirectUri: request.redirectUri,
      codeChallenge: request.codeChallenge,
      resource: resourceOf(this.ctx),
      ...(request.scope !== undefined ? { scope: request.scope } : {}),
      user,
      ...(consent !== undefined ? { consent } : {}),
      createdAt: now,
      expiresAt: now + CODE_TTL_MS,
    });
    await this.ctx.audit.record({
      who: 'user',
      action: 'authorize',
      result: 'ok',
      clientId: request.clientId,
      subject: user.subject,
      detail: { consent: 'remembered' in approval ? 'remembered' : 'given' },
    });
    this.redirectBack(res, request, { code });
  }
}

/** Every failure of a browser endpoint becomes a page; internal reasons go to the log only. */
function pageFor(ctx: OAuthContext, err: unknown): [number, string, Record<string, string>] {
  if (err instanceof PageError) return [err.status, messagePage(err.title, err.text), err.headers];
  if (err instanceof AccountPageError) return [err.status, messagePage(err.title, err.message), {}];
  if (err instanceof IdpClientRefused) {
    ctx.logger.error({ err: describe(err) }, err.message);
    return [502, messagePage('Sign-in is misconfigured', `Sign-in cannot complete: ${err.message}. Tell this server's operators.`), {}];
  }
  if (err instanceof IdpUnavailable) {
    ctx.logger.warn({ err: describe(err) }, 'identity provider unreachable during sign-in: answered 503');
    return [
      503,
      messagePage('Sign-in is unavailable', 'The identity provider cannot be reached right now. Try again in a minute.'),
      { 'retry-after': '30' },
    ];
  }
  const http = httpErrorFor(err);
  if (http.status === 413) return [413, messagePage('Bad request', 'The request is too large.'), {}];
  if (http.status === 429)
    return [429, messagePage('Too many requests', `${capitalise(http.description ?? 'too many requests')}.`), { ...http.headers }];
  if (http.code === 'temporarily_unavailable' && http.description !== undefined) {
    return [503, messagePage('Sign-in is busy', `${capitalise(http.description)}.`), { ...http.headers }];
  }
  if (http.status < 500) return [http.status, messagePage('Bad request', http.description ?? 'The request is not valid.'), {}];
  if (http.code === 'server_error') {
    ctx.logger.error({ err: describe(err) }, 'unexpected error during sign-in');
    return [500, messagePage('Sign-in failed', 'Something went wrong on this server. Try again; if it persists, tell its operators.'), {}];
  }
  ctx.logger.warn({ err: describe(err) }, 'store unavailable during sign-in: answered 503');
  return [
    503,
    messagePage('Sign-in is unavailable', 'The server cannot complete sign-in right now. Try again in a minute.'),
    { 'retry-after': '5' },
  ];
}

function capitalise(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** IdP errors the client can act on keep their meaning; the rest say only that sign-in failed. */
function relayedIdpError(error: string): string {
  if (error === 'temporarily_unavailable') return 'temporarily_unavailable';
  if (error === 'server_error') return 'server_error';
  return 'access_denied';
}
