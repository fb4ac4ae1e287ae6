// The bundled reference MCP upstream, on the official TypeScript SDK's 2.x server line
// (@modelcontextprotocol/server): it exercises what a reverse proxy can break (SSE, progress,
// server-to-client requests, resumability, big bodies, headers). It serves both protocol eras on one
// path: 2026-07-28 requests through the SDK's modern entry (createMcpHandler), which refuses a request
// whose Mcp-Method / Mcp-Name headers disagree with its body (validateStandardRequestHeaders in the
// SDK), and 2025-era clients (the 1.x SDK client) through a sessionful Streamable HTTP transport.

import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import {
  createMcpHandler,
  isInitializeRequest,
  isLegacyRequest,
  McpServer,
  ResourceTemplate,
  type EventId,
  type EventStore,
  type JSONRPCMessage,
  type StreamId,
} from '@modelcontextprotocol/server';
import { hostHeaderValidation, NodeStreamableHTTPServerTransport, toNodeHandler, toWebRequest } from '@modelcontextprotocol/node';
import * as z from 'zod';
import { customFetch } from 'jose';
import { createAssertionVerifier, type AssertionVerifierOptions } from '../assertion/node/verify-assertion.ts';
import { BodyTooLarge, MAX_BODY_BYTES, readJson, rpcError, sendJson, syntheticStream, trackSse } from './http.ts';

export interface UpstreamOptions {
  host?: string;
  port?: number;
  /** Defaults to '/mcp'. */
  path?: string;
  /**
   * Benchmark only (off by default): `GET <path>?events=N` answers a plain SSE stream outside MCP with
   * N small events, one write each, every one stamped with its send time; `events=0` stays open, idle.
   */
  syntheticStreams?: boolean;
  /** Answer POSTs with one JSON body instead of an SSE stream (the transport's enableJsonResponse). */
  jsonResponses?: boolean;
  /**
   * Verify the sidecar's caller assertion (X-MCP-Auth-Assertion) on every request to the MCP path and
   * refuse (401) any request without a valid one.
   */
  assertion?: AssertionVerifierOptions;
  /**
   * DNS-rebinding protection: the Host names (without port) a request may name; any other Host is
   * refused with 403 before anything is read. Off when absent. Behind an ingress, list the public host
   * the ingress passes on; behind the sidecar's proxy mode, the upstream URL's host.
   */
  allowedHosts?: string[];
}

/** What the assertion check has seen (with `assertion` on). */
export interface AssertionChecks {
  verified: number;
  /** Why each refused request was refused, oldest first (max 50). */
  refused: string[];
  /** Times the JWKS was fetched. */
  jwksFetches: number;
}

export interface RunningUpstream {
  /** e.g. http://127.0.0.1:PORT/mcp */
  url: string;
  port: number;
  close(): Promise<void>;
  /** Headers of the most recent requests, newest last, max 50, for tests. */
  seenHeaders: Array<Record<string, string | string[] | undefined>>;
  /** The names of the most recent tool calls the server ran, newest last, max 50, for tests. */
  toolCalls: string[];
  /** Currently open SSE (text/event-stream) responses. */
  openStreams(): number;
  assertions: AssertionChecks;
  /** Turns on the assertion check (as the `assertion` option does at start), e.g. once the sidecar's port is known. */
  requireAssertions(options: AssertionVerifierOptions): void;
}

const MAX_SEEN_HEADERS = 50;
const MAX_STORED_EVENTS = 10_000;

const log = process.env.UPSTREAM_LOG === '1' ? (...args: unknown[]) => console.error('[upstream]', ...args) : () => {};

/** Resumability for one session; bounded so a long-lived session cannot grow memory without limit. */
export class MemoryEventStore implements EventStore {
  private readonly events = new Map<EventId, { streamId: StreamId; message: JSONRPCMessage }>();
  private seq = 0;

  async storeEvent(streamId: StreamId, message: JSONRPCMessage): Promise<EventId> {
    // The sequence number keeps ids ordered across streams; the stream id is kept alongside, not parsed out.
    const eventId = `${++this.seq}_${streamId}`;
    this.events.set(eventId, { streamId, message });
    if (this.events.size > MAX_STORED_EVENTS) {
      const oldest = this.events.keys().next().value;
      if (oldest !== undefined) this.events.delete(oldest);
    }
    return eventId;
  }

