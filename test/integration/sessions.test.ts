// Session and task handles at the proxy listener, over real sockets with a real Redis: forward-auth
// binding a session id to its first presenter, an unrecorded id bound to the first caller the
// upstream accepts it from, deleteClient forgetting a client's handles, Redis down failing closed, and
// the request shapes the sidecar refuses because it could not tell which task they name.

import { randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { handleDigest, handleOwner } from '../../src/proxy/handles.ts';
import { TASK_SCAN_BYTES } from '../../src/proxy/handle-guard.ts';
import { createServer } from 'node:http';
import { StoreDecorator, type StoreOperation } from '../../src/store/decorator.ts';
import { StoreUnavailableError } from '../../src/store/shared.ts';
import { serveOnLoopback, startEchoUpstream, type FakeUpstream } from '../support/fake-upstreams.ts';
import { startRedisServer, type RedisServer } from '../support/redis-server.ts';
import { rawRedis } from '../support/redis.ts';
import { countedOnce } from '../support/requests-counted.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { exchange } from '../hostile/raw-http.ts';

const UNKNOWN_SESSION = { jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null };

async function answerOf(res: Response): Promise<{ status: number; body: any }> {
  const text = await res.text();
  return { status: res.status, body: text === '' ? undefined : JSON.parse(text) };
}

/** A JSON-RPC POST to /mcp as an MCP client sends it (Streamable HTTP: JSON body, both answer types accepted). */
function post(stack: Stack, token: string, message: unknown, headers: Record<string, string> = {}) {
  return fetch(stack.mcpUrl, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...headers,
    },
    body: JSON.stringify(message),
  }).then(answerOf);
}

describe('forward-auth: a session id is bound to the first principal that presents it', () => {
  let echo: FakeUpstream;
  let stack: Stack;
  let authz: string;

  beforeAll(async () => {
    echo = await startEchoUpstream();
    stack = await startStack({ upstreamUrl: echo.url, config: { proxy: { forwardAuth: true } } });
    authz = `${stack.proxyUrl}/authz`;
  });
  afterAll(async () => {
    await stack.close();
    await echo.close();
  });

  /** nginx's auth_request subrequest (examples/nginx/): GET, the original request in X-Original-*, the client's headers. */
  const nginx = (token: string, headers: Record<string, string>) =>
    fetch(authz, { headers: { 'x-original-uri': '/mcp', 'x-original-method': 'POST', authorization: `Bearer ${token}`, ...headers } }).then(
      answerOf,
    );

  it("binds on first presentation; another principal gets /mcp's unknown-session 404 from /authz, the first keeps 200", async () => {
    const a = await stack.issueOAuthToken();
    const b = await stack.issueOAuthToken();
    const session = randomUUID();
    expect((await nginx(a.token, { 'mcp-session-id': session })).status).toBe(200);
    // One request outcome: refused, as a foreign handle.
    const refused = await countedOnce(stack.adminUrl, { outcome: 'refused', reason: 'foreign_handle' }, () =>
      nginx(b.token, { 'mcp-session-id': session }),
    );
    expect(refused).toEqual({ status: 404, body: UNKNOWN_SESSION });
    expect((await nginx(a.token, { 'mcp-session-id': session })).status).toBe(200);
    // The same principal with another token of its client keeps it too (the identity is kind, subject, client).
    const again = await stack.admin('createAccessToken', { clientId: a.clientId, lifetimeSeconds: 600 });
    expect((await nginx(again.body.accessToken, { 'mcp-session-id': session })).status).toBe(200);
    // Counted and audited, never with the id itself.
    const scrape = await (await fetch(`${stack.adminUrl}/metrics`)).text();
    expect(scrape).toMatch(/mcp_auth_foreign_handles_total\{handle="session"\} [1-9]/);
    const audited = stack.logs.filter((l) => l.includes('handle.session.foreign'));
    expect(audited.length).toBeGreaterThan(0);
    expect(audited.join('\n')).not.toContain(session);
    expect(audited.join('\n')).toContain(handleDigest(session).slice(0, 8));
    // Without a session id nothing is bound.
    expect((await nginx(b.token, {})).status).toBe(200);
    expect(echo.seen.length).toBe(0);
  });

  it('a session id sent twice is refused (400), as is a request to /mcp with two', async () => {
    const a = await stack.issueOAuthToken();
    const port = Number(new URL(stack.proxyUrl).port);
    const twice = (target: string, extra: string) =>
      exchange(
        port,
        `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${a.token}\r\n${extra}Mcp-Session-Id: s1\r\nMcp-Session-Id: s2\r\nConnection: close\r\n\r\n`,
      );
    const viaAuthz = await twice('/authz', 'X-Original-URI: /mcp\r\nX-Original-Method: GET\r\n');
    expect(viaAuthz.responses[0]?.status).toBe(400);
    const direct = await twice('/mcp', '');
    expect(direct.responses[0]?.status).toBe(400);
    // One of them alone is fine.
    expect((await nginx(a.token, { 'mcp-session-id': 's1' })).status).toBe(200);
  });
});

