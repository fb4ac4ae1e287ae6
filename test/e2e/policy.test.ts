// Per-tool policy end to end: the official SDK client through the sidecar to the reference upstream
// (SSE answers, and a second upstream answering plain JSON), for allow, deny with the step-up
// challenge, step-up with a wider token, filtered lists, batches, the mirror headers and bad bodies.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { randomBytes } from 'node:crypto';
import { startUpstream, type RunningUpstream } from '../../examples/upstream/server.ts';
import { hashToken, TTL_7_DAYS } from '../../src/credentials.ts';
import { startEchoUpstream, type FakeUpstream } from '../support/fake-upstreams.ts';
import { initializeRequest } from '../support/http.ts';
import { startStack, type Stack } from '../support/stack.ts';

const POLICY = {
  default: 'deny',
  rules: [
    { name: 'never-big', effect: 'deny', requests: { methods: ['tools/call'], names: ['big'] } },
    { name: 'everyone-echo', effect: 'allow', requests: { methods: ['tools/call'], names: ['echo', 'headers'] } },
    { name: 'math', effect: 'allow', principals: { scopes: ['mcp:math'] }, requests: { methods: ['tools/call'], names: ['add'] } },
    { name: 'hello', effect: 'allow', requests: { methods: ['resources/*'], names: ['ref://hello'] } },
    { name: 'oauth-prompts', effect: 'allow', principals: { kinds: ['oauth'] }, requests: { methods: ['prompts/get'] } },
  ],
};

interface Session {
  client: Client;
  transport: StreamableHTTPClientTransport;
}

async function connect(mcpUrl: string, token: string): Promise<Session> {
  const client = new Client({ name: 'policy-e2e', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers: { authorization: `Bearer ${token}` } } });
  await client.connect(transport);
  return { client, transport };
}

/** A raw POST in the session of `s` (its session id and protocol version), as a client would send it. */
async function post(stack: Stack, token: string, body: string, s?: Session, headers: Record<string, string> = {}) {
  const res = await fetch(stack.mcpUrl, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(s?.transport.sessionId ? { 'mcp-session-id': s.transport.sessionId, 'mcp-protocol-version': '2025-06-18' } : {}),
      ...headers,
    },
    body,
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

function call(id: number | string, name: string, args: Record<string, unknown> = {}) {
  return { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } };
}

/** The tool names of the SSE event in `sse` that answers request `id`, sorted. */
function toolNamesIn(sse: string, id: string): string[] | undefined {
  for (const event of sse.split(/\r?\n\r?\n/)) {
    const data = event
      .split(/\r?\n/)
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(l.startsWith('data: ') ? 6 : 5))
      .join('\n');
    if (!data.includes(`"${id}"`)) continue;
    const message = JSON.parse(data) as { result?: { tools?: Array<{ name: string }> } };
    return message.result?.tools?.map((t) => t.name).sort();
  }
  return undefined;
}

function textOf(result: unknown): string {
  return ((result as { content: Array<{ text: string }> }).content[0]?.text) ?? '';
}

