// The official MCP SDK client talking to the reference upstream THROUGH the sidecar, with each kind of
// credential: everything a proxy can break (progress streams, logging notifications, a server-to-client
// elicitation, big bodies, resumable SSE, session headers, a client abort) must behave as it does direct.

import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema, LoggingMessageNotificationSchema, type LoggingMessageNotification } from '@modelcontextprotocol/sdk/types.js';
import { hashToken } from '../../src/model/credentials.ts';
import { rawRedis } from '../support/redis.ts';
import { progressOverSse, rawSession, readSse } from '../support/sse.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { storeUserToken } from '../support/user-tokens.ts';

function textOf(result: object): string {
  const content = 'content' in result ? result.content : undefined;
  const first = (content as Array<{ type: string; text?: string }> | undefined)?.[0];
  expect(first?.type).toBe('text');
  return first?.text ?? '';
}

let stack: Stack;

beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack?.close();
});

function userToken(subject: string): Promise<string> {
  return storeUserToken(stack, subject);
}

interface Connected {
  client: Client;
  transport: StreamableHTTPClientTransport;
  logs: Array<LoggingMessageNotification['params']>;
}

async function connect(token: string | undefined): Promise<Connected> {
  const client = new Client({ name: 'sidecar-e2e', version: '1.0.0' }, { capabilities: { elicitation: {} } });
  const logs: Connected['logs'] = [];
  client.setRequestHandler(ElicitRequestSchema, async (request) => ({
    action: 'accept',
    content: { answer: `yes to: ${request.params.message}` },
  }));
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logs.push(n.params));
  const transport = new StreamableHTTPClientTransport(new URL(stack.mcpUrl), {
    requestInit: token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  return { client, transport, logs };
}

const kinds: Array<{ kind: string; mint: () => Promise<{ token: string; subject: string; clientId?: string }> }> = [
  {
    kind: 'oauth',
    mint: async () => {
      const { token, clientId } = await stack.issueOAuthToken();
      return { token, subject: clientId, clientId };
    },
  },
  { kind: 'user', mint: async () => ({ token: await userToken('alice@example.com'), subject: 'alice@example.com' }) },
  { kind: 'master', mint: async () => ({ token: stack.masterToken, subject: 'master' }) },
];

describe.each(kinds)('the SDK client through the sidecar with a $kind token', ({ kind, mint }) => {
  let c: Connected;
  let token: string;
  let subject: string;
  let clientId: string | undefined;
  beforeAll(async () => {
    ({ token, subject, clientId } = await mint());
    c = await connect(token);
  });
  afterAll(async () => {
    await c?.client.close();
  });

  it('initializes and lists every tool', async () => {
    expect(c.client.getServerVersion()?.name).toBe('reference-upstream');
    const { tools } = await c.client.listTools();
    expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(['add', 'ask', 'big', 'echo', 'headers', 'log', 'progress']));
  });

  it('calls a tool, and the upstream sees who was authenticated, never the bearer token', async () => {
    expect(textOf(await c.client.callTool({ name: 'echo', arguments: { text: 'hé ✓' } }))).toBe('hé ✓');
    const seen = JSON.parse(textOf(await c.client.callTool({ name: 'headers', arguments: {} })));
    expect(seen.authorization).toBeUndefined();
    expect(JSON.stringify(seen)).not.toContain(token);
    expect(seen['x-mcp-auth-kind']).toBe(kind);
    expect(seen['x-mcp-auth-subject']).toBe(subject);
    expect(seen['x-mcp-auth-client-id']).toBe(clientId);
    // MCP session headers pass untouched in both directions.
    expect(seen['mcp-session-id']).toBe(c.transport.sessionId);
    expect(seen['mcp-protocol-version']).toBeTruthy();
  });
});

