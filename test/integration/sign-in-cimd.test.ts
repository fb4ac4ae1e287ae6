// Browser sign-in with a Client ID Metadata Document as client_id: the document is fetched over real
// TLS from a loopback server (a test CA, private addresses allowed for this test only), its host is
// named on the consent page, its redirect URIs bind the request, and the client it describes gets
// tokens that deleteClient revokes like any other's.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/model/clock.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { createCimdResolver } from '../../src/oauth/cimd.ts';
import { serveOnLoopback } from '../support/fake-upstreams.ts';
import { createTestCertificate } from '../support/test-cert.ts';
import {
  approveAndSignIn,
  authorizeUrl,
  CLIENT_REDIRECT,
  clientReceived,
  pkce,
  standardParams,
  startSignInStack,
  tokenRequest,
  type SignInStack,
} from '../support/sign-in.ts';
import { UserAgent } from '../support/user-agent.ts';
import { CLIENT_DOCUMENTS, forTestHost } from '../support/client-documents.ts';
import { decide, deviceAuthorizationRequest, enterCode, poll, startDevice } from '../support/device.ts';

let s: SignInStack;
let docs: { url: string; close: () => Promise<void> };
let docsCert = '';

function serveDocument(req: IncomingMessage, res: ServerResponse): void {
  const self = `${docsBase()}${req.url}`;
  const body: Record<string, unknown> = {
    client_id: self,
    client_name: 'Document Client',
    redirect_uris: [CLIENT_REDIRECT],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  };
  // VS Code's published document, which lists the device grant besides the code grant (its source is
  // named in test/support/client-documents.ts), served at this test's own URL.
  if (req.url?.startsWith('/device.json')) {
    const published = forTestHost(VS_CODE, docsBase(), docsBase());
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ...published, client_id: self }));
    return;
  }
  if (req.url === '/wrong-id.json') body.client_id = `${docsBase()}/someone-else.json`;
  // A right-to-left override and a zero-width space: shown as "Document Client file.exe" unneutralised.
  if (req.url === '/bidi-name.json') body.client_name = 'Document\u200B Client \u202Eexe.elif';
  if (req.url === '/slow.json') {
    // Held until the test releases it: an outbound fetch that occupies a slot.
    slowArrived();
    void slowRelease.then(() => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body)));
    return;
  }
  if (req.url === '/missing.json') {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

let slowArrived: () => void = () => {};
const slowRequested = new Promise<void>((resolve) => {
  slowArrived = resolve;
});
let releaseSlow: () => void = () => {};
const slowRelease = new Promise<void>((resolve) => {
  releaseSlow = resolve;
});

let base = '';
/** https://127.0.0.1:<port> (serveOnLoopback names the server's /mcp URL). */
const docsBase = () => new URL(docs.url).origin;
const VS_CODE = CLIENT_DOCUMENTS.find((d) => d.name === 'VS Code')!;

beforeAll(async () => {
  const cert = createTestCertificate();
  docsCert = cert.cert;
  docs = await serveOnLoopback(createHttpsServer({ cert: cert.cert, key: cert.key }, serveDocument));
  const quiet = createLogger('error', new Writable({ write: (_c, _e, done) => done() }));
  const cimd = createCimdResolver({
    timeoutMs: 10_000,
    maxBytes: 5120,
    cacheTtlMs: 0,
    maxCacheEntries: 10,
    allowPrivateAddresses: true,
    clock: new ManualClock(),
    logger: quiet,
    ca: cert.cert,
  });
  s = await startSignInStack({ cimd });
  base = s.base;
}, 60_000);
afterAll(async () => {
  releaseSlow();
  await s?.close();
  await docs?.close();
});

describe('a Client ID Metadata Document as client_id', () => {
  it('metadata says documents are accepted', async () => {
    const meta = (await (await fetch(`${base}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
    expect(meta.client_id_metadata_document_supported).toBe(true);
  });

  it('a document whose client_name holds bidi or zero-width characters: the consent page shows them as U+FFFD, the name isolated', async () => {
    const page = await new UserAgent().request(authorizeUrl(base, standardParams(base, `${docsBase()}/bidi-name.json`, pkce())));
    expect(page.status, page.body).toBe(200);
    expect(page.body).not.toMatch(/[\u202e\u200b]/);
    expect(page.body).toContain('“<bdi>Document\ufffd Client \ufffdexe.elif</bdi>”');
  });

  it('signs in: the consent page names the document host; tokens work and deleteClient revokes them', async () => {
    const clientId = `${docsBase()}/client.json`;
    const p = pkce();
    const agent = new UserAgent();
    const page = await agent.request(authorizeUrl(base, standardParams(base, clientId, p)));
    expect(page.status, page.body).toBe(200);
    expect(page.body).toContain('Document Client');
    expect(page.body).toContain(new URL(docsBase()).host);
    const hop = await approveAndSignIn(new UserAgent(), base, authorizeUrl(base, standardParams(base, clientId, p)));
    const code = clientReceived(hop).get('code')!;
    const tokens = await tokenRequest(base, {
      grant_type: 'authorization_code',
      code,
      redirect_uri: CLIENT_REDIRECT,
      client_id: clientId,
      code_verifier: p.verifier,
    });
    expect(tokens.status).toBe(200);
    const listed = await s.stack.admin('listClients');
    expect(listed.body.clients.find((c: { clientId: string }) => c.clientId === clientId)).toMatchObject({
      source: 'cimd',
      tokenEndpointAuthMethod: 'none',
    });
    expect((await s.stack.admin('deleteClient', { clientId })).body).toMatchObject({ accessTokensRevoked: 1 });
    const again = await new UserAgent().request(authorizeUrl(base, standardParams(base, clientId, pkce())));
    expect(again.status).toBe(400);
    expect(again.location).toBeUndefined();
  });

  it('no client record at the consent page: one is made only when a code is issued', async () => {
    const clientId = `${docsBase()}/client.json?record=late`;
    const p = pkce();
    const page = await new UserAgent().request(authorizeUrl(base, standardParams(base, clientId, p)));
    expect(page.status).toBe(200);
    const listed = async () => (await s.stack.admin('listClients')).body.clients.some((c: { clientId: string }) => c.clientId === clientId);
    expect(await listed()).toBe(false);
    const hop = await approveAndSignIn(new UserAgent(), base, authorizeUrl(base, standardParams(base, clientId, p)));
    expect(clientReceived(hop).get('code')).toMatch(/^[0-9a-f]{64}$/);
    expect(await listed()).toBe(true);
  });

  it.each([
    ['a redirect_uri the document does not list', '/client.json', { redirect_uri: 'http://127.0.0.1:7777/elsewhere' }],
    ['a document whose client_id is not its URL', '/wrong-id.json', {}],
    ['a document that is not there', '/missing.json', {}],
    ['an http:// client_id (not a document URL, not registered)', 'http', {}],
  ])('%s: an error page, never a redirect', async (_name, path, extra) => {
    const clientId = path === 'http' ? `http://127.0.0.1:1/client.json` : `${docsBase()}${path}`;
    const res = await new UserAgent().request(authorizeUrl(base, standardParams(base, clientId, pkce(), extra)));
    expect(res.status).toBe(400);
    expect(res.location).toBeUndefined();
  });
});

describe('bounds on the fetches /authorize causes (each stack its own, so that one bound does not hide the other)', () => {
  it('oauth.clientMetadataDocuments.fetchesPerMinutePerAddress: past it, a 429 page with Retry-After and no fetch', async () => {
    const quiet = createLogger('error', new Writable({ write: (_c, _e, done) => done() }));
    const cert = createTestCertificate();
    let fetches = 0;
    const counted = await serveOnLoopback(
      createHttpsServer({ cert: cert.cert, key: cert.key }, (req, res) => {
        fetches++;
        const self = `${new URL(counted.url).origin}${req.url}`;
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            client_id: self,
            client_name: 'Counted',
            redirect_uris: [CLIENT_REDIRECT],
            grant_types: ['authorization_code'],
            token_endpoint_auth_method: 'none',
          }),
        );
      }),
    );
    const cimd = createCimdResolver({
      timeoutMs: 10_000,
      maxBytes: 5120,
      cacheTtlMs: 0,
      maxCacheEntries: 10,
      allowPrivateAddresses: true,
      clock: new ManualClock(),
      logger: quiet,
      ca: cert.cert,
    });
    const limited = await startSignInStack({
      cimd,
      config: { oauth: { clientMetadataDocuments: { fetchesPerMinutePerAddress: 2, allowPrivateAddresses: true } } },
    });
    try {
      const at = (n: number) =>
        authorizeUrl(limited.base, standardParams(limited.base, `${new URL(counted.url).origin}/client-${n}.json`, pkce()));
      for (const n of [1, 2]) expect((await new UserAgent().request(at(n))).status).toBe(200);
      const refused = await new UserAgent().request(at(3));
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(refused.body).toMatch(/too many application metadata documents fetched for this address/i);
      expect(fetches).toBe(2);
    } finally {
      await limited.close();
      await counted.close();
    }
  });

  it('maxConcurrentFetches: a fetch over the cap waits its bound, then a 503 page with Retry-After; the held one completes', async () => {
    const quiet = createLogger('error', new Writable({ write: (_c, _e, done) => done() }));
    const capped = createCimdResolver({
      timeoutMs: 10_000,
      maxBytes: 5120,
      cacheTtlMs: 0,
      maxCacheEntries: 10,
      allowPrivateAddresses: true,
      clock: new ManualClock(),
      logger: quiet,
      ca: docsCert,
      maxConcurrentFetches: 1,
      fetchQueueWaitMs: 200,
    });
    const stack = await startSignInStack({ cimd: capped });
    try {
      const held = new UserAgent().request(authorizeUrl(stack.base, standardParams(stack.base, `${docsBase()}/slow.json`, pkce())));
      // The slow fetch holds the only slot once the document server has its request.
      await slowRequested;
      const busy = await new UserAgent().request(
        authorizeUrl(stack.base, standardParams(stack.base, `${docsBase()}/client.json?busy`, pkce())),
      );
      expect(busy.status).toBe(503);
      expect(busy.headers.get('retry-after')).toBe('5');
      expect(busy.body).toMatch(/too many client metadata fetches in progress/i);
      releaseSlow();
      expect((await held).status).toBe(200);
    } finally {
      await stack.close();
    }
  });
});

describe('device sign-in (RFC 8628) for a metadata-document client', () => {
  it('the published VS Code document, which lists the device grant, may use it: consent names the document host; the client record is made at approval; its poll gets tokens', async () => {
    const clientId = `${docsBase()}/device.json?run=${Date.now()}`;
    const d = await startDevice(base, clientId);
    expect(await s.stack.store.getClient(clientId)).toBeNull();
    const agent = new UserAgent();
    const consent = await enterCode(agent, base, d.user_code);
    expect(consent.status, consent.body).toBe(200);
    expect(consent.body).toContain('Visual Studio Code');
    expect(consent.body).toContain(new URL(docsBase()).host);
    expect((await decide(agent, base, consent, 'approve')).body).toContain('Device signed in');
    expect(await s.stack.store.getClient(clientId)).toMatchObject({ source: 'cimd', tokenEndpointAuthMethod: 'none' });
    const tokens = await poll(base, clientId, d.device_code);
    expect(tokens.status, JSON.stringify(tokens.body)).toBe(200);
    expect(tokens.body.access_token).toMatch(/^[0-9a-f]{64}$/);
  });

  it('a document that does not list the device grant is refused: unauthorized_client', async () => {
    const res = await deviceAuthorizationRequest(base, { client_id: `${docsBase()}/client.json?device=no` });
    expect([res.status, res.body.error]).toEqual([400, 'unauthorized_client']);
  });
});
