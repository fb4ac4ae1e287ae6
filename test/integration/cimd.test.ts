// Client ID Metadata Documents against a real https server on loopback (a test certificate made by the
// openssl CLI): validation, the SSRF guard (on by default, so loopback is refused even by name), the
// time and size bounds while streaming, redirects, and the cache.

import { once } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:https';
import { connect, createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/model/clock.ts';
import { HttpError } from '../../src/http/errors.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { cacheLifetimeMs } from '../../src/oauth/cimd-cache.ts';
import { createCimdResolver, isClientIdMetadataUrl, type CimdResolverOptions } from '../../src/oauth/cimd.ts';
import { lookupPublicAddress, refuseNonPublicPeer } from '../../src/oauth/outbound-fetch.ts';
import { serveOnLoopback } from '../support/fake-upstreams.ts';
import { createTestCertificate, type TestCertificate } from '../support/test-cert.ts';

let cert: TestCertificate;
let port: number;
let close: () => Promise<void>;
/** Requests the server received, by path (query included). */
const hits = new Map<string, number>();
/** Paths whose answer the test switches between failing and valid. */
const failing = new Set<string>();
const logLines: string[] = [];
/** /held answers only once the test releases it; `heldArrived` resolves when its request is in. */
let releaseHeld: () => void = () => {};
const heldRelease = new Promise<void>((resolve) => {
  releaseHeld = resolve;
});
let heldArrivedNow: () => void = () => {};
const heldArrived = new Promise<void>((resolve) => {
  heldArrivedNow = resolve;
});
const logger = createLogger('debug', { write: (line: string) => void logLines.push(line) });

function documentFor(req: IncomingMessage, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    client_id: `https://${req.headers.host}${req.url}`,
    client_name: 'Example MCP Client',
    client_uri: 'https://client.example/',
    logo_uri: 'http://client.example/logo.png',
    redirect_uris: ['https://client.example/callback', 'http://127.0.0.1/callback'],
    ...extra,
  };
}

