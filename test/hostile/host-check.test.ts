// DNS rebinding: the forwarder gives the upstream its own Host, so an upstream's Host/Origin check
// cannot see a rebound name; the sidecar refuses it itself, before any token lookup: a Host that is
// not PUBLIC_URL's, a configured one or (on a loopback listener) a loopback name is 421; an Origin that
// is not PUBLIC_URL's, a configured one or a loopback one (same rule) is 403. The original Host still
// reaches the upstream as X-Forwarded-Host.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEchoUpstream, type FakeUpstream } from '../support/fake-upstreams.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { exchange } from './raw-http.ts';

describe('Host and Origin checks (DNS rebinding)', () => {
  let echo: FakeUpstream;
  let stack: Stack;
  let token: string;
  let port: number;

  beforeAll(async () => {
    echo = await startEchoUpstream();
    stack = await startStack({
      upstreamUrl: echo.url,
      config: {
        proxy: { publicUrl: 'https://mcp.example.test', allowedHosts: ['mcp.internal'], allowedOrigins: ['https://app.example.test'] },
      },
    });
    ({ token } = await stack.issueOAuthToken());
    port = Number(new URL(stack.proxyUrl).port);
  });
  afterAll(async () => {
    await stack.close();
    await echo.close();
  });

  async function send(path: string, host: string, extra: string[] = [], auth = token) {
    const lines = [
      `${path === '/health' ? 'GET' : 'POST'} ${path} HTTP/1.1`,
      `Host: ${host}`,
      `Authorization: Bearer ${auth}`,
      'Content-Length: 2',
      'Connection: close',
      ...extra,
    ];
    const before = echo.seen.length;
    const { responses } = await exchange(port, `${lines.join('\r\n')}\r\n\r\n{}`);
    return { status: responses[0]?.status, body: responses[0]?.body ?? '', forwarded: echo.seen.length > before };
  }

  it.each(['evil.example', 'evil.example:8080', 'mcp.example.test.evil.example', '10.0.0.1'])(
    'Host %s: 421 before any token lookup, nothing forwarded',
    async (host) => {
      const lookups = stack.logs.length;
      const res = await send('/mcp', host);
      expect(res.status).toBe(421);
      expect(JSON.parse(res.body).error).toBe('misdirected_request');
      expect(res.forwarded).toBe(false);
      // Even a bad token is not looked at (no denial counted): the Host decides first.
      expect((await send('/mcp', host, [], 'f'.repeat(64))).status).toBe(421);
      expect(stack.logs.slice(lookups).some((l) => l.includes('"denial"'))).toBe(false);
      expect((await send('/health', host)).status).toBe(421);
    },
  );

  it.each([
    ['PUBLIC_URL host', 'mcp.example.test'],
    ['PUBLIC_URL host, any port, any case', 'MCP.Example.Test:443'],
    ['a configured host', 'mcp.internal:8080'],
    ['a loopback name (the listener is on loopback)', '127.0.0.1:1234'],
    ['localhost', 'localhost'],
  ])('%s is served, and its Host goes on as X-Forwarded-Host', async (_what, host) => {
    const res = await send('/mcp', host);
    expect(res.status).toBe(200);
    expect(echo.seen.at(-1)!.headers['x-forwarded-host']).toBe(host);
  });

  it('an Origin other than PUBLIC_URL, a configured or a loopback one: 403, nothing forwarded', async () => {
    const refused = await send('/mcp', 'mcp.example.test', ['Origin: https://evil.example']);
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.body).error).toBe('forbidden');
    expect(refused.forwarded).toBe(false);
    expect((await send('/mcp', 'mcp.example.test', ['Origin: null'])).status).toBe(403);
    for (const origin of ['https://mcp.example.test', 'https://app.example.test', 'http://localhost:6274']) {
      expect((await send('/mcp', 'mcp.example.test', [`Origin: ${origin}`])).status).toBe(200);
    }
  });
});

describe('Host check on a public listener', () => {
  it('loopback names are not allowed when PUBLIC_URL is set and the listener is not loopback', async () => {
    const echo = await startEchoUpstream();
    const stack = await startStack({
      upstreamUrl: echo.url,
      config: { proxy: { host: '0.0.0.0', publicUrl: 'https://mcp.example.test' } },
    });
    try {
      const { token } = await stack.issueOAuthToken();
      const port = Number(new URL(stack.proxyUrl).port);
      const ask = async (host: string) =>
        (
          await exchange(
            port,
            `POST /mcp HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${token}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`,
          )
        ).responses[0]?.status;
      expect(await ask('localhost')).toBe(421);
      expect(await ask('mcp.example.test')).toBe(200);
    } finally {
      await stack.close();
      await echo.close();
    }
  });
});
