// grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer (RFC 7523 §2.1) with an Identity Assertion
// JWT Authorization Grant (ID-JAG) as the assertion: the MCP "Enterprise-Managed Authorization"
// extension. The organisation's IdP issued it to this client for one user, after its own policy
// decided that this user may use this client with this server; it becomes an access token acting for
// that user (`sub`, email and groups kept for the per-tool policy), without a refresh token: the
// client asks the IdP for a fresh ID-JAG instead.
//
// Confidential clients only (the ID-JAG draft: public clients use the authorization code flow): a
// public client is `invalid_client`, as a request without client authentication. The assertion must
// be bound to the authenticated client (`client_id`), name this server's /mcp when it names a
// resource, and is used once: its `jti` is kept in the store until it expires, shared by every
// replica. The scope is what the assertion grants, narrowed to the `scope` asked (when asked) and to
// the client's registered scope (when it has one). Every refusal is the same `invalid_grant`; its
// reason goes to the audit event and the log, never to the client.

import { clientActor } from '../../observability/audit.ts';
import { checkScope } from '../../model/clients.ts';
import { HttpError } from '../../http/errors.ts';
import { GRANT_JWT_BEARER } from '../../model/grant-types.ts';
import type { SignedInUser } from '../../model/records.ts';
import { clientRefused } from '../client-auth.ts';
import { resourceOf } from '../context.ts';
import { IdpRejection, type IdJagAssertion } from '../idp.ts';
import { buildPair, issued } from '../issuance.ts';
import { DEACTIVATED_DESCRIPTION } from '../directory-gate.ts';
import { dpopBinding, idpOutage, refusalWithEvent, requireClient, type Grant } from './grant.ts';

/** The `authorization_grant_profiles_supported` value of ID-JAG (the draft's §7.2). */
export const ID_JAG_GRANT_PROFILE = 'urn:ietf:params:oauth:grant-profile:id-jag';

const ACTION = 'token.id_jag';

/** Space-separated scope tokens of `a` that are also in `b`, in `a`'s order; undefined when none. */
function intersect(a: string, b: string): string | undefined {
  const allowed = new Set(b.split(' '));
  const kept = [...new Set(a.split(' '))].filter((s) => allowed.has(s));
  return kept.length > 0 ? kept.join(' ') : undefined;
}

/**
 * RFC 6749 §3.3 and the extension's scope rule: the assertion's scopes, intersected with those the
 * request asks (when it asks) and those the client was registered with (when it has a scope).
 * Nothing in common is a token without scopes, not a refusal: the scopes are the IdP's to grant.
 */
export function idJagScope(assertion: string | undefined, requested: string | undefined, client: string | undefined): string | undefined {
  let scope = assertion;
  for (const narrower of [requested, client]) {
    if (scope !== undefined && narrower !== undefined) scope = intersect(scope, narrower);
  }
  return scope;
}

export const idJagGrant: Grant = {
  grantType: GRANT_JWT_BEARER,
  grantProfiles: [ID_JAG_GRANT_PROFILE],
  action: ACTION,
  enabled: (ctx) => ctx.idJag !== undefined,
  disabledDescription: 'identity assertion grants (ID-JAG) are not configured on this server',
  // The IdP writes this server's client id into every ID-JAG it issues to the client, so the client
  // must be known to the organisation before it is used: one an administrator created and gave to
  // the IdP. An anonymous registration's id is known to nobody but its registrant.
  registration: 'admin',
  parameters: ['assertion', 'scope'],
  async handle(ctx, request) {
    const { client } = requireClient(request, GRANT_JWT_BEARER, { confidential: 'invalid_client' });
    const { form } = request;
    if (!form.has('assertion')) throw new HttpError('invalid_request', 'assertion is required');
    const requested = checkScope(form.get('scope'));

    const refusal = (reason: string, subject?: string) =>
      refusalWithEvent(new HttpError('invalid_grant', 'the assertion is not acceptable'), {
        who: clientActor(client.clientId),
        action: ACTION,
        result: reason === 'replay' ? 'replay' : 'invalid_grant',
        clientId: client.clientId,
        ...(subject !== undefined ? { subject } : {}),
        detail: { reason },
      });

    const now = ctx.clock.now();
    let assertion: IdJagAssertion;
    try {
      assertion = await ctx.idJag!.verify(form.get('assertion') ?? '', ctx.publicUrl(), now);
    } catch (err) {
      const outage = idpOutage(ctx, err, 'identity assertion grant');
      if (outage) throw outage;
      // The library's code and the claim it checked name the failure (a claim's name, never its value).
      const e = err as { code?: string; claim?: unknown };
      const reason =
        err instanceof IdpRejection ? err.message : `${e.code ?? 'invalid'}${typeof e.claim === 'string' ? ` (${e.claim})` : ''}`;
      ctx.logger.info({ clientId: client.clientId, reason, detail: (err as Error).message }, 'identity assertion grant refused');
      throw refusal(reason);
    }
    if (assertion.clientId !== client.clientId) throw refusal('client_id mismatch', assertion.subject);
    if (assertion.resource !== undefined && assertion.resource !== resourceOf(ctx)) throw refusal('resource mismatch', assertion.subject);
    let granted: string | undefined;
    try {
      granted = idJagScope(checkScope(assertion.scope), requested, client.scope);
    } catch {
      throw refusal('bad scope', assertion.subject);
    }

    // Last, once everything else passed: a refused assertion does not spend its `jti`. Kept past
    // `exp` by the clock tolerance, as long as the assertion would still be accepted.
    const keepUntil = assertion.expiresAt + ctx.config.idp.clockToleranceSeconds * 1000;
    if (!(await ctx.store.useOnce(`id-jag:${assertion.issuer}:${assertion.jti}`, keepUntil))) {
      ctx.logger.warn({ clientId: client.clientId, subject: assertion.subject }, 'identity assertion grant presented again: refused');
      throw refusal('replay', assertion.subject);
    }

    const user: SignedInUser = { subject: assertion.subject, issuer: assertion.issuer };
    if (assertion.email !== undefined) user.email = assertion.email;
    if (assertion.groups !== undefined) user.groups = assertion.groups;
    const pair = await buildPair(ctx, client, granted, { user, refresh: false, dpop: dpopBinding(request) });
    // The client was deleted between its authentication and now.
    if ((await ctx.store.issueTokens(pair.access, pair.refresh)) !== 'ok') throw clientRefused(request.presented);
    // Read after the write (directory-gate.ts): a deactivation racing this grant finds the token, or is seen here.
    if (await ctx.directory?.refuses(user)) {
      await ctx.store.revokeAccessToken(pair.access.tokenHash, ctx.clock.now());
      ctx.logger.info({ clientId: client.clientId }, 'identity assertion grant refused: the directory made this person inactive');
      throw new HttpError('invalid_grant', DEACTIVATED_DESCRIPTION);
    }
    return issued(ctx, ACTION, client, pair);
  },
};
