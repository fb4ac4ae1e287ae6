// The floor: a plain http-proxy (or, with BENCH_PROXY_LIB, http-proxy-3) pass-through with no authentication, over the same keep-alive agent
// settings as the sidecar's forwarder (src/proxy/forwarder.ts). Any path is sent to the upstream as is.
// No header timeout, no metrics, no logging, no SSE header flush: the floor of what a Node proxy costs.

import { once } from 'node:events';
import { Agent, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import httpProxy from 'http-proxy';
import { createProxyServer as createProxyServer3 } from 'http-proxy-3';
import { serveChild } from './child-ipc.ts';

const target = new URL(process.env.BENCH_UPSTREAM_URL ?? 'http://127.0.0.1:3000/mcp');
const agent = new Agent({ keepAlive: true, noDelay: true, maxSockets: 1024, maxFreeSockets: 256, scheduling: 'lifo' });
// BENCH_PROXY_LIB=http-proxy-3: the same pass-through on the maintained fork (same options, same API).
const options = { target: target.origin, agent, changeOrigin: true, xfwd: false, ws: false };
const proxy = (process.env.BENCH_PROXY_LIB === 'http-proxy-3' ? createProxyServer3(options) : httpProxy.createProxyServer(options)) as httpProxy;
proxy.on('error', (_err, _req, res) => {
  const response = res as import('node:http').ServerResponse;
  if (!response.headersSent) response.writeHead(502);
  response.end();
});
// The one addition every pass-through needs: http-proxy 1.18 does not end the upstream request when
// the client goes away after its request was complete (a GET stream), and would leak it upstream.
proxy.on('proxyReq', (proxyReq, _req, res) => {
  res.once('close', () => {
    if (!res.writableFinished) proxyReq.destroy();
  });
});
const server = createServer((req, res) => proxy.web(req, res));
server.timeout = 0;
server.listen(0, '127.0.0.1');
await once(server, 'listening');
const { port } = server.address() as AddressInfo;
serveChild({ proxyUrl: `http://127.0.0.1:${port}` }, async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  agent.destroy();
});
