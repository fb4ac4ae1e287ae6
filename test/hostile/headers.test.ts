// Hostile headers on raw sockets: oversized headers (431), slowloris on headers and on bodies (cut by
// proxy.headersTimeoutMs / proxy.requestTimeoutMs while an established SSE stream lives on), duplicate
// Authorization headers, and Unicode or control characters in and around tokens. Nothing unauthorized
// is ever forwarded, nothing is ever 2xx without the one valid token.

import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveOnLoopback } from '../support/fake-upstreams.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { exchange, RawConnection } from './raw-http.ts';
import { countedOnce } from '../support/requests-counted.ts';

const HEADERS_TIMEOUT_MS = 500;
const REQUEST_TIMEOUT_MS = 1500;
/** Generous slack on a loaded machine; the point is "cut within seconds", not "never". */
const SLACK_MS = 3000;

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  bodyBytes: number;
  complete: boolean;
  /** Resolves when the upstream's side of the request is closed (finished or torn down). */
  closed: Promise<void>;
}

/** GET -> an SSE stream the test writes to; anything else -> echo after reading the whole body. */
async function startMixedUpstream() {
  const seen: Seen[] = [];
  const streams: ServerResponse[] = [];
  const streamWaiters: Array<(r: ServerResponse) => void> = [];
  const server: Server = createServer((req, res) => {
    const closed = new Promise<void>((resolve) => res.once('close', () => resolve()));
    const entry: Seen = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, bodyBytes: 0, complete: false, closed };
    seen.push(entry);
    if (req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: open\n\n');
      const w = streamWaiters.shift();
      if (w) w(res);
      else streams.push(res);
      return;
    }
    req.on('data', (c: Buffer) => (entry.bodyBytes += c.length));
    req.on('end', () => {
      entry.complete = true;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    });
  });
  const { url, close } = await serveOnLoopback(server);
  return {
    url,
    seen,
    nextStream: () => (streams.length > 0 ? Promise.resolve(streams.shift()!) : new Promise<ServerResponse>((r) => streamWaiters.push(r))),
    close,
  };
}

/** Writes `head`, then one `drip` every `everyMs` until the server closes; resolves with what it sent back. */
function slowloris(port: number, head: string, drip: string, everyMs: number): Promise<{ reply: string; ms: number }> {
  return new Promise((resolve) => {
    const started = performance.now();
    const socket = connect({ port, host: '127.0.0.1' });
    let reply = '';
    let timer: NodeJS.Timeout | undefined;
    socket.on('connect', () => {
      socket.write(head);
      timer = setInterval(() => socket.write(drip), everyMs);
    });
    socket.on('data', (c: Buffer) => (reply += c.toString('latin1')));
    const done = () => {
      clearInterval(timer);
      socket.destroy();
      resolve({ reply, ms: performance.now() - started });
    };
    socket.on('end', done);
    socket.on('close', done);
    socket.on('error', done);
  });
}

