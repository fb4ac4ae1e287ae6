// A store outage after the token lookup, once the upstream has answered: recording the session or task id
// the upstream handed out fails. The answer is withheld (503 before its headers went out, the stream cut
// after), and the outage is counted in mcp_auth_store_errors_total like one at the lookup.
// The upstream answers as an MCP server over Streamable HTTP: a JSON result with the Mcp-Session-Id it
// minted, and an SSE stream whose last event is a task-augmented tools/call's CreateTaskResult.

import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/store/shared.ts';
import { StoreDecorator, type StoreOperation } from '../../src/store/decorator.ts';
import { serveOnLoopback } from '../support/fake-upstreams.ts';
import { startStack, type Stack } from '../support/stack.ts';

/** The store, with bindHandle failing as a Redis outage does (the lookup and everything else as it is). */
class BindFails extends StoreDecorator {
  protected around<T>(operation: StoreOperation, call: () => Promise<T>): Promise<T> {
    if (operation === 'bindHandle') return Promise.reject(new StoreUnavailableError('Redis is down'));
    return call();
  }
}

/** initialize: JSON with a new session id; a task-augmented tools/call: SSE, a progress event then the CreateTaskResult. */
async function startHandleUpstream() {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const message = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as { id?: number; method?: string };
      if (message.method === 'initialize') {
        res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': randomUUID() });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result: {} }));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.write(
        `event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: 1 } })}\n\n`,
      );
      const task = {
        taskId: randomUUID(),
        status: 'working',
        createdAt: '2025-11-25T10:30:00Z',
        lastUpdatedAt: '2025-11-25T10:30:00Z',
        ttl: 60000,
      };
      res.end(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: message.id, result: { task } })}\n\n`);
    });
  });
  return serveOnLoopback(server);
}

describe('a store outage after the lookup, while the upstream answer is on its way', () => {
  let upstream: Awaited<ReturnType<typeof startHandleUpstream>>;
  let stack: Stack;
  let token: string;

  beforeAll(async () => {
    upstream = await startHandleUpstream();
    stack = await startStack({ upstreamUrl: upstream.url, wrapStore: (store) => new BindFails(store) });
    ({ token } = await stack.issueOAuthToken());
  });
  afterAll(async () => {
    await stack?.close();
    await upstream?.close();
  });

  async function storeErrors(): Promise<number> {
    const text = await (await fetch(`${stack.adminUrl}/metrics`)).text();
    return Number(/^mcp_auth_store_errors_total (\S+)$/m.exec(text)?.[1] ?? NaN);
  }

  function post(message: unknown) {
    return fetch(stack.mcpUrl, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify(message),
    });
  }

  it('the session id cannot be recorded: 503 before the headers, counted as a store error once', async () => {
    const before = await storeErrors();
    const res = await post({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} });
    expect(res.status).toBe(503);
    expect(res.headers.get('mcp-session-id')).toBeNull();
    expect(await res.json()).toEqual({ error: 'temporarily_unavailable' });
    expect((await storeErrors()) - before).toBe(1);
  });

  it('the task id cannot be recorded mid-stream: the stream is cut before the id, counted as a store error once', async () => {
    const before = await storeErrors();
    // Its headers may have gone out with the progress event, or not yet: either way it is cut, never ended.
    const read = await post({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'slow', arguments: {}, task: { ttl: 60000 } } })
      .then((res) => res.text())
      .then(
        (text) => ({ cut: false, text }),
        () => ({ cut: true, text: '' }),
      );
    expect(read).toEqual({ cut: true, text: '' });
    expect((await storeErrors()) - before).toBe(1);
  });
});