  async getStreamIdForEventId(eventId: EventId): Promise<StreamId | undefined> {
    return this.events.get(eventId)?.streamId;
  }

  async replayEventsAfter(
    lastEventId: EventId,
    { send }: { send: (eventId: EventId, message: JSONRPCMessage) => Promise<void> },
  ): Promise<StreamId> {
    const last = this.events.get(lastEventId);
    if (!last) return '';
    let after = false;
    // Map iteration is insertion order, which is the order the events were sent in.
    for (const [eventId, { streamId, message }] of this.events) {
      if (eventId === lastEventId) {
        after = true;
        continue;
      }
      if (after && streamId === last.streamId) await send(eventId, message);
    }
    return last.streamId;
  }
}

const text = (t: string) => ({ content: [{ type: 'text' as const, text: t }] });

/** One server instance with every tool, resource and prompt; each tool reports its call to `ran` first. */
function buildMcpServer(ran: (tool: string) => void): McpServer {
  const server = new McpServer({ name: 'reference-upstream', version: '1.0.0' }, { capabilities: { logging: {} } });
  server.registerTool(
    'echo',
    { description: 'Echo the given text back.', inputSchema: z.object({ text: z.string() }) },
    async ({ text: t }) => {
      ran('echo');
      return text(t);
    },
  );

  server.registerTool(
    'add',
    { description: 'Add two numbers.', inputSchema: z.object({ a: z.number(), b: z.number() }) },
    async ({ a, b }) => {
      ran('add');
      return text(String(a + b));
    },
  );

  server.registerTool(
    'progress',
    {
      description: 'Send one progress notification per step (when a progressToken is given), then finish.',
      inputSchema: z.object({
        steps: z.number().int().min(1).max(1000).default(5),
        delayMs: z.number().int().min(0).max(5000).default(10),
      }),
    },
    async ({ steps, delayMs }, ctx) => {
      ran('progress');
      const progressToken = ctx.mcpReq._meta?.progressToken;
      for (let i = 1; i <= steps; i++) {
        // Rejects on cancellation, so a client abort through the proxy stops the work here.
        await delay(delayMs, undefined, { signal: ctx.mcpReq.signal });
        if (progressToken !== undefined) {
          await ctx.mcpReq.notify({
            method: 'notifications/progress',
            params: { progressToken, progress: i, total: steps, message: `step ${i}/${steps}` },
          });
        }
      }
      return text(`done ${steps}`);
    },
  );

  server.registerTool(
    'log',
    {
      description: 'Emit a logging notification.',
      inputSchema: z.object({ message: z.string(), level: z.enum(['info', 'warning', 'error']).optional() }),
    },
    async ({ message, level }, ctx) => {
      ran('log');
      // Sent through the request (not server.sendLoggingMessage) so it rides this call's SSE stream
      // rather than the standalone GET stream, which a client may not have open.
      await ctx.mcpReq.notify({
        method: 'notifications/message',
        params: { level: level ?? 'info', logger: 'reference-upstream', data: message },
      });
      return text(`logged ${level ?? 'info'}: ${message}`);
    },
  );

  server.registerTool(
    'ask',
    {
      description: 'Ask the client a question via elicitation, or sampling as a fallback (2025-era clients).',
      inputSchema: z.object({ question: z.string() }),
    },
    async ({ question }, ctx) => {
      ran('ask');
      const caps = server.server.getClientCapabilities();
      // The context's requests are related to this call: they ride its SSE stream.
      const options = { signal: ctx.mcpReq.signal };
      if (caps?.elicitation) {
        const result = await ctx.mcpReq.elicitInput(
          {
            mode: 'form',
            message: question,
            requestedSchema: { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] },
          },
          options,
        );
        return text(`answer: ${JSON.stringify({ action: result.action, content: result.content })}`);
      }
      if (caps?.sampling) {
        const result = await ctx.mcpReq.requestSampling(
          { messages: [{ role: 'user', content: { type: 'text', text: question } }], maxTokens: 256 },
          options,
        );
        return text(`answer: ${JSON.stringify({ model: result.model, content: result.content })}`);
      }
      return { ...text('the client supports neither elicitation nor sampling'), isError: true };
    },
  );

  server.registerTool(
    'big',
    {
      description: 'Return a text of the given number of bytes.',
      inputSchema: z.object({ bytes: z.number().int().min(1).max(16_777_216) }),
    },
    async ({ bytes }) => {
      ran('big');
      return text('x'.repeat(bytes));
    },
  );

  server.registerTool(
    'headers',
    { description: 'Return the HTTP request headers this call arrived with.', inputSchema: z.object({}) },
    async (_args, ctx) => {
      ran('headers');
      return text(JSON.stringify(Object.fromEntries(ctx.http?.req?.headers ?? [])));
    },
  );

  server.registerResource('hello', 'ref://hello', { mimeType: 'text/plain', description: 'A fixed greeting.' }, async (uri) => ({
    contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'hello from the reference upstream' }],
  }));

  server.registerResource(
    'echo',
    new ResourceTemplate('ref://echo/{value}', { list: undefined }),
    { mimeType: 'text/plain', description: 'Echoes the URI value.' },
    async (uri, { value }) => ({
      contents: [{ uri: uri.href, mimeType: 'text/plain', text: Array.isArray(value) ? value.join('/') : String(value) }],
    }),
  );

  server.registerPrompt('greet', { description: 'Greet someone.', argsSchema: z.object({ name: z.string() }) }, ({ name }) => ({
    messages: [{ role: 'user', content: { type: 'text', text: `Please greet ${name}.` } }],
  }));

  return server;
}

