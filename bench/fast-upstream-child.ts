// The fast upstream of the headline scenario: a minimal JSON-RPC answerer that replies to any POST at
// once (`{"jsonrpc":"2.0","id":<id>,"result":{}}`), so what a proxy in front of it costs is not hidden
// behind an upstream that is itself the bottleneck. One process of its own, keep-alive, no parsing
// beyond the request id.

import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serveChild } from './child-ipc.ts';

const ID = /"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)/;

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const id = ID.exec(Buffer.concat(chunks).toString('utf8'))?.[1] ?? 'null';
    const body = `{"jsonrpc":"2.0","id":${id},"result":{}}`;
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1');
await once(server, 'listening');
const { port } = server.address() as AddressInfo;
serveChild({ url: `http://127.0.0.1:${port}/mcp` }, async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});
