// The pure helpers of src/proxy/: hop-by-hop headers, identity header values, the Host/Origin check
// and handle ownership. Each table's inputs are shapes real peers send; where each comes from is said
// above its table.

import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import type { Principal } from '../../src/model/credentials.ts';
import { HttpError } from '../../src/http/errors.ts';
import { handleDigest, handleOwner, unknownSession, UNKNOWN_SESSION } from '../../src/proxy/handles.ts';
import { connectionOptions, isHopByHop, removeHopByHop } from '../../src/proxy/hop-by-hop.ts';
import { createHostCheck, type HostCheckOptions } from '../../src/proxy/host-check.ts';
import { identityHeaderValue } from '../../src/proxy/identity-value.ts';
import { subjectDigest } from '../../src/store/records.ts';

describe('hop-by-hop headers (RFC 9110 §7.6.1)', () => {
  // `Connection` values as peers send them: `keep-alive`/`close` (HTTP/1.0 and 1.1 clients, Node's
  // own agent sends `keep-alive`), an h2c upgrade request (HTTP/2 over cleartext,
  // RFC 7540 §3.2: `Upgrade, HTTP2-Settings`), a WebSocket handshake (`Upgrade` from browsers), and a
  // hostile client naming headers the sidecar must keep or sets itself.
  it.each<[string, string, string[]]>([
    ['keep-alive (nothing to parse)', 'keep-alive', []],
    ['close', 'close', []],
    ['capitalised as some clients send it', 'Keep-Alive', []],
    ['an h2c upgrade', 'Upgrade, HTTP2-Settings', ['upgrade', 'http2-settings']],
    ['a WebSocket handshake', 'keep-alive, Upgrade', ['keep-alive', 'upgrade']],
    ['a client naming an identity header', 'close, X-MCP-Auth-Subject', ['close', 'x-mcp-auth-subject']],
    ['framing headers are never removed on a client’s say-so', 'close, Content-Length, Transfer-Encoding, Host', ['close']],
    ['empty list elements (RFC 9110 §5.6.1) are skipped', ' , ,TE,', ['te']],
  ])('Connection: %s', (_label, value, expected) => {
    expect(connectionOptions(value)).toEqual(expected);
  });

  it.each<[string, boolean]>([
    ['connection', true],
    ['keep-alive', true],
    ['proxy-connection', true],
    ['te', true],
    ['trailer', true],
    ['upgrade', true],
    ['transfer-encoding', false],
    ['content-length', false],
    ['authorization', false],
    ['mcp-session-id', false],
  ])('%s is hop-by-hop: %s', (name, expected) => {
    expect(isHopByHop(name)).toBe(expected);
  });

  it('removes the standard set and what Connection names, keeping framing and end-to-end headers', () => {
    // A request as Node parses it (lowercase names), from a client that tries to strip what it names.
    const headers: IncomingHttpHeaders = {
      host: 'mcp.example.com',
      connection: 'keep-alive, X-MCP-Auth-Subject, Content-Length',
      'keep-alive': 'timeout=5',
      te: 'trailers',
      'x-mcp-auth-subject': 'forged',
      'content-length': '42',
      'content-type': 'application/json',
      'mcp-session-id': 'a1b2',
    };
    removeHopByHop(headers);
    expect(headers).toEqual({
      host: 'mcp.example.com',
      'content-length': '42',
      'content-type': 'application/json',
      'mcp-session-id': 'a1b2',
    });
  });
});

