// A real OpenID provider (panva's oidc-provider, in this process, on port 0) that also does RFC 8693
// token exchange, for mode `token-exchange` end to end. oidc-provider ships no token exchange; it lets
// a grant be registered (`provider.registerGrantType`), and the one registered here behaves as
// Keycloak's standard token exchange does (Keycloak server administration guide, "Standard token
// exchange"; RFC 8693 §2.1 for the request and §2.2 for the answer):
//  - the caller is a confidential client authenticating at the token endpoint, allowed the grant;
//  - `subject_token` is a user's access token from this provider, still active and issued to the
//    caller itself (Keycloak: the caller must be in the subject token's audience);
//    `subject_token_type` and `requested_token_type` are access tokens;
//  - `audience` names a client the caller may exchange for (Keycloak's "available audience");
//  - the answer is a new access token for that audience, for the same user, made with the provider's own
//    AccessToken model (a JWT signed by this provider, `aud` the audience, `sub` the user), with
//    `issued_token_type`, `token_type` Bearer and `expires_in`.
// A refusal is an RFC 6749 §5.2 error: invalid_grant for a subject token that is not active or not
// the caller's, invalid_target (RFC 8693 §2.2.2) for an audience it may not have, invalid_request for
// a token type it does not issue.
// Users sign in at it through the sidecar's browser sign-in; `signInAs` picks who the next one is.

import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

export interface ExchangeIdpUser {
  sub: string;
  email: string;
}

export interface ExchangeIdpOptions {
  clientId: string;
  clientSecret: string;
  /** The sidecar's callbacks (known once it has bound its port). */
  redirectUris: () => string[];
  users: Record<string, ExchangeIdpUser>;
  /** The audiences the client may exchange for, and the lifetime (seconds) of a token for each. */
  audiences: Record<string, { lifetimeSeconds: number }>;
}

export interface ExchangeIdp {
  issuer: string;
  jwksUri: string;
  /** Who the next browser sign-in signs in (a key of `users`). */
  signInAs(name: string): void;
  /** Exchanges answered with a token, per user `sub`. */
  exchanges(sub?: string): number;
  /** Requests to the token endpoint with grant_type token-exchange, answered or refused. */
  exchangeRequests(): number;
  /** HTTP requests of any kind this provider received (discovery, JWKS, token, ...). */
  requests(): number;
  /**
   * An access token of this provider for the user, issued to the sidecar's client (what browser
   * sign-in would have given it), with its lifetime in seconds: for a bench that seeds a user's kept
   * IdP token without a browser.
   */
  mintAccessToken(sub: string): Promise<{ accessToken: string; expiresIn: number }>;
  /** Ends every access token this provider issued to the user (as an administrator's logout does). */
  revokeTokensOf(sub: string): Promise<number>;
  /** Holds every token exchange's answer (the request is counted at once) until the returned function is called. */
  holdExchanges(): () => void;
  /** While down, every request's connection is reset without an answer. */
  setDown(down: boolean): void;
  close(): Promise<void>;
}

/** The slice of oidc-provider used here (the package ships no types). */
interface AccessTokenLike {
  jti: string;
  accountId: string;
  clientId: string;
  grantId?: string;
  isExpired: boolean;
  expiration: number;
  save(): Promise<string>;
  destroy(): Promise<void>;
}
interface Provider {
  callback(): (req: IncomingMessage, res: ServerResponse) => void;
  on(event: string, listener: (...args: any[]) => void): void;
  registerGrantType(name: string, handler: (ctx: any, next: () => Promise<void>) => Promise<void>, parameters: string[]): void;
  interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<any>;
  interactionFinished(req: IncomingMessage, res: ServerResponse, result: Record<string, unknown>, o?: object): Promise<void>;
  Grant: new (init: { accountId: string; clientId: string }) => { addOIDCScope(s: string): void; save(): Promise<string> };
  AccessToken: {
    new (init: Record<string, unknown>): AccessTokenLike;
    find(value: string): Promise<AccessTokenLike | undefined>;
  };
  ResourceServer: new (identifier: string, info: Record<string, unknown>) => unknown;
  Client: { find(id: string): Promise<unknown> };
}

