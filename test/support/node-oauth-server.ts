// A plain OAuth 2.0 authorization server (no OpenID Connect, no ID token) built on
// @node-oauth/oauth2-server 5, on node:http: the authorization_code grant with PKCE (S256) as that
// library implements it (its AuthorizeHandler keeps code_challenge with the code, its
// AuthorizationCodeGrantType checks code_verifier), an in-memory model, and a resource endpoint that
// authenticates a bearer token through the library. The person at /authorize is `user` (signed in
// there already: the authenticate handler answers for them, no prompt).

import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import OAuth2Server from '@node-oauth/oauth2-server';

export interface NodeOAuthServer {
  url: string;
  authorizationEndpoint: string;
  tokenEndpoint: string;
  /** Every request's method and path, in order. */
  readonly requests: Array<{ method: string; path: string }>;
  /** The user a bearer token was issued to, through the library's own authentication; undefined when refused. */
  whoHolds(authorization: string): Promise<string | undefined>;
  close(): Promise<void>;
}

export async function startNodeOAuthServer(options: {
  clientId: string;
  clientSecret: string;
  redirectUri: () => string;
  user: string;
}): Promise<NodeOAuthServer> {
  const client = () => ({ id: options.clientId, redirectUris: [options.redirectUri()], grants: ['authorization_code'] });
  const codes = new Map<string, OAuth2Server.AuthorizationCode>();
  const tokens = new Map<string, OAuth2Server.Token>();
  const model: OAuth2Server.AuthorizationCodeModel = {
    async getClient(clientId: string, clientSecret: string | null) {
      if (clientId !== options.clientId) return null;
      // null: the authorize endpoint asks without a secret; the token endpoint with it.
      if (clientSecret !== null && clientSecret !== options.clientSecret) return null;
      return client();
    },
    async saveAuthorizationCode(code, c, user) {
      const saved = { ...code, client: c, user };
      codes.set(code.authorizationCode, saved);
      return saved;
    },
    async getAuthorizationCode(code) {
      return codes.get(code) ?? null;
    },
    async revokeAuthorizationCode(code) {
      return codes.delete(code.authorizationCode);
    },
    async saveToken(token, c, user) {
      const saved = { ...token, client: c, user };
      tokens.set(token.accessToken, saved);
      return saved;
    },
    async getAccessToken(accessToken) {
      return tokens.get(accessToken) ?? null;
    },
    async verifyScope() {
      return true;
    },
  };
  const oauth = new OAuth2Server({ model });
  const requests: NodeOAuthServer['requests'] = [];

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    requests.push({ method: req.method ?? '', path: url.pathname });
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString();
    const request = new OAuth2Server.Request({
      method: req.method ?? 'GET',
      headers: req.headers as Record<string, string>,
      query: Object.fromEntries(url.searchParams),
      body: Object.fromEntries(new URLSearchParams(raw)),
    });
    const response = new OAuth2Server.Response({});
    try {
      if (url.pathname === '/authorize' && req.method === 'GET') {
        await oauth.authorize(request, response, { authenticateHandler: { handle: () => ({ id: options.user }) } });
      } else if (url.pathname === '/token' && req.method === 'POST') {
        await oauth.token(request, response);
      } else {
        res.writeHead(404).end();
        return;
      }
    } catch (err) {
      // The library has written the error answer (status, body, and for /authorize the redirect).
      if (!(err instanceof OAuth2Server.OAuthError)) throw err;
    }
    res.writeHead(response.status ?? 200, response.headers as Record<string, string>);
    res.end(response.body === undefined || Object.keys(response.body as object).length === 0 ? '' : JSON.stringify(response.body));
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    authorizationEndpoint: `${url}/authorize`,
    tokenEndpoint: `${url}/token`,
    requests,
    async whoHolds(authorization) {
      const request = new OAuth2Server.Request({ method: 'GET', headers: { authorization }, query: {} });
      try {
        const token = await oauth.authenticate(request, new OAuth2Server.Response({}));
        return (token.user as { id: string }).id;
      } catch {
        return undefined;
      }
    },
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