function sendJson(res: ServerResponse, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(200, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  const url = req.url ?? '';
  hits.set(url, (hits.get(url) ?? 0) + 1);
  const path = url.split('?')[0]!;
  if (failing.has(path)) {
    res.writeHead(500).end();
    return;
  }
  switch (path) {
    case '/client.json':
    case '/flaky.json':
      return sendJson(res, documentFor(req), { 'cache-control': 'public, max-age=60' });
    case '/no-cache-headers.json':
      return sendJson(res, documentFor(req));
    case '/no-store.json':
      return sendJson(res, documentFor(req), { 'cache-control': 'no-store' });
    case '/full.json':
      return sendJson(
        res,
        documentFor(req, {
          grant_types: ['authorization_code', 'refresh_token'],
          response_types: ['code'],
          token_endpoint_auth_method: 'none',
          scope: 'mcp read',
          redirect_uris: ['https://client.example/cb', 'https://client.example/cb', 'com.example.app:/oauth'],
        }),
        { 'content-type': 'application/json; charset=utf-8' },
      );
    case '/redirect':
      res.writeHead(302, { location: '/client.json' }).end();
      return;
    case '/missing':
      res.writeHead(404, { 'content-type': 'application/json' }).end('{}');
      return;
    case '/html':
      res.writeHead(200, { 'content-type': 'text/html' }).end('<html></html>');
      return;
    case '/broken-json':
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"client_id": ');
      return;
    case '/array.json':
      return sendJson(res, [documentFor(req)]);
    case '/mismatch.json':
      return sendJson(res, documentFor(req, { client_id: `https://${req.headers.host}/other.json` }));
    case '/no-redirect-uris.json': {
      const doc = documentFor(req);
      delete doc.redirect_uris;
      return sendJson(res, doc);
    }
    case '/fragment-redirect.json':
      return sendJson(res, documentFor(req, { redirect_uris: ['https://client.example/cb#frag'] }));
    case '/relative-redirect.json':
      return sendJson(res, documentFor(req, { redirect_uris: ['/callback'] }));
    case '/javascript-redirect.json':
      return sendJson(res, documentFor(req, { redirect_uris: ['javascript:alert(1)'] }));
    case '/newline-redirect.json':
      return sendJson(res, documentFor(req, { redirect_uris: ['com.example.app:/cb\r\nSet-Cookie: x=1'] }));
    case '/newline-name.json':
      return sendJson(res, documentFor(req, { client_name: 'Example\nAdmin approved' }));
    case '/newline-logo.json':
      return sendJson(res, documentFor(req, { logo_uri: 'https://client.example/lo\ngo.png' }));
    case '/http-redirect.json':
      return sendJson(res, documentFor(req, { redirect_uris: ['http://client.example/cb'] }));
    case '/private-key-jwt.json':
      return sendJson(res, documentFor(req, { token_endpoint_auth_method: 'private_key_jwt', jwks_uri: 'https://client.example/jwks' }));
    case '/private-key-jwt-no-keys.json':
      return sendJson(res, documentFor(req, { token_endpoint_auth_method: 'private_key_jwt' }));
    case '/private-key-jwt-both-keys.json':
      return sendJson(
        res,
        documentFor(req, {
          token_endpoint_auth_method: 'private_key_jwt',
          jwks_uri: 'https://client.example/jwks',
          jwks: { keys: [{ kty: 'EC', crv: 'P-256', x: 'x', y: 'y' }] },
        }),
      );
    case '/private-key-jwt-http-jwks.json':
      return sendJson(res, documentFor(req, { token_endpoint_auth_method: 'private_key_jwt', jwks_uri: 'http://client.example/jwks' }));
    case '/private-key-jwt-secret-key.json':
      return sendJson(
        res,
        documentFor(req, { token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [{ kty: 'oct', k: 'c2VjcmV0' }] } }),
      );
    case '/methods-supported.json':
      return sendJson(
        res,
        documentFor(req, { token_endpoint_auth_methods_supported: ['none', 'private_key_jwt'], jwks_uri: 'https://client.example/jwks' }),
      );
    case '/secret-methods-only.json':
      return sendJson(res, documentFor(req, { token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'] }));
    case '/extra-grants.json':
      return sendJson(
        res,
        documentFor(req, {
          grant_types: [
            'authorization_code',
            'urn:ietf:params:oauth:grant-type:device_code',
            'refresh_token',
            'urn:ietf:params:oauth:grant-type:jwt-bearer',
          ],
          response_types: ['code', 'token'],
        }),
      );
    case '/secret-basic.json':
      return sendJson(res, documentFor(req, { token_endpoint_auth_method: 'client_secret_basic' }));
    case '/with-secret.json':
      return sendJson(res, documentFor(req, { client_secret: 'x' }));
    case '/client-credentials.json':
      return sendJson(res, documentFor(req, { grant_types: ['client_credentials'] }));
    case '/token-response-type.json':
      return sendJson(res, documentFor(req, { response_types: ['token'] }));
    case '/gzip.json':
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' }).end('not really gzip');
      return;
    case '/big-headers':
      res.writeHead(200, { 'content-type': 'application/json', 'x-padding': 'p'.repeat(20 * 1024) });
      res.end(JSON.stringify(documentFor(req)));
      return;
    case '/cut-off':
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"client_id":');
      setImmediate(() => res.socket?.destroy());
      return;
    case '/declared-huge':
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(50 * 1024 * 1024) });
      res.write('{');
      return; // never finishes: only the declared length can decide
    case '/endless': {
      // Streams JSON-looking bytes forever: only a bound enforced while streaming ends this.
      res.writeHead(200, { 'content-type': 'application/json' });
      const chunk = Buffer.alloc(1024, 0x20);
      const pump = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', pump);
      };
      res.write('{"padding": "');
      pump();
      return;
    }
    case '/trickle':
      // Headers and a first byte, then nothing, ever.
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{');
      return;
    case '/silent':
      return; // never answers
    case '/held':
      heldArrivedNow();
      void heldRelease.then(() => sendJson(res, documentFor(req)));
      return;
    case '/jwks.json':
      return sendJson(res, {
        keys: [
          {
            kty: 'EC',
            crv: 'P-256',
            kid: 'k1',
            x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU',
            y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0',
          },
        ],
      });
    case '/jwks-private.json':
      return sendJson(res, { keys: [{ kty: 'EC', crv: 'P-256', x: 'x', y: 'y', d: 'private' }] });
    default:
      res.writeHead(404).end();
  }
}

beforeAll(async () => {
  cert = createTestCertificate();
  const served = await serveOnLoopback(createServer({ cert: cert.cert, key: cert.key }, handle));
  port = Number(new URL(served.url).port);
  close = served.close;
});

afterAll(async () => {
  releaseHeld();
  await close?.();
});

function resolver(overrides: Partial<CimdResolverOptions> = {}) {
  return createCimdResolver({
    timeoutMs: 10_000,
    maxBytes: 5 * 1024,
    cacheTtlMs: 600_000,
    maxCacheEntries: 100,
    allowPrivateAddresses: true,
    clock: new ManualClock(),
    logger,
    ca: cert.cert,
    ...overrides,
  });
}

function at(path: string, host = `127.0.0.1:${port}`): string {
  return `https://${host}${path}`;
}

/** Any HttpError a promise rejected with; fails the test when it resolved. */
async function rejection(promise: Promise<unknown>): Promise<HttpError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(HttpError);
  return err as HttpError;
}

