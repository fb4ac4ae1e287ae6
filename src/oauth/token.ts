// POST /token (RFC 6749 §3.2): the grant named by `grant_type`, looked up in the grant list
// (./grants/index.ts), after the checks every grant shares: the grant is enabled here, the token is
// for this sidecar's /mcp, the client's authentication (when it presents any) succeeds, and a DPoP
// proof (when one is sent) is for this request; its key is what the grant binds its tokens to. Every
// answer is `Cache-Control: no-store`; errors are RFC 6749 §5.2 JSON via HttpError. The audit of
// each request, issued or refused, is written by the route's one wrapper from what this returns or throws.

import { HttpError, invalidDpopProofAtToken } from '../http/errors.ts';
import { authenticateClient } from './client-auth.ts';
import { namesThisResource, type FormRequest, type OAuthContext } from './context.ts';
import { dpopHeader, DpopProofError } from './dpop.ts';
import type { Issued } from './grants/grant.ts';
import { grantNamed } from './grants/index.ts';

export async function handleToken(ctx: OAuthContext, request: FormRequest): Promise<Issued> {
  const grantType = request.form.get('grant_type');
  if (grantType === undefined) throw new HttpError('invalid_request', 'grant_type is required');
  checkTarget(ctx, request);
  const grant = grantNamed(grantType);
  if (!grant) throw new HttpError('unsupported_grant_type', `grant_type ${grantType.slice(0, 100)} is not supported`);
  if (!grant.enabled(ctx)) throw new HttpError('unsupported_grant_type', grant.disabledDescription);
  // The per-client limit is taken inside, before an assertion's jti is remembered.
  const client = await authenticateClient(request.presented, ctx, { fetches: request.fetches, limit: request.countClient });
  const dpopJkt = await checkedProofKey(ctx, request);
  return grant.handle(ctx, { req: request.req, form: request.form, presented: request.presented, client, dpopJkt });
}

/**
 * RFC 9449 §5: a `DPoP` header at /token must be a proof for this POST to the token endpoint; its
 * jti is spent here, before the grant runs, so that one proof yields tokens once at most. Undefined
 * when no proof was sent (the tokens are Bearer tokens).
 */
async function checkedProofKey(ctx: OAuthContext, request: FormRequest): Promise<string | undefined> {
  const header = dpopHeader(request.req.rawHeaders);
  if (header.kind === 'missing') return undefined;
  const nonces = ctx.dpop.nonces;
  const refused = (reason: string) => {
    ctx.logger.info({ reason }, 'DPoP proof refused at the token endpoint');
    return invalidDpopProofAtToken(reason === 'nonce' ? nonces?.current(ctx.clock.now()) : undefined);
  };
  if (header.kind === 'malformed') throw refused('malformed');
  let checked;
  try {
    checked = await ctx.dpop.check(header.proof, { method: 'POST', urls: [`${ctx.publicUrl()}/token`] });
  } catch (err) {
    if (err instanceof DpopProofError) throw refused(err.reason);
    throw err;
  }
  if (!(await ctx.dpop.spend(checked))) throw refused('replayed');
  return checked.jkt;
}

/** RFC 8707 `resource` and RFC 8693 `audience`: tokens are only ever issued for this sidecar's /mcp. */
function checkTarget(ctx: OAuthContext, request: FormRequest): void {
  for (const value of [request.form.get('resource'), request.form.get('audience')]) {
    if (value !== undefined && !namesThisResource(ctx, value)) {
      throw new HttpError('invalid_target', `tokens of this server are only issued for ${ctx.publicUrl()}/mcp`);
    }
  }
}
