// The reference upstream on its own, driven by the official SDK client (and raw fetch for the wire-level
// parts): what the proxy tests later rely on must already hold with no proxy in between.

import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  ElicitRequestSchema,
  LoggingMessageNotificationSchema,
  type LoggingMessageNotification,
} from '@modelcontextprotocol/sdk/types.js';
import { startUpstream, type RunningUpstream } from '../../examples/upstream/server.ts';
import { progressOverSse, rawSession, readSse } from '../support/sse.ts';

const ALL_TOOLS = ['add', 'ask', 'big', 'echo', 'headers', 'log', 'progress'];

// callTool's declared result also admits the legacy `{ toolResult }` shape, hence the loose parameter.
function textOf(result: object): string {
  const content = 'content' in result ? result.content : undefined;
  const first = (content as Array<{ type: string; text?: string }> | undefined)?.[0];
  expect(first?.type).toBe('text');
  return first?.text ?? '';
}

describe('reference upstream through the SDK client', () => {
  let upstream: RunningUpstream;
  let client: Client;
  const logs: Array<LoggingMessageNotification['params']> = [];
  let onLog: ((params: LoggingMessageNotification['params']) => void) | undefined;

  beforeAll(async () => {
    upstream = await startUpstream({ host: '127.0.0.1', port: 0 });
    client = new Client({ name: 'upstream-test', version: '1.0.0' }, { capabilities: { elicitation: {} } });
    client.setRequestHandler(ElicitRequestSchema, async (request) => ({
      action: 'accept',
      content: { answer: `yes to: ${request.params.message}` },
    }));
    client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
      logs.push(notification.params);
      onLog?.(notification.params);
    });
    await client.connect(new StreamableHTTPClientTransport(new URL(upstream.url)));
  });

  afterAll(async () => {
    await client?.close();
    await upstream?.close();
  });

  it('binds a real port and initializes', () => {
    expect(upstream.port).toBeGreaterThan(0);
    expect(upstream.url).toBe(`http://127.0.0.1:${upstream.port}/mcp`);
    expect(client.getServerVersion()?.name).toBe('reference-upstream');
    expect(client.getServerCapabilities()?.logging).toBeDefined();
  });

  it('lists every tool', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(ALL_TOOLS);
  });

  it('echoes and adds', async () => {
    expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'hé ✓' } }))).toBe('hé ✓');
    expect(textOf(await client.callTool({ name: 'add', arguments: { a: 2.5, b: -7 } }))).toBe('-4.5');
  });

  it('sends exactly one progress notification per step', async () => {
    const seen: Array<{ progress: number; total?: number }> = [];
    const result = await client.callTool({ name: 'progress', arguments: { steps: 7, delayMs: 0 } }, undefined, {
      onprogress: (p) => seen.push({ progress: p.progress, total: p.total }),
    });
    expect(textOf(result)).toBe('done 7');
    expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7].map((progress) => ({ progress, total: 7 })));
  });

  it('uses the progress defaults', async () => {
    let count = 0;
    const result = await client.callTool({ name: 'progress', arguments: {} }, undefined, { onprogress: () => count++ });
    expect(textOf(result)).toBe('done 5');
    expect(count).toBe(5);
  });

  it('rejects out-of-range progress arguments', async () => {
    const result = await client.callTool({ name: 'progress', arguments: { steps: 0 } });
    expect(result.isError).toBe(true);
  });

  it('emits a logging notification', async () => {
    const received = new Promise<LoggingMessageNotification['params']>((resolve) => (onLog = resolve));
    const result = await client.callTool({ name: 'log', arguments: { message: 'disk almost full', level: 'warning' } });
    expect(textOf(result)).toContain('disk almost full');
    const params = await received;
    expect(params).toMatchObject({ level: 'warning', data: 'disk almost full', logger: 'reference-upstream' });
    expect(logs).toContainEqual(params);
  });

  it('round-trips an elicitation through the ask tool', async () => {
    const result = await client.callTool({ name: 'ask', arguments: { question: 'ship it?' } });
    expect(result.isError).toBeFalsy();
    const text = textOf(result);
    expect(text.startsWith('answer: ')).toBe(true);
    expect(JSON.parse(text.slice('answer: '.length))).toEqual({ action: 'accept', content: { answer: 'yes to: ship it?' } });
  });

  it('returns a body of exactly the requested size', async () => {
    const bytes = 3 * 1024 * 1024 + 7;
    const text = textOf(await client.callTool({ name: 'big', arguments: { bytes } }));
    expect(text.length).toBe(bytes);
    expect(/^x+$/.test(text)).toBe(true);
  });

  it('reports the headers it received, and records them', async () => {
    const headers = JSON.parse(textOf(await client.callTool({ name: 'headers', arguments: {} })));
    expect(headers['mcp-session-id']).toBe((client.transport as StreamableHTTPClientTransport).sessionId);
    expect(headers['content-type']).toBe('application/json');
    const last = upstream.seenHeaders.at(-1);
    expect(last?.['mcp-session-id']).toBe(headers['mcp-session-id']);
    expect(upstream.seenHeaders.length).toBeLessThanOrEqual(50);
  });

  it('reads the fixed resource and the template', async () => {
    const hello = await client.readResource({ uri: 'ref://hello' });
    expect(hello.contents).toEqual([{ uri: 'ref://hello', mimeType: 'text/plain', text: 'hello from the reference upstream' }]);
    const echo = await client.readResource({ uri: 'ref://echo/abc' });
    expect(echo.contents[0]).toMatchObject({ uri: 'ref://echo/abc', text: 'abc' });
    const { resourceTemplates } = await client.listResourceTemplates();
    expect(resourceTemplates.map((t) => t.uriTemplate)).toContain('ref://echo/{value}');
  });

  it('gets the greet prompt', async () => {
    const prompt = await client.getPrompt({ name: 'greet', arguments: { name: 'Ada' } });
    expect(prompt.messages).toEqual([{ role: 'user', content: { type: 'text', text: 'Please greet Ada.' } }]);
  });
});