interface Session {
  transport: NodeStreamableHTTPServerTransport;
  server: McpServer;
}

export async function startUpstream(opts: UpstreamOptions = {}): Promise<RunningUpstream> {
  const host = opts.host ?? '127.0.0.1';
  const mcpPath = opts.path ?? '/mcp';
  const sessions = new Map<string, Session>();
  const seenHeaders: RunningUpstream['seenHeaders'] = [];
  const toolCalls: string[] = [];
  const ran = (tool: string) => {
    toolCalls.push(tool);
    if (toolCalls.length > MAX_SEEN_HEADERS) toolCalls.shift();
  };
  let streams = 0;
  let closing: Promise<void> | undefined;
  const assertions: AssertionChecks = { verified: 0, refused: [], jwksFetches: 0 };
  let verifyAssertion: ReturnType<typeof createAssertionVerifier> | undefined;
  const requireAssertions = (options: AssertionVerifierOptions) => {
    verifyAssertion = createAssertionVerifier({
      ...options,
      jwks: {
        ...options.jwks,
        [customFetch]: (url: string, init: RequestInit) => {
          assertions.jwksFetches++;
          return fetch(url, init);
        },
      },
    });
  };
  if (opts.assertion) requireAssertions(opts.assertion);

  // 2026-07-28 requests: one server instance per request from the factory; header/body mismatches,
  // a missing Mcp-Method or Mcp-Name, and unsupported revisions are answered by the SDK before any
  // handler runs. 2025-era requests never reach it (routed below), hence `legacy: 'reject'`.
  const modernHandler = createMcpHandler(() => buildMcpServer(ran), {
    legacy: 'reject',
    responseMode: opts.jsonResponses === true ? 'json' : 'auto',
    maxRequestBodySize: MAX_BODY_BYTES,
    onerror: (err) => log('modern request refused or failed:', err.message),
  });
  const modern = toNodeHandler(modernHandler, { maxRequestBodySize: MAX_BODY_BYTES });
  const validateHost = opts.allowedHosts === undefined ? undefined : hostHeaderValidation(opts.allowedHosts);

  async function newSession(): Promise<NodeStreamableHTTPServerTransport> {
    const server = buildMcpServer(ran);
    const transport = new NodeStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: new MemoryEventStore(),
      enableJsonResponse: opts.jsonResponses === true,
      onsessioninitialized: (id) => {
        sessions.set(id, { transport, server });
        log('session opened', id);
      },
    });
    transport.onclose = () => {
      const id = transport.sessionId;
      if (id !== undefined && sessions.delete(id)) log('session closed', id);
    };
    transport.onerror = (err) => log('transport error:', err.message);
    await server.connect(transport);
    return transport;
  }

  async function handleMcp(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const sessionHeader = req.headers['mcp-session-id'];
    const sessionId = Array.isArray(sessionHeader) ? sessionHeader[0] : sessionHeader;
    const session = sessionId !== undefined ? sessions.get(sessionId) : undefined;

    if (req.method === 'POST') {
      let body: unknown;
      try {
        body = await readJson(req);
      } catch (err) {
        if (err instanceof BodyTooLarge) return sendJson(res, 413, rpcError(-32000, 'Request body too large'));
        return sendJson(res, 400, rpcError(-32700, 'Parse error'));
      }
      // The SDK's own routing predicate: a request carrying the 2026-07-28 envelope (or naming that
      // revision in its headers) goes to the modern entry, which owns its validation and errors. What it
      // routes to 2025-era serving (a batch, a posted response) is refused by the session transport when
      // its MCP-Protocol-Version names 2026-07-28 (not a version that transport supports).
      if (!(await isLegacyRequest(await toWebRequest(req, body), body))) return modern(req, res, body);
      if (session) return session.transport.handleRequest(req, res, body);
      if (sessionId !== undefined) return sendJson(res, 404, rpcError(-32001, 'Session not found'));
      if (!isInitializeRequest(body)) {
        return sendJson(res, 400, rpcError(-32000, 'Bad Request: no session id and not an initialize request'));
      }
      const transport = await newSession();
      return transport.handleRequest(req, res, body);
    }

    if (req.method === 'GET' || req.method === 'DELETE') {
      if (session) return session.transport.handleRequest(req, res);
      if (sessionId !== undefined) return sendJson(res, 404, rpcError(-32001, 'Session not found'));
      return sendJson(res, 400, rpcError(-32000, 'Bad Request: missing mcp-session-id'));
    }

    res.setHeader('allow', 'GET, POST, DELETE');
    return sendJson(res, 405, rpcError(-32000, 'Method not allowed'));
  }

  const httpServer = createServer((req, res) => {
    seenHeaders.push({ ...req.headers });
    if (seenHeaders.length > MAX_SEEN_HEADERS) seenHeaders.shift();
    log(req.method, req.url);

    trackSse(
      res,
      () => void streams++,
      () => void streams--,
    );

    const path = new URL(req.url ?? '/', 'http://upstream').pathname;
    if (path !== mcpPath) return sendJson(res, 404, { error: 'not_found', path });
    if (closing) return sendJson(res, 503, rpcError(-32000, 'Server shutting down'));
    // Answered with 403 by the guard itself.
    if (validateHost !== undefined && !validateHost(req, res)) return;
    if (verifyAssertion === undefined) return answer(req, res);
    // Nothing is read or done for a request whose caller is not proven.
    verifyAssertion(req.headers['x-mcp-auth-assertion']).then(
      () => {
        assertions.verified++;
        answer(req, res);
      },
      (err: unknown) => {
        assertions.refused.push((err as Error).message);
        if (assertions.refused.length > MAX_SEEN_HEADERS) assertions.refused.shift();
        log('assertion refused:', (err as Error).message);
        sendJson(res, 401, { error: 'invalid_assertion' });
      },
    );
  });

  function answer(req: IncomingMessage, res: ServerResponse): void {
    if (opts.syntheticStreams && req.method === 'GET' && req.url?.includes('events=')) return syntheticStream(req, res);
    handleMcp(req, res).catch((err: unknown) => {
      log('request failed:', err);
      sendJson(res, 500, rpcError(-32603, 'Internal error'));
    });
  }

  httpServer.listen(opts.port ?? 0, host);
  await once(httpServer, 'listening');
  const { port } = httpServer.address() as AddressInfo;
  // IPv6 literals need brackets inside a URL.
  const urlHost = host.includes(':') ? `[${host}]` : host;

  return {
    url: `http://${urlHost}:${port}${mcpPath}`,
    port,
    seenHeaders,
    toolCalls,
    openStreams: () => streams,
    assertions,
    requireAssertions,
    close() {
      closing ??= (async () => {
        const all = [...sessions.values()];
        sessions.clear();
        await Promise.allSettled([...all.map(({ server }) => server.close()), modernHandler.close()]);
        const closed = new Promise<void>((resolve) => httpServer.close(() => resolve()));
        // Open SSE responses keep their sockets alive; without this, close() would wait on the clients.
        httpServer.closeAllConnections();
        await closed;
      })();
      return closing;
    },
  };
}
