// Session and task handles belong to their caller: two official MCP SDK clients with two tokens
// through the sidecar (and through a second sidecar process on the same Redis). The one that did not
// receive a session id or a task id gets the upstream's own "unknown" answer for it, and the upstream
// never sees that request; the one that did keeps working.

import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CancelTaskResultSchema,
  CreateTaskResultSchema,
  GetTaskPayloadResultSchema,
  GetTaskResultSchema,
  ListTasksResultSchema,
  McpError,
} from '@modelcontextprotocol/sdk/types.js';
import { handleDigest } from '../../src/proxy/handles.ts';
import { keysUnder, rawRedis } from '../support/redis.ts';
import { serveOnLoopback } from '../support/fake-upstreams.ts';
import { startSidecarProcess, type SidecarProcess } from '../support/process.ts';
import { nodeTs } from '../support/node-ts.ts';
import { initializeRequest } from '../support/http.ts';
import { countedOnce } from '../support/requests-counted.ts';
import { startStack, type Stack } from '../support/stack.ts';

const SIDECAR = nodeTs('src/entry/main.ts');

function processEnv(upstreamUrl: string): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    HOST: '127.0.0.1',
    PORT: '0',
    ADMIN_PORT: '0',
    LOG_LEVEL: 'warn',
    LOG_FORMAT: 'json',
    UPSTREAM_URL: upstreamUrl,
  };
}

/** An SDK client with `token` on `mcpUrl`; with `sessionId`, it resumes that session (no initialize, as the SDK reconnects). */
async function connect(
  mcpUrl: string,
  token: string,
  sessionId?: string,
): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const client = new Client({ name: 'sessions-e2e', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
    ...(sessionId !== undefined ? { sessionId } : {}),
  });
  await client.connect(transport);
  return { client, transport };
}

/** What the SDK client throws for an HTTP error answer: its status and the body's text. */
async function httpFailure(call: Promise<unknown>): Promise<{ code: number; message: string }> {
  const err = await call.then(
    () => new Error('resolved'),
    (e: unknown) => e,
  );
  const { code, message } = err as { code?: number; message?: string };
  return { code: code ?? 0, message: message ?? '' };
}

