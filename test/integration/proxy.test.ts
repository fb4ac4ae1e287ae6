// The proxy listener's answers (docs/request-path.md), row by row, over real
// sockets with a real Redis.

import { request } from 'node:http';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashToken, TTL_7_DAYS } from '../../src/model/credentials.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import { startStack, type Stack } from '../support/stack.ts';
import {
  refusedUrl,
  startEchoUpstream,
  startResettingUpstream,
  startSilentUpstream,
  startSseUpstream,
  type FakeUpstream,
  type SseUpstream,
} from '../support/fake-upstreams.ts';
import { rawRedis } from '../support/redis.ts';

const INVALID = { error: 'invalid_token', error_description: 'the access token is invalid, expired or revoked' };

function hex(): string {
  return randomBytes(32).toString('hex');
}

async function call(url: string, init: RequestInit & { token?: string } = {}) {
  const headers = new Headers(init.headers);
  if (init.token !== undefined) headers.set('authorization', `Bearer ${init.token}`);
  const res = await fetch(url, { ...init, headers });
  const text = await res.text();
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  return { status: res.status, headers: res.headers, body };
}

describe('proxy listener: authentication rows', () => {
  let echo: FakeUpstream;
  let stack: Stack;
  let oauthToken: string;
  let clientId: string;

  beforeAll(async () => {
    echo = await startEchoUpstream();
    stack = await startStack({ upstreamUrl: echo.url });
    ({ token: oauthToken, clientId } = await stack.issueOAuthToken());
  });
  afterAll(async () => {
    await stack.close();
    await echo.close();
  });

  async function userToken(fields: { expiresAt?: number; subject?: string } = {}): Promise<string> {
    const token = hex();
    const now = stack.clock.now();
    await stack.store.putUserToken({
      tokenHash: hashToken(token),
      subject: fields.subject ?? 'user-123',
      issuer: 'https://idp.example',
      createdAt: now,
      expiresAt: fields.expiresAt ?? now + TTL_7_DAYS,
    });
    return token;
  }

  it('no Authorization header: 401 with the resource_metadata challenge and nothing forwarded', async () => {
    const before = echo.seen.length;
    const res = await call(stack.mcpUrl, { method: 'POST', body: '{}' });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe(
      `Bearer realm="mcp", resource_metadata="${stack.sidecar.publicUrl()}/.well-known/oauth-protected-resource/mcp"`,
    );
    expect(res.body.error).toBe('unauthorized');
    expect(echo.seen.length).toBe(before);
  });

  it('a token only in the query string is ignored (treated as no token)', async () => {
    const res = await call(`${stack.mcpUrl}?access_token=${oauthToken}`, { method: 'POST', body: '{}' });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).not.toContain('error=');
  });

  const invalidCases: Array<[string, () => Promise<Record<string, string>>]> = [
    ['wrong scheme', async () => ({ authorization: `Basic ${Buffer.from('a:b').toString('base64')}` })],
    ['Bearer with no token', async () => ({ authorization: 'Bearer ' })],
    ['malformed token (63 hex)', async () => ({ authorization: `Bearer ${hex().slice(1)}` })],
    ['uppercase hex', async () => ({ authorization: `Bearer ${hex().toUpperCase()}` })],
    ['unknown token', async () => ({ authorization: `Bearer ${hex()}` })],
    [
      'revoked user-grade token (admin HSET revoked true)',
      async () => {
        const token = await userToken();
        const raw = await rawRedis();
        await raw.hset(`${stack.prefix}userBearerTokens:${hashToken(token)}`, 'revoked', 'true');
        await raw.quit();
        return { authorization: `Bearer ${token}` };
      },
    ],
    [
      'user-grade record with revoked other than "false"',
      async () => {
        const token = await userToken();
        const raw = await rawRedis();
        await raw.hset(`${stack.prefix}userBearerTokens:${hashToken(token)}`, 'revoked', 'no');
        await raw.quit();
        return { authorization: `Bearer ${token}` };
      },
    ],
    [
      'user-grade record with a non-numeric expiresAt',
      async () => {
        const token = await userToken();
        const raw = await rawRedis();
        await raw.hset(`${stack.prefix}userBearerTokens:${hashToken(token)}`, 'expiresAt', 'tomorrow');
        await raw.quit();
        return { authorization: `Bearer ${token}` };
      },
    ],
    [
      'expired user-grade token (injected clock)',
      async () => {
        const token = await userToken({ expiresAt: stack.clock.now() + 60_000 });
        stack.clock.advance(60_000);
        return { authorization: `Bearer ${token}` };
      },
    ],
    [
      'OAuth token of a deleted client',
      async () => {
        const { token, clientId: id } = await stack.issueOAuthToken();
        expect((await stack.admin('deleteClient', { clientId: id })).status).toBe(200);
        return { authorization: `Bearer ${token}` };
      },
    ],
  ];

  it.each(invalidCases)('%s: 401 invalid_token, the one body for every invalid token, nothing forwarded', async (_name, make) => {
    const headers = await make();
    const before = echo.seen.length;
    const res = await call(stack.mcpUrl, { method: 'POST', body: '{}', headers });
    expect(res.status).toBe(401);
    expect(res.body).toEqual(INVALID);
    expect(res.headers.get('www-authenticate')).toBe(
      `Bearer realm="mcp", resource_metadata="${stack.sidecar.publicUrl()}/.well-known/oauth-protected-resource/mcp", error="invalid_token", error_description="${INVALID.error_description}"`,
    );
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(echo.seen.length).toBe(before);
  });

  it('a revocation by HSET takes effect on the very next request', async () => {
    const token = await userToken({ subject: 'alice' });
    expect((await call(stack.mcpUrl, { method: 'POST', body: '{}', token })).status).toBe(200);
    const raw = await rawRedis();
    await raw.hset(`${stack.prefix}userBearerTokens:${hashToken(token)}`, 'revoked', 'true');
    await raw.quit();
    expect((await call(stack.mcpUrl, { method: 'POST', body: '{}', token })).status).toBe(401);
  });

  it('two Authorization headers are refused', async () => {
    const res = await new Promise<number>((resolve, reject) => {
      const req = request(
        stack.mcpUrl,
        {
          method: 'POST',
          headers: [
            'host',
            new URL(stack.proxyUrl).host,
            'authorization',
            `Bearer ${oauthToken}`,
            'authorization',
            `Bearer ${hex()}`,
            'content-length',
            '2',
          ],
        },
        (r) => {
          r.resume();
          resolve(r.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.end('{}');
    });
    expect(res).toBe(401);
  });

  it('valid OAuth token: forwarded with method, query and body; Authorization and spoofed identity removed', async () => {
    const res = await call(`${stack.mcpUrl}?a=1&b=two`, {
      method: 'POST',
      token: oauthToken,
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
      headers: {
        'content-type': 'application/json',
        'mcp-session-id': 'session-abc',
        'mcp-protocol-version': '2025-06-18',
        'last-event-id': 'evt-9',
        'x-mcp-auth-kind': 'master',
        'x-mcp-auth-subject': 'evil',
        'X-MCP-Auth-Client-Id': 'evil',
        'x-forwarded-for': '6.6.6.6',
        'x-forwarded-host': 'evil.example',
        forwarded: 'for=6.6.6.6',
        'proxy-authorization': 'Basic dXNlcjpwYXNz',
      },
    });
    expect(res.status).toBe(200);
    const seen = res.body;
    expect(seen.headers['proxy-authorization']).toBeUndefined();
    expect(seen.method).toBe('POST');
    expect(seen.url).toBe('/mcp?a=1&b=two');
    expect(seen.bodyBytes).toBe(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }).length);
    expect(seen.headers.authorization).toBeUndefined();
    expect(seen.headers['x-mcp-auth-kind']).toBe('oauth');
    expect(seen.headers['x-mcp-auth-subject']).toBe(clientId);
    expect(seen.headers['x-mcp-auth-client-id']).toBe(clientId);
    expect(seen.headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(seen.headers['x-forwarded-proto']).toBe('http');
    expect(seen.headers['x-forwarded-host']).toBe(new URL(stack.proxyUrl).host);
    expect(seen.headers.forwarded).toBeUndefined();
    expect(seen.headers['mcp-session-id']).toBe('session-abc');
    expect(seen.headers['mcp-protocol-version']).toBe('2025-06-18');
    expect(seen.headers['last-event-id']).toBe('evt-9');
    expect(res.headers.get('mcp-session-id')).toBe('session-abc');
    // Only one of each identity header reaches the upstream.
    const names = (seen.rawHeaders as string[]).filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
    expect(names.filter((n) => n === 'x-mcp-auth-subject')).toHaveLength(1);
  });

  it('an OAuth token with a scope: X-MCP-Auth-Scope carries it; a client-sent one never passes', async () => {
    const issued = await stack.admin('createAccessToken', { clientId, lifetimeSeconds: 60, scope: 'tools:read tools:call' });
    expect(issued.status).toBe(201);
    const res = await call(stack.mcpUrl, {
      method: 'POST',
      token: issued.body.accessToken,
      body: '{}',
      headers: { 'x-mcp-auth-scope': 'admin' },
    });
    expect(res.status).toBe(200);
    expect(res.body.headers['x-mcp-auth-scope']).toBe('tools:read tools:call');
    const unscoped = await call(stack.mcpUrl, { method: 'POST', token: oauthToken, body: '{}', headers: { 'x-mcp-auth-scope': 'admin' } });
    expect(unscoped.body.headers['x-mcp-auth-scope']).toBeUndefined();
  });

  it('valid user-grade token: kind user, subject is the IdP sub, no client id', async () => {
    const token = await userToken({ subject: 'sub|ünïcode' });
    const res = await call(stack.mcpUrl, { method: 'POST', token, body: '{}' });
    expect(res.status).toBe(200);
    expect(res.body.headers['x-mcp-auth-kind']).toBe('user');
    expect(res.body.headers['x-mcp-auth-subject']).toBe(encodeURIComponent('sub|ünïcode'));
    expect(res.body.headers['x-mcp-auth-client-id']).toBeUndefined();
  });

  it('master token: kind master, subject master', async () => {
    const res = await call(stack.mcpUrl, { method: 'GET', token: stack.masterToken });
    expect(res.status).toBe(200);
    expect(res.body.method).toBe('GET');
    expect(res.body.headers['x-mcp-auth-kind']).toBe('master');
    expect(res.body.headers['x-mcp-auth-subject']).toBe('master');
  });

  it.each(['DELETE', 'PUT', 'PATCH', 'OPTIONS'])('%s on /mcp is forwarded too', async (method) => {
    const res = await call(stack.mcpUrl, { method, token: oauthToken });
    expect(res.status).toBe(200);
    expect(res.body.method).toBe(method);
  });

  it('a large body is streamed through whole (20 MiB)', async () => {
    const size = 20 * 1024 * 1024;
    const res = await call(stack.mcpUrl, { method: 'POST', token: oauthToken, body: Buffer.alloc(size, 0x61) });
    expect(res.status).toBe(200);
    expect(res.body.bodyBytes).toBe(size);
  });

  it.each(['/', '/mcp/extra', '/admin', '/MCP', '/healthz'])('%s: 404 not_found', async (path) => {
    const res = await call(`${stack.proxyUrl}${path}`, { token: oauthToken });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: 'not_found' });
  });

  it('GET /health with a valid token: 200 and every part ok', async () => {
    const res = await call(`${stack.proxyUrl}/health`, { token: oauthToken });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok', store: 'ok', upstream: 'ok' });
  });

  it('GET /health without a token: 401', async () => {
    expect((await call(`${stack.proxyUrl}/health`)).status).toBe(401);
  });

  it('protected-resource metadata is built from the public URL, not the Host header', async () => {
    const res = await call(`${stack.proxyUrl}/.well-known/oauth-protected-resource/mcp`, { headers: { host: 'evil.example' } });
    expect(res.status).toBe(200);
    expect(res.body.resource).toBe(`${stack.sidecar.publicUrl()}/mcp`);
  });
});