/** The store, counting the reads of handle records (everything else as it is). */
class CountsHandleReads extends StoreDecorator {
  count = 0;
  protected around<T>(operation: StoreOperation, call: () => Promise<T>): Promise<T> {
    if (operation === 'readHandle') this.count++;
    return call();
  }
}

describe('proxy mode: unrecorded session ids, deleteClient, and what cannot be read', () => {
  let echo: FakeUpstream;
  let stack: Stack;
  let reads: CountsHandleReads;

  beforeAll(async () => {
    echo = await startEchoUpstream();
    stack = await startStack({ upstreamUrl: echo.url, wrapStore: (store) => (reads = new CountsHandleReads(store)) });
  });
  afterAll(async () => {
    await stack.close();
    await echo.close();
  });

  it('an unrecorded session id goes to the upstream; once it accepts it (2xx), it is bound to that caller, and deleteClient forgets it', async () => {
    const a = await stack.issueOAuthToken();
    const b = await stack.issueOAuthToken();
    const session = randomUUID();
    const before = echo.seen.length;
    expect((await post(stack, a.token, { jsonrpc: '2.0', id: 1, method: 'ping' }, { 'mcp-session-id': session })).status).toBe(200);
    expect(echo.seen.length).toBe(before + 1);
    expect(await post(stack, b.token, { jsonrpc: '2.0', id: 1, method: 'ping' }, { 'mcp-session-id': session })).toEqual({
      status: 404,
      body: UNKNOWN_SESSION,
    });
    expect(echo.seen.length).toBe(before + 1);

    const key = `${stack.prefix}{oauth}:mcpHandles:session:${handleDigest(session)}`;
    const raw = await rawRedis();
    try {
      expect(await raw.exists(key)).toBe(1);
      expect((await stack.admin('deleteClient', { clientId: a.clientId })).status).toBe(200);
      expect(await raw.exists(key)).toBe(0);
      expect(await raw.exists(`${stack.prefix}{oauth}:mcpHandlesByClient:${a.clientId}`)).toBe(0);
    } finally {
      await raw.quit();
    }
    // Forgotten: the id is unrecorded again (the upstream decides on it, as before the sidecar kept ids).
    expect((await post(stack, b.token, { jsonrpc: '2.0', id: 2, method: 'ping' }, { 'mcp-session-id': session })).status).toBe(200);
  });

  it("the owner's use renews the record once a sixteenth of proxy.handleIdleMs has passed since the last renewal, not before", async () => {
    const a = await stack.issueOAuthToken(86_400);
    const session = randomUUID();
    const ping = (id: number) => post(stack, a.token, { jsonrpc: '2.0', id, method: 'ping' }, { 'mcp-session-id': session });
    expect((await ping(1)).status).toBe(200);
    const key = `${stack.prefix}{oauth}:mcpHandles:session:${handleDigest(session)}`;
    const raw = await rawRedis();
    try {
      const boundAt = stack.clock.now();
      expect(await raw.hget(key, 'renewedAt')).toBe(String(boundAt));
      const sixteenth = Math.floor(stack.sidecar.config.proxy.handleIdleMs / 16);
      stack.clock.advance(sixteenth - 1);
      expect((await ping(2)).status).toBe(200);
      expect(await raw.hget(key, 'renewedAt')).toBe(String(boundAt));
      stack.clock.advance(1);
      expect((await ping(3)).status).toBe(200);
      expect(await raw.hget(key, 'renewedAt')).toBe(String(stack.clock.now()));
    } finally {
      await raw.quit();
    }
  });

  it('a request without a credential is refused (401) without reading the record of the session id it presents', async () => {
    const before = reads.count;
    const res = await fetch(stack.mcpUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'mcp-session-id': randomUUID() },
      body: '{"jsonrpc":"2.0","id":1,"method":"ping"}',
    });
    expect(res.status).toBe(401);
    expect(reads.count).toBe(before);
    const a = await stack.issueOAuthToken();
    expect((await post(stack, a.token, { jsonrpc: '2.0', id: 1, method: 'ping' }, { 'mcp-session-id': randomUUID() })).status).toBe(200);
    expect(reads.count).toBe(before + 1);
  });

  it('forgetSubjectHandles (what revoking a subject calls) frees the handles of an IdP user', async () => {
    const b = await stack.issueOAuthToken();
    const taskId = randomUUID();
    await stack.store.bindHandle(
      'task',
      handleDigest(taskId),
      handleOwner({ kind: 'user', subject: 'carol' }),
      stack.clock.now(),
      60_000,
      10,
    );
    const getTask = { jsonrpc: '2.0', id: 5, method: 'tasks/get', params: { taskId } };
    const before = echo.seen.length;
    expect(await post(stack, b.token, getTask)).toEqual({
      status: 200,
      body: { jsonrpc: '2.0', id: 5, error: { code: -32602, message: 'Failed to retrieve task: Task not found' } },
    });
    expect(echo.seen.length).toBe(before);
    expect(await stack.store.forgetSubjectHandles('carol')).toBe(1);
    expect((await post(stack, b.token, getTask)).status).toBe(200);
    expect(echo.seen.length).toBe(before + 1);
  });

  describe('a task named in a way some parser reads is still decided by its owner', () => {
    const owner = handleOwner({ kind: 'user', subject: 'dave' });
    let b: { token: string };
    let taskId: string;
    beforeAll(async () => {
      b = await stack.issueOAuthToken();
      taskId = randomUUID();
      await stack.store.bindHandle('task', handleDigest(taskId), owner, stack.clock.now(), 60_000, 10);
    });

    it('escaped (\\u0074asks/get, t\\u0061skId), in a batch: refused, each request answered', async () => {
      const before = echo.seen.length;
      const body = `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"\\u0074asks/get","params":{"t\\u0061skId":"${taskId}"}}]`;
      const res = await fetch(stack.mcpUrl, {
        method: 'POST',
        headers: { authorization: `Bearer ${b.token}`, 'content-type': 'application/json' },
        body,
      });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual([
        { jsonrpc: '2.0', id: 1, error: { code: -32602, message: 'Failed to retrieve task: Task not found' } },
        { jsonrpc: '2.0', id: 2, error: { code: -32602, message: 'Failed to retrieve task: Task not found' } },
      ]);
      expect(echo.seen.length).toBe(before);
    });

    it('a taskId key spelt in another case (Go reads TaskId as taskId) is read as the taskId: refused, nothing forwarded', async () => {
      const before = echo.seen.length;
      const answer = await post(stack, b.token, { jsonrpc: '2.0', id: 3, method: 'tasks/get', params: { TaskId: taskId } });
      expect(answer).toEqual({
        status: 200,
        body: { jsonrpc: '2.0', id: 3, error: { code: -32602, message: 'Failed to retrieve task: Task not found' } },
      });
      // Two spellings of it in one object: refused whole (which one an upstream reads is its choice).
      expect(
        (await post(stack, b.token, { jsonrpc: '2.0', id: 3, method: 'tasks/get', params: { taskId: randomUUID(), TASKID: taskId } }))
          .status,
      ).toBe(400);
      // Not a string: nothing to decide on.
      expect((await post(stack, b.token, { jsonrpc: '2.0', id: 3, method: 'tasks/get', params: { taskId: 7 } })).status).toBe(400);
      expect(echo.seen.length).toBe(before);
    });

    it('a body that names a task and is not JSON-RPC is refused 400, nothing forwarded', async () => {
      const before = echo.seen.length;
      const res = await fetch(stack.mcpUrl, {
        method: 'POST',
        headers: { authorization: `Bearer ${b.token}`, 'content-type': 'application/json' },
        body: `{"method":"tasks/get","params":{"taskId":"${taskId}"}`,
      });
      expect(res.status).toBe(400);
      expect(echo.seen.length).toBe(before);
    });

    it('a compressed body (Content-Encoding) cannot be read for the tasks it names: 400, nothing forwarded', async () => {
      const before = echo.seen.length;
      const res = await fetch(stack.mcpUrl, {
        method: 'POST',
        headers: { authorization: `Bearer ${b.token}`, 'content-type': 'application/json', 'content-encoding': 'gzip' },
        body: gzipSync(JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'tasks/get', params: { taskId } })),
      });
      expect(res.status).toBe(400);
      expect(echo.seen.length).toBe(before);
    });

    it(`a body over ${TASK_SCAN_BYTES} bytes that names a task is cut, the upstream never gets it whole; one that names none passes whole`, async () => {
      const padding = ' '.repeat(TASK_SCAN_BYTES);
      const naming = `{"jsonrpc":"2.0","id":6,"method":"tasks/get","params":{"taskId":"${taskId}"}${padding}}`;
      const before = echo.seen.length;
      const cut = await fetch(stack.mcpUrl, {
        method: 'POST',
        headers: { authorization: `Bearer ${b.token}`, 'content-type': 'application/json' },
        body: naming,
      }).then(
        (res) => res.status,
        () => 'cut',
      );
      // Refused with 413 if the whole body had arrived before forwarding, else cut while it streams.
      expect([413, 'cut']).toContain(cut);
      expect(echo.seen.slice(before).every((s) => s.bodyBytes < Buffer.byteLength(naming))).toBe(true);
      const plain = `{"jsonrpc":"2.0","id":7,"method":"ping","params":{"note":"caf\\u00e9 ${padding}"}}`;
      const passed = await fetch(stack.mcpUrl, {
        method: 'POST',
        headers: { authorization: `Bearer ${b.token}`, 'content-type': 'application/json' },
        body: plain,
      });
      expect(passed.status).toBe(200);
      expect(((await passed.json()) as { bodyBytes: number }).bodyBytes).toBe(Buffer.byteLength(plain));
    });
  });
});