describe('MCP sessions are bound to the caller that initialized them', () => {
  let stack: Stack;
  let second: SidecarProcess;
  let a: { token: string; clientId: string };
  let b: { token: string; clientId: string };

  beforeAll(async () => {
    stack = await startStack();
    a = await stack.issueOAuthToken();
    b = await stack.issueOAuthToken();
    // A second sidecar process on the same Redis and key prefix: another replica.
    second = await startSidecarProcess('sessions', SIDECAR, processEnv(stack.upstream!.url), [], {
      prefix: stack.prefix,
      master: stack.masterToken,
    } as SidecarProcess);
  });
  afterAll(async () => {
    await second?.cleanup();
    await stack?.close();
  });

  /** Requests the reference upstream saw from a client (by the identity the sidecar added). */
  const seenFrom = (clientId: string) => stack.upstream!.seenHeaders.filter((h) => h['x-mcp-auth-client-id'] === clientId);

  it("B presenting A's session id gets the SDK server's unknown-session 404, the upstream never sees it, and A keeps working", async () => {
    const alice = await connect(stack.mcpUrl, a.token);
    const sessionId = alice.transport.sessionId!;
    expect(sessionId).toBeTruthy();
    // Recorded by its SHA-256, never the id itself.
    const raw = await rawRedis();
    try {
      const keys = await keysUnder(raw, stack.prefix);
      expect(keys).toContain(`${stack.prefix}{oauth}:mcpHandles:session:${handleDigest(sessionId)}`);
      expect(keys.join('\n')).not.toContain(sessionId);
    } finally {
      await raw.quit();
    }

    const fromB = seenFrom(b.clientId).length;
    const bob = await connect(stack.mcpUrl, b.token, sessionId);
    const refused = await httpFailure(bob.client.listTools());
    expect(refused.code).toBe(404);
    expect(refused.message).toContain('Session not found');
    // The same answer, byte for byte, as the upstream gives an unknown session.
    const direct = await fetch(`${stack.mcpUrl}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${b.token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-session-id': sessionId,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(direct.status).toBe(404);
    expect(await direct.json()).toEqual({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
    const upstreamUnknown = await fetch(stack.upstream!.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': randomUUID() },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(upstreamUnknown.status).toBe(404);
    expect(await upstreamUnknown.json()).toEqual({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
    expect(seenFrom(b.clientId).length).toBe(fromB);

    expect((await alice.client.listTools()).tools.map((t) => t.name)).toContain('echo');
    await alice.client.close();
    await bob.client.close().catch(() => undefined);
  });

  it("B's request with A's session id is one request outcome: refused, as a foreign handle", async () => {
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const initialized = await fetch(stack.mcpUrl, {
      method: 'POST',
      headers: { ...headers, authorization: `Bearer ${a.token}` },
      body: JSON.stringify(initializeRequest('sessions-e2e')),
    });
    expect(initialized.status).toBe(200);
    await initialized.text();
    const sessionId = initialized.headers.get('mcp-session-id')!;
    const refused = await countedOnce(stack.adminUrl, { outcome: 'refused', reason: 'foreign_handle' }, () =>
      fetch(stack.mcpUrl, {
        method: 'POST',
        headers: { ...headers, authorization: `Bearer ${b.token}`, 'mcp-session-id': sessionId },
        body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
      }),
    );
    expect(refused.status).toBe(404);
    await refused.text();
  });

  it('the binding holds through a second sidecar process on the same Redis, both ways', async () => {
    // Initialized through the first sidecar, presented by B to the second: refused.
    const alice = await connect(stack.mcpUrl, a.token);
    const fromB = seenFrom(b.clientId).length;
    const bob = await connect(`${second.proxyUrl}/mcp`, b.token, alice.transport.sessionId!);
    const refused = await httpFailure(bob.client.listTools());
    expect(refused.code).toBe(404);
    expect(seenFrom(b.clientId).length).toBe(fromB);
    // A itself, through the second process, keeps its session.
    const aliceElsewhere = await connect(`${second.proxyUrl}/mcp`, a.token, alice.transport.sessionId!);
    expect((await aliceElsewhere.client.callTool({ name: 'echo', arguments: { text: 'via the other replica' } })).content).toEqual([
      { type: 'text', text: 'via the other replica' },
    ]);

    // Initialized through the second process, presented by B to the first: refused too.
    const aliceOnSecond = await connect(`${second.proxyUrl}/mcp`, a.token);
    const bobOnFirst = await connect(stack.mcpUrl, b.token, aliceOnSecond.transport.sessionId!);
    expect((await httpFailure(bobOnFirst.client.listTools())).code).toBe(404);
    expect(seenFrom(b.clientId).length).toBe(fromB);
    expect((await aliceOnSecond.client.listTools()).tools.length).toBeGreaterThan(0);

    for (const c of [alice, aliceElsewhere, aliceOnSecond]) await c.client.close();
    for (const c of [bob, bobOnFirst]) await c.client.close().catch(() => undefined);
  });

  it('DELETE ends a session: its record is forgotten once the upstream has accepted it', async () => {
    const alice = await connect(stack.mcpUrl, a.token);
    const key = `${stack.prefix}{oauth}:mcpHandles:session:${handleDigest(alice.transport.sessionId!)}`;
    const raw = await rawRedis();
    try {
      expect(await raw.exists(key)).toBe(1);
      // B's DELETE of A's session is refused like any other request, and ends nothing.
      const foreign = await fetch(stack.mcpUrl, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${b.token}`, 'mcp-session-id': alice.transport.sessionId! },
      });
      expect(foreign.status).toBe(404);
      expect(await raw.exists(key)).toBe(1);
      await alice.transport.terminateSession();
      expect(await raw.exists(key)).toBe(0);
    } finally {
      await raw.quit();
      await alice.client.close();
    }
  });
});

/** A task of the small upstream below. */
interface UpstreamTask {
  taskId: string;
  status: 'working' | 'completed' | 'cancelled';
  createdAt: string;
}

/**
 * A small MCP upstream with the Tasks extension (MCP 2025-11-25), which the reference upstream does not
 * have: it answers a task-augmented `tools/call` with a CreateTaskResult shaped as the specification's
 * example ({"task": {"taskId", "status": "working", "createdAt", "lastUpdatedAt", "ttl", "pollInterval"}}),
 * and `tasks/get`, `tasks/result`, `tasks/cancel` for its tasks, whoever asks (it knows no users), an
 * unknown task as the SDK answers it (-32602); `tasks/list` lists every task it has, to whoever asks
 * ({"tasks": [...]}, the specification's ListTasksResult, in one page). The tool `sse` answers over SSE,
 * every other as JSON; `tasks/list` answers as `listOver` says. `addTask` makes a task no caller created
 * through the sidecar (one from before the sidecar kept records, or whose record expired).
 */
