// What the stages of browser sign-in share: the browser binding, remembered approvals, the client
// lookup, the client address the limits count, and how a request waits between steps and goes back
// to its client.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { tooManyRequests } from '../../http/errors.ts';
import { limitKey } from '../../model/net-address.ts';
import { generateToken, hashToken } from '../../model/credentials.ts';
import type { AuthorizationRequest, AuthorizationRequestRecord } from '../../store/types.ts';
import type { SignedInUser } from '../../model/records.ts';
import type { OAuthContext } from '../context.ts';
import type { IdpSignIn } from '../oidc-client.ts';
import type { ConsentView } from '../sign-in-pages.ts';
import { RememberedApprovals } from './approvals.ts';
import { BrowserCookies } from './browser.ts';
import { SignInClients, type SignInClient } from './clients.ts';

/** How long a sign-in may take, from /authorize to the IdP's callback, per step. */
export const SIGN_IN_STEP_TTL_MS = 10 * 60 * 1000;

export interface SignInParts {
  readonly ctx: OAuthContext;
  /** undefined when browser sign-in is not configured. */
  readonly signIn: IdpSignIn | undefined;
  /** The IdP's host, shown on the consent page ('' without sign-in). */
  readonly idpHost: string;
  readonly cookies: BrowserCookies;
  readonly approvals: RememberedApprovals;
  readonly clients: SignInClients;
  /** What the per-address limits count a request under: its client address, an IPv6 one as its network. */
  clientKey(req: IncomingMessage): string;
}

export function createSignInParts(ctx: OAuthContext, signIn: IdpSignIn | undefined): SignInParts {
  const clientKey = (req: IncomingMessage): string => limitKey(ctx.addresses.client(req), ctx.config.rateLimits.ipv6PrefixLength);
  const cookies = new BrowserCookies(ctx.publicUrl(), SIGN_IN_STEP_TTL_MS / 1000, ctx.config.oauth.consentRememberSeconds);
  return {
    ctx,
    signIn,
    idpHost: signIn ? new URL(signIn.issuer).host : '',
    cookies,
    approvals: new RememberedApprovals(ctx, cookies),
    clients: new SignInClients(ctx, clientKey),
    clientKey,
  };
}

/**
 * Stores the request /authorize (or /device) starts (for the consent page, or for the IdP when consent
 * is remembered), unless its client address or its client already holds its bound of pending sign-ins
 * (rateLimits.pendingSignInsPerAddress, ...PerClient): then a 429 page with Retry-After (until the
 * oldest expires) and nothing is stored, so a flood of /authorize from one address, or for one client,
 * cannot grow Redis without end.
 */
export async function holdPendingSignIn(
  ctx: OAuthContext,
  requestHash: string,
  record: AuthorizationRequestRecord,
  address: string,
  clientId: string,
): Promise<void> {
  const now = ctx.clock.now();
  const { pendingSignInsPerAddress: perAddress, pendingSignInsPerClient: perClient } = ctx.config.rateLimits;
  const outcome = await ctx.store.putPendingSignIn(requestHash, record, now + SIGN_IN_STEP_TTL_MS, {
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

/** RFC 6749 §4.1.2.1 with RFC 9207 `iss`: the answer (a code, or an error the client can show) goes back to the client. */
export function redirectBack(
  ctx: OAuthContext,
  res: ServerResponse,
  request: Pick<AuthorizationRequest, 'redirectUri' | 'state'>,
  params: Record<string, string>,
  status = 303,
): void {
  const url = new URL(request.redirectUri);
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  if (request.state !== undefined) url.searchParams.set('state', request.state);
  url.searchParams.set('iss', ctx.publicUrl());
  sendTo(res, url, status);
}

/** A bodiless redirect to `url`, neither cached nor leaking this page's URL as a Referer. */
export function sendTo(res: ServerResponse, url: URL, status: number): void {
  res.statusCode = status;
  res.setHeader('location', url.href);
  res.setHeader('cache-control', 'no-store');
  res.setHeader('referrer-policy', 'no-referrer');
  res.setHeader('content-length', '0');
  res.end();
}

/**
 * A request that waits for its user's consent (an /authorize request, or a device code entered):
 * held at its consent stage under a fresh request id, bound to this browser (the consent form must
 * come back from it), and what its consent page shows.
 */
export async function awaitConsent(
  parts: SignInParts,
  request: AuthorizationRequest,
  browserValue: string,
  address: string,
  found: SignInClient,
): Promise<ConsentView> {
  const requestId = generateToken();
  await holdPendingSignIn(
    parts.ctx,
    hashToken(requestId),
    { stage: 'consent', request, browserHash: hashToken(browserValue) },
    address,
    request.clientId,
  );
  return {
    ...consentView(parts, request, requestId, found.client.clientName),
    ...(found.metadataHost !== undefined ? { metadataHost: found.metadataHost } : {}),
  };
}

/** What the consent page shows of a request (the page before the IdP, or after it with `user`). */
export function consentView(
  parts: SignInParts,
  request: AuthorizationRequest,
  requestId: string,
  clientName: string | undefined,
  user?: SignedInUser,
): ConsentView {
  const device = request.deviceCodeHash !== undefined;
  const target = device ? undefined : new URL(request.redirectUri);
  const { rememberMs } = parts.approvals;
  return {
    clientName,
    clientId: request.clientId,
    redirectHost: target ? `${target.protocol}//${target.host}` : '',
    ...(device ? { device: true } : {}),
    scopes: request.scope ? request.scope.split(' ') : [],
    idpHost: providerHost(parts, request.provider),
    requestId,
    action: `${parts.ctx.publicUrl()}/authorize/consent`,
    ...(rememberMs > 0 && !device ? { rememberDays: Math.max(1, Math.round(rememberMs / 86_400_000)) } : {}),
    ...(user ? { signedInAs: user.email ?? user.subject } : {}),
  };
}

/** The host of the provider a request signs in at (the chosen one, with several). */
function providerHost(parts: SignInParts, provider: string | undefined): string {
  const chosen = provider === undefined ? undefined : parts.signIn?.providers.find((p) => p.name === provider);
  return chosen === undefined ? parts.idpHost : new URL(chosen.issuer).host;
}
