// Remembered approvals (oauth.consentRememberSeconds): an approval a user gave in one browser, kept
// under the SHA-256 of that browser's consent cookie, lets a later sign-in of the same client, redirect
// URI and scope set skip the consent page, for that user only.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { scopeWithin } from '../../model/clients.ts';
import { hashToken } from '../../model/credentials.ts';
import { consentKey } from '../../store/records.ts';
import type { AuthorizationRequest, ConsentLink, ConsentRecord } from '../../store/types.ts';
import type { SignedInUser } from '../../model/records.ts';
import type { OAuthContext } from '../context.ts';
import type { BrowserCookies } from './browser.ts';

/** Remembered approvals one browser may hold (one per IdP user, client and redirect URI). */
export const MAX_CONSENTS_PER_BROWSER = 20;

export class RememberedApprovals {
  readonly #ctx: OAuthContext;
  readonly #cookies: BrowserCookies;
  /** How long an approval is remembered; 0: never. */
  readonly rememberMs: number;

  constructor(ctx: OAuthContext, cookies: BrowserCookies) {
    this.#ctx = ctx;
    this.#cookies = cookies;
    this.rememberMs = ctx.config.oauth.consentRememberSeconds * 1000;
  }

  /**
   * This browser's remembered approval of the request, if one holds: the same client (its record not
   * deleted, nor created anew since), the exact redirect URI, a scope set that covers the one asked,
   * given less than oauth.consentRememberSeconds ago, and, once the IdP has answered, by that user.
   */
  async find(req: IncomingMessage, request: AuthorizationRequest, user?: SignedInUser): Promise<ConsentRecord | undefined> {
    if (this.rememberMs === 0) return undefined;
    const cookie = this.#cookies.consentCookie(req);
    if (cookie === undefined) return undefined;
    const client = await this.#ctx.store.getClient(request.clientId);
    if (!client || client === 'corrupt' || client.revokedAt !== undefined) return undefined;
    const now = this.#ctx.clock.now();
    const approvals = await this.#ctx.store.listConsents(hashToken(cookie), now);
    return approvals.find(
      (c) =>
        c.clientId === request.clientId &&
        c.clientCreatedAt === client.createdAt &&
        c.redirectUri === request.redirectUri &&
        c.approvedAt + this.rememberMs > now &&
        // No scope asked is nothing beyond the MCP server itself, within any approval.
        (request.scope === undefined || scopeWithin(request.scope, c.scope ?? '')) &&
        (user === undefined || (c.issuer === user.issuer && c.subject === user.subject)),
    );
  }

  /** Where `approval`, found in this browser by `find`, lives: what a code issued under it is tied to. */
  linkOf(req: IncomingMessage, approval: ConsentRecord): ConsentLink {
    return { browserHash: hashToken(this.#cookies.consentCookie(req)!), key: consentKey(approval), expiresAt: approval.expiresAt };
  }

  /** Records the approval `user` just gave in this browser (its cookie set on `res`); where it lives. */
  async record(
    req: IncomingMessage,
    res: ServerResponse,
    request: AuthorizationRequest,
    user: SignedInUser,
  ): Promise<ConsentLink | undefined> {
    const client = await this.#ctx.store.getClient(request.clientId);
    if (this.rememberMs === 0 || !client || client === 'corrupt' || client.revokedAt !== undefined) return undefined;
    const binding = this.#cookies.consentBinding(req);
    const now = this.#ctx.clock.now();
    const approval: ConsentRecord = {
      clientId: request.clientId,
      clientCreatedAt: client.createdAt,
      redirectUri: request.redirectUri,
      issuer: user.issuer,
      subject: user.subject,
      approvedAt: now,
      expiresAt: now + this.rememberMs,
    };
    if (request.scope !== undefined) approval.scope = request.scope;
    const browserHash = hashToken(binding.value);
    await this.#ctx.store.putConsent(browserHash, approval, now, MAX_CONSENTS_PER_BROWSER);
    res.setHeader('set-cookie', binding.setCookie);
    return { browserHash, key: consentKey(approval), expiresAt: approval.expiresAt };
  }
}