describe('Redis down: a request with a session id fails closed', () => {
  let redis: RedisServer;
  let echo: FakeUpstream;
  let stack: Stack;

  beforeAll(async () => {
    redis = await startRedisServer();
    echo = await startEchoUpstream();
    stack = await startStack({ upstreamUrl: echo.url, redisUrl: redis.url, config: { redis: { commandTimeoutMs: 500 } } });
  });
  afterEach(async () => undefined);
  afterAll(async () => {
    await stack.close();
    await echo.close();
    await redis.stop();
  });

  it('503 temporarily_unavailable with Retry-After and nothing forwarded, even for the master token (no token lookup to fail first)', async () => {
    await redis.kill();
    const before = echo.seen.length;
    const res = await fetch(stack.mcpUrl, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.masterToken}`, 'content-type': 'application/json', 'mcp-session-id': randomUUID() },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
    });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('2');
    expect(await res.json()).toEqual({ error: 'temporarily_unavailable' });
    expect(echo.seen.length).toBe(before);
    // The same request without a session id needs no store: forwarded.
    const without = await fetch(stack.mcpUrl, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.masterToken}`, 'content-type': 'application/json' },
      body: '{"jsonrpc":"2.0","id":2,"method":"ping"}',
    });
    expect(without.status).toBe(200);
  });
});

