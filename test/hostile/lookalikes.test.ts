// Identity-header look-alikes: CGI/WSGI servers (Python's wsgiref, many PHP and Ruby stacks) and some
// proxies read `x_mcp_auth_kind` and `X-MCP-Auth-Kind` as one header (HTTP_X_MCP_AUTH_KIND). Every
// spelling of a header the sidecar owns must be gone before the upstream sees the request, whatever
// the case and whatever the peer; client-address headers pass only from a trusted proxy.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeUpstream } from '../support/fake-upstreams.ts';
import { startEchoStack, type Stack } from '../support/stack.ts';
import { cgiView, exchange } from './raw-http.ts';
import { forgedIdentityHeaderNames } from '../support/identity-spellings.ts';

const SPOOFED: Array<[string, string]> = [
  ['x_mcp_auth_kind', 'master'],
  ['X_MCP_AUTH_SUBJECT', 'admin'],
  ['x_Mcp_Auth_Client_Id', 'victim-client'],
  ['x_mcp_auth_scope', 'admin:all'],
  ['X-MCP_Auth-Scope', 'admin:mixed'],
  ['x_forwarded_for', '6.6.6.6'],
  ['X_Forwarded_Host', 'evil.example'],
  ['x_forwarded_proto', 'https'],
  ['X-Real-IP', '6.6.6.7'],
  ['x_real_ip', '6.6.6.8'],
  ['True-Client-IP', '6.6.6.9'],
  ['true_client_ip', '6.6.6.10'],
  ['X-Client-IP', '6.6.6.11'],
  ['CF-Connecting-IP', '6.6.6.12'],
  ['Forwarded', 'for=6.6.6.13'],
  ['proxy_authorization', 'Basic dXNlcjpwYXNz'],
];

function rawRequest(host: string, token: string, headers: Array<[string, string]>): string {
  const lines = [
    `POST /mcp HTTP/1.1`,
    `Host: ${host}`,
    `Authorization: Bearer ${token}`,
    'Content-Type: application/json',
    'Content-Length: 2',
    'Connection: close',
  ];
  for (const [name, value] of headers) lines.push(`${name}: ${value}`);
  return `${lines.join('\r\n')}\r\n\r\n{}`;
}

describe('identity header look-alikes', () => {
  let echo: FakeUpstream;
  let stack: Stack;
  let token: string;
  let clientId: string;
  let port: number;
  let host: string;
  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ echo, stack, token, clientId, host, port, close } = await startEchoStack());
  });
  afterAll(() => close());

  it('no spelling of an owned header survives: the upstream sees only what the sidecar set', async () => {
    const { responses } = await exchange(port, rawRequest(host, token, SPOOFED));
    expect(responses[0]?.status).toBe(200);
    const seen = echo.seen.at(-1)!;
    const env = cgiView(seen.rawHeaders);
    expect(env.get('X_MCP_AUTH_KIND')).toEqual(['oauth']);
    expect(env.get('X_MCP_AUTH_SUBJECT')).toEqual([clientId]);
    expect(env.get('X_MCP_AUTH_CLIENT_ID')).toEqual([clientId]);
    // This token has no scope: the sidecar sets none, and no client-sent one may stand in for it.
    expect(env.get('X_MCP_AUTH_SCOPE')).toBeUndefined();
    expect(env.get('X_FORWARDED_FOR')).toEqual(['127.0.0.1']);
    expect(env.get('X_FORWARDED_HOST')).toEqual([host]);
    expect(env.get('X_FORWARDED_PROTO')).toEqual(['http']);
    for (const name of [
      'X_REAL_IP',
      'TRUE_CLIENT_IP',
      'X_CLIENT_IP',
      'CF_CONNECTING_IP',
      'FORWARDED',
      'PROXY_AUTHORIZATION',
      'AUTHORIZATION',
    ]) {
      expect(env.get(name), name).toBeUndefined();
    }
  });

  it('every -/_/. and case spelling of every identity name, set by the sidecar or not, is gone (proxy mode, as in examples/kubernetes)', async () => {
    const forged = forgedIdentityHeaderNames();
    const { responses } = await exchange(
      port,
      rawRequest(
        host,
        token,
        forged.map((name): [string, string] => [name, 'forged']),
      ),
    );
    expect(responses[0]?.status).toBe(200);
    const env = cgiView(echo.seen.at(-1)!.rawHeaders);
    const identity = [...env].filter(([name]) => name.startsWith('X_MCP_AUTH_'));
    expect(Object.fromEntries(identity)).toEqual({
      X_MCP_AUTH_KIND: ['oauth'],
      X_MCP_AUTH_SUBJECT: [clientId],
      X_MCP_AUTH_CLIENT_ID: [clientId],
    });
  });

  it('unrelated headers with underscores pass untouched', async () => {
    const { responses } = await exchange(
      port,
      rawRequest(host, token, [
        ['x_custom_trace', 'abc'],
        ['X_Request_Id', 'r-1'],
      ]),
    );
    expect(responses[0]?.status).toBe(200);
    const seen = echo.seen.at(-1)!;
    expect(seen.headers['x_custom_trace']).toBe('abc');
    expect(seen.headers['x_request_id']).toBe('r-1');
  });
});

describe('identity header look-alikes from a trusted proxy', () => {
  let echo: FakeUpstream;
  let stack: Stack;
  let token: string;
  let port: number;
  let host: string;
  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ echo, stack, token, host, port, close } = await startEchoStack({ config: { proxy: { trustedProxies: ['127.0.0.1'] } } }));
  });
  afterAll(() => close());

  it('the hyphen spellings a trusted proxy writes are kept; underscore spellings never are', async () => {
    const { responses } = await exchange(
      port,
      rawRequest(host, token, [
        ['X-Real-IP', '203.0.113.7'],
        ['X-Forwarded-For', '203.0.113.7'],
        ['x_real_ip', '6.6.6.6'],
        ['x_forwarded_for', '6.6.6.6'],
        ['x_mcp_auth_kind', 'master'],
      ]),
    );
    expect(responses[0]?.status).toBe(200);
    const env = cgiView(echo.seen.at(-1)!.rawHeaders);
    expect(env.get('X_REAL_IP')).toEqual(['203.0.113.7']);
    expect(env.get('X_FORWARDED_FOR')).toEqual(['203.0.113.7, 127.0.0.1']);
    expect(env.get('X_MCP_AUTH_KIND')).toEqual(['oauth']);
  });
});