describe('hostile headers', () => {
  let upstream: Awaited<ReturnType<typeof startMixedUpstream>>;
  let stack: Stack;
  let port: number;
  let token: string;

  beforeAll(async () => {
    upstream = await startMixedUpstream();
    stack = await startStack({
      upstreamUrl: upstream.url,
      // The raw requests name `Host: x`, a host this sidecar is told it answers for.
      config: { proxy: { headersTimeoutMs: HEADERS_TIMEOUT_MS, requestTimeoutMs: REQUEST_TIMEOUT_MS, allowedHosts: ['x'] } },
    });
    port = Number(new URL(stack.proxyUrl).port);
    ({ token } = await stack.issueOAuthToken());
  });
  afterAll(async () => {
    await stack.close();
    await upstream.close();
  });

  const request = (headers: string, body = '', method = 'POST') =>
    `${method} /mcp HTTP/1.1\r\nHost: x\r\n${headers}Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;

  async function statusOf(bytes: string | Buffer): Promise<number> {
    const { responses } = await exchange(port, bytes);
    return responses[0]?.status ?? 0;
  }

  describe('oversized headers: 431', () => {
    const big = (n: number) => 'a'.repeat(n);
    it.each([
      ['one 20 KiB header', () => request(`Authorization: Bearer ${token}\r\nX-Big: ${big(20 * 1024)}\r\n`)],
      [
        '1000 small headers',
        () => request(`Authorization: Bearer ${token}\r\n${Array.from({ length: 1000 }, (_, i) => `X-H${i}: ${big(20)}\r\n`).join('')}`),
      ],
      ['a 20 KiB Authorization value', () => request(`Authorization: Bearer ${big(20 * 1024)}\r\n`)],
      [
        'a 20 KiB URL',
        () => `GET /mcp?${big(20 * 1024)} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nConnection: close\r\n\r\n`,
      ],
    ])('%s', async (_name, build) => {
      const before = upstream.seen.length;
      // Node answers before any request object exists: still counted once, as a refusal under its code.
      const status = await countedOnce(stack.adminUrl, { outcome: 'refused', reason: 'request_header_fields_too_large' }, () =>
        statusOf(build()),
      );
      expect(status).toBe(431);
      expect(upstream.seen.length).toBe(before);
      // and an access line for it, with what is known: no method, path or principal.
      const last = JSON.parse(stack.logs.filter((l) => l.includes('"msg":"request"')).at(-1)!) as Record<string, unknown>;
      expect(last).toMatchObject({ status: 431, outcome: 'refused', reason: 'request_header_fields_too_large' });
      expect(Object.keys(last)).not.toContain('method');
    });

    it('just under the limit is fine', async () => {
      expect(await statusOf(request(`Authorization: Bearer ${token}\r\nX-Big: ${big(12 * 1024)}\r\n`, '{}'))).toBe(200);
    });
  });

  it('slowloris on headers and on bodies is cut by the timeouts; an established SSE stream is not', async () => {
    // The stream is open before the attack and idle during it.
    const sse = connect({ port, host: '127.0.0.1' });
    await once(sse, 'connect');
    let streamed = '';
    const gotEvent = (text: string) =>
      new Promise<void>((resolve) => {
        const check = () => {
          if (streamed.includes(text)) {
            sse.off('data', check);
            resolve();
          }
        };
        sse.on('data', check);
        check();
      });
    sse.on('data', (c: Buffer) => (streamed += c.toString('latin1')));
    sse.write(`GET /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nAccept: text/event-stream\r\n\r\n`);
    const upstreamStream = await upstream.nextStream();
    await gotEvent('data: open');
    let sseClosed = false;
    sse.on('close', () => (sseClosed = true));

    const forwardedBefore = upstream.seen.length;
    const attacks = await Promise.all([
      // Headers that never end, one more header every 100 ms.
      ...Array.from({ length: 5 }, () => slowloris(port, 'GET /mcp HTTP/1.1\r\nHost: x\r\n', 'X-Slow: 1\r\n', 100)),
      // A request line that never ends, one byte every 100 ms.
      slowloris(port, 'GET /mcp?', 'a', 100),
      // An authorized POST whose declared body trickles in: 1 byte every 100 ms of 100000.
      ...Array.from({ length: 3 }, () =>
        slowloris(port, `POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Length: 100000\r\n\r\n`, 'x', 100),
      ),
      // The same, chunked.
      slowloris(
        port,
        `POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nTransfer-Encoding: chunked\r\n\r\n`,
        '1\r\nx\r\n',
        100,
      ),
    ]);
    const headerAttacks = attacks.slice(0, 6);
    const bodyAttacks = attacks.slice(6);
    for (const a of headerAttacks) {
      expect(a.reply).toMatch(/^HTTP\/1\.1 408 /);
      expect(a.ms).toBeLessThan(HEADERS_TIMEOUT_MS + SLACK_MS);
    }
    for (const a of bodyAttacks) {
      expect(a.reply === '' || /^HTTP\/1\.1 408 /.test(a.reply)).toBe(true);
      expect(a.ms).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 100);
      expect(a.ms).toBeLessThan(REQUEST_TIMEOUT_MS + SLACK_MS);
    }
    // A trickling body of a declared length within the bound the sidecar reads whole (to find the tasks
    // it names) never reached the upstream; the chunked one reached it as an incomplete request, torn
    // down with it.
    const slowPosts = upstream.seen.slice(forwardedBefore).filter((s) => s.method === 'POST');
    expect(slowPosts).toHaveLength(1);
    for (const p of slowPosts) expect(p.complete).toBe(false);
    await Promise.all(slowPosts.map((p) => p.closed));
    expect(stack.sidecar.forwarder.inFlight()).toBe(1); // the SSE stream, nothing else

    // The idle SSE stream outlived both timeouts and still carries events.
    expect(sseClosed).toBe(false);
    upstreamStream.write('data: still here\n\n');
    await gotEvent('data: still here');
    sse.destroy();
  });

  it("a body Node's parser refuses is answered 400 by Node itself, and counted once as refused/invalid_request", async () => {
    // A chunk size that is not hex: Node writes its own 400 and closes, after the request was handed
    // to the sidecar (its headers were whole). Counted like the sidecar's own refusals.
    const bytes = `POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`;
    const status = await countedOnce(stack.adminUrl, { outcome: 'refused', reason: 'invalid_request' }, () => statusOf(bytes));
    expect(status).toBe(400);
  });

  it.each([
    ['a request line that is not HTTP', 'GET /mcp HTTP/9\r\nHost: x\r\n\r\n'],
    ['a method with a space in it', 'PO ST /mcp HTTP/1.1\r\nHost: x\r\n\r\n'],
    ['a header name with a space in it', 'GET /mcp HTTP/1.1\r\nHost: x\r\nBad Name: y\r\n\r\n'],
  ])('%s: Node answers 400 before any request object, counted once as refused/invalid_request', async (_name, bytes) => {
    const status = await countedOnce(stack.adminUrl, { outcome: 'refused', reason: 'invalid_request' }, () => statusOf(bytes));
    expect(status).toBe(400);
  });

  it('headers that never end: Node answers 408 before any request object, counted once as refused/request_timeout', async () => {
    // The headers are never finished; Node's headers timeout answers (no request object exists yet).
    const { responses } = await countedOnce(stack.adminUrl, { outcome: 'refused', reason: 'request_timeout' }, () =>
      exchange(port, `POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n`, { timeoutMs: HEADERS_TIMEOUT_MS + SLACK_MS }),
    );
    expect(responses.map((r) => r.status)).toEqual([408]);
  });

  it('a broken request after an answered one on the same connection: each counted once, the second as refused', async () => {
    const connection = await RawConnection.open(port);
    try {
      const whole = `POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`;
      const first = await countedOnce(stack.adminUrl, { outcome: 'forwarded' }, () => connection.request(whole));
      expect(first === 'closed' ? 'closed' : first.status).toBe(200);
      // The connection's one response has closed: nothing is in flight when the broken line comes.
      const second = await countedOnce(stack.adminUrl, { outcome: 'refused', reason: 'invalid_request' }, () =>
        connection.request('PO ST /mcp HTTP/1.1\r\nHost: x\r\n\r\n'),
      );
      expect(second === 'closed' ? 'closed' : second.status).toBe(400);
    } finally {
      connection.close();
    }
  });

  describe('duplicate Authorization headers: 401, nothing forwarded', () => {
    const other = () => randomBytes(32).toString('hex');
    it.each([
      ['the valid token twice', () => [`Authorization: Bearer ${token}`, `Authorization: Bearer ${token}`]],
      ['valid, then unknown', () => [`Authorization: Bearer ${token}`, `Authorization: Bearer ${other()}`]],
      ['unknown, then valid', () => [`Authorization: Bearer ${other()}`, `Authorization: Bearer ${token}`]],
      ['valid, then empty', () => [`Authorization: Bearer ${token}`, 'Authorization: ']],
      ['different casing of the name', () => [`authorization: Bearer ${token}`, `AUTHORIZATION: Bearer ${token}`]],
      ['master token, then valid', () => [`Authorization: Bearer ${stack.masterToken}`, `Authorization: Bearer ${token}`]],
      ['valid, then master token', () => [`Authorization: Bearer ${token}`, `Authorization: Bearer ${stack.masterToken}`]],
      ['valid, then Basic', () => [`Authorization: Bearer ${token}`, 'Authorization: Basic YTpi']],
    ])('%s', async (_name, make) => {
      const before = upstream.seen.length;
      expect(await statusOf(request(`${make().join('\r\n')}\r\n`, '{}'))).toBe(401);
      expect(upstream.seen.length).toBe(before);
    });

    it('a token only in Proxy-Authorization or a look-alike header counts as none', async () => {
      for (const name of ['Proxy-Authorization', 'X-Authorization', 'Authorization2', 'Authorisation']) {
        const { responses } = await exchange(port, request(`${name}: Bearer ${token}\r\n`, '{}'));
        expect(responses[0]?.status).toBe(401);
        expect(responses[0]?.headers['www-authenticate']).not.toContain('error=');
      }
    });
  });

  describe('Unicode and control characters in and around the token', () => {
    // Latin-1 strings are written byte for byte; `utf8` marks rows whose bytes are UTF-8 encoded.
    const rows: Array<[name: string, value: () => string, encoding?: 'utf8']> = [
      ['token + é (UTF-8)', () => `Bearer ${token}é`, 'utf8'],
      ['é in place of the last character (UTF-8)', () => `Bearer ${token.slice(0, 63)}é`, 'utf8'],
      ['fullwidth digit in place of the first character', () => `Bearer \uff10${token.slice(1)}`, 'utf8'],
      ['zero-width space inside', () => `Bearer ${token.slice(0, 32)}\u200b${token.slice(32)}`, 'utf8'],
      ['right-to-left override before the token', () => `Bearer \u202e${token}`, 'utf8'],
      // In place of the first character, not of the first `a`: a random token may hold no `a` at all.
      ['Cyrillic а in place of a hex letter (homoglyph)', () => `Bearer \u0430${token.slice(1)}`, 'utf8'],
      ['NUL after the token', () => `Bearer ${token}\x00`],
      ['NUL inside the token', () => `Bearer ${token.slice(0, 10)}\x00${token.slice(10)}`],
      ['DEL inside the token', () => `Bearer ${token.slice(0, 10)}\x7f${token.slice(11)}`],
      ['a tab between scheme and token', () => `Bearer\t${token}`],
      ['two spaces between scheme and token', () => `Bearer  ${token}`],
      ['a tab inside the token', () => `Bearer ${token.slice(0, 10)}\t${token.slice(11)}`],
      ['Latin-1 byte 0xff inside the token', () => `Bearer ${token.slice(0, 10)}\xff${token.slice(11)}`],
      ['vertical tab before the token', () => `Bearer \x0b${token}`],
      ['form feed after the token', () => `Bearer ${token}\x0c`],
      ['escape sequence in the token', () => `Bearer \x1b[31m${token.slice(5)}`],
      ['upper-case token', () => `Bearer ${token.toUpperCase()}`],
      ['master token + é', () => `Bearer ${stack.masterToken}é`, 'utf8'],
      ['master token upper-case', () => `Bearer ${stack.masterToken.toUpperCase()}`],
      ['master token with its last character cut', () => `Bearer ${stack.masterToken.slice(0, 63)}`],
      ['master token + one more hex digit', () => `Bearer ${stack.masterToken}0`],
      ['scheme in Cyrillic letters', () => `Веаrer ${token}`, 'utf8'],
      ['percent-encoded token', () => `Bearer ${encodeURIComponent(`${token.slice(0, 63)}%`)}`],
    ];

    it.each(rows)('%s: refused (400 or 401), nothing forwarded', async (_name, value, encoding) => {
      const before = upstream.seen.length;
      const head = `POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\nAuthorization: `;
      const bytes = Buffer.concat([
        Buffer.from(head, 'latin1'),
        Buffer.from(value(), encoding ?? 'latin1'),
        Buffer.from('\r\n\r\n{}', 'latin1'),
      ]);
      const status = await statusOf(bytes);
      expect([400, 401]).toContain(status);
      expect(upstream.seen.length).toBe(before);
    });

    it('optional whitespace around the value is not part of it (RFC 9110 §5.5): the exact token still works', async () => {
      for (const value of [`Bearer ${token} `, `Bearer ${token}\t`, ` Bearer ${token}`]) {
        expect(await statusOf(request(`Authorization:${value}\r\n`, '{}'))).toBe(200);
      }
    });

    it('the sidecar is still up and logged no unexpected error', async () => {
      expect(await statusOf(request(`Authorization: Bearer ${token}\r\n`, '{}'))).toBe(200);
      expect(stack.logs.filter((l) => l.includes('unexpected error'))).toEqual([]);
    });
  });
});