/** The HttpError resolve() rejected with; fails the test when it resolved. */
async function refusal(promise: Promise<unknown>): Promise<HttpError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(HttpError);
  const httpError = err as HttpError;
  expect(httpError.code).toBe('invalid_client');
  expect(httpError.status).toBe(400);
  return httpError;
}

describe('isClientIdMetadataUrl', () => {
  it.each([
    'https://client.example/client.json',
    'https://client.example/oauth/client-metadata',
    'https://client.example:8443/a/b?version=2',
    'https://192.0.2.1/client.json',
    'https://[2001:db8::1]/client.json',
  ])('accepts %s', (url) => {
    expect(isClientIdMetadataUrl(url)).toBe(true);
  });

  it.each([
    ['http://client.example/client.json', 'http'],
    ['https://client.example', 'no path'],
    ['https://client.example/', 'root path'],
    ['https://client.example/?x=1', 'root path with query'],
    ['https://client.example/client.json#frag', 'fragment'],
    ['https://client.example/client.json#', 'empty fragment'],
    ['https://user@client.example/client.json', 'user info'],
    ['https://user:pw@client.example/client.json', 'user info'],
    ['https://client.example/a/../client.json', 'double-dot segment'],
    ['https://client.example/a/./client.json', 'single-dot segment'],
    ['https://client.example/a/%2e%2e/client.json', 'encoded dot segment'],
    ['https://client.example/a/%2E/client.json', 'encoded dot segment'],
    ['https://Client.Example/client.json', 'not normalised (host case)'],
    ['https://client.example:443/client.json', 'not normalised (default port)'],
    ['https://client.example/a b', 'not normalised (space)'],
    [' https://client.example/client.json', 'leading space'],
    ['mcp_0123456789abcdef0123456789abcdef', 'a registered client id'],
    ['', 'empty'],
    [`https://client.example/${'a'.repeat(2100)}`, 'too long'],
  ])('refuses %s (%s)', (url) => {
    expect(isClientIdMetadataUrl(url)).toBe(false);
  });
});