describe('identity header values', () => {
  // Subjects and client ids as IdPs and this sidecar issue them: Google (numeric `sub`), Auth0
  // (`provider|id`), Okta (`00u…`), Microsoft Entra ID (base64url `sub`), an email-shaped subject,
  // this sidecar's client ids (`mcp_` + 32 hex); then what a JWT's JSON string may hold that a header
  // may not: leading/trailing spaces, `%`, non-ASCII, CR LF, a lone surrogate.
  it.each<[string, string, string]>([
    ['Google', '110248495921238986420', '110248495921238986420'],
    ['Auth0', 'auth0|5f7c8ec7c33c6c004bbafe82', 'auth0|5f7c8ec7c33c6c004bbafe82'],
    ['Auth0 social', 'google-oauth2|103547991597142817347', 'google-oauth2|103547991597142817347'],
    ['Okta', '00u1abcd2EFGHijkl3m4', '00u1abcd2EFGHijkl3m4'],
    ['Entra ID', 'AAAAAAAAAAAAAAAAAAAAAIkzqFVrSaSaFHy782bbtaQ', 'AAAAAAAAAAAAAAAAAAAAAIkzqFVrSaSaFHy782bbtaQ'],
    ['an email', 'alice@example.com', 'alice@example.com'],
    ['a client id', 'mcp_0123456789abcdef0123456789abcdef', 'mcp_0123456789abcdef0123456789abcdef'],
    ['an inner space is printable', 'Alice Example', 'Alice Example'],
    ['a leading space', ' alice', '%20alice'],
    ['a trailing space', 'alice ', 'alice%20'],
    ['a % (so that a value with % is always an encoding)', '100%', '100%25'],
    ['non-ASCII, as UTF-8', 'José', 'Jos%C3%A9'],
    ['header injection', 'alice\r\nX-MCP-Auth-Subject: root', 'alice%0D%0AX-MCP-Auth-Subject%3A%20root'],
    ['empty', '', ''],
  ])('%s', (_label, value, expected) => {
    const written = identityHeaderValue(value);
    expect(written).toBe(expected);
    expect(written).toMatch(/^[\x20-\x7e]*$/);
    expect(decodeURIComponent(written)).toBe(value);
  });

  it('a lone surrogate does not throw: written as the UTF-8 of U+FFFD', () => {
    expect(identityHeaderValue('a\ud800')).toBe('a%EF%BF%BD');
  });

  it('two subjects never give the same header', () => {
    const subjects = ['a b', 'a%20b', 'a%2520b', ' a', '%20a', 'a', 'José', 'Jos%C3%A9'];
    expect(new Set(subjects.map(identityHeaderValue)).size).toBe(subjects.length);
  });
});

describe('Host and Origin check (DNS rebinding)', () => {
  const request = (host: string | undefined, origin?: string): IncomingMessage =>
    ({ headers: { ...(host !== undefined ? { host } : {}), ...(origin !== undefined ? { origin } : {}) } }) as IncomingMessage;
  const outcome = (check: ReturnType<typeof createHostCheck>, req: IncomingMessage, host?: string): string => {
    try {
      check(req, host);
      return 'ok';
    } catch (err) {
      return err instanceof HttpError ? `${err.status} ${err.code}` : 'other';
    }
  };

  // A deployment behind an ingress: PUBLIC_URL set, listening on every interface, an in-cluster
  // service name and a web app's origin allowed. Host values as RFC 9110 §7.2 writes them (a port or
  // none, any case); Origin values as browsers serialise them (RFC 6454 §6.1), `null` from a
  // sandboxed frame or a file:// page.
  const deployed: HostCheckOptions = {
    publicUrl: 'https://mcp.example.com',
    listenHost: '0.0.0.0',
    allowedHosts: ['mcp-sidecar.tools.svc:8080'],
    allowedOrigins: ['https://app.example.com/'],
  };
  it.each<[string, string | undefined, string | undefined, string]>([
    ['PUBLIC_URL’s host', 'mcp.example.com', undefined, 'ok'],
    ['with a port, upper case', 'MCP.EXAMPLE.COM:443', undefined, 'ok'],
    ['an allowed host, its port not compared', 'mcp-sidecar.tools.svc:9999', undefined, 'ok'],
    ['localhost is not this deployment', 'localhost:8080', undefined, '421 misdirected_request'],
    ['a rebinding attacker’s name', 'attacker.example', undefined, '421 misdirected_request'],
    ['a suffix of the public host', 'mcp.example.com.attacker.example', undefined, '421 misdirected_request'],
    ['no Host at all', undefined, undefined, '421 misdirected_request'],
    ['PUBLIC_URL’s origin', 'mcp.example.com', 'https://mcp.example.com', 'ok'],
    ['an allowed origin (its trailing / in the configuration ignored)', 'mcp.example.com', 'https://app.example.com', 'ok'],
    ['an origin in another case', 'mcp.example.com', 'https://APP.example.com', 'ok'],
    ['the same host over http', 'mcp.example.com', 'http://mcp.example.com', '403 forbidden'],
    ['an opaque origin', 'mcp.example.com', 'null', '403 forbidden'],
    ['a loopback origin, not allowed here', 'mcp.example.com', 'http://localhost:3000', '403 forbidden'],
  ])('deployed: %s', (_label, host, origin, expected) => {
    expect(outcome(createHostCheck(deployed), request(host, origin))).toBe(expected);
  });

  // The default local set-up: no PUBLIC_URL, listening on loopback (what `npm start` and the demo do).
  const local: HostCheckOptions = { publicUrl: undefined, listenHost: '127.0.0.1', allowedHosts: [], allowedOrigins: [] };
  it.each<[string, string | undefined, string | undefined, string]>([
    ['localhost', 'localhost:8080', undefined, 'ok'],
    ['127.0.0.1', '127.0.0.1:8080', undefined, 'ok'],
    ['[::1]', '[::1]:8080', undefined, 'ok'],
    ['another name', 'mcp.example.com', undefined, '421 misdirected_request'],
    ['a LAN address', '192.168.1.20:8080', undefined, '421 misdirected_request'],
    ['a loopback origin (a local web inspector)', 'localhost:8080', 'http://localhost:6274', 'ok'],
    ['a 127.0.0.1 origin', 'localhost:8080', 'http://127.0.0.1:5173', 'ok'],
    ['a web page elsewhere', 'localhost:8080', 'https://attacker.example', '403 forbidden'],
    ['a file:// page', 'localhost:8080', 'file://', '403 forbidden'],
  ])('local: %s', (_label, host, origin, expected) => {
    expect(outcome(createHostCheck(local), request(host, origin))).toBe(expected);
  });

  it('a Host accepted once is remembered, its Origin still checked on every request', () => {
    const check = createHostCheck(deployed);
    expect(outcome(check, request('mcp.example.com'))).toBe('ok');
    expect(outcome(check, request('mcp.example.com', 'https://attacker.example'))).toBe('403 forbidden');
  });

  it('the Host a forward-auth ingress states is the one checked, not the request’s own', () => {
    const check = createHostCheck(deployed);
    expect(outcome(check, request('mcp-sidecar.tools.svc:8080'), 'attacker.example')).toBe('421 misdirected_request');
    expect(outcome(check, request('attacker.example'), 'mcp.example.com')).toBe('ok');
  });
});