describe('proxy listener: upstream faults', () => {
  it('upstream refuses: 502', async () => {
    const stack = await startStack({ upstreamUrl: await refusedUrl() });
    try {
      const { token } = await stack.issueOAuthToken();
      const res = await call(stack.mcpUrl, { method: 'POST', token, body: '{}' });
      expect(res.status).toBe(502);
      expect(res.body.error).toBe('bad_gateway');
      const health = await call(`${stack.proxyUrl}/health`, { token });
      expect(health.status).toBe(503);
      expect(health.body).toEqual({ status: 'unavailable', store: 'ok', upstream: 'unavailable' });
    } finally {
      await stack.close();
    }
  });

  it('upstream resets the connection: 502', async () => {
    const upstream = await startResettingUpstream();
    const stack = await startStack({ upstreamUrl: upstream.url });
    try {
      const { token } = await stack.issueOAuthToken();
      const res = await call(stack.mcpUrl, { method: 'POST', token, body: '{}' });
      expect(res.status).toBe(502);
      expect(upstream.seen).toHaveLength(1);
    } finally {
      await stack.close();
      await upstream.close();
    }
  });

  it('upstream never sends headers: 504 after upstream.headersTimeoutMs', async () => {
    const upstream = await startSilentUpstream();
    const stack = await startStack({ upstreamUrl: upstream.url, config: { upstream: { headersTimeoutMs: 300 } } });
    try {
      const { token } = await stack.issueOAuthToken();
      const res = await call(stack.mcpUrl, { method: 'POST', token, body: '{}' });
      expect(res.status).toBe(504);
      expect(res.body.error).toBe('gateway_timeout');
    } finally {
      await stack.close();
      await upstream.close();
    }
  });
});

