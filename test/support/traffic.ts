// Real traffic of every kind through a whole stack (real Redis, reference upstream, a local JWKS for the
// IdP exchange): admin operations, every /token grant, refresh reuse, /revoke, /introspect, /register,
// /mcp and /health with good, bad and missing tokens. Returns every secret that crossed the wire, so
// tests can check that none of them reached a log line, the audit stream or the metrics.

import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { hashToken } from '../../src/model/credentials.ts';
import { basic, initializeStatus, postForm } from './http.ts';
import { startStack, type Stack, type StackOptions } from './stack.ts';

export const ISSUER = 'https://idp.traffic.test/';
export const AUDIENCE = 'mcp-bearer-proxy-traffic';
const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const JWT_TYPE = 'urn:ietf:params:oauth:token-type:jwt';

export interface TrafficStack {
  stack: Stack;
  /** A fresh IdP JWT for `sub`. */
  idToken(sub: string): Promise<string>;
  close(): Promise<void>;
}

/** A stack whose IdP exchange is on, against a JWKS served on loopback. */
export async function startTrafficStack(options: StackOptions = {}): Promise<TrafficStack> {
  const { publicKey, privateKey } = await generateKeyPair('RS256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  const jwks: Server = createServer((_req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ keys: [jwk] }));
  });
  jwks.listen(0, '127.0.0.1');
  await once(jwks, 'listening');
  const jwksUrl = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks`;
  const stack = await startStack({
    ...options,
    config: { ...options.config, idp: { issuer: ISSUER, audience: AUDIENCE, jwksUrl, jwksCooldownMs: 0, algorithms: ['RS256'] } },
  });
  return {
    stack,
    idToken: (sub) =>
      new SignJWT({ sub, email: `${sub}@example.com` })
        .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE)
        .setIssuedAt(Math.floor(stack.clock.now() / 1000))
        .setExpirationTime(Math.floor(stack.clock.now() / 1000) + 600)
        .sign(privateKey),
    async close() {
      await stack.close();
      await new Promise((r) => jwks.close(() => r(undefined)));
    },
  };
}

export interface TrafficResult {
  /** Every secret the traffic used or received: master token, client secrets, tokens, JWTs. */
  secrets: string[];
  /** SHA-256 of every issued token (they may appear as 8-hex prefixes only). */
  hashes: string[];
  /** The admin-created client, deleted at the end. */
  clientId: string;
  /** Statuses by step, for the caller's sanity checks. */
  statuses: Record<string, number>;
  /**
   * The pair a refresh token's rotation issued, delivered again (by design) to each presentation of
   * the rotated token within the grace window, and how many times it was delivered in all.
   */
  gracePair: { tokens: string[]; deliveries: number };
}

function expectStatus(statuses: Record<string, number>, step: string, status: number, expected: number): void {
  statuses[step] = status;
  if (status !== expected) throw new Error(`traffic step ${step}: expected ${expected}, got ${status}`);
}

/** Runs every kind of request once or twice; throws when a step does not answer as it should. */
export async function runTraffic(t: TrafficStack): Promise<TrafficResult> {
  const { stack } = t;
  const base = stack.proxyUrl;
  const secrets: string[] = [stack.masterToken];
  const hashes: string[] = [];
  const statuses: Record<string, number> = {};
  const issued = (token: string) => {
    secrets.push(token);
    hashes.push(hashToken(token));
    return token;
  };

  expectStatus(statuses, 'seedDefaultProfiles', (await stack.admin('seedDefaultProfiles')).status, 200);
  const created = await stack.admin('createClient', { clientName: 'traffic', grantTypes: ['client_credentials', 'refresh_token'] });
  expectStatus(statuses, 'createClient', created.status, 201);
  const clientId = created.body.clientId as string;
  const clientSecret = created.body.clientSecret as string;
  secrets.push(clientSecret);

  // client_credentials with Basic, with a wrong secret, and with the secret in the body.
  const cc = await postForm(`${base}/token`, { grant_type: 'client_credentials' }, basic(clientId, clientSecret));
  expectStatus(statuses, 'client_credentials', cc.status, 200);
  const access1 = issued(cc.body!.access_token);
  const refresh1 = issued(cc.body!.refresh_token);
  const wrong = randomBytes(32).toString('hex');
  secrets.push(wrong);
  expectStatus(
    statuses,
    'client_credentials wrong secret',
    (await postForm(`${base}/token`, { grant_type: 'client_credentials' }, basic(clientId, wrong))).status,
    401,
  );
  const viaPost = await postForm(`${base}/token`, { grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret });
  expectStatus(statuses, 'client_credentials secret in body', viaPost.status, 200);
  issued(viaPost.body!.access_token);
  issued(viaPost.body!.refresh_token);

  // /mcp and /health with an OAuth token, then rotation and reuse of the rotated refresh token.
  expectStatus(statuses, 'mcp oauth', await initializeStatus(stack, access1), 200);
  const health = await fetch(`${base}/health`, { headers: { authorization: `Bearer ${access1}` } });
  await health.arrayBuffer();
  expectStatus(statuses, 'health', health.status, 200);
  const rotated = await postForm(`${base}/token`, { grant_type: 'refresh_token', refresh_token: refresh1 }, basic(clientId, clientSecret));
  expectStatus(statuses, 'refresh_token', rotated.status, 200);
  issued(rotated.body!.access_token);
  issued(rotated.body!.refresh_token);
  // Presented again at once (parallel sessions): the same pair as the rotation's, every time; once
  // the grace window is over: theft.
  for (let i = 0; i < 2; i++) {
    const raced = await postForm(`${base}/token`, { grant_type: 'refresh_token', refresh_token: refresh1 }, basic(clientId, clientSecret));
    expectStatus(statuses, 'refresh_token within the grace window', raced.status, 200);
    if (raced.body!.refresh_token !== rotated.body!.refresh_token)
      throw new Error("traffic step refresh_token within the grace window: a pair other than the rotation's");
  }
  stack.clock.advance(stack.sidecar.config.oauth.refreshReuseGraceSeconds * 1000);
  const reuse = await postForm(`${base}/token`, { grant_type: 'refresh_token', refresh_token: refresh1 }, basic(clientId, clientSecret));
  expectStatus(statuses, 'refresh_token reuse', reuse.status, 400);

  // Admin-issued access token: works, is introspected by the master token, revoked by its client.
  const adminIssued = await stack.admin('createAccessToken', { clientId, lifetimeSeconds: 600 });
  expectStatus(statuses, 'createAccessToken', adminIssued.status, 201);
  const access3 = issued(adminIssued.body.accessToken);
  expectStatus(statuses, 'mcp admin-issued', await initializeStatus(stack, access3), 200);
  const introspected = await postForm(`${base}/introspect`, { token: access3 }, { authorization: `Bearer ${stack.masterToken}` });
  expectStatus(statuses, 'introspect', introspected.status, 200);
  expectStatus(
    statuses,
    'revoke access',
    (await postForm(`${base}/revoke`, { token: access3 }, basic(clientId, clientSecret))).status,
    200,
  );
  expectStatus(statuses, 'mcp revoked', await initializeStatus(stack, access3), 401);

  // The IdP exchange: a user-grade token, revoked by the admin operation; another revoked by its holder.
  const jwt = await t.idToken('alice');
  secrets.push(jwt);
  const exchanged = await postForm(`${base}/token`, { grant_type: EXCHANGE, subject_token: jwt, subject_token_type: JWT_TYPE });
  expectStatus(statuses, 'token_exchange', exchanged.status, 200);
  const user1 = issued(exchanged.body!.access_token);
  expectStatus(statuses, 'mcp user', await initializeStatus(stack, user1), 200);
  expectStatus(statuses, 'revokeUserToken', (await stack.admin('revokeUserToken', { token: user1 })).status, 200);
  const jwt2 = await t.idToken('bob');
  secrets.push(jwt2);
  const exchanged2 = await postForm(`${base}/token`, { grant_type: EXCHANGE, subject_token: jwt2, subject_token_type: JWT_TYPE });
  expectStatus(statuses, 'token_exchange 2', exchanged2.status, 200);
  const user2 = issued(exchanged2.body!.access_token);
  expectStatus(statuses, 'revoke user', (await postForm(`${base}/revoke`, { token: user2 })).status, 200);
  const badJwt = `${jwt2.slice(0, -4)}AAAA`;
  secrets.push(badJwt);
  expectStatus(
    statuses,
    'token_exchange bad jwt',
    (await postForm(`${base}/token`, { grant_type: EXCHANGE, subject_token: badJwt, subject_token_type: JWT_TYPE })).status,
    400,
  );

  // Dynamic registration (its secret is shown once).
  const registered = await fetch(`${base}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'editor', redirect_uris: ['http://127.0.0.1:33418/callback'] }),
  });
  expectStatus(statuses, 'register', registered.status, 201);
  secrets.push(((await registered.json()) as { client_secret: string }).client_secret);

  // Refusals: unknown, malformed and missing tokens; the master token on /mcp; admin without it.
  const unknown = randomBytes(32).toString('hex');
  secrets.push(unknown);
  expectStatus(statuses, 'mcp unknown', await initializeStatus(stack, unknown), 401);
  expectStatus(statuses, 'mcp malformed', await initializeStatus(stack, 'not-a-token'), 401);
  expectStatus(statuses, 'mcp missing', await initializeStatus(stack, undefined), 401);
  expectStatus(statuses, 'mcp master', await initializeStatus(stack, stack.masterToken), 200);
  const refused = await fetch(`${stack.adminUrl}/oauth/listClients`, { method: 'POST', body: JSON.stringify({ callerToken: wrong }) });
  await refused.arrayBuffer();
  expectStatus(statuses, 'admin wrong master', refused.status, 401);
  const viaHeader = await fetch(`${stack.adminUrl}/oauth/listClients`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack.masterToken}` },
    body: '{}',
  });
  await viaHeader.arrayBuffer();
  expectStatus(statuses, 'admin master header', viaHeader.status, 200);

  expectStatus(statuses, 'deleteClient', (await stack.admin('deleteClient', { clientId })).status, 200);
  expectStatus(statuses, 'listAuditEvents', (await stack.admin('listAuditEvents', { count: 1000 })).status, 200);
  return {
    secrets,
    hashes,
    clientId,
    statuses,
    gracePair: { tokens: [rotated.body!.access_token, rotated.body!.refresh_token], deliveries: 3 },
  };
}
