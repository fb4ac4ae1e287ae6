// POST /authorize/consent: the consent page's answer. One use of the pending request, from the browser
// it was shown to. Deny goes back to the client (or to the device) as access_denied; Approve goes on
// to the IdP, or, when the user already signed in there, straight to the code.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseForm, readBody } from '../../http/body.ts';
import { hashToken, isTokenShaped } from '../../model/credentials.ts';
import type { AuthorizationRequest } from '../../store/types.ts';
import type { SignedInUser } from '../../model/records.ts';
import { messagePage, writePage } from '../../web/pages.ts';
import type { CodeIssuance } from './code.ts';
import { checkFormPost } from './browser.ts';
import { OTHER_BROWSER, PageError, SIGN_IN_OFF, STALE } from './errors.ts';
import type { IdpRoundTrip } from './idp-round-trip.ts';
import { redirectBack, type SignInParts } from './parts.ts';

const CONSENT_MAX_BODY_BYTES = 4096;

export class ConsentStage {
  readonly #parts: SignInParts;
  readonly #idp: IdpRoundTrip;
  readonly #codes: CodeIssuance;

  constructor(parts: SignInParts, idp: IdpRoundTrip, codes: CodeIssuance) {
    this.#parts = parts;
    this.#idp = idp;
    this.#codes = codes;
  }

  /** POST /authorize/consent: one use of the pending request, from the browser it was shown to. */
  async answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { ctx, signIn } = this.#parts;
    if (!signIn) throw SIGN_IN_OFF;
    checkFormPost(req, ctx.publicUrl(), 'The consent form');
    const form = parseForm(req, await readBody(req, CONSENT_MAX_BODY_BYTES));
    const requestId = form.get('request');
    const decision = form.get('decision');
    if (requestId === undefined || !isTokenShaped(requestId))
      throw new PageError(400, 'Bad request', 'The consent form is incomplete: start signing in again from your application.');
    if (decision !== 'approve' && decision !== 'deny') throw new PageError(400, 'Bad request', 'Choose Approve or Deny.');
    const stored = await ctx.store.takeAuthorizationRequest(hashToken(requestId));
    if (!stored || stored === 'corrupt' || stored.stage === 'idp' || stored.stage === 'account') throw STALE;
    if (!this.#parts.cookies.sameBrowser(req, stored.browserHash)) throw OTHER_BROWSER;
    const { request } = stored;
    const user = stored.stage === 'user-consent' ? stored.user : undefined;
    if (decision === 'deny') {
      await this.#denied(res, request, user);
      return;
    }
    // A device's approval is never remembered: each device code is approved on its own.
    const remember = form.get('remember') === 'yes' && this.#parts.approvals.rememberMs > 0 && request.deviceCodeHash === undefined;
    if (user) {
      // Asked after the IdP: the approval is this user's own; the code follows at once.
      await this.#codes.issue(req, res, request, user, { remember });
      return;
    }
    await this.#idp.toIdp(res, request, stored.browserHash, { consent: 'given', remember }, 303);
  }

  /** Deny: audited, and access_denied for the client (at its redirect URI, or at its device's next poll). */
  async #denied(res: ServerResponse, request: AuthorizationRequest, user: SignedInUser | undefined): Promise<void> {
    const { ctx } = this.#parts;
    await ctx.audit.record({
      who: user ? 'user' : 'anonymous',
      action: 'authorize',
      result: 'access_denied',
      clientId: request.clientId,
      ...(user ? { subject: user.subject } : {}),
      detail: { by: 'user', ...(request.deviceCodeHash !== undefined ? { device: true } : {}) },
    });
    if (request.deviceCodeHash !== undefined) {
      // The device's client learns it at its next poll (access_denied).
      await ctx.store.decideDeviceAuthorization(request.deviceCodeHash, ctx.clock.now(), undefined);
      writePage(res, 200, messagePage('Access denied', 'You denied access: the device is not signed in. You can close this window.'));
      return;
    }
    redirectBack(ctx, res, request, { error: 'access_denied', error_description: 'the user denied access' });
  }
}
