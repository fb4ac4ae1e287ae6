// Real clients' metadata documents (test/support/client-documents.ts: VS Code, ChatGPT in both shapes,
// Claude, Claude Code, opencode) through browser sign-in in Chromium (playwright-core, JavaScript off)
// and the code exchange the way each client does it: the public clients with client_id and the PKCE
// verifier, ChatGPT with an RS256 client assertion signed by the key its jwks_uri publishes. The
// documents are served over real TLS from loopback (a test CA; private addresses allowed for this
// test's resolver only).

import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { Writable } from 'node:stream';
import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import type { Browser } from 'playwright-core';
import { launchChromium, startLoopbackSite, type LoopbackSite } from '../support/chromium.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/model/clock.ts';
import { DEMO_USER } from '../../demo/idp.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { createCimdResolver } from '../../src/oauth/cimd.ts';
import { JWT_BEARER_ASSERTION } from '../../src/oauth/client-auth.ts';
import { CLIENT_DOCUMENTS, documentPath, forTestHost, testRedirect, type ClientDocumentFixture } from '../support/client-documents.ts';
import { serveOnLoopback } from '../support/fake-upstreams.ts';
import { authorizeUrl, pkce, standardParams, startSignInStack, tokenRequest, type SignInStack } from '../support/sign-in.ts';
import { createTestCertificate } from '../support/test-cert.ts';

let browser: Browser;
let s: SignInStack;
let docs: { url: string; close: () => Promise<void> };
let receiver: LoopbackSite;
let receiverOrigin = '';
let received: (query: URLSearchParams) => void = () => undefined;
/** ChatGPT's signing key; its public half is what the test host's jwks_uri serves. */
let signing: { privateKey: CryptoKey; jwk: JWK };

const docsOrigin = () => new URL(docs.url).origin;

function serveDocuments(req: IncomingMessage, res: ServerResponse): void {
  const path = (req.url ?? '').split('?')[0];
  if (path === '/oauth/jwks.json') {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [signing.jwk] }));
    return;
  }
  const fixture = CLIENT_DOCUMENTS.find((f) => documentPath(f) === path);
  if (!fixture) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(forTestHost(fixture, docsOrigin(), receiverOrigin)));
}

beforeAll(async () => {
  const { privateKey, publicKey } = await generateKeyPair('RS256');
  signing = { privateKey, jwk: { ...(await exportJWK(publicKey)), kid: 'chatgpt-test-key', alg: 'RS256', use: 'sig' } };
  receiver = await startLoopbackSite((req, res) => {
    received(new URL(req.url ?? '/', 'http://127.0.0.1').searchParams);
    res.setHeader('content-type', 'text/html');
    res.end('<p>Signed in.</p>');
  });
  receiverOrigin = receiver.origin;
  const cert = createTestCertificate();
  docs = await serveOnLoopback(createHttpsServer({ cert: cert.cert, key: cert.key }, serveDocuments));
  const quiet = createLogger('error', new Writable({ write: (_c, _e, done) => done() }));
  const cimd = createCimdResolver({
    timeoutMs: 10_000,
    maxBytes: 5120,
    cacheTtlMs: 600_000,
    maxCacheEntries: 100,
    allowPrivateAddresses: true,
    clock: new ManualClock(),
    logger: quiet,
    ca: cert.cert,
  });
  s = await startSignInStack({ autoLogin: false, cimd });
  browser = await launchChromium();
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await s?.close();
  await docs?.close();
  await receiver?.close();
});

/** The redirect URI the client sends: a loopback one on the receiver's port (any port matches), an https one moved to the receiver. */
function redirectFor(f: ClientDocumentFixture): string {
  const moved = new URL(testRedirect(f.signInRedirect, receiverOrigin));
  moved.port = new URL(receiverOrigin).port;
  return moved.href;
}

/** The client's assertion for one token request: iss = sub = its client id, aud this server's issuer. */
function clientAssertion(clientId: string, jti = randomUUID()): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({})
    .setProtectedHeader({ alg: 'RS256', kid: 'chatgpt-test-key' })
    .setIssuer(clientId)
    .setSubject(clientId)
    .setAudience(s.base)
    .setIssuedAt(now)
    .setExpirationTime(now + 60)
    .setJti(jti)
    .sign(signing.privateKey);
}

describe("real clients' metadata documents sign in through a browser and trade their code as the client does", () => {
  it.each(CLIENT_DOCUMENTS.map((f) => [f.name, f] as const))(
    '%s',
    async (_name, fixture) => {
      const clientId = `${docsOrigin()}${documentPath(fixture)}`;
      const redirectUri = redirectFor(fixture);
      const p = pkce();
      const context = await browser.newContext({ javaScriptEnabled: false });
      const page = await context.newPage();
      const arrived = new Promise<URLSearchParams>((resolve) => (received = resolve));
      await page.goto(authorizeUrl(s.base, standardParams(s.base, clientId, p, { redirect_uri: redirectUri })));
      expect(await page.locator('body').textContent()).toContain(fixture.published.client_name as string);
      await page.getByRole('button', { name: 'Approve' }).click();
      await page.getByLabel('Password').fill(DEMO_USER.password);
      await page.getByRole('button', { name: 'Sign in' }).click();
      const query = await arrived;
      await context.close();
      const code = query.get('code');
      expect(code, query.toString()).toMatch(/^[0-9a-f]{64}$/);

      const exchange: Record<string, string> = {
        grant_type: 'authorization_code',
        code: code!,
        redirect_uri: redirectUri,
        code_verifier: p.verifier,
      };
      if (fixture.tokenAuth === 'none') {
        const tokens = await tokenRequest(s.base, { ...exchange, client_id: clientId });
        expect(tokens.status, JSON.stringify(tokens.body)).toBe(200);
        expect(tokens.body.token_type).toBe('Bearer');
        return;
      }
      // private_key_jwt: the client id alone is not enough, nor is an assertion for another audience.
      expect((await tokenRequest(s.base, { ...exchange, client_id: clientId })).status).toBe(401);
      const jti = randomUUID();
      const tokens = await tokenRequest(s.base, {
        ...exchange,
        client_assertion_type: JWT_BEARER_ASSERTION,
        client_assertion: await clientAssertion(clientId, jti),
      });
      expect(tokens.status, JSON.stringify(tokens.body)).toBe(200);
      const refresh = tokens.body.refresh_token as string;
      // The same assertion again (a replay), then a fresh one: only the fresh one refreshes.
      const replay = await tokenRequest(s.base, {
        grant_type: 'refresh_token',
        refresh_token: refresh,
        client_assertion_type: JWT_BEARER_ASSERTION,
        client_assertion: await clientAssertion(clientId, jti),
      });
      expect([replay.status, replay.body.error]).toEqual([401, 'invalid_client']);
      const refreshed = await tokenRequest(s.base, {
        grant_type: 'refresh_token',
        refresh_token: refresh,
        client_assertion_type: JWT_BEARER_ASSERTION,
        client_assertion: await clientAssertion(clientId),
      });
      expect(refreshed.status, JSON.stringify(refreshed.body)).toBe(200);
    },
    60_000,
  );
});
