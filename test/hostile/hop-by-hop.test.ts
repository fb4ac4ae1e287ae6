// Hop-by-hop headers (RFC 9110 §7.6.1): the standard set, and whatever a client names in `Connection`,
// never reach the upstream; and a client's `Connection` naming the sidecar's own headers changes
// nothing of what the sidecar states. Raw sockets, so no client library tidies the request first.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeUpstream } from '../support/fake-upstreams.ts';
import { startEchoStack, type Stack } from '../support/stack.ts';
import { exchange } from './raw-http.ts';

function rawPost(host: string, token: string, headers: string[], body = '{}'): string {
  const lines = [
    `POST /mcp HTTP/1.1`,
    `Host: ${host}`,
    `Authorization: Bearer ${token}`,
    'Content-Type: application/json',
    `Content-Length: ${body.length}`,
    ...headers,
  ];
  return `${lines.join('\r\n')}\r\n\r\n${body}`;
}

describe('hop-by-hop headers', () => {
  let echo: FakeUpstream;
  let stack: Stack;
  let token: string;
  let clientId: string;
  let host: string;
  let port: number;
  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ echo, stack, token, clientId, host, port, close } = await startEchoStack());
  });
  afterAll(() => close());

  const sent = () => {
    const raw = echo.seen.at(-1)!.rawHeaders;
    const names = raw.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
    return { names, headers: echo.seen.at(-1)!.headers };
  };

  it('headers named in Connection and the standard hop-by-hop set are removed', async () => {
    const { responses, timedOut } = await exchange(
      port,
      rawPost(host, token, [
        'Connection: keep-alive, X-Session-Hint, Cookie',
        'Connection: close',
        'X-Session-Hint: for-this-hop-only',
        'Cookie: a=1',
        'Keep-Alive: timeout=5',
        'Proxy-Connection: keep-alive',
        'TE: trailers',
        'Trailer: X-Checksum',
        'X-End-To-End: kept',
      ]),
    );
    expect(responses[0]?.status).toBe(200);
    const { names, headers } = sent();
    for (const gone of ['x-session-hint', 'cookie', 'keep-alive', 'proxy-connection', 'te', 'trailer']) expect(names).not.toContain(gone);
    // What reaches the upstream is the sidecar's own connection management, never the client's list.
    expect(headers.connection ?? 'keep-alive').toMatch(/^(keep-alive|close)$/i);
    expect(headers['x-end-to-end']).toBe('kept');
    // The client asked to close: the upstream's keep-alive answer does not keep the client's connection open.
    expect(timedOut).toBe(false);
    expect(responses[0]!.headers.connection).toBe('close');
    expect(responses[0]!.headers['keep-alive']).toBeUndefined();
  });

  it('Connection naming the identity and forwarding headers cannot remove or change what the sidecar sets', async () => {
    const { responses } = await exchange(
      port,
      rawPost(host, token, [
        'Connection: X-MCP-Auth-Kind, x-mcp-auth-subject, X-MCP-Auth-Client-Id, X-Forwarded-For, X-Forwarded-Host, X-Forwarded-Proto, close',
      ]),
    );
    expect(responses[0]?.status).toBe(200);
    const { names, headers } = sent();
    expect(headers['x-mcp-auth-kind']).toBe('oauth');
    expect(headers['x-mcp-auth-subject']).toBe(clientId);
    expect(headers['x-mcp-auth-client-id']).toBe(clientId);
    expect(headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(headers['x-forwarded-host']).toBe(host);
    expect(headers['x-forwarded-proto']).toBe('http');
    // The upstream (or any proxy after it) gets no Connection list that would strip them on the next hop.
    expect(String(headers.connection ?? '')).not.toMatch(/x-mcp-auth|x-forwarded/i);
    expect(names.filter((n) => n === 'x-mcp-auth-kind')).toHaveLength(1);
  });

  it('Connection cannot remove the framing: the body still arrives whole', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
    const { responses } = await exchange(port, rawPost(host, token, ['Connection: Content-Length, Transfer-Encoding, Host, close'], body));
    expect(responses[0]?.status).toBe(200);
    expect(echo.seen.at(-1)!.bodyBytes).toBe(body.length);
  });
});
