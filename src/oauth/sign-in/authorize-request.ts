// GET /authorize (OAuth 2.1 §4.1, RFC 7636): the request check. Client and redirect URI first (wrong:
// an error page, never a redirect), then the rest of the request (wrong: an error redirect with state
// and iss), then the consent page, or, when this browser holds a remembered approval of this client,
// redirect URI and scope set, straight to the IdP.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { FailedAuthLimiter, WindowLimit } from '../../http/rate-limits.ts';
import { checkScope, redirectUriMatches, scopeWithin, splitScopes } from '../../model/clients.ts';
import { hashToken } from '../../model/credentials.ts';
import { GRANT_AUTHORIZATION_CODE } from '../../model/grant-types.ts';
import type { AuthorizationRequest } from '../../store/types.ts';
import type { ClientRecord } from '../../model/records.ts';
import { resourceOf, type OAuthContext } from '../context.ts';
import { consentPage } from '../sign-in-pages.ts';
import { writePage } from '../../web/pages.ts';
import type { SignInClient } from './clients.ts';
import { PageError, RedirectableError } from './errors.ts';
import type { IdpRoundTrip } from './idp-round-trip.ts';
import { chooseProvider } from './provider-choice.ts';
import { awaitConsent, redirectBack, type SignInParts } from './parts.ts';

const MAX_STATE_LENGTH = 1024;
/** base64url of a SHA-256: what an S256 code_challenge is. */
const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

export class AuthorizeRequestStage {
  readonly #parts: SignInParts;
  readonly #idp: IdpRoundTrip;
  /** GET /authorize requests for a known client, per client address and minute. */
  readonly #authorizeRequests: WindowLimit;
  /**
   * GET /authorize requests naming no known client, per client address and minute: counted apart,
   * and refused apart (remembered in this process once over), so that junk from an address shared
   * with real users (a NAT, an office) never uses up their sign-ins.
   */
  readonly #unknownClients: FailedAuthLimiter | undefined;

  constructor(parts: SignInParts, idp: IdpRoundTrip) {
    const { ctx } = parts;
    this.#parts = parts;
    this.#idp = idp;
    this.#authorizeRequests = new WindowLimit(ctx.store, ctx.clock, 'authorize', ctx.config.rateLimits.authorizeRequestsPerMinute);
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
  }

  /**
   * GET /authorize: client and redirect URI first, then the rest, then the consent page. A request
   * that names no known client counts towards its own per-address limit (past it: a 429 page instead
   * of the error page); one for a known client towards the sign-in limit, before anything is fetched
   * from the IdP or stored. The client lookup before either is one store read (a metadata document's
   * fetch has its own per-address limit, and a cached document costs none).
   */
  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const address = this.#parts.clientKey(req);
    const query = new URLSearchParams((req.url ?? '').split('?')[1] ?? '');
    const { found, redirectUri } = await this.#trustedClient(req, query, address);
    // From here on the client and its redirect URI are trusted: errors go back to it.
    const stateValues = query.getAll('state');
    const state =
      stateValues.length === 1 && stateValues[0] !== '' && stateValues[0]!.length <= MAX_STATE_LENGTH ? stateValues[0] : undefined;
    try {
      const { request, ignored } = checkRequest(this.#parts.ctx, this.#parts.signIn !== undefined, query, found.client, redirectUri, state);
      await this.#proceed(req, res, request, found, ignored, address, query);
    } catch (err) {
      if (err instanceof RedirectableError) {
        redirectBack(this.#parts.ctx, res, { redirectUri, state }, { error: err.error, error_description: err.description }, 302);
        return;
      }
      throw err;
    }
  }

  /**
   * The client the request names and its redirect URI, refused with a page when either is wrong. A
   * request naming no known client counts towards the unknown-client limit, one for a known client
   * towards the sign-in limit (a 429 page with Retry-After past it).
   */
  async #trustedClient(
    req: IncomingMessage,
    query: URLSearchParams,
    address: string,
  ): Promise<{ found: SignInClient; redirectUri: string }> {
    const unknown = async (err: PageError): Promise<never> => {
      await this.#unknownClients?.failed(address);
      throw err;
    };
    const clientIds = query.getAll('client_id');
    const redirectUris = query.getAll('redirect_uri');
    if (clientIds.length !== 1 || clientIds[0] === '')
      return unknown(new PageError(400, 'Unknown application', 'The sign-in request names no application (client_id), or names several.'));
    let found;
    try {
      found = await this.#parts.clients.lookUp(clientIds[0]!, req);
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
    const redirectUri = redirectUris[0]!;
    if (!redirectUriMatches(found.client.redirectUris, redirectUri)) {
      throw new PageError(
        400,
        'Invalid redirect URI',
        'The redirect_uri of this sign-in request is not one the application registered. Nothing was sent to it.',
      );
    }
    return { found, redirectUri };
  }

  /** A valid request: straight to the IdP when this browser remembers an approval of it, else the consent page. */
  async #proceed(
    req: IncomingMessage,
    res: ServerResponse,
    request: AuthorizationRequest,
    found: SignInClient,
    ignoredScopes: string[],
    address: string,
    query: URLSearchParams,
  ): Promise<void> {
    const { cookies, approvals, ctx } = this.#parts;
    // Several providers: which one first (the chooser page, unless the request names one).
    const choice = chooseProvider(this.#parts.signIn!, query, res, `${ctx.publicUrl()}/authorize`);
    if (choice === undefined) return;
    Object.assign(request, choice);
    const browser = cookies.binding(req);
    if (await approvals.find(req, request)) {
      // Approved before in this browser: straight to the IdP; the callback checks that the user who
      // comes back is the one who approved, and asks that user otherwise.
      res.setHeader('set-cookie', browser.setCookie);
      await this.#idp.toIdp(res, request, hashToken(browser.value), { consent: 'remembered', remember: false }, 302, address);
      return;
    }
    const html = consentPage({ ...(await awaitConsent(this.#parts, request, browser.value, address, found)), ignoredScopes });
    writePage(res, 200, html, { 'set-cookie': browser.setCookie });
  }
}

/**
 * The rest of an /authorize request, once its client and redirect URI are trusted: each problem a
 * RedirectableError. The request as it is kept, its scope narrowed to what the policy knows
 * (`ignored`: the scopes it dropped, shown on the consent page).
 */
function checkRequest(
  ctx: OAuthContext,
  signInOn: boolean,
  query: URLSearchParams,
  client: ClientRecord,
  redirectUri: string,
  state: string | undefined,
): { request: AuthorizationRequest; ignored: string[] } {
  const single = (name: string): string | undefined => {
    const all = query.getAll(name);
    if (all.length > 1) throw new RedirectableError('invalid_request', `${name} was sent more than once`);
    return all[0] === '' ? undefined : all[0];
  };
  const stateValues = query.getAll('state');
  if (stateValues.length > 1 || (stateValues[0]?.length ?? 0) > MAX_STATE_LENGTH)
    throw new RedirectableError('invalid_request', 'state must be sent once, at most 1024 characters');
  if (!signInOn) throw new RedirectableError('unsupported_response_type', 'browser sign-in is not configured on this server');
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
  const expected = resourceOf(ctx);
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
  const { granted, ignored } = splitScopes(scope ?? client.scope, ctx.config.policy.rules?.scopes ?? []);
  return { request: { clientId: client.clientId, redirectUri, codeChallenge: challenge, state, scope: granted }, ignored };
}