describe('proxy listener: proxy.maxBodyBytes', () => {
  let echo: FakeUpstream;
  let stack: Stack;
  let token: string;
  const MAX = 1024;
  beforeAll(async () => {
    echo = await startEchoUpstream();
    stack = await startStack({ upstreamUrl: echo.url, config: { proxy: { maxBodyBytes: MAX } } });
    ({ token } = await stack.issueOAuthToken());
  });
  afterAll(async () => {
    await stack.close();
    await echo.close();
  });

  it('a body up to the limit passes whole; a declared Content-Length over it gets 413 and reaches nothing', async () => {
    const ok = await call(stack.mcpUrl, { method: 'POST', token, body: 'x'.repeat(MAX) });
    expect(ok.status).toBe(200);
    expect(ok.body.bodyBytes).toBe(MAX);
    const seen = echo.seen.length;
    const over = await call(stack.mcpUrl, { method: 'POST', token, body: 'x'.repeat(MAX + 1) });
    expect(over.status).toBe(413);
    expect(over.body.error).toBe('payload_too_large');
    expect(echo.seen.length).toBe(seen);
  });

  it('a chunked body that grows past the limit is cut: the upstream never gets a complete request', async () => {
    const seen = echo.seen.length;
    const outcome = await new Promise<string>((resolve) => {
      const req = request(
        stack.mcpUrl,
        { method: 'POST', headers: { authorization: `Bearer ${token}`, 'transfer-encoding': 'chunked' } },
        (res) => {
          res.resume();
          res.on('end', () => resolve(`status ${res.statusCode}`));
          res.on('error', () => resolve('response cut'));
        },
      );
      req.on('error', () => resolve('connection cut'));
      // Written in pieces, each after the previous one is flushed, until the sidecar cuts the request.
      let sent = 0;
      const more = () => {
        if (sent > MAX * 8 || req.destroyed) {
          req.end();
          return;
        }
        sent += 256;
        req.write('y'.repeat(256), more);
      };
      more();
    });
    expect(outcome).not.toBe('status 200');
    expect(echo.seen.length).toBe(seen);
  });
});

