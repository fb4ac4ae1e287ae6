// Per-tool policy end to end: the official SDK client through the sidecar to the reference upstream
// (SSE answers, and a second upstream answering plain JSON), for allow, deny with the step-up
// challenge, step-up with a wider token, filtered lists, batches, the mirror headers and bad bodies.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { randomBytes } from 'node:crypto';
import { startUpstream, type RunningUpstream } from '../../examples/upstream/server.ts';
import { startEchoUpstream, type FakeUpstream } from '../support/fake-upstreams.ts';
import { initializeRequest } from '../support/http.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { storeUserToken } from '../support/user-tokens.ts';

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

/** Where a denial's authorization context travels (`_meta` of a tool result, `data` of an error). */
const AUTHORIZATION = 'io.modelcontextprotocol/authorization';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The policy.deny audit events the sidecar logged, oldest first. */
function denials(stack: Stack): Array<{ eventId: string; action: string; result: string; detail: Record<string, unknown> }> {
  return stack.logs
    .map((l) => JSON.parse(l))
    .filter((l) => l.audit?.action === 'policy.deny')
    .map((l) => l.audit);
}

function textOf(result: unknown): string {
  return (result as { content: Array<{ text: string }> }).content[0]?.text ?? '';
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
  it.skipIf(jsonResponses)(
    'a stream resumed with Last-Event-ID replays the tools/list answer filtered, as the POST answered it',
    async () => {
      const headers = {
        authorization: `Bearer ${plain}`,
        'mcp-session-id': session.transport.sessionId!,
        'mcp-protocol-version': '2025-11-25',
      };
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
      const resumed = await fetch(stack.mcpUrl, {
        method: 'GET',
        headers: { ...headers, accept: 'text/event-stream', 'last-event-id': primingId! },
        signal: controller.signal,
      });
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
    },
  );

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
    expect(JSON.parse(res.text)).toEqual({
      jsonrpc: '2.0',
      id: 7,
      error: { code: -32003, message: 'tools/call add is not allowed for this token' },
    });
    expect(res.text).not.toContain('math"'); // the rule's name stays in the audit trail
    expect(upstream.seenHeaders.length).toBe(before);
  });

  it('a call no scope would allow: 200, a tool error carrying the audit event id, no challenge; the upstream sees nothing', async () => {
    const before = upstream.seenHeaders.length;
    // Another client's token, so not in this session: a session belongs to the caller that opened it.
    const big = await post(stack, math, JSON.stringify(call(8, 'big')));
    expect(big.status).toBe(200);
    expect(big.headers.get('www-authenticate')).toBeNull();
    expect(big.headers.get('content-type')).toBe('application/json');
    const answer = JSON.parse(big.text);
    const contextId = answer.result?._meta?.[AUTHORIZATION]?.authorizationContextId as string;
    expect(contextId).toMatch(UUID);
    expect(answer).toEqual({
      jsonrpc: '2.0',
      id: 8,
      result: {
        isError: true,
        content: [{ type: 'text', text: expect.stringContaining('"big" is not available to you') }],
        _meta: { [AUTHORIZATION]: { reason: 'insufficient_authorization', remediation: 'unavailable', authorizationContextId: contextId } },
      },
    });
    expect(big.text).not.toContain('never-big'); // the rule's name stays in the audit trail
    expect(upstream.seenHeaders.length).toBe(before);
    expect(denials(stack).find((a) => a.eventId === contextId)).toMatchObject({
      result: 'insufficient_authorization',
      detail: { method: 'tools/call', name: 'big', rule: 'never-big' },
    });
  });

  it('a client that accepts only text/event-stream gets that answer as one SSE event', async () => {
    const big = await post(stack, plain, JSON.stringify(call('sse-only', 'big')), session, { accept: 'text/event-stream' });
    expect(big.status).toBe(200);
    expect(big.headers.get('content-type')).toBe('text/event-stream');
    const data = /^event: message\ndata: (.+)\n\n$/.exec(big.text)?.[1];
    expect(JSON.parse(data!)).toMatchObject({ id: 'sse-only', result: { isError: true } });
  });

  it('the SDK client sees a refusal a scope would lift as an error (the 403 challenge)', async () => {
    await expect(session.client.callTool({ name: 'add', arguments: { a: 1, b: 2 } })).rejects.toThrow(/is not allowed for this token/);
  });

  it('the SDK client calling a tool no scope allows gets a CallToolResult with isError and the authorization _meta, not an error', async () => {
    const result = await session.client.callTool({ name: 'big', arguments: {} });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/"big" is not available to you/);
    const context = (result._meta as Record<string, { reason: string; remediation: string; authorizationContextId: string }>)[
      AUTHORIZATION
    ]!;
    expect(context).toMatchObject({ reason: 'insufficient_authorization', remediation: 'unavailable' });
    // The audit line that records this denial (the first of its kind in the aggregation window) carries the id.
    expect(denials(stack).find((a) => a.eventId === context.authorizationContextId)).toMatchObject({
      action: 'policy.deny',
      detail: { name: 'big' },
    });
    // Counted as refused, not forwarded.
    const metrics = await (await fetch(`${stack.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/^mcp_auth_requests_total\{outcome="refused",reason="insufficient_authorization"\} [1-9]/m);
    // The session goes on: the next call works.
    expect(textOf(await session.client.callTool({ name: 'echo', arguments: { text: 'after' } }))).toBe('after');
  });

  it('resources/read, resources/subscribe no scope would allow: 200 with a JSON-RPC error carrying the authorization context', async () => {
    for (const [id, method, params] of [
      [21, 'resources/read', { uri: 'ref://other' }],
      [22, 'resources/subscribe', { uri: 'ref://other' }],
    ] as const) {
      const res = await post(stack, plain, JSON.stringify({ jsonrpc: '2.0', id, method, params }), session);
      expect(res.status, method).toBe(200);
      expect(res.headers.get('www-authenticate')).toBeNull();
      const answer = JSON.parse(res.text);
      expect(answer).toEqual({
        jsonrpc: '2.0',
        id,
        error: {
          code: -32003,
          message: `${method} ${Object.values(params)[0]} is not allowed for this token, and no other authorization would allow it`,
          data: {
            [AUTHORIZATION]: {
              reason: 'insufficient_authorization',
              remediation: 'unavailable',
              authorizationContextId: expect.stringMatching(UUID),
            },
          },
        },
      });
    }
    await expect(session.client.readResource({ uri: 'ref://other' })).rejects.toThrow(
      /MCP error -32003: resources\/read ref:\/\/other is not allowed/,
    );
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

  it('a batch with a call no scope would allow is denied whole: 403 without a scope, each request answered with the context', async () => {
    const before = upstream.seenHeaders.length;
    const res = await post(stack, plain, JSON.stringify([call(1, 'echo', { text: 'a' }), call(2, 'big')]), session);
    expect(res.status).toBe(403);
    expect(res.headers.get('www-authenticate')).not.toContain('scope=');
    const answers = JSON.parse(res.text) as Array<{ id: number; error: { data: Record<string, { authorizationContextId: string }> } }>;
    expect(answers.map((a) => a.id)).toEqual([1, 2]);
    expect(answers[0]!.error.data[AUTHORIZATION]!.authorizationContextId).toMatch(UUID);
    expect(upstream.seenHeaders.length).toBe(before);
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
    expect(JSON.parse(wrongMethod.text)).toMatchObject({
      error: 'invalid_request',
      error_description: 'the Mcp-Method header does not match the body',
    });
    // A header that names an allowed tool cannot carry a denied one past the sidecar.
    const smuggled = await post(stack, plain, JSON.stringify(call(4, 'add', { a: 1, b: 1 })), session, {
      'mcp-method': 'tools/call',
      'mcp-name': 'echo',
    });
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
    const token = await storeUserToken(stack, 'u-1');
    for (const t of [token, stack.masterToken]) {
      const s = await connect(stack.mcpUrl, t);
      try {
        expect((await s.client.listPrompts()).prompts).toEqual([]);
        // No scope would allow it (user-grade and master tokens carry none): a JSON-RPC error at 200.
        await expect(s.client.getPrompt({ name: 'greet', arguments: { name: 'x' } })).rejects.toThrow(
          /MCP error -32003: prompts\/get greet is not allowed for this token/,
        );
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
    expect((await explain({ token: oauth, method: 'tools/call', name: 'echo' })).body).toMatchObject({
      effect: 'allow',
      decidedBy: 'rule',
      rule: 'everyone-echo',
    });
    expect((await explain({ token: oauth, method: 'tools/call', name: 'add' })).body).toMatchObject({
      effect: 'deny',
      decidedBy: 'default',
      scope: 'mcp:math',
    });
    expect((await explain({ token: oauth, method: 'tools/call', name: 'big' })).body).toMatchObject({
      effect: 'deny',
      decidedBy: 'rule',
      rule: 'never-big',
    });
    expect((await explain({ token: stack.masterToken, method: 'prompts/get', name: 'greet' })).body).toMatchObject({
      effect: 'deny',
      principal: { kind: 'master' },
    });
    expect((await explain({ token: oauth, method: 'tools/list' })).body).toMatchObject({ effect: 'allow', decidedBy: 'always allowed' });
    expect((await explain({ token: randomBytes(32).toString('hex'), method: 'tools/call', name: 'echo' })).body).toMatchObject({
      effect: 'deny',
      decidedBy: 'token',
    });
    const bad = await explain({ token: oauth });
    expect(bad).toMatchObject({
      status: 400,
      body: { error: 'invalid_request', error_description: 'method must be a JSON-RPC method name' },
    });
    expect((await explain({ method: 'tools/call' })).status).toBe(400);
  });

  it('a denial is an audit event naming the rule, and a metric labelled by rule only', async () => {
    const s = await connect(stack.mcpUrl, oauth);
    try {
      expect(await s.client.callTool({ name: 'big', arguments: {} })).toMatchObject({ isError: true });
      await expect(s.client.callTool({ name: 'add', arguments: {} })).rejects.toThrow(/is not allowed for this token/);
    } finally {
      await s.client.close();
    }
    const audit = denials(stack);
    expect(audit.at(-2)).toMatchObject({
      eventId: expect.stringMatching(UUID),
      result: 'insufficient_authorization',
      detail: { method: 'tools/call', name: 'big', rule: 'never-big' },
    });
    expect(audit.at(-1)).toMatchObject({
      eventId: expect.stringMatching(UUID),
      result: 'insufficient_scope',
      detail: { method: 'tools/call', name: 'add', rule: 'default' },
    });
    const metrics = await (await fetch(`${stack.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/mcp_auth_policy_denials_total\{rule="never-big"\} [1-9]/);
  });
});

