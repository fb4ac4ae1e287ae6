// A client's credential store in front of a client that has none: forwards every request to one target
// with `Authorization: Bearer <token>` set, everything else (Host and Origin included) unchanged, and
// streams both bodies through as they come (an SSE response is never held back). For test tools that
// cannot send a header of their own, such as the MCP conformance CLI.

import { once } from 'node:events';
import { createServer, request, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface CredentialForwarder {
  /** http://127.0.0.1:PORT/mcp: the target's path on the forwarder's port. */
  url: string;
  close(): Promise<void>;
}

// Framing and connection headers belong to each hop; Node writes its own on both sides.
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'proxy-connection', 'upgrade', 'te', 'trailer']);

function endToEnd(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) if (!HOP_BY_HOP.has(name) && value !== undefined) out[name] = value;
  return out;
}

/** Listens on 127.0.0.1, port 0; `target` is an http:// URL whose origin every request goes to. */
export async function startCredentialForwarder(target: string, token: string): Promise<CredentialForwarder> {
  const targetUrl = new URL(target);
  if (targetUrl.protocol !== 'http:') throw new Error(`the credential forwarder speaks http:// only, not ${targetUrl.protocol}`);

  const server = createServer((req, res) => {
    // The Host the client sent goes through as it is: the sidecar's DNS rebinding check must see it.
    const headers = { ...endToEnd(req.headers), authorization: `Bearer ${token}` };
    const forwarded = request({ host: targetUrl.hostname, port: targetUrl.port, method: req.method, path: req.url, headers });
    forwarded.on('response', (answer) => {
      res.writeHead(answer.statusCode ?? 502, endToEnd(answer.headers));
      // Headers now, not with the first body chunk: an SSE stream may stay quiet for a while.
      res.flushHeaders();
      answer.pipe(res);
    });
    forwarded.on('error', () => {
      if (res.headersSent) res.destroy();
      else res.writeHead(502, { 'content-type': 'text/plain' }).end('credential forwarder: the target did not answer');
    });
    // The client went away (e.g. cancelled an SSE read): so does the forwarded request.
    res.on('close', () => {
      if (!res.writableFinished) forwarded.destroy();
    });
    req.pipe(forwarded);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${targetUrl.pathname}`,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}
