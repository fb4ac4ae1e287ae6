// Raw HTTP/1.1 over net.Socket for hostile-input tests: requests are written byte for byte (no client
// library normalises them), and responses are read with a small parser that knows Content-Length,
// chunked and close-delimited bodies. Also a raw TCP upstream that frames the requests it receives
// itself and counts them, so a smuggled second request cannot hide inside a library's parser.

import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Parses as many complete responses as `buf` holds; returns them and the bytes consumed. */
function parseResponses(buf: Buffer, ended: boolean, head = false): { responses: RawResponse[]; used: number } {
  const responses: RawResponse[] = [];
  let at = 0;
  for (;;) {
    const headEnd = buf.indexOf('\r\n\r\n', at);
    if (headEnd === -1) break;
    const lines = buf.subarray(at, headEnd).toString('latin1').split('\r\n');
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '')?.[1] ?? NaN);
    const headers: Record<string, string> = {};
    for (const line of lines.slice(1)) {
      const i = line.indexOf(':');
      if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
    let bodyStart = headEnd + 4;
    if (status === 100) {
      at = bodyStart;
      continue;
    }
    if (head) {
      // A response to HEAD never has a body, whatever its Content-Length says.
      responses.push({ status, headers, body: '' });
      at = bodyStart;
      continue;
    }
    if (headers['content-length'] !== undefined) {
      const n = Number(headers['content-length']);
      if (buf.length < bodyStart + n) break;
      responses.push({ status, headers, body: buf.subarray(bodyStart, bodyStart + n).toString('utf8') });
      at = bodyStart + n;
      continue;
    }
    if (headers['transfer-encoding']?.toLowerCase() === 'chunked') {
      const parts: Buffer[] = [];
      let p = bodyStart;
      let complete = false;
      for (;;) {
        const lineEnd = buf.indexOf('\r\n', p);
        if (lineEnd === -1) break;
        const size = parseInt(buf.subarray(p, lineEnd).toString('latin1'), 16);
        if (size === 0) {
          const trailerEnd = buf.indexOf('\r\n\r\n', lineEnd);
          if (trailerEnd === -1 && buf.length < lineEnd + 4) break;
          p = trailerEnd === lineEnd ? lineEnd + 4 : trailerEnd + 4;
          complete = true;
          break;
        }
        if (buf.length < lineEnd + 2 + size + 2) break;
        parts.push(buf.subarray(lineEnd + 2, lineEnd + 2 + size));
        p = lineEnd + 2 + size + 2;
      }
      if (!complete) break;
      responses.push({ status, headers, body: Buffer.concat(parts).toString('utf8') });
      at = p;
      continue;
    }
    if (status === 204 || status === 304) {
      responses.push({ status, headers, body: '' });
      at = bodyStart;
      continue;
    }
    // Close-delimited.
    if (!ended) break;
    responses.push({ status, headers, body: buf.subarray(bodyStart).toString('utf8') });
    at = buf.length;
  }
  return { responses, used: at };
}

/**
 * Writes `bytes` on a fresh connection and collects every response until the server closes it. The
 * caller ends `bytes` with a request that carries `Connection: close` (a client that half-closes gets
 * no answer at all: Node's server aborts requests in progress when the client's side ends).
 */
export async function exchange(
  port: number,
  bytes: Buffer | string,
  options: { halfClose?: boolean; timeoutMs?: number } = {},
): Promise<{ responses: RawResponse[]; raw: string; timedOut: boolean }> {
  const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
  await once(socket, 'connect');
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  const closed = new Promise<void>((resolve) => {
    socket.once('end', () => {
      socket.destroy();
      resolve();
    });
    socket.once('close', () => resolve());
    socket.once('error', () => resolve());
  });
  socket.write(bytes);
  if (options.halfClose === true) socket.end();
  // Safety net only (a hang is a failure the caller sees as `timedOut`).
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    socket.destroy();
  }, options.timeoutMs ?? 10_000);
  await closed;
  clearTimeout(timer);
  const buf = Buffer.concat(chunks);
  return { responses: parseResponses(buf, true).responses, raw: buf.toString('latin1'), timedOut };
}

/** A keep-alive raw connection: send one request's bytes, get its response (or `closed`). */
export class RawConnection {
  readonly #socket: Socket;
  #buf = Buffer.alloc(0);
  #ended = false;
  #waiter: (() => void) | undefined;

  private constructor(socket: Socket) {
    this.#socket = socket;
    socket.on('data', (c: Buffer) => {
      this.#buf = Buffer.concat([this.#buf, c]);
      this.#waiter?.();
    });
    const end = () => {
      this.#ended = true;
      this.#waiter?.();
    };
    socket.on('end', end);
    socket.on('close', end);
    socket.on('error', end);
  }

  static async open(port: number): Promise<RawConnection> {
    const socket = connect({ port, host: '127.0.0.1' });
    await once(socket, 'connect');
    return new RawConnection(socket);
  }

  get usable(): boolean {
    return !this.#ended && !this.#socket.destroyed;
  }

