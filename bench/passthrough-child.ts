// The floor: a plain pass-through with no authentication, no header timeout, no metrics, no logging,
// no SSE header flush: what a Node proxy on a given forwarding engine costs. BENCH_PROXY_LIB picks it:
// `http-proxy` (default) or `http-proxy-3` (the maintained fork) over a keep-alive agent with the
// settings the sidecar used on that engine, or `undici` (a Pool and `stream`, the engine of
// src/proxy/forwarder.ts). Any path is sent to the upstream as is.

import { once } from 'node:events';
import { Agent, createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import httpProxy from 'http-proxy';
import { createProxyServer as createProxyServer3 } from 'http-proxy-3';
import { Pool } from 'undici';
import { serveChild } from './child-ipc.ts';

const target = new URL(process.env.BENCH_UPSTREAM_URL ?? 'http://127.0.0.1:3000/mcp');
const lib = process.env.BENCH_PROXY_LIB ?? 'http-proxy';

function httpProxyHandler(): { handle: (req: IncomingMessage, res: ServerResponse) => void; close: () => void } {
  const agent = new Agent({ keepAlive: true, noDelay: true, maxSockets: 1024, maxFreeSockets: 256, scheduling: 'lifo' });
  const options = { target: target.origin, agent, changeOrigin: true, xfwd: false, ws: false };
  const proxy = (lib === 'http-proxy-3' ? createProxyServer3(options) : httpProxy.createProxyServer(options)) as httpProxy;
  proxy.on('error', (_err, _req, res) => {
    const response = res as ServerResponse;
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
  return { handle: (req, res) => proxy.web(req, res), close: () => agent.destroy() };
}

// Request headers undici refuses or that belong to this hop only.
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'upgrade',
  'proxy-connection',
  'te',
  'trailer',
  'expect',
  'host',
]);

function undiciHandler(): { handle: (req: IncomingMessage, res: ServerResponse) => void; close: () => void } {
  const pool = new Pool(target.origin, { connections: 1024, pipelining: 1 });
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const headers: Record<string, string | string[]> = {};
    for (const name in req.headers) if (!HOP_BY_HOP.has(name)) headers[name] = req.headers[name]!;
    const abort = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) abort.abort();
    });
    const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
    pool.stream(
      { path: req.url ?? '/', method: req.method as 'GET', headers, body: hasBody ? req : null, signal: abort.signal },
      ({ statusCode, headers: upstreamHeaders }) => {
        const out: Record<string, string | string[]> = {};
        for (const name in upstreamHeaders) if (!HOP_BY_HOP.has(name)) out[name] = upstreamHeaders[name] as string | string[];
        res.writeHead(statusCode, out);
        return res;
      },
      (err) => {
        if (!err) return;
        if (!res.headersSent) res.writeHead(502);
        res.end();
      },
    );
  };
  return { handle, close: () => void pool.destroy() };
}

const { handle, close } = lib === 'undici' ? undiciHandler() : httpProxyHandler();
const server = createServer(handle);
server.timeout = 0;
server.listen(0, '127.0.0.1');
await once(server, 'listening');
const { port } = server.address() as AddressInfo;
serveChild({ proxyUrl: `http://127.0.0.1:${port}` }, async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  close();
});
