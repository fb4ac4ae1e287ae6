// The last stage of browser sign-in: a signed-in user's approval becomes a single-use authorization
// code sent to the client's redirect URI, or, for a device sign-in, the device authorization its
// client's next poll redeems.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { generateToken, generateTokenFor, hashToken } from '../../model/credentials.ts';
import type { AuthorizationRequest, ConsentLink } from '../../store/types.ts';
import type { SignedInUser } from '../../model/records.ts';
import { isClientIdMetadataUrl } from '../cimd.ts';
import { resourceOf } from '../context.ts';
import { messagePage, writePage } from '../../web/pages.ts';
import { PageError } from './errors.ts';
import { redirectBack, type SignInParts } from './parts.ts';

/** RFC 6749 §4.1.2: short lived; OAuth 2.1 recommends at most ten minutes, this is one. */
export const CODE_TTL_MS = 60 * 1000;

/** The approval a code is issued under: one remembered, or the one just given (`remember`: keep it). */
export type CodeApproval = { remembered: ConsentLink } | { remember: boolean };

export class CodeIssuance {
  readonly #parts: SignInParts;

  constructor(parts: SignInParts) {
    this.#parts = parts;
  }

  /**
   * The single-use code for the client, tied to the approval it was issued under: one remembered, or
   * the one just given (recorded here when the user asked to remember it).
   */
  async issue(
    req: IncomingMessage,
    res: ServerResponse,
    request: AuthorizationRequest,
    user: SignedInUser,
    approval: CodeApproval,
  ): Promise<void> {
    const { ctx, clients } = this.#parts;
    if (ctx.cimd && isClientIdMetadataUrl(request.clientId)) {
      // The document is looked up again (cached, as a rule): a client an administrator deleted since
      // the consent page, or whose document went bad, gets no code.
      const found = await clients.lookUp(request.clientId, req);
      if (!found)
        throw new PageError(
          400,
          'Unknown application',
          'The application of this sign-in was removed from this server. Nothing was issued.',
        );
      if (found.client.source === 'cimd' && !found.stored) await clients.remember(found.client);
    }
    if (request.deviceCodeHash !== undefined) {
      await this.#approveDevice(res, request, request.deviceCodeHash, user);
      return;
    }
    const consent =
      'remembered' in approval
        ? approval.remembered
        : approval.remember
          ? await this.#parts.approvals.record(req, res, request, user)
          : undefined;
    const code = generateTokenFor(request.clientId);
    const now = ctx.clock.now();
    await ctx.store.putAuthorizationCode({
      codeHash: hashToken(code),
      clientId: request.clientId,
      redirectUri: request.redirectUri,
      codeChallenge: request.codeChallenge,
      resource: resourceOf(ctx),
      ...(request.scope !== undefined ? { scope: request.scope } : {}),
      user,
      ...(consent !== undefined ? { consent } : {}),
      createdAt: now,
      expiresAt: now + CODE_TTL_MS,
    });
    await ctx.audit.record({
      who: 'user',
      action: 'authorize',
      result: 'ok',
      clientId: request.clientId,
      subject: user.subject,
      detail: { consent: 'remembered' in approval ? 'remembered' : 'given', issuer: user.issuer },
    });
    redirectBack(ctx, res, request, { code });
  }

  /**
   * The approval goes to the device's authorization (taken once, while pending and unexpired): its
   * client's next poll gets the tokens.
   */
  async #approveDevice(res: ServerResponse, request: AuthorizationRequest, deviceCodeHash: string, user: SignedInUser): Promise<void> {
    const { ctx } = this.#parts;
    if (!(await ctx.store.decideDeviceAuthorization(deviceCodeHash, ctx.clock.now(), user))) {
      throw new PageError(
        400,
        'This code has expired',
        'The device code expired or was already decided. Start signing in again on your device.',
      );
    }
    await ctx.audit.record({
      who: 'user',
      action: 'authorize',
      result: 'ok',
      clientId: request.clientId,
      subject: user.subject,
      detail: { consent: 'given', device: true, issuer: user.issuer },
    });
    writePage(
      res,
      200,
      messagePage('Device signed in', 'You approved the device: it is signed in within a few seconds. You can close this window.'),
    );
  }
}
