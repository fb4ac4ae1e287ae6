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
// Each stage is a module of ./sign-in/: the request check (authorize-request.ts), the consent form
// (consent.ts), the IdP round trip and its callback (idp-round-trip.ts), code issuance (code.ts) and
// the device code entry (device-entry.ts), over what they share (parts.ts). This module routes them
// and turns every failure into a page.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { httpErrorFor } from '../http/errors.ts';
import type { Route } from '../http/serve.ts';
import { describe } from '../observability/logger.ts';
import { AccountPageError, AccountPages, AccountSessions } from './account.ts';
import { ApprovalPages } from './approval-page.ts';
import type { OAuthContext } from './context.ts';
import { IdpClientRefused, IdpUnavailable, type IdpSignIn } from './oidc-client.ts';
import { messagePage, writePage } from '../web/pages.ts';
import { AuthorizeRequestStage } from './sign-in/authorize-request.ts';
import { CodeIssuance } from './sign-in/code.ts';
import { ConsentStage } from './sign-in/consent.ts';
import { DeviceEntryStage } from './sign-in/device-entry.ts';
import { PageError } from './sign-in/errors.ts';
import { IdpRoundTrip } from './sign-in/idp-round-trip.ts';
import { createSignInParts } from './sign-in/parts.ts';

export {
  DEVICE_ENTRIES_PER_MINUTE_PER_ADDRESS,
  DEVICE_ENTRIES_PER_MINUTE_PER_CODE,
  DEVICE_ENTRIES_PER_MINUTE_UNDER_GUESSING,
  DEVICE_FAILED_ENTRIES_PER_MINUTE,
} from './sign-in/device-entry.ts';

/** The browser endpoints of sign-in, as routes of the proxy listener. */
export function signInRoutes(ctx: OAuthContext, signIn: IdpSignIn | undefined): Route[] {
  const account = new AccountPages(ctx, signIn);
  const approvals = new ApprovalPages(ctx, new AccountSessions(ctx, signIn));
  const parts = createSignInParts(ctx, signIn);
  const codes = new CodeIssuance(parts);
  const idp = new IdpRoundTrip(parts, codes, account);
  const authorize = new AuthorizeRequestStage(parts, idp);
  const consent = new ConsentStage(parts, idp, codes);
  const device = new DeviceEntryStage(parts);
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
    { path: '/authorize', methods: ['GET'], handler: page((req, res) => authorize.handle(req, res)) },
    { path: '/authorize/consent', methods: ['POST'], handler: page((req, res) => consent.answer(req, res)) },
    { path: '/oauth/callback', methods: ['GET'], handler: page((req, res) => idp.callback(req, res)) },
    {
      path: '/device',
      methods: ['GET', 'POST'],
      handler: page((req, res) => (req.method === 'POST' ? device.entry(req, res) : device.page(req, res))),
    },
    { path: '/account', methods: ['GET'], handler: page((req, res) => account.show(req, res)) },
    { path: '/account/revoke', methods: ['POST'], handler: page((req, res) => account.revoke(req, res)) },
    { path: '/account/forget', methods: ['POST'], handler: page((req, res) => account.forget(req, res)) },
    { path: '/account/disconnect', methods: ['POST'], handler: page((req, res) => account.disconnect(req, res)) },
    { path: '/account/sign-out', methods: ['POST'], handler: page((req, res) => account.signOut(req, res)) },
    { path: '/approve/*', methods: ['GET', 'POST'], handler: page((req, res) => approvals.handle(req, res)) },
  ];
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
