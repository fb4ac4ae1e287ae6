// The reference upstream on its own, driven by the official SDK client (and raw fetch for the wire-level
// parts): what the proxy tests later rely on must already hold with no proxy in between. The upstream is
// on the SDK's 2.x server line (examples/upstream/server.ts); the SDK 1.x client (2025-11-25) is run
// against it and against the 1.x server kept in test/support/upstream-sdk1.ts.

import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema, LoggingMessageNotificationSchema, type LoggingMessageNotification } from '@modelcontextprotocol/sdk/types.js';
import { startUpstream, type RunningUpstream } from '../../examples/upstream/server.ts';
import { startUpstream as startUpstreamSdk1 } from '../support/upstream-sdk1.ts';
import { exchange } from '../hostile/raw-http.ts';
import { progressOverSse, rawSession, readSse } from '../support/sse.ts';

const ALL_TOOLS = ['add', 'ask', 'big', 'echo', 'headers', 'log', 'progress'];

// callTool's declared result also admits the legacy `{ toolResult }` shape, hence the loose parameter.
function textOf(result: object): string {
  const content = 'content' in result ? result.content : undefined;
  const first = (content as Array<{ type: string; text?: string }> | undefined)?.[0];
  expect(first?.type).toBe('text');
  return first?.text ?? '';
}

const SERVER_LINES = [
  ['SDK 2.x', startUpstream],
  ['SDK 1.x', startUpstreamSdk1],
] as const;

describe.each(SERVER_LINES)('reference upstream (%s server) through the SDK 1.x client', (_line, start) => {
  let upstream: Awaited<ReturnType<typeof start>>;
  let client: Client;
  const logs: Array<LoggingMessageNotification['params']> = [];
  let onLog: ((params: LoggingMessageNotification['params']) => void) | undefined;

  beforeAll(async () => {
    upstream = await start({ host: '127.0.0.1', port: 0 });
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

// A 2026-07-28 request as the SDK 2.x client sends it: SEP-2243 headers mirroring the body, and the
// per-request `_meta` envelope (protocolVersion, clientCapabilities) its server requires.
describe('reference upstream (SDK 2.x server) on protocol 2026-07-28', () => {
  let upstream: RunningUpstream;
  const ENVELOPE = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
  const post = async (headers: Record<string, string>, name: string) => {
    const res = await fetch(upstream.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2026-07-28',
        ...headers,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name, arguments: { a: 2, b: 3, text: 't' }, _meta: ENVELOPE },
      }),
    });
    return { status: res.status, body: (await res.json()) as { result?: { content: Array<{ text: string }> }; error?: { code: number } } };
  };

  beforeAll(async () => {
    upstream = await startUpstream({ port: 0, allowedHosts: ['127.0.0.1'] });
  });
  afterAll(async () => {
    await upstream?.close();
  });

  it('runs a call whose Mcp-Method / Mcp-Name agree with the body, without a session', async () => {
    const answer = await post({ 'mcp-method': 'tools/call', 'mcp-name': 'add' }, 'add');
    expect(answer.status).toBe(200);
    expect(answer.body.result?.content[0]?.text).toBe('5');
    expect(upstream.toolCalls.at(-1)).toBe('add');
  });

  it('refuses (-32020) a call whose headers name another tool or method, before the tool runs', async () => {
    const ran = upstream.toolCalls.length;
    const mismatches: Array<Record<string, string>> = [
      { 'mcp-method': 'tools/call', 'mcp-name': 'add' },
      { 'mcp-method': 'tools/list' },
      { 'mcp-method': 'tools/call' },
    ];
    for (const headers of mismatches) {
      const answer = await post(headers, 'echo');
      expect(answer.status, JSON.stringify(headers)).toBe(400);
      expect(answer.body.error?.code, JSON.stringify(headers)).toBe(-32020);
    }
    expect(upstream.toolCalls.length).toBe(ran);
  });

  it('refuses a Host it does not allow (DNS rebinding) with 403, before anything is read', async () => {
    const ran = upstream.toolCalls.length;
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'add', arguments: { a: 1, b: 1 }, _meta: ENVELOPE },
    });
    const request = (host: string) =>
      `POST /mcp HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: add\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
    const refused = await exchange(upstream.port, request('mcp_upstream'));
    expect(refused.responses[0]?.status).toBe(403);
    expect(upstream.toolCalls.length).toBe(ran);
    const allowed = await exchange(upstream.port, request(`127.0.0.1:${upstream.port}`));
    expect(allowed.responses[0]?.status).toBe(200);
    expect(upstream.toolCalls.length).toBe(ran + 1);
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
