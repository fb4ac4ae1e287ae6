// OAuth routes on the proxy listener (the sidecar is the authorization server for /mcp): discovery
// documents, /register, /token, /revoke, /introspect, /device_authorization, and the browser sign-in pages (./authorize.ts). Bodies are small and bounded; what a handler
// throws is answered by the listener's one error mapper (a store outage is a 503, never a success).

import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseForm, readBody } from '../http/body.ts';
import { HttpError, httpErrorFor, writeJson } from '../http/errors.ts';
import type { AuditInput } from '../observability/audit.ts';
import type { Route } from '../http/serve.ts';
import { limitKey } from '../model/net-address.ts';
import { RESOURCE_METADATA_PATH } from './resource-metadata.ts';
import { isFailureRefusal, ProvenRequestLimit, WindowLimit } from '../http/rate-limits.ts';
import { presentedClient, type AuthenticatedClient } from './client-auth.ts';
import { fetchAdmission, type FormRequest, type OAuthContext } from './context.ts';
import { refusalEventOf, type Issued } from './grants/grant.ts';
import { GRANTS, grantNamed } from './grants/index.ts';
import { authorizationServerMetadata, protectedResourceMetadata } from './metadata.ts';
import { signInRoutes } from './authorize.ts';
import { handleDeviceAuthorization } from './device.ts';
import { handleRegister } from './register.ts';
import { handleIntrospect, handleRevoke } from './revocation.ts';
import { handleToken } from './token.ts';

/** Form bodies of /token, /revoke and /introspect (a JWT subject token fits with room to spare). */
export const FORM_MAX_BODY_BYTES = 32 * 1024;

/** A form endpoint's handler: answers itself, or (/token) returns what it issued for the audit wrapper to record and answer. */
type FormHandler = (ctx: OAuthContext, request: FormRequest) => Promise<Issued | void>;

/** Refusals that mean "a credential was wrong": counted per address with the proxy's bad tokens. */
const FAILED_AUTHENTICATION = new Set(['invalid_client', 'invalid_grant', 'invalid_token']);

/**
 * Runs an endpoint that authenticates its caller. A valid credential is always served; a failed
 * authentication is counted, and from an address over the limit answered with a bare 429 instead.
 */
async function counted<T>(authFailures: OAuthContext['authFailures'], address: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof HttpError && FAILED_AUTHENTICATION.has(err.code)) await authFailures?.failed(address);
    throw err;
  }
}

/** The discovery documents: protected-resource metadata (RFC 9728) and authorization-server metadata (RFC 8414). */
function metadataHandlers(ctx: OAuthContext): { resourceMetadata: Route['handler']; serverMetadata: Route['handler'] } {
  const scopes = ctx.config.policy.rules?.scopes ?? [];
  const resourceMetadata: Route['handler'] = (_req, res) =>
    writeJson(res, 200, protectedResourceMetadata(ctx.publicUrl(), scopes, ctx.config.oauth.requireDpop));
  const serverMetadata: Route['handler'] = (_req, res) => {
    const enabled = GRANTS.filter((g) => g.enabled(ctx));
    writeJson(
      res,
      200,
      authorizationServerMetadata(ctx.publicUrl(), {
        grantTypes: enabled.map((g) => g.grantType),
        grantProfiles: enabled.flatMap((g) => g.grantProfiles ?? []),
        signIn: ctx.signIn !== undefined,
        clientMetadataDocuments: ctx.signIn !== undefined && ctx.cimd !== undefined,
        scopes,
      }),
    );
  };
  return { resourceMetadata, serverMetadata };
}

