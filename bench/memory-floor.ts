// The memory floor of one idle SSE response in Node's http server, with no proxying at all: a bare
// server holds N responses open to a client in another process; RSS and JS heap per response after a
// forced GC. A proxied stream holds two such sockets (client side and upstream side), which is the
// floor the idle-stream scenario of `npm run bench` is read against.
// usage: node --expose-gc --import tsx bench/memory-floor.ts [N=1000]

import { fork } from 'node:child_process';
import { once } from 'node:events';
import { Agent, createServer, get } from 'node:http';
import type { AddressInfo } from 'node:net';

const N = Number(process.argv[2] ?? 1000);

if (process.env.MEMORY_FLOOR_CLIENT) {
  // The client: opens N streams and reports once every one has its first event.
  const port = Number(process.env.MEMORY_FLOOR_CLIENT);
  const agent = new Agent({ keepAlive: true, maxSockets: Infinity });
  process.once('message', () => {
    let got = 0;
    for (let i = 0; i < N; i++) {
      get({ port, host: '127.0.0.1', agent }, (res) => res.once('data', () => ++got === N && process.send!('open')));
    }
  });
} else {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with node --expose-gc');
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(': open\n\n');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const client = fork(import.meta.filename, [String(N)], {
    env: { ...process.env, MEMORY_FLOOR_CLIENT: String((server.address() as AddressInfo).port) },
    execArgv: ['--import', 'tsx'],
  });
  gc();
  const before = process.memoryUsage();
  client.send('go');
  await once(client, 'message');
  gc();
  const open = process.memoryUsage();
  const kib = (bytes: number) => (bytes / N / 1024).toFixed(1);
  process.stdout.write(
    `${N} idle SSE responses held by a bare node:http server: RSS ${kib(open.rss - before.rss)} KiB, JS heap + external ${kib(open.heapUsed + open.external - before.heapUsed - before.external)} KiB per response\n`,
  );
  client.kill();
  server.closeAllConnections();
  server.close();
}