async function startTaskUpstream() {
  const sessions = new Set<string>();
  const tasks = new Map<string, UpstreamTask>();
  const control = { listOver: 'json' as 'json' | 'sse' };
  const addTask = (): string => {
    const task: UpstreamTask = { taskId: randomUUID(), status: 'working', createdAt: new Date().toISOString() };
    tasks.set(task.taskId, task);
    return task.taskId;
  };
  const seen: Array<{ method: string; clientId: string | undefined }> = [];
  const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  };
  const taskView = (t: UpstreamTask) => ({ ...t, lastUpdatedAt: t.createdAt, ttl: 60000, pollInterval: 100 });
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const session = req.headers['mcp-session-id'] as string | undefined;
      if (req.method === 'GET')
        return json(res, 405, { jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed.' }, id: null });
      if (req.method === 'DELETE') {
        if (session !== undefined) sessions.delete(session);
        return json(res, 200, {});
      }
      const message = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id?: number | string; method: string; params?: any };
      seen.push({ method: message.method, clientId: req.headers['x-mcp-auth-client-id'] as string | undefined });
      if (message.method === 'initialize') {
        const id = randomUUID();
        sessions.add(id);
        return json(
          res,
          200,
          {
            jsonrpc: '2.0',
            id: message.id,
            result: {
              protocolVersion: message.params.protocolVersion,
              capabilities: { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
              serverInfo: { name: 'task-upstream', version: '1.0.0' },
            },
          },
          { 'mcp-session-id': id },
        );
      }
      if (session === undefined || !sessions.has(session))
        return json(res, 404, { jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
      if (message.id === undefined) {
        res.writeHead(202).end();
        return;
      }
      const answer = (result: unknown) => ({ jsonrpc: '2.0', id: message.id, result });
      const unknown = { jsonrpc: '2.0', id: message.id, error: { code: -32602, message: 'Failed to retrieve task: Task not found' } };
      const params = message.params ?? {};
      if (message.method === 'tools/call' && params.task) {
        const task: UpstreamTask = { taskId: randomUUID(), status: 'working', createdAt: new Date().toISOString() };
        tasks.set(task.taskId, task);
        const created = answer({ task: taskView(task) });
        if (params.name !== 'sse') return json(res, 200, created);
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(`event: message\ndata: ${JSON.stringify(created)}\n\n`);
        return;
      }
      if (message.method === 'tasks/list') {
        const listed = answer({ tasks: [...tasks.values()].map(taskView) });
        if (control.listOver === 'json') return json(res, 200, listed);
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(`event: message\ndata: ${JSON.stringify(listed)}\n\n`);
        return;
      }
      const task = typeof params.taskId === 'string' ? tasks.get(params.taskId) : undefined;
      if (message.method === 'tasks/get') return json(res, 200, task ? answer(taskView(task)) : unknown);
      if (message.method === 'tasks/result')
        return json(res, 200, task ? answer({ content: [{ type: 'text', text: `result of ${task.taskId}` }] }) : unknown);
      if (message.method === 'tasks/cancel') {
        if (!task) return json(res, 200, unknown);
        task.status = 'cancelled';
        return json(res, 200, answer(taskView(task)));
      }
      return json(res, 200, { jsonrpc: '2.0', id: message.id, error: { code: -32601, message: 'Method not found' } });
    });
  });
  const { url, close } = await serveOnLoopback(server);
  return { url, seen, close, control, addTask, taskIds: () => [...tasks.keys()] };
}

/** A policy that allows every call: the body is then read and decided by the policy gate, and tasks read from its decision. */
const ALLOW_ALL = { default: 'allow', rules: [{ name: 'tools', effect: 'allow', requests: { methods: ['tools/call'] } }] };