describe('handle ownership', () => {
  it('a handle is stored as the SHA-256 hex of its value', () => {
    // An MCP SDK session id (a UUID) as the TypeScript SDK's Streamable HTTP server generates it.
    const session = '3f2a7c1e-9b4d-4e8a-b6f1-0c2d5e7a9b13';
    expect(handleDigest(session)).toBe(createHash('sha256').update(session).digest('hex'));
    expect(handleDigest('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  // The principals the credential model produces (src/model/credentials.ts, decideToken): a user-grade
  // token from token exchange, an OAuth token of client_credentials (its subject is its client id),
  // an OAuth token from browser sign-in (an IdP user through a client), the master token.
  const CLIENT = 'mcp_0123456789abcdef0123456789abcdef';
  it.each<[string, Principal, { id: string; clientId?: string; subjectHash?: string }]>([
    ['a user-grade token', { kind: 'user', subject: 'alice' }, { id: '["user","alice",null]', subjectHash: subjectDigest('alice') }],
    [
      'client_credentials',
      { kind: 'oauth', subject: CLIENT, clientId: CLIENT },
      { id: `["oauth","${CLIENT}","${CLIENT}"]`, clientId: CLIENT },
    ],
    [
      'a signed-in user through a client',
      { kind: 'oauth', subject: 'alice', clientId: CLIENT },
      { id: `["oauth","alice","${CLIENT}"]`, clientId: CLIENT, subjectHash: subjectDigest('alice') },
    ],
    ['the master token', { kind: 'master', subject: 'master' }, { id: '["master","master",null]' }],
  ])('%s', (_label, principal, expected) => {
    expect(handleOwner(principal)).toEqual(expected);
  });

  it('owners differ by kind, subject and client, and no subject can forge another’s id', () => {
    const owners = [
      handleOwner({ kind: 'user', subject: 'alice' }),
      handleOwner({ kind: 'oauth', subject: 'alice', clientId: CLIENT }),
      handleOwner({ kind: 'oauth', subject: 'alice', clientId: 'mcp_ffffffffffffffffffffffffffffffff' }),
      handleOwner({ kind: 'oauth', subject: 'bob', clientId: CLIENT }),
      // A subject shaped like the serialised tail of another owner.
      handleOwner({ kind: 'user', subject: `alice","${CLIENT}` }),
      handleOwner({ kind: 'oauth', subject: 'alice', clientId: 'x' }),
    ];
    expect(new Set(owners.map((o) => o.id)).size).toBe(owners.length);
  });

  it('another caller’s session is answered as the MCP SDK answers an unknown one', () => {
    const err = unknownSession();
    expect([err.status, JSON.parse(err.body!)]).toEqual([404, { jsonrpc: '2.0', error: UNKNOWN_SESSION, id: null }]);
  });
});
