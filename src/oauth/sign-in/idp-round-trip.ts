// The IdP round trip of browser sign-in: the browser is sent to the IdP with the request waiting under
// the login's `state`; GET /oauth/callback takes it back once, from the same browser, has
// openid-client check the IdP's answer, and hands the signed-in user to code issuance, or, when the
// consent page was skipped for an approval another user gave, to the consent page for this user.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { generateToken, hashToken } from '../../model/credentials.ts';
import { clientName } from '../../model/clients.ts';
import type { AuthorizationRequest, AuthorizationRequestRecord } from '../../store/types.ts';
import type { SignedInUser } from '../../model/records.ts';
import type { AccountPages } from '../account.ts';
import { IdpRejection } from '../idp.ts';
import { DEACTIVATED_TEXT } from '../directory-gate.ts';
import { IdpAuthorizationError, IdpUnavailable } from '../oidc-client.ts';
import { consentPage } from '../sign-in-pages.ts';
import { messagePage, writePage } from '../../web/pages.ts';
import type { CodeIssuance } from './code.ts';
import { OTHER_BROWSER, SIGN_IN_OFF, STALE } from './errors.ts';
import { consentView, holdPendingSignIn, redirectBack, sendTo, SIGN_IN_STEP_TTL_MS, type SignInParts } from './parts.ts';

/** How a request reached the IdP: consent given on the page, or skipped for a remembered approval. */
export interface IdpApproval {
  consent: 'given' | 'remembered';
  remember: boolean;
}

export class IdpRoundTrip {
  readonly #parts: SignInParts;
  readonly #codes: CodeIssuance;
  readonly #account: AccountPages;

  constructor(parts: SignInParts, codes: CodeIssuance, account: AccountPages) {
    this.#parts = parts;
    this.#codes = codes;
    this.#account = account;
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
    approval: IdpApproval,
    status: number,
    startedBy?: string,
  ): Promise<void> {
    const { ctx } = this.#parts;
    const { url, login } = await this.#parts.signIn!.start(request.provider, request.loginHint);
    const record: AuthorizationRequestRecord = {
      stage: 'idp',
      request,
      browserHash,
      ...approval,
      nonce: login.nonce,
      codeVerifier: login.codeVerifier,
    };
    if (startedBy !== undefined) await holdPendingSignIn(ctx, hashToken(login.state), record, startedBy, request.clientId);
    else await ctx.store.putAuthorizationRequest(hashToken(login.state), record, ctx.clock.now() + SIGN_IN_STEP_TTL_MS);
    sendTo(res, url, status);
  }

  /** GET /oauth/callback: the IdP's answer, checked by openid-client, becomes a code for the client. */
  async callback(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { ctx, signIn } = this.#parts;
    if (!signIn) throw SIGN_IN_OFF;
    const query = new URLSearchParams((req.url ?? '').split('?')[1] ?? '');
    const state = query.get('state');
    if (state === null || state.length === 0 || state.length > 512) throw STALE;
    const stored = await ctx.store.takeAuthorizationRequest(hashToken(state));
    // A sign-in to the account page comes back through the same callback (the one the IdP knows).
    if (stored && stored !== 'corrupt' && stored.stage === 'account') return this.#account.callback(req, res, query, state, stored);
    if (!stored || stored === 'corrupt' || stored.stage !== 'idp') throw STALE;
    if (!this.#parts.cookies.sameBrowser(req, stored.browserHash)) throw OTHER_BROWSER;
    const { request } = stored;
    let user;
    try {
      let tokens;
      ({ user, tokens } = await signIn.finish(query, {
        state,
        nonce: stored.nonce,
        codeVerifier: stored.codeVerifier,
        ...(request.provider !== undefined ? { provider: request.provider } : {}),
      }));
      // What this sign-in leads to (a code, a device approval) is refused if the person is offboarded after it.
      user.signedInAt = ctx.clock.now();
      // The IdP's tokens belong to this user (IdP sub + issuer): kept, encrypted, when the upstream is
      // to receive them (upstream.credentials idp or token-exchange); otherwise dropped here.
      await ctx.keepIdpTokens?.(user, tokens);
    } catch (err) {
      await this.#refused(res, request, err);
      return;
    }
    if (await ctx.directory?.refuses(user)) {
      await this.#deactivated(res, request, user.subject);
      return;
    }
    if (stored.consent === 'remembered') {
      await this.#afterRememberedConsent(req, res, request, stored.browserHash, user);
      return;
    }
    await this.#codes.issue(req, res, request, user, { remember: stored.remember });
  }

  /**
   * The IdP refused the sign-in (or relayed an error): nothing issued, the error sent back to the
   * client. Anything else the IdP round trip threw (unreachable, the client refused) is rethrown.
   */
  async #refused(res: ServerResponse, request: AuthorizationRequest, err: unknown): Promise<void> {
    const { ctx } = this.#parts;
    if (err instanceof IdpUnavailable) throw err;
    const error =
      err instanceof IdpAuthorizationError ? relayedIdpError(err.error) : err instanceof IdpRejection ? 'access_denied' : undefined;
    if (error === undefined) throw err;
    ctx.logger.info(
      { clientId: request.clientId, reason: (err as Error).message },
      'sign-in at the identity provider refused: nothing issued',
    );
    await ctx.audit.record({
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
    redirectBack(ctx, res, request, { error, error_description: 'sign-in at the identity provider did not succeed' });
  }

  /** The directory made this person inactive: nothing issued, and the page says why (a client's error would not). */
  async #deactivated(res: ServerResponse, request: AuthorizationRequest, subject: string): Promise<void> {
    const { ctx } = this.#parts;
    ctx.logger.info({ clientId: request.clientId }, 'sign-in refused: the directory made this person inactive');
    await ctx.audit.record({
      who: 'user',
      action: 'authorize',
      result: 'access_denied',
      clientId: request.clientId,
      subject,
      detail: { by: 'directory' },
    });
    writePage(res, 403, messagePage('Account deactivated', DEACTIVATED_TEXT));
  }

  /** Consent was skipped for a remembered approval: a code when it is this user's, else the consent page for this user. */
  async #afterRememberedConsent(
    req: IncomingMessage,
    res: ServerResponse,
    request: AuthorizationRequest,
    browserHash: string,
    user: SignedInUser,
  ): Promise<void> {
    const { ctx, approvals } = this.#parts;
    const approval = await approvals.find(req, request, user);
    if (!approval) {
      // Consent was skipped for an approval of another user (or one revoked meanwhile): this user
      // has approved nothing, so this user is asked now, and no code exists before Approve.
      const requestId = generateToken();
      const record: AuthorizationRequestRecord = { stage: 'user-consent', request, browserHash, user };
      await ctx.store.putAuthorizationRequest(hashToken(requestId), record, ctx.clock.now() + SIGN_IN_STEP_TTL_MS);
      const client = await ctx.store.getClient(request.clientId);
      writePage(res, 200, consentPage(consentView(this.#parts, request, requestId, clientName(client), user)));
      return;
    }
    await this.#codes.issue(req, res, request, user, { remembered: approvals.linkOf(req, approval) });
  }
}

/** IdP errors the client can act on keep their meaning; the rest say only that sign-in failed. */
function relayedIdpError(error: string): string {
  if (error === 'temporarily_unavailable') return 'temporarily_unavailable';
  if (error === 'server_error') return 'server_error';
  return 'access_denied';
}