describe.each([
  { label: 'without a policy', config: {} },
  { label: 'with a policy', config: { policy: ALLOW_ALL } },
])('MCP tasks are decided by their owner ($label)', ({ config }) => {
  let upstream: Awaited<ReturnType<typeof startTaskUpstream>>;
  let stack: Stack;
  let alice: Client;
  let bob: Client;
  let b: { token: string; clientId: string };

  beforeAll(async () => {
    upstream = await startTaskUpstream();
    stack = await startStack({ upstreamUrl: upstream.url, config });
    const a = await stack.issueOAuthToken();
    b = await stack.issueOAuthToken();
    alice = (await connect(stack.mcpUrl, a.token)).client;
    bob = (await connect(stack.mcpUrl, b.token)).client;
  });
  afterAll(async () => {
    await alice?.close();
    await bob?.close();
    await stack?.close();
    await upstream?.close();
  });

  /** Task requests the upstream saw from B's client. */
  const taskRequestsFromB = () => upstream.seen.filter((s) => s.clientId === b.clientId && s.method.startsWith('tasks/'));

  /** B asking about `taskId` with each task method: the unknown-task error every time. */
  async function expectRefusedToB(taskId: string): Promise<void> {
    const requests = [
      bob.request({ method: 'tasks/get', params: { taskId } }, GetTaskResultSchema),
      bob.request({ method: 'tasks/result', params: { taskId } }, GetTaskPayloadResultSchema),
      bob.request({ method: 'tasks/cancel', params: { taskId } }, CancelTaskResultSchema),
    ];
    for (const request of requests) {
      const err = await request.then(
        () => new Error('resolved'),
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(McpError);
      expect((err as McpError).code).toBe(-32602);
      expect((err as McpError).message).toContain('Task not found');
    }
  }

  it.each(['json', 'sse'])(
    'a task created by A (its answer over %s) is refused to B for tasks/get, tasks/result and tasks/cancel, never forwarded; A gets all three',
    async (tool) => {
      const created = await alice.request(
        { method: 'tools/call', params: { name: tool, arguments: {}, task: { ttl: 60000 } } },
        CreateTaskResultSchema,
      );
      const taskId = created.task.taskId;
      expect(created.task.status).toBe('working');

      const before = taskRequestsFromB().length;
      await expectRefusedToB(taskId);
      expect(taskRequestsFromB().length).toBe(before);

      expect((await alice.request({ method: 'tasks/get', params: { taskId } }, GetTaskResultSchema)).taskId).toBe(taskId);
      expect(await alice.request({ method: 'tasks/result', params: { taskId } }, GetTaskPayloadResultSchema)).toMatchObject({
        content: [{ type: 'text', text: `result of ${taskId}` }],
      });
      expect((await alice.request({ method: 'tasks/cancel', params: { taskId } }, CancelTaskResultSchema)).status).toBe('cancelled');
    },
  );

  it.each(['json', 'sse'] as const)(
    "a tasks/list answer (over %s) that lists every caller's tasks reaches each caller with only its own: another's and unrecorded ones are removed",
    async (over) => {
      upstream.control.listOver = over;
      const create = (client: Client) =>
        client.request({ method: 'tools/call', params: { name: 'json', arguments: {}, task: { ttl: 60000 } } }, CreateTaskResultSchema);
      const mineA = (await create(alice)).task.taskId;
      const mineB = (await create(bob)).task.taskId;
      const unrecorded = upstream.addTask();
      // The upstream lists all three to anyone.
      expect(upstream.taskIds()).toEqual(expect.arrayContaining([mineA, mineB, unrecorded]));

      const listedTo = async (client: Client) =>
        (await client.request({ method: 'tasks/list', params: {} }, ListTasksResultSchema)).tasks.map((t) => t.taskId);
      const toA = await listedTo(alice);
      expect(toA).toContain(mineA);
      expect(toA).not.toContain(mineB);
      expect(toA).not.toContain(unrecorded);
      const toB = await listedTo(bob);
      expect(toB).toContain(mineB);
      expect(toB).not.toContain(mineA);
      expect(toB).not.toContain(unrecorded);
      // What is listed to each is exactly what each may ask about.
      for (const taskId of toB)
        expect((await bob.request({ method: 'tasks/get', params: { taskId } }, GetTaskResultSchema)).taskId).toBe(taskId);
    },
  );

  it("B's request naming A's task is one request outcome: refused, as a foreign handle", async () => {
    const created = await alice.request(
      { method: 'tools/call', params: { name: 'json', arguments: {}, task: { ttl: 60000 } } },
      CreateTaskResultSchema,
    );
    const refused = await countedOnce(stack.adminUrl, { outcome: 'refused', reason: 'foreign_handle' }, () =>
      fetch(stack.mcpUrl, {
        method: 'POST',
        headers: { authorization: `Bearer ${b.token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { taskId: created.task.taskId } }),
      }),
    );
    expect(refused.status).toBe(200);
    expect(await refused.json()).toMatchObject({ id: 1, error: { code: -32602 } });
  });

  it('B asking about a task nobody recorded reaches the upstream, which answers it as unknown', async () => {
    const before = taskRequestsFromB().length;
    const err = await bob.request({ method: 'tasks/get', params: { taskId: randomUUID() } }, GetTaskResultSchema).then(
      () => new Error('resolved'),
      (e: unknown) => e,
    );
    expect((err as McpError).code).toBe(-32602);
    expect(taskRequestsFromB().length).toBe(before + 1);
  });
});
