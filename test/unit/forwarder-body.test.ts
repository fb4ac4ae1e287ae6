// What the forwarder sends on as a request body: a body that has already arrived whole goes as one
// buffer (sent with the headers in one write); one still arriving streams, so nothing waits for it.

import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { bodyOf } from '../../src/proxy/forwarder.ts';

const BODY = '{"jsonrpc":"2.0","id":1,"method":"ping"}';

describe('bodyOf: the request body the forwarder sends on', () => {
  let server: Server;
  let port: number;
  let requests: Array<{ req: IncomingMessage; res: ServerResponse }>;
  let waiting: Array<() => void>;
  let socket: Socket | undefined;

  beforeEach(async () => {
    requests = [];
    waiting = [];
    server = createServer((req, res) => {
      requests.push({ req, res });
      for (const wake of waiting.splice(0)) wake();
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as AddressInfo).port;
  });
  afterEach(async () => {
    socket?.destroy();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  async function nextRequest(): Promise<{ req: IncomingMessage; res: ServerResponse }> {
    while (requests.length === 0) await new Promise<void>((resolve) => waiting.push(resolve));
    return requests.shift()!;
  }

  async function send(head: string, body?: string): Promise<void> {
    socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    socket.write(body === undefined ? head : head + body);
  }

  function head(length: number): string {
    return `POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;
  }

  it('a body that came with the headers is taken whole, as one buffer, and the request still ends', async () => {
    await send(head(BODY.length), BODY);
    const { req } = await nextRequest();
    // The rest of what arrived is parsed in the same turn as the headers.
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(req.complete).toBe(true);
    const body = bodyOf(req, 0);
    expect(Buffer.isBuffer(body)).toBe(true);
    expect((body as Buffer).toString()).toBe(BODY);
    // Consumed: the request reaches its end, so the connection can serve the next request.
    if (!req.readableEnded) await once(req, 'end');
    expect(req.readableEnded).toBe(true);
  });

  it('a body still on its way streams: the request itself is sent on, nothing waits for the rest', async () => {
    await send(head(BODY.length), BODY.slice(0, 10));
    const { req } = await nextRequest();
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(req.complete).toBe(false);
    const body = bodyOf(req, 0);
    expect(body).toBe(req);
    const chunks: Buffer[] = [];
    (body as Readable).on('data', (chunk: Buffer) => chunks.push(chunk));
    socket!.write(BODY.slice(10));
    await once(req, 'end');
    expect(Buffer.concat(chunks).toString()).toBe(BODY);
  });

  it('no body (no length, no transfer coding, or length 0): nothing is sent', async () => {
    await send('GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(bodyOf((await nextRequest()).req, 0)).toBeNull();
    socket!.write(head(0));
    expect(bodyOf((await nextRequest()).req, 0)).toBeNull();
  });

  it('a chunked body always streams, through the counter when a cap is set', async () => {
    await send(
      'POST /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n',
      `${BODY.length.toString(16)}\r\n${BODY}\r\n0\r\n\r\n`,
    );
    const { req } = await nextRequest();
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(bodyOf(req, 0)).toBe(req);
    const capped = bodyOf(req, 1024);
    expect(capped).toBeInstanceOf(Readable);
    expect(capped).not.toBe(req);
  });
});