/** The OAuth routes of the proxy listener: one entry an endpoint. */
export function oauthRoutes(ctx: OAuthContext): Route[] {
  const { store, clock, config, authFailures } = ctx;
  const limits = {
    register: new WindowLimit(store, clock, 'register', config.oauth.registrationRateLimitPerMinute),
    token: new WindowLimit(store, clock, 'token', config.rateLimits.tokenRequestsPerMinute),
    revoke: new WindowLimit(store, clock, 'revoke', config.rateLimits.revocationRequestsPerMinute),
    introspect: new WindowLimit(store, clock, 'introspect', config.rateLimits.introspectionRequestsPerMinute),
    // Device authorizations are token requests of another kind: the same per-address budget, counted apart.
    device: new WindowLimit(store, clock, 'device', config.rateLimits.tokenRequestsPerMinute),
  };
  // Every per-address count below keys on limitKey: an IPv6 client as its network (a /64 by default).
  const { addresses } = ctx;
  const publicClientTokens = new ProvenRequestLimit(limits.token, clock);
  const fetchesFor = fetchAdmission(ctx, 'too many client metadata documents and key sets fetched for this address; try again in a minute');

  /**
   * An endpoint taking a bounded form body. `limit` counts every request per address before the body
   * is read (a refused address costs no parsing), or, for /token, per client and address once the
   * client authenticated: whoever knows a client id cannot use up that client's requests elsewhere,
   * nor, with wrong secrets, at its own address (failures count towards the failure limit only). `audit`: a refusal is
   * audited (successes are, by the handler).
   */
  function formEndpoint(handler: FormHandler, limit: WindowLimit, audit: boolean): Route['handler'] {
    return async (req, res, path) => {
      const address = limitKey(addresses.client(req), config.rateLimits.ipv6PrefixLength);
      const perClient = limit === limits.token;
      let request: FormRequest | undefined;
      const work = async (): Promise<Issued | void> => {
        if (!perClient) await limit.take(address, `too many ${path.slice(1)} requests from this address`);
        return counted(authFailures, address, async () => {
          const form = parseForm(req, await readBody(req, FORM_MAX_BODY_BYTES));
          // A public client is named, not authenticated: its grant is its credential, so its requests
          // count once they succeeded, and grants that fail use up nothing of its requests.
          let countAfter: string | undefined;
          const countClient = async (client: AuthenticatedClient | null): Promise<void> => {
            const key = client === null ? `address:${address}` : `${client.client.clientId}@${address}`;
            const description = 'too many token requests for this client from this address';
            if (client === null || client.confidential) return limit.take(key, description);
            publicClientTokens.check(key, description);
            countAfter = key;
          };
          request = {
            req,
            res,
            form,
            presented: presentedClient(req, form),
            countMiss: async () => authFailures?.failed(address),
            fetches: fetchesFor(address),
            ...(perClient ? { countClient } : {}),
          };
          const issued = await handler(ctx, request);
          if (issued && countAfter !== undefined) await publicClientTokens.counted(countAfter);
          return issued;
        });
      };
      if (audit) await audited(ctx, res, path, () => request, work);
      else await work();
    };
  }

  const { resourceMetadata, serverMetadata } = metadataHandlers(ctx);
  const register: Route['handler'] = (req, res, path) => {
    const address = limitKey(addresses.client(req), config.rateLimits.ipv6PrefixLength);
    const work = async () => {
      await limits.register.take(address, 'too many registrations from this address');
      // A wrong initial access token (protected registration) is a failed authentication like any other.
      await counted(authFailures, address, () => handleRegister(ctx, req, res));
    };
    return audited(ctx, res, path, () => undefined, work);
  };

  return [
    withCors({ path: '/.well-known/oauth-protected-resource', methods: ['GET'], handler: resourceMetadata }),
    withCors({ path: RESOURCE_METADATA_PATH, methods: ['GET'], handler: resourceMetadata }),
    withCors({ path: '/.well-known/oauth-authorization-server', methods: ['GET'], handler: serverMetadata }),
    withCors({ path: '/register', methods: ['POST'], handler: register }),
    withCors({ path: '/token', methods: ['POST'], handler: formEndpoint(handleToken, limits.token, true) }),
    withCors({ path: '/revoke', methods: ['POST'], handler: formEndpoint(handleRevoke, limits.revoke, true) }),
    // Introspection is neither issuance nor revocation: not audited.
    { path: '/introspect', methods: ['POST'], handler: formEndpoint(handleIntrospect, limits.introspect, false) },
    // RFC 8628: on with browser sign-in (the user approves a device there). Its successes are audited by the handler.
    ...(ctx.signIn
      ? [
          withCors({
            path: '/device_authorization',
            methods: ['POST'],
            handler: formEndpoint(handleDeviceAuthorization, limits.device, false),
          }),
        ]
      : []),
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
      // A browser client reads the nonce a use_dpop_nonce answer carries.
      res.setHeader('access-control-expose-headers', 'dpop-nonce');
      if (req.method !== 'OPTIONS') return route.handler(req, res, path);
      res.statusCode = 204;
      res.setHeader('access-control-allow-methods', allowed);
      res.setHeader('access-control-allow-headers', 'authorization, content-type, dpop, mcp-protocol-version');
      res.setHeader('access-control-max-age', '600');
      res.end();
    },
  };
}

/** Token responses (RFC 6749 §5.1): `Cache-Control: no-store` comes with every JSON answer, and `Pragma` for HTTP/1.0 caches. */
const NO_CACHE = { pragma: 'no-cache' };

/**
 * The one audit of /token, /revoke and /register, for successes and refusals alike. What a grant
 * issued is recorded with the event it returned, then answered (/revoke and /register answer and
 * record their own successes, which depend on what they changed). A refusal or failure is recorded
 * with the event its grant attached (a replay that revoked what it had issued), else as `anonymous`
 * with the client id presented (unverified) and the answer it gets.
 */
async function audited(
  ctx: OAuthContext,
  res: ServerResponse,
  path: string,
  request: () => FormRequest | undefined,
  work: () => Promise<Issued | void>,
): Promise<void> {
  let issued: Issued | void;
  try {
    issued = await work();
  } catch (err) {
    // A failure refused past the per-address limit is answered without an audit line.
    if (isFailureRefusal(err)) throw err;
    const own = refusalEventOf(err);
    if (own) {
      await ctx.audit.record(own.event, own.level);
    } else {
      const answer = httpErrorFor(err);
      const r = request();
      const action =
        path === '/token' ? (grantNamed(r?.form.get('grant_type') ?? '')?.action ?? 'token') : path === '/revoke' ? 'revoke' : 'register';
      const clientId = r?.presented.clientId;
      const event: AuditInput = {
        who: 'anonymous',
        action,
        result: answer.code,
        ...(clientId !== undefined ? { clientId } : {}),
        detail: { status: answer.status },
      };
      await ctx.audit.record(event);
    }
    throw err;
  }
  if (issued) {
    await ctx.audit.record(issued.event);
    writeJson(res, 200, issued.body, NO_CACHE);
  }
}
