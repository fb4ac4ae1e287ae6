// A stand-in for GitHub as an OAuth provider, shaped after GitHub's documentation of its web
// application flow, "Authorizing OAuth apps"
// (https://docs.github.com/en/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps), and, with
// `expiring`, "Refreshing user access tokens" of GitHub Apps
// (https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/refreshing-user-access-tokens):
//   GET  /login/oauth/authorize     client_id, redirect_uri, scope, state (and PKCE's code_challenge,
//                                   S256): a user who already authorized the app is sent straight back
//                                   (no prompt) to redirect_uri with `code` and `state`.
//   POST /login/oauth/access_token  client_id, client_secret, code, redirect_uri (code_verifier) as form
//                                   parameters. The answer: `access_token`, `token_type` bearer and a
//                                   comma-separated `scope`; no ID token, no refresh token (OAuth app).
//                                   Form-encoded (`access_token=...&scope=...&token_type=bearer`) unless
//                                   asked with `Accept: application/json`, then JSON. With `expiring`
//                                   (GitHub App user tokens): `expires_in` 28800, a `refresh_token` and
//                                   `refresh_token_expires_in`, and grant_type=refresh_token redeems it.
//   GET  /user                      the REST API's "the authenticated user" (api.github.com/user):
//                                   whose a token is.
// No discovery document: GitHub publishes none for OAuth apps (/.well-known/* is 404 here).

import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface GitHubStub {
  /** http://127.0.0.1:<port> (github.com's place). */
  url: string;
  authorizationEndpoint: string;
  tokenEndpoint: string;
  /** Every request it received, in order: method, path (without query), and the Accept header. */
  readonly requests: Array<{ method: string; path: string; accept: string | undefined; body: URLSearchParams | undefined }>;
  /** Who authorizes at /login/oauth/authorize (GitHub's signed-in user in that browser). */
  login: string;
  /** Holds the next refresh until released (the provider answering slowly). */
  holdNextRefresh(): { arrived: Promise<void>; release(): void };
  close(): Promise<void>;
}

export async function startGitHubStub(options: { clientId: string; clientSecret: string; expiring?: boolean }): Promise<GitHubStub> {
  const codes = new Map<string, { login: string; scope: string; redirectUri: string; challenge: string | undefined }>();
  const tokens = new Map<string, string>();
  const refreshTokens = new Map<string, { login: string; scope: string }>();
  const requests: GitHubStub['requests'] = [];
  let hold: { arrived: () => void; released: Promise<void> } | undefined;

  const secretOk = (given: string | null) =>
    given !== null &&
    given.length === options.clientSecret.length &&
    timingSafeEqual(Buffer.from(given), Buffer.from(options.clientSecret));

  function issue(res: import('node:http').ServerResponse, req: IncomingMessage, login: string, scope: string): void {
    const accessToken = `gho_${randomBytes(18).toString('hex')}`;
    tokens.set(accessToken, login);
    // GitHub lists granted scopes comma-separated.
    const answer: Record<string, string | number> = { access_token: accessToken, token_type: 'bearer', scope: scope.split(' ').join(',') };
    if (options.expiring) {
      const refreshToken = `ghr_${randomBytes(18).toString('hex')}`;
      refreshTokens.set(refreshToken, { login, scope });
      Object.assign(answer, { expires_in: 28800, refresh_token: refreshToken, refresh_token_expires_in: 15897600 });
    }
    answerToken(res, req, answer);
  }

  const server: Server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    let body: URLSearchParams | undefined;
    if (req.method === 'POST') {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      body = new URLSearchParams(Buffer.concat(chunks).toString());
    }
    requests.push({ method: req.method ?? '', path: url.pathname, accept: req.headers.accept, body });
    if (req.method === 'GET' && url.pathname === '/login/oauth/authorize') {
      const q = url.searchParams;
      const redirectUri = q.get('redirect_uri');
      if (q.get('client_id') !== options.clientId || redirectUri === null) {
        res.writeHead(404).end('Not Found');
        return;
      }
      const code = randomBytes(10).toString('hex');
      codes.set(code, {
        login: stub.login,
        scope: q.get('scope') ?? '',
        redirectUri,
        challenge: q.get('code_challenge_method') === 'S256' ? (q.get('code_challenge') ?? undefined) : undefined,
      });
      const back = new URL(redirectUri);
      back.searchParams.set('code', code);
      if (q.get('state') !== null) back.searchParams.set('state', q.get('state')!);
      res.writeHead(302, { location: back.href }).end();
      return;
    }
    if (req.method === 'POST' && url.pathname === '/login/oauth/access_token' && body !== undefined) {
      // The client's credentials as GitHub documents them: form parameters.
      if (body.get('client_id') !== options.clientId || !secretOk(body.get('client_secret'))) {
        answerToken(res, req, {
          error: 'incorrect_client_credentials',
          error_description: 'The client_id and/or client_secret passed are incorrect.',
        });
        return;
      }
      if (body.get('grant_type') === 'refresh_token') {
        const kept = refreshTokens.get(body.get('refresh_token') ?? '');
        if (!options.expiring || kept === undefined) {
          answerToken(res, req, { error: 'bad_refresh_token', error_description: 'The refresh token passed is incorrect or expired.' });
          return;
        }
        if (hold !== undefined) {
          const { arrived, released } = hold;
          hold = undefined;
          arrived();
          await released;
        }
        refreshTokens.delete(body.get('refresh_token')!);
        issue(res, req, kept.login, kept.scope);
        return;
      }
      const code = codes.get(body.get('code') ?? '');
      codes.delete(body.get('code') ?? '');
      const verifier = body.get('code_verifier');
      if (
        code === undefined ||
        (body.get('redirect_uri') !== null && body.get('redirect_uri') !== code.redirectUri) ||
        (code.challenge !== undefined &&
          (verifier === null || createHash('sha256').update(verifier).digest('base64url') !== code.challenge))
      ) {
        answerToken(res, req, { error: 'bad_verification_code', error_description: 'The code passed is incorrect or expired.' });
        return;
      }
      issue(res, req, code.login, code.scope);
      return;
    }
    if (req.method === 'GET' && url.pathname === '/user') {
      const login = tokens.get((req.headers.authorization ?? '').replace(/^Bearer /, ''));
      res.writeHead(login === undefined ? 401 : 200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(login === undefined ? { message: 'Bad credentials' } : { login }));
      return;
    }
    res.writeHead(404).end('Not Found');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const stub: GitHubStub = {
    url,
    authorizationEndpoint: `${url}/login/oauth/authorize`,
    tokenEndpoint: `${url}/login/oauth/access_token`,
    requests,
    login: 'octocat',
    holdNextRefresh() {
      let arrived!: () => void;
      let release!: () => void;
      const arrivedP = new Promise<void>((r) => (arrived = r));
      const released = new Promise<void>((r) => (release = r));
      hold = { arrived, released };
      return { arrived: arrivedP, release };
    },
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
  return stub;
}

/** GitHub's token endpoint answer: JSON when asked with Accept: application/json, form-encoded otherwise (both at HTTP 200, errors too). */
function answerToken(res: import('node:http').ServerResponse, req: IncomingMessage, answer: Record<string, string | number>): void {
  const json = (req.headers.accept ?? '').includes('application/json');
  const body = json
    ? JSON.stringify(answer)
    : new URLSearchParams(Object.entries(answer).map(([k, v]): [string, string] => [k, String(v)])).toString();
  res.writeHead(200, { 'content-type': json ? 'application/json; charset=utf-8' : 'application/x-www-form-urlencoded; charset=utf-8' });
  res.end(body);
}
