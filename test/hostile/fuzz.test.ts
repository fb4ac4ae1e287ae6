// 10,000 random requests from fast-check, written raw over keep-alive sockets: random methods, paths,
// header names and values (any byte), Authorization variants (valid, master, revoked, unknown, mutated,
// doubled), protocol upgrades (WebSocket, h2c), framings and bodies. Properties: the process never crashes or answers 500, and no response
// is 2xx unless the request carried exactly one Authorization header holding a valid token; no upgrade
// request is answered 1xx or 2xx; every request the upstream sees carries the sidecar's identity
// headers and no Authorization or Upgrade.

import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEchoUpstream, type FakeUpstream } from '../support/fake-upstreams.ts';
import { PROBE_HEADERS } from '../../src/proxy/upstream-check.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { RawConnection, type RawResponse } from './raw-http.ts';

const BATCH = 100;
const RUNS = 100; // BATCH * RUNS = 10,000 requests
const WORKERS = 8;

interface Tokens {
  valid: string;
  master: string;
  revoked: string;
}

type AuthSpec =
  | { kind: 'none' }
  | { kind: 'valid' | 'master' | 'revoked' | 'unknown'; scheme: string; pad: string }
  | { kind: 'mutated'; at: number; char: string }
  | { kind: 'suffixed'; suffix: string }
  | { kind: 'raw'; value: string }
  | { kind: 'double'; first: 'valid' | 'unknown' | 'master'; second: 'valid' | 'unknown' | 'master' };

interface FuzzRequest {
  method: string;
  path: string;
  auth: AuthSpec;
  headers: Array<[string, string]>;
  framing: 'none' | 'length' | 'chunked' | 'short-length';
  body: string;
  version: string;
  upgrade: 'none' | 'websocket' | 'h2c' | 'bare';
}

// Protocol upgrade requests (MCP has none): the sidecar must answer them at once and close, never forward.
const UPGRADES: Record<FuzzRequest['upgrade'], string[]> = {
  none: [],
  websocket: ['Connection: Upgrade', 'Upgrade: websocket', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version: 13'],
  h2c: ['Connection: Upgrade, HTTP2-Settings', 'Upgrade: h2c', 'HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA'],
  bare: ['Upgrade: websocket'],
};

const latin1 = (max: number) => fc.string({ unit: fc.integer({ min: 0, max: 255 }).map((c) => String.fromCharCode(c)), maxLength: max });
const printable = (max: number) =>
  fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: max });
const hex64 = fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: 64, maxLength: 64 });

const authArb: fc.Arbitrary<AuthSpec> = fc.oneof(
  { weight: 2, arbitrary: fc.constant({ kind: 'none' as const }) },
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constantFrom('valid' as const, 'master' as const, 'revoked' as const, 'unknown' as const),
      scheme: fc.constantFrom('Bearer', 'bearer', 'BEARER', 'Bearer ', 'Basic', 'Bearer\t', 'Token', ''),
      pad: fc.constantFrom('', ' ', '\t', 'x', '\u00a0'),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('mutated' as const), at: fc.nat(63), char: latin1(1).filter((c) => c.length === 1) }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('suffixed' as const), suffix: latin1(4).filter((s) => s.length > 0) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('raw' as const), value: latin1(80) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('double' as const),
      first: fc.constantFrom('valid' as const, 'unknown' as const, 'master' as const),
      second: fc.constantFrom('valid' as const, 'unknown' as const, 'master' as const),
    }),
  },
);

const headerName = fc.oneof(
  fc.constantFrom(
    'Content-Type',
    'X-MCP-Auth-Kind',
    'X-MCP-Auth-Subject',
    'x_mcp_auth_kind',
    'X_MCP_AUTH_CLIENT_ID',
    'x_mcp_auth_scope',
    'X-Forwarded-For',
    'x_forwarded_for',
    'X-Real-IP',
    'true_client_ip',
    'proxy_authorization',
    'Forwarded',
    'Mcp-Session-Id',
    'Last-Event-ID',
    'Connection',
    'Keep-Alive',
    'Proxy-Connection',
    'Trailer',
    'Expect',
    'TE',
    'Upgrade',
    'Cookie',
    'Host',
    'Content-Length',
    'Transfer-Encoding',
    'authorization',
    'Proxy-Authorization',
  ),
  printable(12).filter((s) => s.length > 0),
  latin1(8).filter((s) => s.length > 0),
);
const headerValue = fc.oneof(
  latin1(40),
  fc.constantFrom(
    '0',
    '-1',
    'abc',
    'chunked',
    'gzip',
    'identity',
    'close',
    'keep-alive',
    '100-continue',
    'websocket',
    'h2c',
    'upgrade',
    'Upgrade, HTTP2-Settings',
    'master',
    'user',
    // Connection option lists naming headers the sidecar sets or needs (hop-by-hop removal must not touch them).
    'x-mcp-auth-kind',
    'keep-alive, X-MCP-Auth-Subject, X-Forwarded-For',
    'close, Content-Length',
    'Transfer-Encoding, x-mcp-auth-client-id',
  ),
);

