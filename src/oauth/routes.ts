// OAuth routes on the proxy listener (the sidecar is the authorization server for /mcp): discovery
// documents, /register, /token, /revoke and /introspect. Bodies are small and bounded; what a handler
// throws is answered by the listener's one error mapper (a store outage is a 503, never a success).

import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseForm, readBody, type Form } from '../body.ts';
import { httpErrorFor, methodNotAllowed, writeJson } from '../errors.ts';
import { wasAudited } from '../audit.ts';
import type { RouteHandler } from '../proxy/server.ts';
import { clientAddresses } from '../proxy/client-address.ts';
import { limitTokenRequests } from '../rate-limits.ts';
import { presentedClientId } from './client-auth.ts';
import type { OAuthContext } from './context.ts';
import { authorizationServerMetadata, protectedResourceMetadata } from './metadata.ts';
import { FixedWindowLimiter } from './rate-limit.ts';
import { handleRegister } from './register.ts';
import { handleIntrospect, handleRevoke } from './revocation.ts';
import { handleToken } from './token.ts';

/** Form bodies of /token, /revoke and /introspect (a JWT subject token fits with room to spare). */
export const FORM_MAX_BODY_BYTES = 32 * 1024;

type FormHandler = (ctx: OAuthContext, req: IncomingMessage, res: ServerResponse, form: Form) => Promise<void>;

const FORM_ENDPOINTS: Readonly<Record<string, FormHandler>> = {
  '/token': handleToken,
  '/revoke': handleRevoke,
  '/introspect': handleIntrospect,
};

export function createOAuthRoutes(ctx: OAuthContext): RouteHandler {
  const registrations = new FixedWindowLimiter({ limit: ctx.config.oauth.registrationRateLimitPerMinute, windowMs: 60_000, clock: ctx.clock });
  const addresses = clientAddresses(ctx.config.proxy.trustedProxies);

  return async (req: IncomingMessage, res: ServerResponse, path: string): Promise<boolean> => {
    if (path === '/.well-known/oauth-protected-resource' || path === '/.well-known/oauth-protected-resource/mcp') {
      allow(req, 'GET');
      writeJson(res, 200, protectedResourceMetadata(ctx.publicUrl()));
      return true;
    }
    if (path === '/.well-known/oauth-authorization-server') {
      allow(req, 'GET');
      writeJson(res, 200, authorizationServerMetadata(ctx.publicUrl(), { tokenExchange: ctx.idp !== undefined }));
      return true;
    }
    if (path === '/register') {
      allow(req, 'POST');
      await audited(ctx, req, path, undefined, handleRegister(ctx, registrations, addresses.client(req), req, res));
      return true;
    }
    const handler = FORM_ENDPOINTS[path];
    if (handler === undefined) return false;
    allow(req, 'POST');
    let form: Form | undefined;
    const work = async () => {
      form = parseForm(req, await readBody(req, FORM_MAX_BODY_BYTES));
      if (path === '/token') {
        const key = presentedClientId(req, form) ?? `address:${addresses.client(req)}`;
        await limitTokenRequests(ctx.store, key.slice(0, 200), ctx.config.rateLimits.tokenRequestsPerMinute);
      }
      await handler(ctx, req, res, form);
    };
    // Introspection is neither issuance nor revocation: not audited.
    if (path === '/introspect') await work();
    else await audited(ctx, req, path, () => form, work());
    return true;
  };
}

const GRANT_ACTIONS: Readonly<Record<string, string>> = {
  client_credentials: 'token.client_credentials',
  refresh_token: 'token.refresh_token',
  'urn:ietf:params:oauth:grant-type:token-exchange': 'token.token_exchange',
};

/**
 * Successes are audited by the handlers, which know who the caller is. A refused or failed /token,
 * /revoke or /register is audited here, once, with the answer it gets: `who` is `anonymous` and
 * `clientId` is the one presented (unverified).
 */
async function audited(ctx: OAuthContext, req: IncomingMessage, path: string, form: (() => Form | undefined) | undefined, work: Promise<void>): Promise<void> {
  try {
    await work;
  } catch (err) {
    if (!wasAudited(err)) {
      const answer = httpErrorFor(err);
      const f = form?.();
      const grant = f?.get('grant_type');
      const action = path === '/token' ? (GRANT_ACTIONS[grant ?? ''] ?? 'token') : path === '/revoke' ? 'revoke' : 'register';
      const clientId = f ? presentedClientId(req, f) : undefined;
      void ctx.audit.record({
        who: 'anonymous',
        action,
        result: answer.code,
        ...(clientId !== undefined ? { clientId } : {}),
        detail: { status: answer.status },
      });
    }
    throw err;
  }
}

function allow(req: IncomingMessage, method: 'GET' | 'POST'): void {
  if (req.method === method || (method === 'GET' && req.method === 'HEAD')) return;
  throw methodNotAllowed(method === 'GET' ? 'GET, HEAD' : 'POST');
}