/**
 * A broken upstream that hands every caller the same session id and the same task id: what the sidecar
 * must never pass on to a second caller. Its answers have the shapes of the MCP SDK server's (a JSON
 * result with `Mcp-Session-Id`) and of the Tasks specification's CreateTaskResult example.
 */
async function startSameHandleUpstream() {
  let requests = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      requests++;
      const message = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as {
        id?: number;
        method?: string;
        params?: { task?: unknown };
      };
      const result = message.params?.task
        ? {
            task: {
              taskId: 'the-only-task',
              status: 'working',
              createdAt: '2025-11-25T10:30:00Z',
              lastUpdatedAt: '2025-11-25T10:30:00Z',
              ttl: 60000,
              pollInterval: 5000,
            },
          }
        : {};
      // The session id minted in the answer to initialize; no session checked after that.
      res.writeHead(200, {
        'content-type': 'application/json',
        ...(message.method === 'initialize' ? { 'mcp-session-id': 'the-only-session' } : {}),
      });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id ?? null, result }));
    });
  });
  const { url, close } = await serveOnLoopback(server);
  return { url, close, requests: () => requests };
}

describe("an upstream that hands one caller's handle to another", () => {
  let upstream: Awaited<ReturnType<typeof startSameHandleUpstream>>;
  let stack: Stack;

  beforeAll(async () => {
    upstream = await startSameHandleUpstream();
    stack = await startStack({ upstreamUrl: upstream.url });
  });
  afterAll(async () => {
    await stack.close();
    await upstream.close();
  });

  it("its answer is not passed on (502): the second caller never learns the first one's session or task id", async () => {
    const a = await stack.issueOAuthToken();
    const b = await stack.issueOAuthToken();
    const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: {} };
    const first = await fetch(stack.mcpUrl, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(init),
    });
    expect(first.status).toBe(200);
    expect(first.headers.get('mcp-session-id')).toBe('the-only-session');
    const second = await fetch(stack.mcpUrl, {
      method: 'POST',
      headers: { authorization: `Bearer ${b.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(init),
    });
    expect(second.status).toBe(502);
    expect(second.headers.get('mcp-session-id')).toBeNull();

    const call = { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'x', arguments: {}, task: { ttl: 60000 } } };
    const created = await fetch(stack.mcpUrl, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(call),
    });
    expect(created.status).toBe(200);
    expect(await created.text()).toContain('the-only-task');
    // B creates a task and is answered with A's task id: 502, nothing of the answer passes.
    const again = await fetch(stack.mcpUrl, {
      method: 'POST',
      headers: { authorization: `Bearer ${b.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(call),
    });
    expect(again.status).toBe(502);
    expect(await again.text()).not.toContain('the-only-task');
  });
});

/** The store, with bindHandle failing as a Redis outage does (everything else as it is). */
class BindFails extends StoreDecorator {
  protected around<T>(operation: StoreOperation, call: () => Promise<T>): Promise<T> {
    if (operation === 'bindHandle') return Promise.reject(new StoreUnavailableError('Redis is down'));
    return call();
  }
}

describe('the record of a new session cannot be written', () => {
  let echo: FakeUpstream;
  let stack: Stack;

  beforeAll(async () => {
    echo = await startEchoUpstream();
    stack = await startStack({ upstreamUrl: echo.url, wrapStore: (store) => new BindFails(store) });
  });
  afterAll(async () => {
    await stack.close();
    await echo.close();
  });

  it('the upstream accepted an unrecorded session id, but its answer is withheld: 503 with Retry-After, not passed on unbound', async () => {
    const a = await stack.issueOAuthToken();
    const res = await fetch(stack.mcpUrl, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.token}`, 'content-type': 'application/json', 'mcp-session-id': randomUUID() },
      body: '{"jsonrpc":"2.0","id":1,"method":"ping"}',
    });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('2');
    expect(await res.json()).toEqual({ error: 'temporarily_unavailable' });
  });
});