const requestArb: fc.Arbitrary<FuzzRequest> = fc.record({
  method: fc.oneof(
    fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD'),
    printable(8).filter((s) => s.length > 0),
  ),
  path: fc.oneof(
    fc.constantFrom(
      '/mcp',
      '/mcp?x=1',
      '/mcp?access_token=TOKEN',
      '/health',
      '/mcp/',
      '//mcp',
      '/MCP',
      '/mcp%00',
      '/mcp#f',
      '*',
      '/mcp/../mcp',
    ),
    printable(30).map((s) => `/x${s}`),
  ),
  auth: authArb,
  headers: fc.array(fc.tuple(headerName, headerValue), { maxLength: 8 }),
  framing: fc.constantFrom('none' as const, 'length' as const, 'chunked' as const, 'short-length' as const),
  body: latin1(200),
  version: fc.constantFrom('HTTP/1.1', 'HTTP/1.1', 'HTTP/1.1', 'HTTP/1.0', 'HTTP/2.0', 'HTTP/1.1 '),
  upgrade: fc.constantFrom(
    'none' as const,
    'none' as const,
    'none' as const,
    'none' as const,
    'none' as const,
    'none' as const,
    'websocket' as const,
    'h2c' as const,
    'bare' as const,
  ),
});

function tokenOf(kind: 'valid' | 'master' | 'revoked' | 'unknown', t: Tokens, unknown: string): string {
  return kind === 'unknown' ? unknown : t[kind];
}

/** The raw bytes, and whether this request presents exactly one Authorization header with a usable token. */
function render(r: FuzzRequest, t: Tokens, unknown: string): { bytes: Buffer; authorized: boolean } {
  const lines: string[] = [`${r.method} ${r.path.replace('TOKEN', t.valid)} ${r.version}`, 'Host: fuzz'];
  const auths: string[] = [];
  switch (r.auth.kind) {
    case 'none':
      break;
    case 'valid':
    case 'master':
    case 'revoked':
    case 'unknown':
      auths.push(`${r.auth.scheme} ${tokenOf(r.auth.kind, t, unknown)}${r.auth.pad}`);
      break;
    case 'mutated': {
      const v = t.valid;
      auths.push(`Bearer ${v.slice(0, r.auth.at)}${r.auth.char}${v.slice(r.auth.at + 1)}`);
      break;
    }
    case 'suffixed':
      auths.push(`Bearer ${t.valid}${r.auth.suffix}`);
      break;
    case 'raw':
      auths.push(r.auth.value);
      break;
    case 'double':
      auths.push(`Bearer ${tokenOf(r.auth.first, t, unknown)}`, `Bearer ${tokenOf(r.auth.second, t, unknown)}`);
      break;
  }
  for (const a of auths) lines.push(`Authorization: ${a}`);
  lines.push(...UPGRADES[r.upgrade]);
  for (const [name, value] of r.headers) lines.push(`${name}: ${value}`);
  let body = '';
  if (r.framing === 'length') {
    lines.push(`Content-Length: ${Buffer.byteLength(r.body, 'latin1')}`);
    body = r.body;
  } else if (r.framing === 'short-length') {
    lines.push(`Content-Length: ${Math.floor(Buffer.byteLength(r.body, 'latin1') / 2)}`);
    body = r.body;
  } else if (r.framing === 'chunked') {
    lines.push('Transfer-Encoding: chunked');
    body = r.body.length > 0 ? `${Buffer.byteLength(r.body, 'latin1').toString(16)}\r\n${r.body}\r\n0\r\n\r\n` : '0\r\n\r\n';
  }
  const bytes = Buffer.from(`${lines.join('\r\n')}\r\n\r\n${body}`, 'latin1');

  // Every Authorization header as the server would see it: the name matched case-insensitively, the
  // value without surrounding optional whitespace (RFC 9110 §5.5).
  const presented: string[] = [];
  for (const a of auths) presented.push(a);
  for (const [name, value] of r.headers) if (name.toLowerCase() === 'authorization') presented.push(value);
  const usable = new Set([t.valid, t.master]);
  let authorized = false;
  if (presented.length === 1) {
    const value = presented[0]!.replace(/^[ \t]+|[ \t]+$/g, '');
    const m = /^bearer ([0-9a-f]{64})$/i.exec(value);
    authorized = m !== null && usable.has(m[1]!);
  }
  return { bytes, authorized };
}