describe.each([
  { answers: 'SSE', jsonResponses: false },
  { answers: 'JSON', jsonResponses: true },
])('per-tool policy, upstream answering $answers', ({ jsonResponses }) => {
  let upstream: RunningUpstream;
  let stack: Stack;
  let plain: string;
  let math: string;
  let session: Session;

  beforeAll(async () => {
    upstream = await startUpstream({ host: '127.0.0.1', port: 0, jsonResponses });
    stack = await startStack({ upstreamUrl: upstream.url, config: { policy: POLICY } });
    ({ token: plain } = await stack.issueOAuthToken());
    const { clientId } = await stack.issueOAuthToken();
    const issued = await stack.admin('createAccessToken', { clientId, lifetimeSeconds: 600, scope: 'mcp:math' });
    math = issued.body.accessToken;
    session = await connect(stack.mcpUrl, plain);
  });
  afterAll(async () => {
    await session?.client.close();
    await stack?.close();
    await upstream?.close();
  });

  it('lists only what the token may use', async () => {
    const { tools } = await session.client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(['echo', 'headers']);
    const { resources } = await session.client.listResources();
    expect(resources.map((r) => r.uri)).toEqual(['ref://hello']);
    const { prompts } = await session.client.listPrompts();
    expect(prompts.map((p) => p.name)).toEqual(['greet']);
  });

  // The reference upstream keeps its SSE events (an SDK EventStore) and, for protocol 2025-11-25,
  // opens each POST answer with a priming event carrying an id; a GET with Last-Event-ID set to it
  // has the SDK replay that answer on the GET stream (webStandardStreamableHttp.js, replayEvents).
  it.skipIf(jsonResponses)('a stream resumed with Last-Event-ID replays the tools/list answer filtered, as the POST answered it', async () => {
    const headers = { authorization: `Bearer ${plain}`, 'mcp-session-id': session.transport.sessionId!, 'mcp-protocol-version': '2025-11-25' };
    const answered = await fetch(stack.mcpUrl, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 'replay-me', method: 'tools/list' }),
    });
    const text = await answered.text();
    const primingId = /^id: (.+)$/m.exec(text)?.[1];
    expect(primingId, text).toBeDefined();
    expect(toolNamesIn(text, 'replay-me')).toEqual(['echo', 'headers']);

    const controller = new AbortController();
    const resumed = await fetch(stack.mcpUrl, { method: 'GET', headers: { ...headers, accept: 'text/event-stream', 'last-event-id': primingId! }, signal: controller.signal });
    expect(resumed.status).toBe(200);
    expect(resumed.headers.get('content-type')).toContain('text/event-stream');
    // The stream stays open after the replay: read until the replayed answer has arrived.
    const reader = resumed.body!.getReader();
    const decoder = new TextDecoder();
    let replayed = '';
    while (!replayed.includes('"replay-me"') || !/\n\n/.test(replayed.slice(replayed.indexOf('"replay-me"')))) {
      const { value, done } = await reader.read();
      if (done) break;
      replayed += decoder.decode(value, { stream: true });
    }
    controller.abort();
    expect(toolNamesIn(replayed, 'replay-me')).toEqual(['echo', 'headers']);
    expect(replayed).not.toContain('"add"');
    expect(replayed).not.toContain('"big"');
  });

  it('an allowed call goes through', async () => {
    expect(textOf(await session.client.callTool({ name: 'echo', arguments: { text: 'ok' } }))).toBe('ok');
    const read = await session.client.readResource({ uri: 'ref://hello' });
    expect(read.contents[0]).toMatchObject({ uri: 'ref://hello' });
  });

  it('a denied call: 403 with the step-up challenge and a JSON-RPC error naming only what was asked; the upstream sees nothing', async () => {
    const before = upstream.seenHeaders.length;
    const res = await post(stack, plain, JSON.stringify(call(7, 'add', { a: 1, b: 2 })), session);
    expect(res.status).toBe(403);
    expect(res.headers.get('www-authenticate')).toBe(
      `Bearer error="insufficient_scope", scope="mcp:math", resource_metadata="${stack.proxyUrl.replace('127.0.0.1', 'localhost')}/.well-known/oauth-protected-resource/mcp"`,
    );
    expect(JSON.parse(res.text)).toEqual({ jsonrpc: '2.0', id: 7, error: { code: -32003, message: 'tools/call add is not allowed for this token' } });
    expect(res.text).not.toContain('math"'); // the rule's name stays in the audit trail
    expect(upstream.seenHeaders.length).toBe(before);
    // Denied whatever scope: no challenge scope. (Another client's token, so not in this session: a
    // session belongs to the caller that opened it, and another caller presenting it gets a 404.)
    const big = await post(stack, math, JSON.stringify(call(8, 'big')));
    expect(big.status).toBe(403);
    expect(big.headers.get('www-authenticate')).not.toContain('scope=');
  });

  it('the SDK client sees the refusal as an error', async () => {
    await expect(session.client.callTool({ name: 'add', arguments: { a: 1, b: 2 } })).rejects.toThrow(/is not allowed for this token/);
  });

  it('step-up: a token with the named scope gets through, and sees the tool listed', async () => {
    const wider = await connect(stack.mcpUrl, math);
    try {
      expect(textOf(await wider.client.callTool({ name: 'add', arguments: { a: 2, b: 3 } }))).toBe('5');
      const { tools } = await wider.client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual(['add', 'echo', 'headers']);
    } finally {
      await wider.client.close();
    }
  });

  it('a batch with one denied call is denied whole', async () => {
    const before = upstream.seenHeaders.length;
    const res = await post(stack, plain, JSON.stringify([call(1, 'echo', { text: 'a' }), call(2, 'add', { a: 1, b: 1 })]), session);
    expect(res.status).toBe(403);
    expect(JSON.parse(res.text)).toEqual([
      { jsonrpc: '2.0', id: 1, error: { code: -32003, message: 'tools/call add is not allowed for this token' } },
      { jsonrpc: '2.0', id: 2, error: { code: -32003, message: 'tools/call add is not allowed for this token' } },
    ]);
    expect(upstream.seenHeaders.length).toBe(before);
  });

  it('Mcp-Method and Mcp-Name must say what the body says', async () => {
    const body = JSON.stringify(call(3, 'echo', { text: 'x' }));
    expect((await post(stack, plain, body, session, { 'mcp-method': 'tools/call', 'mcp-name': 'echo' })).status).toBe(200);
    const wrongMethod = await post(stack, plain, body, session, { 'mcp-method': 'tools/list' });
    expect(wrongMethod.status).toBe(400);
    expect(JSON.parse(wrongMethod.text)).toMatchObject({ error: 'invalid_request', error_description: 'the Mcp-Method header does not match the body' });
    // A header that names an allowed tool cannot carry a denied one past the sidecar.
    const smuggled = await post(stack, plain, JSON.stringify(call(4, 'add', { a: 1, b: 1 })), session, { 'mcp-method': 'tools/call', 'mcp-name': 'echo' });
    expect(smuggled.status).toBe(400);
  });
});