describe('resolve: a valid document (private addresses allowed for the test server)', () => {
  it('returns the document with defaults filled in and the host:port the consent page names', async () => {
    const url = at('/client.json');
    const doc = await resolver().resolve(url);
    expect(doc).toEqual({
      clientId: url,
      clientName: 'Example MCP Client',
      clientUri: 'https://client.example/',
      redirectUris: ['https://client.example/callback', 'http://127.0.0.1/callback'],
      grantTypes: ['authorization_code'],
      responseTypes: ['code'],
      tokenEndpointAuthMethod: 'none',
      host: `127.0.0.1:${port}`,
    });
    // logo_uri was http: display-only fields are kept only when https.
    expect(doc.logoUri).toBeUndefined();
    expect(Object.isFrozen(doc) && Object.isFrozen(doc.redirectUris)).toBe(true);
  });

  it('reads every supported field, with a charset parameter on the content type; duplicate URIs once', async () => {
    const doc = await resolver().resolve(at('/full.json'));
    expect(doc.grantTypes).toEqual(['authorization_code', 'refresh_token']);
    expect(doc.responseTypes).toEqual(['code']);
    expect(doc.scope).toBe('mcp read');
    expect(doc.redirectUris).toEqual(['https://client.example/cb', 'com.example.app:/oauth']);
  });

  it('ignores grant and response types this server does not support (a document is written for every server); the device grant it keeps', async () => {
    const doc = await resolver().resolve(at('/extra-grants.json'));
    expect(doc.grantTypes).toEqual(['authorization_code', 'urn:ietf:params:oauth:grant-type:device_code', 'refresh_token']);
    expect(doc.responseTypes).toEqual(['code']);
  });

  it('private_key_jwt when the document offers it, as its method or in token_endpoint_auth_methods_supported', async () => {
    expect(await resolver().resolve(at('/private-key-jwt.json'))).toMatchObject({
      tokenEndpointAuthMethod: 'private_key_jwt',
      jwksUri: 'https://client.example/jwks',
    });
    expect(await resolver().resolve(at('/methods-supported.json'))).toMatchObject({
      tokenEndpointAuthMethod: 'private_key_jwt',
      jwksUri: 'https://client.example/jwks',
    });
    expect((await resolver().resolve(at('/client.json'))).tokenEndpointAuthMethod).toBe('none');
  });

  it('keySet: fetches a JWKS with the same guard and cache; refuses one with a private key', async () => {
    const r = resolver();
    const set = await r.keySet(at('/jwks.json'));
    expect(set.keys[0]).toMatchObject({ kid: 'k1' });
    await r.keySet(at('/jwks.json'));
    expect(hits.get('/jwks.json')).toBe(1);
    expect((await refusal(r.keySet(at('/jwks-private.json')))).description).toMatch(
      /key set \(jwks_uri\) must be a set of 1 to 32 public keys/,
    );
    expect((await refusal(resolver({ allowPrivateAddresses: false }).keySet(at('/jwks.json?guard=1')))).description).toMatch(
      /has no public address/,
    );
    expect(hits.get('/jwks.json?guard=1')).toBeUndefined();
  });

  it('caps concurrent fetches in the process: one over the cap waits, then is answered 503 with Retry-After', async () => {
    const r = resolver({ maxConcurrentFetches: 2, fetchQueueWaitMs: 200, timeoutMs: 2_000 });
    const slow = [r.resolve(at('/silent?slot=1')), r.resolve(at('/silent?slot=2'))].map((p) => p.catch((e: unknown) => e));
    const over = await rejection(r.resolve(at('/client.json?slot=3')));
    expect(over.status).toBe(503);
    expect(over.headers?.['retry-after']).toBe('5');
    expect(hits.get('/client.json?slot=3')).toBeUndefined();
    await Promise.all(slow);
    // The slots are free again once the slow fetches gave up.
    expect((await r.resolve(at('/client.json?slot=4'))).clientName).toBe('Example MCP Client');
  });

  it('an address holds at most maxConcurrentFetchesPerAddress slots: its next fetch waits (then 503), another address still finds one', async () => {
    const r = resolver({ maxConcurrentFetches: 3, maxConcurrentFetchesPerAddress: 1, fetchQueueWaitMs: 200, timeoutMs: 2_000 });
    const slow = r.resolve(at('/silent?share=1'), { address: '192.0.2.1' }).catch((e: unknown) => e);
    const over = await rejection(r.resolve(at('/client.json?share=2'), { address: '192.0.2.1' }));
    expect(over.status).toBe(503);
    expect(hits.get('/client.json?share=2')).toBeUndefined();
    expect((await r.resolve(at('/client.json?share=3'), { address: '192.0.2.2' })).clientName).toBe('Example MCP Client');
    await slow;
  });

  it("an address's waiting fetch gets its slot once its earlier fetch ends", async () => {
    const r = resolver({ maxConcurrentFetches: 3, maxConcurrentFetchesPerAddress: 1, fetchQueueWaitMs: 30_000 });
    const first = r.resolve(at('/held'), { address: '192.0.2.3' });
    await heldArrived;
    const waiting = r.resolve(at('/client.json?share=5'), { address: '192.0.2.3' });
    // Another address is not held up meanwhile.
    expect((await r.resolve(at('/client.json?share=6'), { address: '192.0.2.4' })).clientName).toBe('Example MCP Client');
    expect(hits.get('/client.json?share=5')).toBeUndefined();
    releaseHeld();
    expect((await first).clientName).toBe('Example MCP Client');
    expect((await waiting).clientName).toBe('Example MCP Client');
    expect(hits.get('/client.json?share=5')).toBe(1);
  });

  it('refetchKeySet and refetchDocument: past the cache once refetchCooldownMs has passed since the last fetch, undefined within it', async () => {
    const clock = new ManualClock();
    const r = resolver({ clock, refetchCooldownMs: 30_000 });
    const keys = at('/jwks.json?refetch=1');
    expect((await r.keySet(keys)).keys[0]!.kid).toBe('k1');
    expect(await r.refetchKeySet(keys)).toBeUndefined();
    expect(hits.get('/jwks.json?refetch=1')).toBe(1);
    clock.advance(30_000);
    expect((await r.refetchKeySet(keys))!.keys[0]!.kid).toBe('k1');
    expect(hits.get('/jwks.json?refetch=1')).toBe(2);
    // The set fetched again is the cached one from then on.
    await r.keySet(keys);
    expect(hits.get('/jwks.json?refetch=1')).toBe(2);
    // A refetch its admission refuses (an address over its budget) leaves the cached copy in place.
    clock.advance(30_000);
    const stop = async () => {
      throw new HttpError('too_many_requests', 'slow down');
    };
    expect((await rejection(r.refetchKeySet(keys, { beforeFetch: stop }))).status).toBe(429);
    expect((await r.keySet(keys, { beforeFetch: stop })).keys[0]!.kid).toBe('k1');
    expect(hits.get('/jwks.json?refetch=1')).toBe(2);

    const doc = at('/client.json?refetch=doc');
    await r.resolve(doc);
    expect(await r.refetchDocument(doc)).toBeUndefined();
    clock.advance(30_000);
    expect((await r.refetchDocument(doc))!.clientId).toBe(doc);
    expect(hits.get('/client.json?refetch=doc')).toBe(2);
  });

  it('beforeFetch runs only when a fetch goes out (not on a cache hit), and can stop it', async () => {
    const r = resolver();
    let calls = 0;
    const count = async () => void calls++;
    await r.resolve(at('/client.json?before=1'), { beforeFetch: count });
    await r.resolve(at('/client.json?before=1'), { beforeFetch: count });
    expect(calls).toBe(1);
    const stop = async () => {
      throw new HttpError('too_many_requests', 'slow down');
    };
    expect((await rejection(r.resolve(at('/client.json?before=2'), { beforeFetch: stop }))).status).toBe(429);
    expect(hits.get('/client.json?before=2')).toBeUndefined();
  });

  it('drops a display-only URI that holds a control character instead of showing it', async () => {
    const doc = await resolver().resolve(at('/newline-logo.json'));
    expect(doc.logoUri).toBeUndefined();
    expect(doc.clientUri).toBe('https://client.example/');
  });

  it('also by host name (localhost) when private addresses are allowed', async () => {
    const doc = await resolver().resolve(at('/client.json', `localhost:${port}`));
    expect(doc.host).toBe(`localhost:${port}`);
  });

  it('warns once, at creation, that allowing private addresses is unsafe', () => {
    logLines.length = 0;
    resolver();
    expect(logLines.filter((l) => l.includes('allowPrivateAddresses') && l.includes('"level":40'))).toHaveLength(1);
    resolver({ allowPrivateAddresses: false });
    expect(logLines).toHaveLength(1);
  });
});