describe('fuzzing the proxy listener (fast-check, 10,000 raw requests)', () => {
  let echo: FakeUpstream;
  let stack: Stack;
  let port: number;
  let tokens: Tokens;
  const tally = new Map<number | 'closed', number>();

  beforeAll(async () => {
    echo = await startEchoUpstream();
    stack = await startStack({
      upstreamUrl: echo.url,
      config: { proxy: { headersTimeoutMs: 2000, requestTimeoutMs: 3000, allowedHosts: ['fuzz'] } },
    });
    port = Number(new URL(stack.proxyUrl).port);
    const valid = await stack.issueOAuthToken();
    const revoked = await stack.issueOAuthToken();
    expect((await stack.admin('deleteClient', { clientId: revoked.clientId })).status).toBe(200);
    tokens = { valid: valid.token, master: stack.masterToken, revoked: revoked.token };
  });
  afterAll(async () => {
    await stack.close();
    await echo.close();
  });

  it('never crashes, never 500, never 2xx without exactly one valid token', async () => {
    const pool: RawConnection[] = [];
    const failures: string[] = [];
    let sent = 0;

    async function runOne(conn: { c: RawConnection | undefined }, r: FuzzRequest): Promise<void> {
      const { bytes, authorized } = render(r, tokens, '0'.repeat(64));
      if (!conn.c || !conn.c.usable) conn.c = await RawConnection.open(port);
      const res: RawResponse | 'closed' = await conn.c.request(bytes);
      sent++;
      const status = res === 'closed' ? 'closed' : res.status;
      tally.set(status, (tally.get(status) ?? 0) + 1);
      if (res === 'closed') {
        conn.c = undefined;
        return;
      }
      if (res.status >= 500 && res.status !== 502 && res.status !== 503 && res.status !== 504)
        failures.push(`${res.status} for ${JSON.stringify(bytes.toString('latin1'))}`);
      if (res.status >= 200 && res.status < 300 && !authorized)
        failures.push(`${res.status} without a valid token for ${JSON.stringify(bytes.toString('latin1'))}`);
      const upgrading = r.upgrade !== 'none' || r.headers.some(([name]) => name.toLowerCase() === 'upgrade');
      if (upgrading && res.status < 300) failures.push(`${res.status} to an upgrade request ${JSON.stringify(bytes.toString('latin1'))}`);
      // Whatever happened, the next request on this connection starts clean only if the server kept it.
      if (res.headers.connection?.toLowerCase() === 'close') conn.c = undefined;
    }

    await fc.assert(
      fc.asyncProperty(fc.array(requestArb, { minLength: BATCH, maxLength: BATCH }), async (batch) => {
        const queue = [...batch];
        const before = failures.length;
        await Promise.all(
          Array.from({ length: WORKERS }, async () => {
            const conn: { c: RawConnection | undefined } = { c: undefined };
            for (let r = queue.shift(); r !== undefined; r = queue.shift()) {
              // One request per connection when the previous one may have left it mid-message.
              await runOne(conn, r);
              if (r.framing === 'short-length' || r.version !== 'HTTP/1.1') {
                conn.c?.close();
                conn.c = undefined;
              }
            }
            if (conn.c) pool.push(conn.c);
          }),
        );
        return failures.length === before;
      }),
      { numRuns: RUNS, seed: 20250501, endOnFailure: true },
    );
    for (const c of pool) c.close();

    expect(failures.slice(0, 5)).toEqual([]);
    expect(sent).toBe(BATCH * RUNS);
    // Everything the upstream received was authorized by the sidecar, and carried no credential.
    // Fuzzed `/health` requests make the sidecar probe the upstream on its own behalf: exactly the
    // probe's headers (no credential, no identity) and nothing else; every other request must be authorized.
    const isProbe = (h: Record<string, unknown>) =>
      Object.keys(h).sort().join() === 'accept,connection,host,user-agent' && h['user-agent'] === PROBE_HEADERS['user-agent'];
    for (const seen of echo.seen.filter((s) => !isProbe(s.headers))) {
      expect(['user', 'oauth', 'master']).toContain(seen.headers['x-mcp-auth-kind']);
      expect(seen.headers.authorization).toBeUndefined();
      // Hop-by-hop headers stop at the sidecar; the upstream connection is the sidecar's own.
      for (const hop of ['keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade']) expect(seen.headers[hop]).toBeUndefined();
      expect(String(seen.headers.connection ?? 'keep-alive')).toMatch(/^(keep-alive|close)$/);
      // No underscore spelling of an identity, address or credential header (CGI reads them as the real one).
      expect(
        Object.keys(seen.headers).filter((n) => /^(x_mcp_auth_|x_forwarded_|x_real_ip$|true_client_ip$|proxy_authorization$)/.test(n)),
      ).toEqual([]);
    }
    // Still serving, and no handler ever failed unexpectedly.
    const ok = await fetch(stack.mcpUrl, { method: 'POST', headers: { authorization: `Bearer ${tokens.valid}` }, body: '{}' });
    expect(ok.status).toBe(200);
    expect(stack.logs.filter((l) => l.includes('unexpected error'))).toEqual([]);
    // For the record: how the 10,000 were answered.
    console.log(
      [...tally.entries()]
        .sort((a, b) => b[1] - a[1])
        .map(([s, n]) => `${s}: ${n}`)
        .join(', '),
    );
  }, 60_000);
});