describe('per-tool policy: principals and bad bodies', () => {
  let stack: Stack;
  let oauth: string;

  beforeAll(async () => {
    stack = await startStack({ config: { policy: { ...POLICY, maxBodyBytes: 4096, maxBatch: 10 } } });
    ({ token: oauth } = await stack.issueOAuthToken());
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('a user-grade token gets the rules for its kind (no prompts), the master token too', async () => {
    const token = randomBytes(32).toString('hex');
    const now = stack.clock.now();
    await stack.store.putUserToken({ tokenHash: hashToken(token), subject: 'u-1', issuer: 'https://idp.example', createdAt: now, expiresAt: now + TTL_7_DAYS });
    for (const t of [token, stack.masterToken]) {
      const s = await connect(stack.mcpUrl, t);
      try {
        expect((await s.client.listPrompts()).prompts).toEqual([]);
        await expect(s.client.getPrompt({ name: 'greet', arguments: { name: 'x' } })).rejects.toThrow(/is not allowed for this token/);
        expect(textOf(await s.client.callTool({ name: 'echo', arguments: { text: 'y' } }))).toBe('y');
      } finally {
        await s.client.close();
      }
    }
  });

  it('scopes_supported in both metadata documents: every scope the policy names', async () => {
    const resource = (await (await fetch(`${stack.proxyUrl}/.well-known/oauth-protected-resource/mcp`)).json()) as Record<string, unknown>;
    const server = (await (await fetch(`${stack.proxyUrl}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
    expect(resource.scopes_supported).toEqual(['mcp:math']);
    expect(server.scopes_supported).toEqual(['mcp:math']);
  });

  it('explainPolicy: which rule decides, and why (a dry run over the admin listener)', async () => {
    const explain = (body: Record<string, unknown>) => stack.admin('explainPolicy', body);
    expect((await explain({ token: oauth, method: 'tools/call', name: 'echo' })).body).toMatchObject({ effect: 'allow', decidedBy: 'rule', rule: 'everyone-echo' });
    expect((await explain({ token: oauth, method: 'tools/call', name: 'add' })).body).toMatchObject({ effect: 'deny', decidedBy: 'default', scope: 'mcp:math' });
    expect((await explain({ token: oauth, method: 'tools/call', name: 'big' })).body).toMatchObject({ effect: 'deny', decidedBy: 'rule', rule: 'never-big' });
    expect((await explain({ token: stack.masterToken, method: 'prompts/get', name: 'greet' })).body).toMatchObject({ effect: 'deny', principal: { kind: 'master' } });
    expect((await explain({ token: oauth, method: 'tools/list' })).body).toMatchObject({ effect: 'allow', decidedBy: 'always allowed' });
    expect((await explain({ token: randomBytes(32).toString('hex'), method: 'tools/call', name: 'echo' })).body).toMatchObject({ effect: 'deny', decidedBy: 'token' });
    const bad = await explain({ token: oauth });
    expect(bad).toMatchObject({ status: 400, body: { error: 'invalid_request', error_description: 'method must be a JSON-RPC method name' } });
    expect((await explain({ method: 'tools/call' })).status).toBe(400);
  });

  it('a denial is an audit event naming the rule, and a metric labelled by rule only', async () => {
    const s = await connect(stack.mcpUrl, oauth);
    try {
      await expect(s.client.callTool({ name: 'big', arguments: {} })).rejects.toThrow(/is not allowed for this token/);
    } finally {
      await s.client.close();
    }
    const audit = stack.logs.map((l) => JSON.parse(l)).filter((l) => l.audit?.action === 'policy.deny');
    expect(audit.at(-1)?.audit).toMatchObject({ result: 'insufficient_scope', detail: { method: 'tools/call', name: 'big', rule: 'never-big' } });
    const metrics = await (await fetch(`${stack.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/mcp_auth_policy_denials_total\{rule="never-big"\} [1-9]/);
  });

});

describe('per-tool policy: bad bodies', () => {
  let echo: FakeUpstream;
  let stack: Stack;
  let oauth: string;

  beforeAll(async () => {
    echo = await startEchoUpstream();
    stack = await startStack({ upstreamUrl: echo.url, config: { policy: { ...POLICY, maxBodyBytes: 4096, maxBatch: 10 } } });
    ({ token: oauth } = await stack.issueOAuthToken());
  });
  afterAll(async () => {
    await stack?.close();
    await echo?.close();
  });

  it('an allowed body reaches the upstream byte for byte', async () => {
    const body = JSON.stringify(call(1, 'echo', { text: 'héllo' }));
    const res = await post(stack, oauth, body);
    expect(res.status).toBe(200);
    expect(echo.seen.at(-1)).toMatchObject({ method: 'POST', bodyBytes: Buffer.byteLength(body) });
    expect(echo.seen.at(-1)!.headers['content-length']).toBe(String(Buffer.byteLength(body)));
  });

  it.each([
    ['not JSON', '{"jsonrpc":', 400, /not JSON/],
    ['not JSON-RPC', '{"id":1,"method":"ping"}', 400, /JSON-RPC 2\.0/],
    ['too deep', `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":${'['.repeat(70)}${']'.repeat(70)}}}`, 400, /nested deeper/],
    ['a batch over the bound', JSON.stringify(Array.from({ length: 11 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'ping' }))), 400, /at most 10 messages/],
    ['a duplicate id', JSON.stringify([call(1, 'echo', { text: 'a' }), call(1, 'echo', { text: 'b' })]), 400, /duplicate id/],
    ['a method that is not a string', '{"jsonrpc":"2.0","id":1,"method":["tools/call"]}', 400, /method must be a non-empty string/],
    ['a body over policy.maxBodyBytes', JSON.stringify(call(1, 'echo', { text: 'x'.repeat(5000) })), 413, /limited to 4096 bytes/],
  ])('%s: a clear error, nothing forwarded', async (_label, body, status, message) => {
    const before = echo.seen.length;
    const res = await post(stack, oauth, body);
    expect(res.status).toBe(status);
    expect(JSON.parse(res.text).error_description).toMatch(message);
    expect(echo.seen.length).toBe(before);
  });

  it('a batch of 10,000 calls is refused without a crash; the sidecar keeps serving', async () => {
    const huge = JSON.stringify(Array.from({ length: 10_000 }, (_, i) => call(i, 'echo', { text: 'a' })));
    const big = await startStack({ config: { policy: POLICY } });
    try {
      const { token } = await big.issueOAuthToken();
      const res = await post(big, token, huge);
      expect([400, 413]).toContain(res.status);
      const init = await post(big, token, JSON.stringify(initializeRequest('after-flood')));
      expect(init.status).toBe(200);
    } finally {
      await big.close();
    }
  });
});