describe('proxy listener: SSE', () => {
  let sse: SseUpstream;
  let stack: Stack;
  let token: string;
  beforeAll(async () => {
    sse = await startSseUpstream();
    stack = await startStack({ upstreamUrl: sse.url, config: { upstream: { headersTimeoutMs: 200 } } });
    ({ token } = await stack.issueOAuthToken());
  });
  afterAll(async () => {
    await stack.close();
    await sse.close();
  });

  it('events arrive one by one, unbuffered, and a client abort closes the upstream stream', async () => {
    const controller = new AbortController();
    const res = await fetch(stack.mcpUrl, {
      headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
      signal: controller.signal,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const upstream = await sse.nextStream();
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    for (let i = 1; i <= 3; i++) {
      upstream.res.write(`id: ${i}\ndata: event ${i}\n\n`);
      // Each event is read before the next is written: nothing waits for a buffer to fill.
      let got = '';
      while (!got.includes(`data: event ${i}\n\n`)) {
        const { value, done } = await reader.read();
        expect(done).toBe(false);
        got += decoder.decode(value, { stream: true });
      }
      expect(got).toBe(`id: ${i}\ndata: event ${i}\n\n`);
    }
    upstream.res.write(': heartbeat\n\n');
    const { value } = await reader.read();
    expect(decoder.decode(value)).toBe(': heartbeat\n\n');
    expect((await stack.sidecar.metrics.openStreams.get()).values[0]?.value).toBe(1);
    controller.abort();
    await upstream.closed; // the upstream saw its stream close: nothing leaks there
    expect(upstream.res.destroyed || upstream.res.writableEnded).toBe(true);
  });

  it('an open stream is not cut by the upstream headers timeout once headers have arrived', async () => {
    const res = await fetch(stack.mcpUrl, { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } });
    const upstream = await sse.nextStream();
    const reader = res.body!.getReader();
    // Let more than headersTimeoutMs (200 ms) pass on the upstream's own timer, then send an event.
    await new Promise<void>((resolve) => {
      setTimeout(() => {
        upstream.res.write('data: late\n\n');
        resolve();
      }, 400);
    });
    const { value, done } = await reader.read();
    expect(done).toBe(false);
    expect(new TextDecoder().decode(value)).toBe('data: late\n\n');
    await reader.cancel();
    await upstream.closed;
  });
});

describe('proxy listener: Redis down (fail closed)', () => {
  it('answers 503 within 2 s with Retry-After, forwards nothing, and recovers when Redis is back', async () => {
    const { startRedisServer } = await import('../support/redis-server.ts');
    const redis = await startRedisServer();
    const echo = await startEchoUpstream();
    const stack = await startStack({ upstreamUrl: echo.url, redisUrl: redis.url });
    try {
      const { token } = await stack.issueOAuthToken();
      expect((await call(stack.mcpUrl, { method: 'POST', token, body: '{}' })).status).toBe(200);
      const forwarded = echo.seen.length;

      await redis.kill();
      const started = performance.now();
      const down = await call(stack.mcpUrl, { method: 'POST', token, body: '{}' });
      const elapsed = performance.now() - started;
      expect(down.status).toBe(503);
      expect(down.body).toEqual({ error: 'temporarily_unavailable' });
      expect(down.headers.get('retry-after')).toBe('2');
      expect(elapsed).toBeLessThan(2000);
      expect(echo.seen.length).toBe(forwarded);
      const outcomes = (await stack.sidecar.metrics.requests.get()).values;
      expect(outcomes.find((v) => v.labels.outcome === 'unavailable')?.value).toBe(1);
      const ready = await call(`${stack.adminUrl}/readyz`);
      expect(ready.status).toBe(503);
      const adminDown = await stack.admin('listClients');
      expect(adminDown.status).toBe(503);
      expect(adminDown.body).toEqual({ error: 'temporarily_unavailable' });

      const client = (stack.store as RedisTokenStore).client;
      // Not events.once: a failed reconnect attempt ('error') while Redis restarts must not reject this.
      const reconnected = new Promise<void>((resolve) => client.once('ready', () => resolve()));
      await redis.restart();
      await reconnected;
      // Redis restarted empty (no persistence in the test): the token is gone, so 401, not 503.
      const after = await call(stack.mcpUrl, { method: 'POST', token, body: '{}' });
      expect(after.status).toBe(401);
      expect((await call(stack.mcpUrl, { method: 'POST', token: stack.masterToken, body: '{}' })).status).toBe(200);
    } finally {
      await stack.close();
      await echo.close();
      await redis.stop();
    }
  });
});
