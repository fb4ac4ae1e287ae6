// Protocol upgrade requests (WebSocket, h2c) on raw sockets: MCP's Streamable HTTP has none, so the
// sidecar refuses them with 400 and closes the connection at once, whatever the path or credential,
// and never forwards one (Node stops parsing a connection after an upgrade request: a forwarded one
// left the client hanging and was logged as 200).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEchoUpstream, type FakeUpstream } from '../support/fake-upstreams.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { exchange } from './raw-http.ts';

const WEBSOCKET =
  'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n';
const H2C = 'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n';
// An Upgrade header the client did not name in Connection: not an upgrade to Node, but nothing an MCP
// upstream should be handed either.
const BARE = 'Upgrade: websocket\r\n';

describe('upgrade requests', () => {
  let echo: FakeUpstream;
  let stack: Stack;
  let port: number;
  let token: string;

  beforeAll(async () => {
    echo = await startEchoUpstream();
    stack = await startStack({ upstreamUrl: echo.url });
    port = Number(new URL(stack.proxyUrl).port);
    token = (await stack.issueOAuthToken()).token;
  });
  afterAll(async () => {
    await stack.close();
    await echo.close();
  });

  const cases: Array<[string, string, string, string]> = [
    ['GET', '/mcp', 'websocket', WEBSOCKET],
    ['POST', '/mcp', 'h2c', H2C],
    ['GET', '/mcp', 'h2c', H2C],
    ['GET', '/mcp', 'a bare Upgrade header', BARE],
    ['GET', '/health', 'websocket', WEBSOCKET],
    ['GET', '/.well-known/oauth-protected-resource/mcp', 'h2c', H2C],
  ];

  it.each(cases)('%s %s with an authenticated %s upgrade: 400 and the connection closed', async (method, path, _kind, upgrade) => {
    const before = echo.seen.length;
    const body = method === 'POST' ? '{"jsonrpc":"2.0","id":1,"method":"ping"}' : '';
    const framing = method === 'POST' ? `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n` : '';
    // No `Connection: close` of the client's own: the server must close by itself.
    const r = await exchange(
      port,
      `${method} ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n${upgrade}${framing}\r\n${body}`,
      { timeoutMs: 20_000 },
    );
    expect(r.timedOut).toBe(false);
    expect(r.responses.map((x) => x.status)).toEqual([400]);
    expect(r.responses[0]!.headers.connection?.toLowerCase()).toBe('close');
    expect(JSON.parse(r.responses[0]!.body)).toMatchObject({ error: 'invalid_request' });
    expect(echo.seen.length).toBe(before);
    const line = stack.logs
      .map((l) => JSON.parse(l))
      .filter((l) => l.msg === 'request' && l.path === path)
      .at(-1);
    expect(line).toMatchObject({ method, status: 400 });
    expect(line.upstreamStatus).toBeUndefined();
  });

  it('an upgrade without any credential is refused the same way, before any token lookup', async () => {
    const r = await exchange(port, `GET /mcp HTTP/1.1\r\nHost: x\r\n${WEBSOCKET}\r\n`, { timeoutMs: 20_000 });
    expect(r.timedOut).toBe(false);
    expect(r.responses.map((x) => x.status)).toEqual([400]);
  });

  it('a plain request on a fresh connection is still served', async () => {
    const res = await fetch(stack.mcpUrl, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: '{}' });
    expect(res.status).toBe(200);
  });
});