describe('MCP features through the sidecar (OAuth token)', () => {
  let c: Connected;
  let token: string;
  beforeAll(async () => {
    ({ token } = await stack.issueOAuthToken());
    c = await connect(token);
  });
  afterAll(async () => {
    await c?.client.close();
  });

  it('streams one progress notification per step, then the result', async () => {
    const seen: number[] = [];
    const result = await c.client.callTool({ name: 'progress', arguments: { steps: 6, delayMs: 5 } }, undefined, {
      onprogress: (p) => void seen.push(p.progress),
    });
    expect(textOf(result)).toBe('done 6');
    expect(seen).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('delivers a logging notification', async () => {
    const before = c.logs.length;
    const result = await c.client.callTool({ name: 'log', arguments: { message: 'disk almost full', level: 'warning' } });
    expect(textOf(result)).toContain('disk almost full');
    await vi.waitFor(() => expect(c.logs.length).toBeGreaterThan(before), { timeout: 5_000, interval: 5 });
    expect(c.logs.at(-1)).toMatchObject({ level: 'warning', data: 'disk almost full' });
  });

  it('round-trips a server-to-client request (elicitation) through the sidecar', async () => {
    const result = await c.client.callTool({ name: 'ask', arguments: { question: 'ship it?' } });
    expect(result.isError).toBeFalsy();
    expect(JSON.parse(textOf(result).slice('answer: '.length))).toEqual({ action: 'accept', content: { answer: 'yes to: ship it?' } });
  });

  it('carries a 3 MiB result whole', async () => {
    const bytes = 3 * 1024 * 1024 + 7;
    const text = textOf(await c.client.callTool({ name: 'big', arguments: { bytes } }));
    expect(text.length).toBe(bytes);
  });

  it('reads resources and prompts', async () => {
    const hello = await c.client.readResource({ uri: 'ref://hello' });
    expect(hello.contents[0]).toMatchObject({ uri: 'ref://hello', text: 'hello from the reference upstream' });
    const echo = await c.client.readResource({ uri: 'ref://echo/abc' });
    expect(echo.contents[0]).toMatchObject({ text: 'abc' });
    const prompt = await c.client.getPrompt({ name: 'greet', arguments: { name: 'Ada' } });
    expect(prompt.messages).toEqual([{ role: 'user', content: { type: 'text', text: 'Please greet Ada.' } }]);
  });
});

describe('Streamable HTTP on the wire through the sidecar', () => {
  let auth: Record<string, string>;
  beforeAll(async () => {
    auth = { authorization: `Bearer ${(await stack.issueOAuthToken()).token}` };
  });

  it('resumes a POST stream with Last-Event-ID: the replay passes through the sidecar', async () => {
    const session = await rawSession(stack.mcpUrl, auth);
    const original = await progressOverSse(stack.mcpUrl, session.headers(), 3);
    expect(original).toHaveLength(4);
    expect(original.every((e) => e.id)).toBe(true);

    const resumed = await fetch(stack.mcpUrl, { headers: session.headers({ 'last-event-id': original[0]!.id! }) });
    expect(resumed.status).toBe(200);
    expect(await readSse(resumed.body!, (events) => events.length >= 3)).toEqual(original.slice(1));
  });

  it('a client that aborts its GET stream closes the upstream stream too (nothing leaks upstream)', async () => {
    const session = await rawSession(stack.mcpUrl, auth);
    const upstream = stack.upstream!;
    const before = upstream.openStreams();
    const abort = new AbortController();
    const get = await fetch(stack.mcpUrl, { headers: session.headers(), signal: abort.signal });
    expect(get.status).toBe(200);
    expect(get.headers.get('content-type')).toContain('text/event-stream');
    await vi.waitFor(() => expect(upstream.openStreams()).toBe(before + 1), { timeout: 5_000, interval: 5 });
    abort.abort();
    await vi.waitFor(() => expect(upstream.openStreams()).toBe(before), { timeout: 5_000, interval: 5 });
    await vi.waitFor(() => expect(stack.sidecar.forwarder.inFlight()).toBe(0), { timeout: 5_000, interval: 5 });
  });

  it('DELETE ends the session upstream', async () => {
    const session = await rawSession(stack.mcpUrl, auth);
    const del = await fetch(stack.mcpUrl, { method: 'DELETE', headers: session.headers() });
    expect(del.status).toBe(200);
    const after = await fetch(stack.mcpUrl, {
      method: 'POST',
      headers: session.headers(),
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list' }),
    });
    expect(after.status).toBe(404);
  });
});

describe('refusals seen by the SDK client', () => {
  it('without a token the client cannot connect, and the upstream sees nothing', async () => {
    const before = stack.upstream!.seenHeaders.length;
    await expect(connect(undefined)).rejects.toThrow(/invalid_token|unauthorized|401/i);
    expect(stack.upstream!.seenHeaders.length).toBe(before);
  });

  it('an unknown token cannot connect', async () => {
    const before = stack.upstream!.seenHeaders.length;
    await expect(connect(randomBytes(32).toString('hex'))).rejects.toThrow(/invalid_token|unauthorized|401/i);
    expect(stack.upstream!.seenHeaders.length).toBe(before);
  });

  it('revoking a user-grade token by HSET ends an open session on its next request', async () => {
    const token = await userToken('bob@example.com');
    const c = await connect(token);
    try {
      expect(textOf(await c.client.callTool({ name: 'echo', arguments: { text: 'before' } }))).toBe('before');
      const raw = await rawRedis();
      await raw.hset(`${stack.prefix}userBearerTokens:${hashToken(token)}`, 'revoked', 'true');
      await raw.quit();
      const before = stack.upstream!.seenHeaders.length;
      await expect(c.client.callTool({ name: 'echo', arguments: { text: 'after' } })).rejects.toThrow(/invalid_token|unauthorized|401/i);
      expect(stack.upstream!.seenHeaders.length).toBe(before);
    } finally {
      await c.client.close();
    }
  });
});
