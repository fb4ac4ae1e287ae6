// OAuth routes on the proxy listener (the sidecar is the authorization server for /mcp): discovery
// documents, /register, /token, /revoke, /introspect, and the browser sign-in pages (./authorize.ts). Bodies are small and bounded; what a handler
// throws is answered by the listener's one error mapper (a store outage is a 503, never a success).

import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseForm, readBody, type Form } from '../body.ts';
import { httpErrorFor, writeJson } from '../errors.ts';
import { wasAudited } from '../audit.ts';
import type { Route } from '../http.ts';
import { clientAddresses } from '../proxy/client-address.ts';
import { limitTokenRequests } from '../rate-limits.ts';
import { presentedClientId } from './client-auth.ts';
import type { OAuthContext } from './context.ts';
import { authorizationServerMetadata, protectedResourceMetadata } from './metadata.ts';
import { FixedWindowLimiter } from './rate-limit.ts';
import { signInRoutes } from './authorize.ts';
import { handleRegister } from './register.ts';
import { handleIntrospect, handleRevoke } from './revocation.ts';
import { handleToken } from './token.ts';

/** Form bodies of /token, /revoke and /introspect (a JWT subject token fits with room to spare). */
export const FORM_MAX_BODY_BYTES = 32 * 1024;

type FormHandler = (ctx: OAuthContext, req: IncomingMessage, res: ServerResponse, form: Form) => Promise<void>;

/** The OAuth routes of the proxy listener: one entry an endpoint. */
export function oauthRoutes(ctx: OAuthContext): Route[] {
  const registrations = new FixedWindowLimiter({ limit: ctx.config.oauth.registrationRateLimitPerMinute, windowMs: 60_000, clock: ctx.clock });
  const addresses = clientAddresses(ctx.config.proxy.trustedProxies);

  const scopes = ctx.config.policy.rules?.scopes ?? [];
  const resourceMetadata: Route['handler'] = (_req, res) => writeJson(res, 200, protectedResourceMetadata(ctx.publicUrl(), scopes));
  const serverMetadata: Route['handler'] = (_req, res) =>
    writeJson(res, 200, authorizationServerMetadata(ctx.publicUrl(), { tokenExchange: ctx.idp !== undefined, signIn: ctx.signIn !== undefined, clientMetadataDocuments: ctx.signIn !== undefined && ctx.cimd !== undefined, scopes }));
  const register: Route['handler'] = (req, res, path) =>
    audited(ctx, req, path, undefined, handleRegister(ctx, registrations, addresses.client(req), req, res));
  /** Token requests are limited per client_id named (or per address when none is). */
  const limitedToken: FormHandler = async (ctx, req, res, form) => {
    const key = presentedClientId(req, form) ?? `address:${addresses.client(req)}`;
    await limitTokenRequests(ctx.store, key.slice(0, 200), ctx.config.rateLimits.tokenRequestsPerMinute);
    await handleToken(ctx, req, res, form);
  };

  return [
    withCors({ path: '/.well-known/oauth-protected-resource', methods: ['GET'], handler: resourceMetadata }),
    withCors({ path: '/.well-known/oauth-protected-resource/mcp', methods: ['GET'], handler: resourceMetadata }),
    withCors({ path: '/.well-known/oauth-authorization-server', methods: ['GET'], handler: serverMetadata }),
    withCors({ path: '/register', methods: ['POST'], handler: register }),
    withCors({ path: '/token', methods: ['POST'], handler: formEndpoint(ctx, limitedToken, true) }),
    withCors({ path: '/revoke', methods: ['POST'], handler: formEndpoint(ctx, handleRevoke, true) }),
    // Introspection is neither issuance nor revocation: not audited.
    { path: '/introspect', methods: ['POST'], handler: formEndpoint(ctx, handleIntrospect, false) },
    ...signInRoutes(ctx, ctx.signIn),
  ];
}

/**
 * For endpoints that browser-based MCP clients (the MCP Inspector) call with fetch from their own
 * origin: CORS without credentials (no cookie is read on them, and their answers are no secret to
 * the page that asked), and the preflight. The browser sign-in pages are not among them.
 */
function withCors(route: Route): Route {
  const methods = route.methods === 'any' ? [] : route.methods;
  const allowed = methods.join(', ') + (methods.includes('GET') ? ', HEAD' : '');
  return {
    path: route.path,
    methods: [...methods, 'OPTIONS'],
    handler: (req, res, path) => {
      res.setHeader('access-control-allow-origin', '*');
      if (req.method !== 'OPTIONS') return route.handler(req, res, path);
      res.statusCode = 204;
      res.setHeader('access-control-allow-methods', allowed);
      res.setHeader('access-control-allow-headers', 'authorization, content-type, mcp-protocol-version');
      res.setHeader('access-control-max-age', '600');
      res.end();
    },
  };
}

/** An endpoint taking a bounded form body; `audit`: a refusal is audited (successes are, by the handler). */
function formEndpoint(ctx: OAuthContext, handler: FormHandler, audit: boolean): Route['handler'] {
  return async (req, res, path) => {
    let form: Form | undefined;
    const work = async () => {
      form = parseForm(req, await readBody(req, FORM_MAX_BODY_BYTES));
      await handler(ctx, req, res, form);
    };
    if (audit) await audited(ctx, req, path, () => form, work());
    else await work();
  };
}

const GRANT_ACTIONS: Readonly<Record<string, string>> = {
  client_credentials: 'token.client_credentials',
  refresh_token: 'token.refresh_token',
  'urn:ietf:params:oauth:grant-type:token-exchange': 'token.token_exchange',
  authorization_code: 'token.authorization_code',
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