export async function startExchangeIdp(options: ExchangeIdpOptions): Promise<ExchangeIdp> {
  const { default: ProviderClass, errors } = (await import('oidc-provider')) as unknown as {
    default: new (issuer: string, config: Record<string, unknown>) => Provider;
    errors: Record<string, new (description: string) => Error>;
  };
  const server: Server = createServer();
  const sockets = new Set<Socket>();
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'exchange-idp', alg: 'RS256', use: 'sig' };
  const bySub = new Map(Object.values(options.users).map((u) => [u.sub, u]));
  let next: ExchangeIdpUser | undefined;
  let down = false;
  let requests = 0;
  let received = 0;
  let held: Promise<void> | undefined;
  const answered = new Map<string, number>();
  const issued = new Map<string, AccessTokenLike[]>();

  let built: Provider | undefined;
  const provider = (): Provider => {
    if (built) return built;
    built = new ProviderClass(issuer, {
      clients: [
        {
          client_id: options.clientId,
          client_secret: options.clientSecret,
          redirect_uris: options.redirectUris(),
          grant_types: ['authorization_code', TOKEN_EXCHANGE],
          response_types: ['code'],
          token_endpoint_auth_method: 'client_secret_basic',
        },
      ],
      jwks: { keys: [jwk] },
      cookies: { keys: [randomBytes(32).toString('hex')] },
      claims: { openid: ['sub'], email: ['email', 'email_verified'] },
      features: { devInteractions: { enabled: false } },
      interactions: { url: (_ctx: unknown, interaction: { uid: string }) => `/interaction/${interaction.uid}` },
      findAccount: (_ctx: unknown, sub: string) => {
        const user = bySub.get(sub);
        return user && { accountId: sub, claims: async () => ({ sub, email: user.email, email_verified: true }) };
      },
    });
    const p = built;
    p.on('access_token.saved', (token: AccessTokenLike) => {
      const list = issued.get(token.accountId) ?? [];
      list.push(token);
      issued.set(token.accountId, list);
    });
    p.registerGrantType(
      TOKEN_EXCHANGE,
      async (ctx) => {
        requests++;
        await held;
        const params = ctx.oidc.params as Record<string, string | undefined>;
        const client = ctx.oidc.client as { clientId: string };
        for (const name of ['subject_token', 'subject_token_type', 'audience'])
          if (!params[name]) throw new errors.InvalidRequest!(`missing required parameter '${name}'`);
        if (params.subject_token_type !== ACCESS_TOKEN_TYPE) throw new errors.InvalidRequest!('subject_token_type not supported');
        if (params.requested_token_type !== undefined && params.requested_token_type !== ACCESS_TOKEN_TYPE)
          throw new errors.InvalidRequest!('requested_token_type not supported');
        const subject = await p.AccessToken.find(params.subject_token!);
        if (!subject || subject.isExpired) throw new errors.InvalidGrant!('subject token is not active');
        if (subject.clientId !== client.clientId) throw new errors.InvalidGrant!('subject token was not issued to this client');
        const target = options.audiences[params.audience!];
        if (!target) throw new errors.InvalidTarget!('requested audience not available');
        const token = new p.AccessToken({
          accountId: subject.accountId,
          client: ctx.oidc.client,
          grantId: subject.grantId,
          gty: 'token_exchange',
          resourceServer: new p.ResourceServer(params.audience!, {
            audience: params.audience,
            scope: '',
            accessTokenFormat: 'jwt',
            accessTokenTTL: target.lifetimeSeconds,
            jwt: { sign: { alg: 'RS256' } },
          }),
        });
        const value = await token.save();
        answered.set(subject.accountId, (answered.get(subject.accountId) ?? 0) + 1);
        ctx.body = { access_token: value, issued_token_type: ACCESS_TOKEN_TYPE, token_type: 'Bearer', expires_in: token.expiration };
      },
      ['subject_token', 'subject_token_type', 'requested_token_type', 'audience', 'scope'],
    );
    return p;
  };

  async function interaction(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const p = provider();
    const details = await p.interactionDetails(req, res);
    if (details.prompt.name === 'consent') {
      const grant = new p.Grant({ accountId: details.session.accountId, clientId: options.clientId });
      grant.addOIDCScope(String(details.params.scope ?? 'openid'));
      await p.interactionFinished(req, res, { consent: { grantId: await grant.save() } }, { mergeWithLastSubmission: true });
      return;
    }
    if (!next) throw new Error('signInAs was not called');
    await p.interactionFinished(req, res, { login: { accountId: next.sub } }, { mergeWithLastSubmission: false });
  }

  let handle: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    received++;
    if (down) {
      req.socket.destroy();
      return;
    }
    if (/^\/interaction\/[A-Za-z0-9_-]+$/.test((req.url ?? '').split('?')[0]!)) {
      interaction(req, res).catch((err: unknown) => {
        if (!res.headersSent) res.writeHead(400).end(String((err as Error).message));
      });
      return;
    }
    handle ??= provider().callback();
    handle(req, res);
  });

  return {
    issuer,
    jwksUri: `${issuer}/jwks`,
    signInAs(name) {
      next = options.users[name];
      if (!next) throw new Error(`no user ${name}`);
    },
    exchanges: (sub) => (sub === undefined ? [...answered.values()].reduce((a, b) => a + b, 0) : (answered.get(sub) ?? 0)),
    exchangeRequests: () => requests,
    requests: () => received,
    async mintAccessToken(sub) {
      if (!bySub.has(sub)) throw new Error(`no user ${sub}`);
      const p = provider();
      const token = new p.AccessToken({ accountId: sub, client: await p.Client.find(options.clientId), scope: 'openid' });
      return { accessToken: await token.save(), expiresIn: token.expiration };
    },
    async revokeTokensOf(sub) {
      const list = issued.get(sub) ?? [];
      issued.delete(sub);
      await Promise.all(list.map((t) => t.destroy()));
      return list.length;
    },
    holdExchanges() {
      let release!: () => void;
      held = new Promise<void>((resolve) => (release = resolve));
      return () => {
        held = undefined;
        release();
      };
    },
    setDown(value) {
      down = value;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
