// The HTTP boundary every listener is built on (src/http/serve.ts), over real sockets: exact and prefix
// routes, GET answering HEAD, one 405 with its Allow header, one 404 for any other path, protocol
// upgrades refused before routing, and the one error mapper (refusal as is, store outage 503, bug 500).

import { EventEmitter, once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpError, writeJson } from '../../src/http/errors.ts';
import { StoreUnavailableError } from '../../src/store/shared.ts';
import { serve } from '../../src/http/serve.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { exchange } from '../hostile/raw-http.ts';

const logs: Array<Record<string, any>> = [];
const counts = { notFound: 0, storeUnavailable: 0, errorAnswers: [] as string[], closed: 0 };
let base: string;
let port: number;
let server: ReturnType<typeof serve>;
const closes = new EventEmitter();

beforeAll(async () => {
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) logs.push(JSON.parse(line));
      done();
    },
  });
  server = serve({
    name: 'test',
    logger: createLogger('debug', destination),
    http: {},
    routes: [
      { path: '/exact', methods: ['GET'], handler: (_req, res, path) => writeJson(res, 200, { path }) },
      { path: '/ops/*', methods: ['POST', 'PUT'], handler: (_req, res, path) => writeJson(res, 200, { path }) },
      { path: '/any', methods: 'any', handler: (req, res) => writeJson(res, 200, { method: req.method }) },
      { path: '/refuse', methods: ['GET'], handler: () => Promise.reject(new HttpError('invalid_grant', 'no')) },
      { path: '/outage', methods: ['GET'], handler: () => Promise.reject(new StoreUnavailableError('down')) },
      {
        path: '/bug',
        methods: ['GET'],
        handler: () => {
          throw new TypeError('undefined is not a function');
        },
      },
    ],
    onStoreUnavailable: () => counts.storeUnavailable++,
    onNotFound: () => counts.notFound++,
    onErrorAnswer: (answer, path) => counts.errorAnswers.push(`${path} ${answer.status}`),
    onClose: () => {
      counts.closed++;
      closes.emit('closed');
    },
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  port = (server.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
});
afterAll(async () => {
  server.close();
  server.closeAllConnections();
});

async function call(path: string, method = 'GET') {
  const res = await fetch(`${base}${path}`, { method });
  const text = await res.text();
  return { status: res.status, allow: res.headers.get('allow'), body: text ? JSON.parse(text) : undefined };
}

describe('serve', () => {
  it('routes exact paths (query stripped) and prefixes; GET answers HEAD', async () => {
    expect(await call('/exact?x=1')).toMatchObject({ status: 200, body: { path: '/exact' } });
    expect((await call('/exact', 'HEAD')).status).toBe(200);
    expect(await call('/ops/createClient', 'PUT')).toMatchObject({ status: 200, body: { path: '/ops/createClient' } });
    expect(await call('/any', 'DELETE')).toMatchObject({ status: 200, body: { method: 'DELETE' } });
  });

  it('answers a method the route does not take with 405 and the methods it does in Allow', async () => {
    expect(await call('/exact', 'POST')).toEqual({ status: 405, allow: 'GET, HEAD', body: { error: 'method_not_allowed' } });
    expect(await call('/ops/x', 'GET')).toEqual({ status: 405, allow: 'POST, PUT', body: { error: 'method_not_allowed' } });
  });

  it('answers any other path 404, counted once', async () => {
    const before = counts.notFound;
    expect(await call('/exact/more')).toEqual({ status: 404, allow: null, body: { error: 'not_found' } });
    expect(await call('/ops')).toMatchObject({ status: 404 });
    expect(counts.notFound).toBe(before + 2);
  });

  it('maps errors once: a refusal as it is, a store outage 503 with Retry-After, a bug 500 with an error log', async () => {
    expect(await call('/refuse')).toMatchObject({ status: 400, body: { error: 'invalid_grant', error_description: 'no' } });
    const outage = await fetch(`${base}/outage`);
    expect([outage.status, outage.headers.get('retry-after'), await outage.json()]).toEqual([
      503,
      '2',
      { error: 'temporarily_unavailable' },
    ]);
    expect(counts.storeUnavailable).toBe(1);
    expect(await call('/bug')).toMatchObject({ status: 500, body: { error: 'server_error' } });
    const bug = logs.find((l) => l.msg === 'unexpected error on the test listener: answering 500');
    expect(bug).toMatchObject({ level: 50, listener: 'test', path: '/bug', err: { message: 'undefined is not a function' } });
    expect(bug?.err.stack).toMatch(/^TypeError/);
    expect(counts.errorAnswers).toEqual(expect.arrayContaining(['/refuse 400', '/outage 503', '/bug 500']));
  });

  it('refuses a protocol upgrade before routing, and closes the connection', async () => {
    const { responses } = await exchange(port, 'GET /exact HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
    expect(responses[0]?.status).toBe(400);
    expect(responses[0]?.headers.connection).toBe('close');
  });

  it('reports every closed response, answered or refused', async () => {
    const before = counts.closed;
    const both = new Promise<void>((resolve) => {
      const check = () => {
        if (counts.closed < before + 2) return;
        closes.off('closed', check);
        resolve();
      };
      closes.on('closed', check);
    });
    await call('/exact');
    await call('/nowhere');
    await both;
    expect(counts.closed).toBe(before + 2);
  });
});