  /** Writes the request and resolves with the first complete response, or 'closed'. */
  async request(bytes: Buffer | string): Promise<RawResponse | 'closed'> {
    this.#socket.write(bytes);
    const head = (typeof bytes === 'string' ? bytes : bytes.toString('latin1', 0, 5)).startsWith('HEAD ');
    for (;;) {
      const { responses, used } = parseResponses(this.#buf, this.#ended, head);
      if (responses.length > 0) {
        this.#buf = this.#buf.subarray(used);
        const first = responses[0]!;
        if (first.headers.connection?.toLowerCase() === 'close') this.close();
        return first;
      }
      if (this.#ended) return 'closed';
      await new Promise<void>((resolve) => (this.#waiter = resolve));
      this.#waiter = undefined;
    }
  }

  close(): void {
    this.#ended = true;
    this.#socket.destroy();
  }
}

export interface UpstreamRequest {
  method: string;
  target: string;
  headers: Array<[string, string]>;
  body: Buffer;
  /** Framing the upstream would have to guess at: both CL and TE, two CLs, a TE other than chunked. */
  ambiguous: string | undefined;
}

export interface RawUpstream {
  url: string;
  requests: UpstreamRequest[];
  /** Bytes that did not form a request when their connection closed. */
  leftovers: string[];
  server: Server;
  close(): Promise<void>;
}

/**
 * A raw TCP upstream: frames each request itself (Content-Length or chunked, as the sidecar must send
 * them) and answers `200 ok`. Everything it was sent is recorded, request by request.
 */
export async function startRawUpstream(): Promise<RawUpstream> {
  const requests: UpstreamRequest[] = [];
  const leftovers: string[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    let buf = Buffer.alloc(0);
    socket.on('data', (c: Buffer) => {
      buf = Buffer.concat([buf, c]);
      for (;;) {
        const headEnd = buf.indexOf('\r\n\r\n');
        if (headEnd === -1) return;
        const lines = buf.subarray(0, headEnd).toString('latin1').split('\r\n');
        const [method = '', target = ''] = (lines[0] ?? '').split(' ');
        const headers: Array<[string, string]> = [];
        for (const line of lines.slice(1)) {
          const i = line.indexOf(':');
          headers.push(i === -1 ? [line, ''] : [line.slice(0, i), line.slice(i + 1).trim()]);
        }
        const named = (n: string) => headers.filter(([k]) => k.toLowerCase() === n).map(([, v]) => v);
        const cl = named('content-length');
        const te = named('transfer-encoding');
        let ambiguous: string | undefined;
        if (cl.length > 0 && te.length > 0) ambiguous = 'both Content-Length and Transfer-Encoding';
        else if (cl.length > 1) ambiguous = 'two Content-Length headers';
        else if (te.length > 1 || (te.length === 1 && te[0]!.toLowerCase() !== 'chunked')) ambiguous = `Transfer-Encoding ${te.join(', ')}`;
        if (headers.some(([k]) => k !== k.trim() || /[\r\n]/.test(k))) ambiguous = 'malformed header name';
        let body: Buffer;
        let end: number;
        if (te.length > 0) {
          const parts: Buffer[] = [];
          let p = headEnd + 4;
          let done = false;
          for (;;) {
            const lineEnd = buf.indexOf('\r\n', p);
            if (lineEnd === -1) break;
            const size = parseInt(buf.subarray(p, lineEnd).toString('latin1'), 16);
            if (Number.isNaN(size)) {
              ambiguous = 'bad chunk size';
              done = true;
              p = buf.length;
              break;
            }
            if (size === 0) {
              if (buf.length < lineEnd + 4) break;
              p = lineEnd + 4;
              done = true;
              break;
            }
            if (buf.length < lineEnd + 2 + size + 2) break;
            parts.push(buf.subarray(lineEnd + 2, lineEnd + 2 + size));
            p = lineEnd + 2 + size + 2;
          }
          if (!done) return;
          body = Buffer.concat(parts);
          end = p;
        } else {
          const n = cl.length > 0 ? Number(cl[0]) : 0;
          if (buf.length < headEnd + 4 + n) return;
          body = buf.subarray(headEnd + 4, headEnd + 4 + n);
          end = headEnd + 4 + n;
        }
        requests.push({ method, target, headers, body: Buffer.from(body), ambiguous });
        buf = buf.subarray(end);
        socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok');
      }
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      sockets.delete(socket);
      if (buf.length > 0) leftovers.push(buf.toString('latin1'));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    requests,
    leftovers,
    server,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/**
 * Header names as the most lenient gateway reads them (upper case, `-` as `_` as CGI/WSGI do, and `.`
 * too as PHP does, every other character but a letter or digit as Apache httpd 2.2 did:
 * `x_mcp_auth_kind`, `X.MCP.Auth.Kind` and `X-MCP-Auth-Kind` are one name; see
 * test/support/identity-spellings.ts), each with every value sent under it; from raw name/value pairs.
 */
export function cgiView(rawHeaders: readonly string[]): Map<string, string[]> {
  const env = new Map<string, string[]>();
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const key = rawHeaders[i]!.toUpperCase().replace(/[^A-Z0-9]/g, '_');
    env.set(key, [...(env.get(key) ?? []), rawHeaders[i + 1]!]);
  }
  return env;
}
