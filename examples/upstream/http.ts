// HTTP plumbing of the reference MCP upstreams (examples/upstream/server.ts on the SDK's 2.x line, and
// the 1.x one the tests keep): bounded JSON bodies, JSON answers, counting open SSE streams, and the
// benchmark's synthetic streams.

import type { IncomingMessage, ServerResponse } from 'node:http';

export const MAX_BODY_BYTES = 8 * 1024 * 1024;

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

export const rpcError = (code: number, message: string) => ({ jsonrpc: '2.0', error: { code, message }, id: null });

export class BodyTooLarge extends Error {}

export async function readJson(req: IncomingMessage): Promise<unknown> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > MAX_BODY_BYTES) throw new BodyTooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new BodyTooLarge();
    chunks.push(chunk);
  }
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

/** Finds the content type a response is being sent with, whether set via setHeader or passed to writeHead. */
function contentTypeOf(res: ServerResponse, args: unknown[]): string {
  const fromRes = res.getHeader('content-type');
  if (fromRes !== undefined) return String(fromRes);
  const headers = args.find((a) => typeof a === 'object' && a !== null);
  if (Array.isArray(headers)) {
    // Raw form: either [k, v, k, v] or [[k, v], ...].
    const flat = headers.flat() as unknown[];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      if (String(flat[i]).toLowerCase() === 'content-type') return String(flat[i + 1]);
    }
  } else if (headers) {
    for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() === 'content-type') return String(v);
  }
  return '';
}

/** Counts a response as an open stream from the moment it is sent as SSE until its socket side closes. */
export function trackSse(res: ServerResponse, onOpen: () => void, onClose: () => void): void {
  const writeHead = res.writeHead;
  res.writeHead = function (this: ServerResponse, ...args: unknown[]) {
    const result = (writeHead as (...a: unknown[]) => ServerResponse).apply(this, args);
    if (contentTypeOf(this, args).includes('text/event-stream')) {
      onOpen();
      res.once('close', onClose);
    }
    return result;
  } as ServerResponse['writeHead'];
}

/** See UpstreamOptions.syntheticStreams: `id: n`, `data: {"n":n,"t":<epoch ms, sub-ms>}` per event. */
export function syntheticStream(req: IncomingMessage, res: ServerResponse): void {
  const n = Number(new URL(req.url ?? '/', 'http://upstream').searchParams.get('events'));
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.write(': open\n\n');
  if (!(n > 0)) return; // idle until the client goes away
  let sent = 0;
  const next = () => {
    if (res.destroyed) return;
    sent++;
    const ok = res.write(`id: ${sent}\ndata: {"n":${sent},"t":${performance.timeOrigin + performance.now()}}\n\n`);
    if (sent === n) res.end();
    else if (ok) setImmediate(next);
    else res.once('drain', next);
  };
  setImmediate(next);
}