/**
 * What a refused internal address and an unresolvable name both say: not which class the address is
 * (that would tell anyone who can start a sign-in what internal names resolve to), but the setting
 * that allows internal addresses in development.
 */
const NO_PUBLIC_ADDRESS =
  "the metadata document's host has no public address that could be fetched (only public addresses are; for local development, oauth.clientMetadataDocuments.allowPrivateAddresses allows loopback and private ones)";

describe('resolve: the SSRF guard (allowPrivateAddresses off, the default)', () => {
  it('refuses loopback reached by name (localhost resolves to 127.0.0.1), and sends it nothing; the class is in the log only', async () => {
    const url = at('/client.json?guard=name', `localhost:${port}`);
    logLines.length = 0;
    const err = await refusal(resolver({ allowPrivateAddresses: false }).resolve(url));
    expect(err.description).toBe(NO_PUBLIC_ADDRESS);
    expect(err.description).not.toMatch(/loopback address/);
    expect(hits.get('/client.json?guard=name')).toBeUndefined();
    expect(logLines.some((l) => JSON.parse(l).addressClass === 'a loopback address')).toBe(true);
  });

  it.each([
    ['IPv4 literal', () => `127.0.0.1:${port}`],
    ['IPv6 literal', () => `[::1]:${port}`],
    ['IPv4-mapped IPv6 literal', () => `[::ffff:7f00:1]:${port}`],
  ])('refuses loopback as an %s, and sends it nothing', async (_, host) => {
    const err = await refusal(resolver({ allowPrivateAddresses: false }).resolve(at('/client.json?guard=literal', host())));
    expect(err.description).toBe(NO_PUBLIC_ADDRESS);
    expect(hits.get('/client.json?guard=literal')).toBeUndefined();
  });

  it.each([
    ['10.0.0.1', 'a private address'],
    ['169.254.169.254', 'a link-local address'],
    ['100.64.0.1', 'a carrier-grade NAT address'],
    ['[fd00::1]', 'a private address'],
    ['[64:ff9b::a9fe:a9fe]', 'a link-local address'],
  ])('refuses %s before connecting (%s, said in the log only)', async (host, name) => {
    logLines.length = 0;
    const err = await refusal(resolver({ allowPrivateAddresses: false }).resolve(`https://${host}/client.json`));
    expect(err.description).toBe(NO_PUBLIC_ADDRESS);
    expect(logLines.some((l) => (JSON.parse(l).addressClass as string | undefined)?.startsWith(name))).toBe(true);
  });

  it('the lookup refuses a name with any non-public address, and passes public ones on in both answer shapes', async () => {
    const look = (host: string, all: boolean) =>
      new Promise<{ err: Error | null; address: unknown; family?: number }>((r) =>
        lookupPublicAddress(host, { all }, (err, address, family) => r({ err, address, family })),
      );
    for (const all of [false, true]) {
      expect((await look('localhost', all)).err?.message).toBe('refused address: loopback');
      expect((await look('10.0.0.1', all)).err?.message).toBe('refused address: private');
      expect((await look('::ffff:169.254.169.254', all)).err?.message).toBe('refused address: link-local');
    }
    expect(await look('8.8.8.8', false)).toEqual({ err: null, address: '8.8.8.8', family: 4 });
    expect(await look('2606:4700:4700::1111', true)).toEqual({
      err: null,
      address: [{ address: '2606:4700:4700::1111', family: 6 }],
      family: undefined,
    });
  });

  it('destroys a socket whose connected peer is not public, whoever resolved the name', async () => {
    const server = createNetServer((s) => s.on('error', () => {}));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const socket: Socket = connect({ host: '127.0.0.1', port: (server.address() as AddressInfo).port });
      refuseNonPublicPeer(socket);
      const [err] = (await once(socket, 'error')) as [Error];
      expect(err.message).toBe('refused address: loopback');
      expect(socket.destroyed).toBe(true);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});

describe('resolve: bad URLs and bad answers, each a clear invalid_client', () => {
  it.each([
    ['http://client.example/client.json'],
    ['https://client.example/'],
    ['https://client.example/client.json#x'],
    ['https://client.example/a/../client.json'],
  ])('refuses %s without fetching', async (url) => {
    const err = await refusal(resolver().resolve(url));
    expect(err.description).toMatch(/client_id URL must be https, with a path/);
  });

  const rows: Array<[path: string, expected: RegExp]> = [
    ['/redirect', /answered with a redirect \(HTTP 302\); redirects are not followed/],
    ['/missing', /answered HTTP 404, not 200/],
    ['/html', /is not JSON \(its content-type must be application\/json\)/],
    ['/broken-json', /is not valid JSON/],
    ['/array.json', /must be a JSON object/],
    ['/mismatch.json', /client_id is not exactly the URL it was fetched from/],
    ['/no-redirect-uris.json', /has no redirect_uris/],
    ['/fragment-redirect.json', /redirect_uris must be a non-empty list of absolute URIs \(at most 64\), each https.*without fragment/],
    ['/relative-redirect.json', /redirect_uris must be a non-empty list of absolute URIs/],
    ['/javascript-redirect.json', /redirect_uris must be a non-empty list of absolute URIs/],
    ['/http-redirect.json', /redirect_uris must be a non-empty list of absolute URIs/],
    ['/newline-redirect.json', /redirect_uris must be a non-empty list of absolute URIs/],
    ['/newline-name.json', /client_name must be a string of at most 256 characters, without control characters/],
    ['/private-key-jwt-no-keys.json', /asks for private_key_jwt but publishes no keys/],
    ['/private-key-jwt-both-keys.json', /must not give both jwks_uri and jwks/],
    ['/private-key-jwt-http-jwks.json', /jwks_uri must be an https URL/],
    ['/private-key-jwt-secret-key.json', /jwks must be a JSON Web Key Set of 1 to 32 public keys/],
    ['/secret-methods-only.json', /offers no client authentication this server supports/],
    ['/secret-basic.json', /asks for token_endpoint_auth_method "client_secret_basic"/],
    ['/with-secret.json', /must not contain client_secret/],
    ['/client-credentials.json', /grant_types must include authorization_code/],
    ['/token-response-type.json', /response_types must include code/],
    ['/gzip.json', /without content-encoding/],
    ['/declared-huge', /larger than 5120 bytes/],
    ['/cut-off', /^the metadata document was cut off$/],
    ['/big-headers', /^the metadata document could not be fetched$/],
  ];
  it.each(rows)('%s: %s', async (path, expected) => {
    const err = await refusal(resolver().resolve(at(path)));
    expect(err.description).toMatch(expected);
  });

  it('does not follow a redirect: its target is never requested', async () => {
    const before = hits.get('/client.json') ?? 0;
    await refusal(resolver().resolve(at('/redirect')));
    expect(hits.get('/client.json') ?? 0).toBe(before);
  });

  it('stops reading an endless body at maxBytes (the size bound acts while streaming, before the time bound)', async () => {
    const err = await refusal(resolver({ timeoutMs: 20_000 }).resolve(at('/endless')));
    expect(err.description).toBe('the metadata document is larger than 5120 bytes');
  });

  it('gives up on a body that never finishes within timeoutMs', async () => {
    const err = await refusal(resolver({ timeoutMs: 300 }).resolve(at('/trickle')));
    expect(err.description).toBe('the metadata document was not fetched within 300 ms');
  });

  it('gives up on a server that never answers within timeoutMs', async () => {
    const err = await refusal(resolver({ timeoutMs: 300 }).resolve(at('/silent')));
    expect(err.description).toBe('the metadata document was not fetched within 300 ms');
  });

  it('refuses a certificate it does not trust', async () => {
    const err = await refusal(resolver({ ca: undefined }).resolve(at('/client.json')));
    expect(err.description).toBe("the metadata document's host did not present a valid TLS certificate for its name");
  });

  it('refuses a host nobody listens on, and a name that does not resolve', async () => {
    const server = createNetServer();
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const freePort = (server.address() as AddressInfo).port;
    await new Promise<void>((r) => server.close(() => r()));
    expect((await refusal(resolver().resolve(at('/client.json', `127.0.0.1:${freePort}`)))).description).toBe(
      "the metadata document's host refused the connection",
    );
    // The same words as for a name that resolves to an internal address: the page is no DNS oracle.
    expect((await refusal(resolver().resolve('https://cimd-test.invalid/client.json'))).description).toBe(NO_PUBLIC_ADDRESS);
  });
});

describe('resolve: the cache', () => {
  it('reuses a document for its max-age (capped by cacheTtlMs), then fetches it again', async () => {
    const clock = new ManualClock();
    const r = resolver({ clock });
    const url = at('/client.json?cache=max-age');
    await r.resolve(url);
    await r.resolve(url);
    expect(hits.get('/client.json?cache=max-age')).toBe(1);
    clock.advance(59_999);
    await r.resolve(url);
    expect(hits.get('/client.json?cache=max-age')).toBe(1);
    clock.advance(1);
    await r.resolve(url);
    expect(hits.get('/client.json?cache=max-age')).toBe(2);

    const capped = resolver({ clock, cacheTtlMs: 10_000 });
    await capped.resolve(at('/client.json?cache=capped'));
    clock.advance(10_000);
    await capped.resolve(at('/client.json?cache=capped'));
    expect(hits.get('/client.json?cache=capped')).toBe(2);
  });

  it('without caching headers keeps a document for cacheTtlMs; with no-store not at all', async () => {
    const clock = new ManualClock();
    const r = resolver({ clock, cacheTtlMs: 5_000 });
    await r.resolve(at('/no-cache-headers.json'));
    clock.advance(4_999);
    await r.resolve(at('/no-cache-headers.json'));
    expect(hits.get('/no-cache-headers.json')).toBe(1);
    await r.resolve(at('/no-store.json'));
    await r.resolve(at('/no-store.json'));
    expect(hits.get('/no-store.json')).toBe(2);
  });

  it('a failure is answered again without a fetch for failureCacheMs (per URL), then the URL is fetched again and can succeed', async () => {
    const clock = new ManualClock();
    const r = resolver({ clock, failureCacheMs: 30_000 });
    failing.add('/flaky.json');
    const url = at('/flaky.json');
    const first = await refusal(r.resolve(url));
    const again = await refusal(r.resolve(url));
    expect(again.description).toBe(first.description);
    expect(hits.get('/flaky.json')).toBe(1);
    // Another URL of the same host is its own entry.
    await refusal(r.resolve(at('/flaky.json?other')));
    expect(hits.get('/flaky.json?other')).toBe(1);
    failing.delete('/flaky.json');
    clock.advance(29_999);
    await refusal(r.resolve(url));
    expect(hits.get('/flaky.json')).toBe(1);
    clock.advance(1);
    expect((await r.resolve(url)).clientId).toBe(url);
    expect(hits.get('/flaky.json')).toBe(2);
    // failureCacheMs 0: every use fetches again.
    failing.add('/flaky.json');
    const uncached = resolver({ clock, failureCacheMs: 0 });
    await refusal(uncached.resolve(at('/flaky.json?uncached')));
    await refusal(uncached.resolve(at('/flaky.json?uncached')));
    expect(hits.get('/flaky.json?uncached')).toBe(2);
    failing.delete('/flaky.json');
  });

  it('keeps at most maxCacheEntries, evicting the least recently used', async () => {
    const r = resolver({ maxCacheEntries: 2 });
    const u = (n: number) => at(`/client.json?lru=${n}`);
    await r.resolve(u(1));
    await r.resolve(u(2));
    await r.resolve(u(1)); // 1 is now the most recently used
    await r.resolve(u(3)); // evicts 2
    await r.resolve(u(1));
    await r.resolve(u(3));
    expect([1, 2, 3].map((n) => hits.get(`/client.json?lru=${n}`))).toEqual([1, 1, 1]);
    await r.resolve(u(2));
    expect(hits.get('/client.json?lru=2')).toBe(2);
  });

  it('fetches once for concurrent resolves of the same URL', async () => {
    const r = resolver();
    const url = at('/client.json?concurrent=1');
    const [a, b, c] = await Promise.all([r.resolve(url), r.resolve(url), r.resolve(url)]);
    expect(a).toBe(b);
    expect(b).toBe(c);
    expect(hits.get('/client.json?concurrent=1')).toBe(1);
  });
});

describe('cacheLifetimeMs', () => {
  it.each([
    [undefined, 600_000],
    ['max-age=60', 60_000],
    ['public, max-age=60', 60_000],
    ['max-age="30"', 30_000],
    ['max-age=999999', 600_000],
    ['max-age=0', 0],
    ['no-store', 0],
    ['no-cache, max-age=60', 0],
    ['private', 600_000],
  ])('%s -> %d ms', (header, expected) => {
    expect(cacheLifetimeMs(header, 600_000)).toBe(expected);
  });
});