describe('reference upstream without elicitation or sampling', () => {
  let upstream: RunningUpstream;
  let client: Client;

  beforeAll(async () => {
    upstream = await startUpstream({ port: 0 });
    client = new Client({ name: 'plain', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(upstream.url)));
  });
  afterAll(async () => {
    await client?.close();
    await upstream?.close();
  });

  it('answers ask with an error result', async () => {
    const result = await client.callTool({ name: 'ask', arguments: { question: 'anyone?' } });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/neither elicitation nor sampling/);
  });
});

describe('reference upstream on the wire', () => {
  let upstream: RunningUpstream;

  beforeAll(async () => {
    upstream = await startUpstream({ port: 0 });
  });
  afterAll(async () => {
    await upstream?.close();
  });

  it('answers other paths with 404 JSON', async () => {
    const res = await fetch(new URL('/elsewhere', upstream.url));
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toContain('application/json');
    expect(await res.json()).toMatchObject({ error: 'not_found' });
  });

  it('refuses unknown sessions and non-initialize requests without one', async () => {
    const base = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    const unknown = await fetch(upstream.url, { method: 'POST', headers: { ...base, 'mcp-session-id': 'nope' }, body });
    expect(unknown.status).toBe(404);
    const missing = await fetch(upstream.url, { method: 'POST', headers: base, body });
    expect(missing.status).toBe(400);
    const garbage = await fetch(upstream.url, { method: 'POST', headers: base, body: '{not json' });
    expect(garbage.status).toBe(400);
    expect(await garbage.json()).toMatchObject({ error: { code: -32700 } });
  });

  it('replays a POST stream after Last-Event-ID', async () => {
    const session = await rawSession(upstream.url);
    const original = await progressOverSse(upstream.url, session.headers(), 3);
    expect(original.map((e) => JSON.parse(e.data).method ?? 'result')).toEqual([
      'notifications/progress',
      'notifications/progress',
      'notifications/progress',
      'result',
    ]);
    expect(original.every((e) => e.id)).toBe(true);

    const resumed = await fetch(upstream.url, { headers: session.headers({ 'last-event-id': original[0]!.id! }) });
    expect(resumed.status).toBe(200);
    const replayed = await readSse(resumed.body!, (events) => events.length >= 3);
    expect(replayed).toEqual(original.slice(1));
  });

  it('counts an open GET stream, uncounts it when the client aborts, and DELETE ends the session', async () => {
    const session = await rawSession(upstream.url);
    const before = upstream.openStreams();
    const abort = new AbortController();
    const get = await fetch(upstream.url, { headers: session.headers(), signal: abort.signal });
    expect(get.headers.get('content-type')).toContain('text/event-stream');
    expect(upstream.openStreams()).toBe(before + 1);
    abort.abort();
    // The server learns of the abort only when the socket closes; poll for it rather than sleeping blind.
    await vi.waitFor(() => expect(upstream.openStreams()).toBe(before), { timeout: 5_000, interval: 5 });

    const del = await fetch(upstream.url, { method: 'DELETE', headers: session.headers() });
    expect(del.status).toBe(200);
    const after = await fetch(upstream.url, {
      method: 'POST',
      headers: session.headers(),
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list' }),
    });
    expect(after.status).toBe(404);
  });
});

describe('reference upstream shutdown', () => {
  it('close() resolves while a GET SSE stream is open, ending that stream', async () => {
    const upstream = await startUpstream({ port: 0 });
    const session = await rawSession(upstream.url);
    const get = await fetch(upstream.url, { headers: session.headers() });
    expect(get.status).toBe(200);
    expect(upstream.openStreams()).toBeGreaterThanOrEqual(1);

    const reader = get.body!.getReader();
    // The stream must end (cleanly or by reset) once the server is gone, not hang.
    const ended = (async () => {
      try {
        while (!(await reader.read()).done);
        return 'done';
      } catch {
        return 'reset';
      }
    })();
    await expect(upstream.close()).resolves.toBeUndefined();
    expect(['done', 'reset']).toContain(await ended);
    await expect(fetch(upstream.url)).rejects.toThrow();
  }, 15_000);
});