describe('per-tool policy behind an ingress (forward-auth): denials stay 403', () => {
  let stack: Stack;
  let oauth: string;

  beforeAll(async () => {
    stack = await startStack({ config: { proxy: { forwardAuth: true }, policy: POLICY } });
    ({ token: oauth } = await stack.issueOAuthToken());
  });
  afterAll(async () => {
    await stack?.close();
  });

  // nginx's auth_request takes any 2xx from the check as "allowed" and forwards the request: a tool
  // error at 200 cannot reach the client through it, so /authz answers 403 either way.
  const ask = (name: string) =>
    fetch(`${stack.proxyUrl}/authz`, {
      headers: {
        authorization: `Bearer ${oauth}`,
        'x-original-method': 'POST',
        'x-original-uri': '/mcp',
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'tools/call',
        'mcp-name': name,
      },
    });

  it('no scope would lift it: 403 without a scope, the JSON-RPC error carrying the audit event id', async () => {
    const res = await ask('big');
    expect(res.status).toBe(403);
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer error="insufficient_scope", resource_metadata=/);
    const answer = (await res.json()) as { id: null; error: { data: Record<string, { authorizationContextId: string }> } };
    expect(answer).toMatchObject({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32003, data: { [AUTHORIZATION]: { reason: 'insufficient_authorization', remediation: 'unavailable' } } },
    });
    const contextId = answer.error.data[AUTHORIZATION]!.authorizationContextId;
    expect(denials(stack).find((a) => a.eventId === contextId)).toMatchObject({
      result: 'insufficient_authorization',
      detail: { name: 'big' },
    });
  });

  it('a scope would lift it: the step-up challenge', async () => {
    const res = await ask('add');
    expect(res.status).toBe(403);
    expect(res.headers.get('www-authenticate')).toContain('scope="mcp:math"');
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
    [
      'too deep',
      `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":${'['.repeat(70)}${']'.repeat(70)}}}`,
      400,
      /nested deeper/,
    ],
    [
      'a batch over the bound',
      JSON.stringify(Array.from({ length: 11 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'ping' }))),
      400,
      /at most 10 messages/,
    ],
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
