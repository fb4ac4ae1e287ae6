// The "everything" MCP server the official conformance suite's server scenarios expect
// (@modelcontextprotocol/conformance): the tools, resources and prompts each scenario calls, with the
// content each one checks, on the SDK's McpServer and Streamable HTTP transport. Written from the
// scenarios' own descriptions and checks in the package; the sidecar's conformance test runs the suite
// against it directly and through the sidecar.

import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { crc32, deflateSync } from 'node:zlib';
import { completable } from '@modelcontextprotocol/sdk/server/completable.js';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  isInitializeRequest,
  LATEST_PROTOCOL_VERSION,
  SubscribeRequestSchema,
  SUPPORTED_PROTOCOL_VERSIONS,
  UnsubscribeRequestSchema,
  type ElicitRequestFormParams,
} from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod';
import { MemoryEventStore } from '../../examples/upstream/server.ts';

export interface ConformanceUpstream {
  /** http://127.0.0.1:PORT/mcp */
  url: string;
  close(): Promise<void>;
}

const MAX_BODY_BYTES = 1024 * 1024;
/** The reconnection delay the transport announces on its SSE streams (the `retry:` field). */
const RETRY_INTERVAL_MS = 200;
/** Spacing of the logging and progress notifications, as the scenarios describe (~50 ms). */
const STEP_MS = 50;
const JSON_SCHEMA_2020_12 = 'https://json-schema.org/draft/2020-12/schema';

function pngChunk(type: string, data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const typeAndData = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(typeAndData));
  return Buffer.concat([length, typeAndData, crc]);
}

/** A valid 1x1 red PNG (8-bit RGB), built here so nothing opaque is pasted in. */
function redPixelPng(): string {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(1, 0); // width
  header.writeUInt32BE(1, 4); // height
  header.set([8, 2, 0, 0, 0], 8); // bit depth 8, colour type RGB, deflate, no filter method, no interlace
  const scanline = Buffer.from([0, 255, 0, 0]); // filter "none", then one red pixel
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', header),
    pngChunk('IDAT', deflateSync(scanline)),
    pngChunk('IEND', Buffer.alloc(0)),
  ]).toString('base64');
}

/** A valid WAV file: 8 kHz, mono, 8-bit PCM, 80 samples of silence (10 ms). */
function silentWav(): string {
  const samples = Buffer.alloc(80, 128); // 8-bit PCM is unsigned: 128 is the zero line
  const wav = Buffer.alloc(44);
  wav.write('RIFF', 0, 'ascii');
  wav.writeUInt32LE(36 + samples.length, 4);
  wav.write('WAVEfmt ', 8, 'ascii');
  wav.writeUInt32LE(16, 16); // fmt chunk size
  wav.writeUInt16LE(1, 20); // PCM
  wav.writeUInt16LE(1, 22); // mono
  wav.writeUInt32LE(8000, 24); // sample rate
  wav.writeUInt32LE(8000, 28); // byte rate
  wav.writeUInt16LE(1, 32); // block align
  wav.writeUInt16LE(8, 34); // bits per sample
  wav.write('data', 36, 'ascii');
  wav.writeUInt32LE(samples.length, 40);
  return Buffer.concat([wav, samples]).toString('base64');
}

const PNG = redPixelPng();
const WAV = silentWav();

const text = (t: string) => ({ content: [{ type: 'text' as const, text: t }] });

function buildServer(): McpServer {
  const server = new McpServer(
    { name: 'conformance-everything-upstream', version: '1.0.0' },
    { capabilities: { logging: {}, completions: {}, resources: { subscribe: true } } },
  );

  // tools-call-*: one tool per scenario, named and shaped as the scenario's description asks.
  server.registerTool('test_simple_text', { description: 'Returns simple text content.' }, async () =>
    text('This is a simple text response for testing.'),
  );
  server.registerTool('test_image_content', { description: 'Returns a 1x1 PNG image.' }, async () => ({
    content: [{ type: 'image' as const, data: PNG, mimeType: 'image/png' }],
  }));
  server.registerTool('test_audio_content', { description: 'Returns a short WAV audio clip.' }, async () => ({
    content: [{ type: 'audio' as const, data: WAV, mimeType: 'audio/wav' }],
  }));
  server.registerTool('test_embedded_resource', { description: 'Returns an embedded text resource.' }, async () => ({
    content: [
      {
        type: 'resource' as const,
        resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' },
      },
    ],
  }));
  server.registerTool('test_multiple_content_types', { description: 'Returns text, image and resource content.' }, async () => ({
    content: [
      { type: 'text' as const, text: 'Multiple content types test:' },
      { type: 'image' as const, data: PNG, mimeType: 'image/png' },
      {
        type: 'resource' as const,
        resource: {
          uri: 'test://mixed-content-resource',
          mimeType: 'application/json',
          text: JSON.stringify({ test: 'data', value: 123 }),
        },
      },
    ],
  }));

  server.registerTool('test_tool_with_logging', { description: 'Sends three info log notifications while it runs.' }, async (extra) => {
    const messages = ['Tool execution started', 'Tool processing data', 'Tool execution completed'];
    for (const [i, data] of messages.entries()) {
      if (i > 0) await delay(STEP_MS, undefined, { signal: extra.signal });
      // On this request's own SSE stream (not the standalone GET stream, which a client may not open).
      await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', logger: 'conformance', data } });
    }
    return text('Tool with logging executed successfully');
  });

  server.registerTool('test_error_handling', { description: 'Always fails, as a tool error result.' }, async () => ({
    ...text('This tool intentionally returns an error for testing'),
    isError: true,
  }));

  server.registerTool('test_tool_with_progress', { description: 'Reports progress 0, 50 and 100 of 100.' }, async (extra) => {
    const progressToken = extra._meta?.progressToken;
    for (const [i, progress] of [0, 50, 100].entries()) {
      if (i > 0) await delay(STEP_MS, undefined, { signal: extra.signal });
      if (progressToken !== undefined) {
        await extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress, total: 100 } });
      }
    }
    return text('Tool with progress executed successfully');
  });

  // Server-to-client requests ride the calling request's SSE stream (relatedRequestId).
  server.registerTool(
    'test_sampling',
    { description: 'Asks the client for an LLM completion (sampling).', inputSchema: { prompt: z.string() } },
    async ({ prompt }, extra) => {
      if (!server.server.getClientCapabilities()?.sampling) return { ...text('the client does not support sampling'), isError: true };
      const result = await server.server.createMessage(
        { messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens: 100 },
        { relatedRequestId: extra.requestId, signal: extra.signal },
      );
      const answer = result.content.type === 'text' ? result.content.text : JSON.stringify(result.content);
      return text(`LLM response: ${answer}`);
    },
  );

  const elicit = async (
    extra: { requestId: string | number; signal: AbortSignal },
    message: string,
    requestedSchema: ElicitRequestFormParams['requestedSchema'],
  ) => {
    if (!server.server.getClientCapabilities()?.elicitation) return { ...text('the client does not support elicitation'), isError: true };
    const result = await server.server.elicitInput(
      { mode: 'form', message, requestedSchema },
      { relatedRequestId: extra.requestId, signal: extra.signal },
    );
    return text(`Elicitation completed: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`);
  };

  server.registerTool(
    'test_elicitation',
    { description: 'Asks the client for user input (elicitation).', inputSchema: { message: z.string() } },
    async ({ message }, extra) =>
      elicit(extra, message, {
        type: 'object',
        properties: {
          username: { type: 'string', description: "User's response" },
          email: { type: 'string', description: "User's email address" },
        },
        required: ['username', 'email'],
      }),
  );

  server.registerTool(
    'test_elicitation_sep1034_defaults',
    { description: 'Elicitation whose schema gives a default for every primitive type.' },
    async (extra) =>
      elicit(extra, 'Please review the defaults', {
        type: 'object',
        properties: {
          name: { type: 'string', description: 'User name', default: 'John Doe' },
          age: { type: 'integer', description: 'User age', default: 30 },
          score: { type: 'number', description: 'User score', default: 95.5 },
          status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
          verified: { type: 'boolean', description: 'Verification status', default: true },
        },
      }),
  );

  server.registerTool('test_elicitation_sep1330_enums', { description: 'Elicitation whose schema has every enum form.' }, async (extra) =>
    elicit(extra, 'Please choose', {
      type: 'object',
      properties: {
        untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
        titledSingle: {
          type: 'string',
          oneOf: [
            { const: 'value1', title: 'First Option' },
            { const: 'value2', title: 'Second Option' },
            { const: 'value3', title: 'Third Option' },
          ],
        },
        legacyEnum: { type: 'string', enum: ['opt1', 'opt2', 'opt3'], enumNames: ['Option One', 'Option Two', 'Option Three'] },
        untitledMulti: { type: 'array', items: { type: 'string', enum: ['option1', 'option2', 'option3'] } },
        titledMulti: {
          type: 'array',
          items: {
            anyOf: [
              { const: 'value1', title: 'First Choice' },
              { const: 'value2', title: 'Second Choice' },
              { const: 'value3', title: 'Third Choice' },
            ],
          },
        },
      },
    }),
  );

  // json-schema-2020-12: the listing must carry $schema (2020-12), $defs and additionalProperties
  // as the server wrote them. McpServer lists a zod schema as draft-07; zod's .meta() keys are written
  // into the listed schema as given, which is how this schema's 2020-12 keywords get there.
  server.registerTool(
    'json_schema_2020_12_tool',
    {
      description: 'Tool with JSON Schema 2020-12 features',
      inputSchema: z
        .object({
          name: z.string().optional(),
          address: z.object({ street: z.string().optional(), city: z.string().optional() }).optional().meta({ $ref: '#/$defs/address' }),
        })
        .strict()
        .meta({
          $schema: JSON_SCHEMA_2020_12,
          $defs: { address: { type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
        }),
    },
    async ({ name }) => text(`hello ${name ?? 'anonymous'}`),
  );

  // server-sse-polling: closes the call's SSE stream before answering, so the client resumes with
  // Last-Event-ID to get the result. The transport offers closeSSEStream only to a client that
  // negotiated 2025-11-25 or later (it needs the priming event); otherwise the answer comes on the
  // open stream.
  server.registerTool('test_reconnection', { description: 'Closes its SSE stream mid-call, then answers.' }, async (extra) => {
    if (extra.closeSSEStream) {
      extra.closeSSEStream();
      await delay(STEP_MS, undefined, { signal: extra.signal });
    }
    return text('Reconnection test completed successfully');
  });

  server.registerResource(
    'static-text',
    'test://static-text',
    { mimeType: 'text/plain', description: 'A fixed text resource.' },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'This is the content of the static text resource.' }] }),
  );
  server.registerResource(
    'static-binary',
    'test://static-binary',
    { mimeType: 'image/png', description: 'A fixed binary resource (a PNG).' },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'image/png', blob: PNG }] }),
  );
  server.registerResource(
    'template',
    new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { mimeType: 'application/json', description: 'Data for the id in the URI.' },
    async (uri, { id }) => ({
      contents: [
        { uri: uri.href, mimeType: 'application/json', text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) },
      ],
    }),
  );
  server.registerResource(
    'watched-resource',
    'test://watched-resource',
    { mimeType: 'text/plain', description: 'A resource a client may subscribe to.' },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'Watched resource content' }] }),
  );
  // resources-subscribe / -unsubscribe: McpServer has no handlers of its own for these. The scenarios
  // check that both requests succeed; the resource never changes, so no update is ever sent.
  const subscriptions = new Set<string>();
  server.server.setRequestHandler(SubscribeRequestSchema, async (request) => {
    subscriptions.add(request.params.uri);
    return {};
  });
  server.server.setRequestHandler(UnsubscribeRequestSchema, async (request) => {
    subscriptions.delete(request.params.uri);
    return {};
  });

  server.registerPrompt('test_simple_prompt', { description: 'A prompt without arguments.' }, () => ({
    messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }],
  }));
  // completion-complete asks for completions of this prompt's arg1.
  server.registerPrompt(
    'test_prompt_with_arguments',
    {
      description: 'A prompt with two arguments.',
      argsSchema: {
        arg1: completable(z.string(), (value) => ['testValue1', 'test', 'paris', 'park'].filter((v) => v.startsWith(value))),
        arg2: z.string(),
      },
    },
    ({ arg1, arg2 }) => ({
      messages: [{ role: 'user', content: { type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` } }],
    }),
  );
  server.registerPrompt(
    'test_prompt_with_embedded_resource',
    { description: 'A prompt that embeds a resource.', argsSchema: { resourceUri: z.string() } },
    ({ resourceUri }) => ({
      messages: [
        {
          role: 'user',
          content: {
            type: 'resource',
            resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' },
          },
        },
        { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } },
      ],
    }),
  );
  server.registerPrompt('test_prompt_with_image', { description: 'A prompt with an image.' }, () => ({
    messages: [
      { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
      { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } },
    ],
  }));

  return server;
}

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]']);

function hostName(host: string): string {
  const h = host.toLowerCase();
  if (h.startsWith('[')) return h.slice(0, h.indexOf(']') + 1);
  const colon = h.lastIndexOf(':');
  return colon === -1 ? h : h.slice(0, colon);
}

/**
 * DNS rebinding protection, as the spec asks of a server on localhost (the dns-rebinding-protection
 * scenario): Host must be a loopback name, and an Origin, when sent, a loopback origin (any port).
 */
function fromLoopback(req: IncomingMessage): boolean {
  if (req.headers.host === undefined || !LOOPBACK_NAMES.has(hostName(req.headers.host))) return false;
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  try {
    const url = new URL(origin);
    return (url.protocol === 'http:' || url.protocol === 'https:') && LOOPBACK_NAMES.has(url.hostname.toLowerCase());
  } catch {
    return false;
  }
}

const rpcError = (code: number, message: string) => ({ jsonrpc: '2.0', error: { code, message }, id: null });

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

class BodyTooLarge extends Error {}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new BodyTooLarge();
    chunks.push(chunk);
  }
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

interface Session {
  transport: StreamableHTTPServerTransport;
  server: McpServer;
  /** The protocol version the initialize exchange settled on. */
  protocolVersion: string;
}

export async function startConformanceUpstream(): Promise<ConformanceUpstream> {
  const sessions = new Map<string, Session>();

  async function newSession(requestedVersion: string): Promise<StreamableHTTPServerTransport> {
    const protocolVersion = SUPPORTED_PROTOCOL_VERSIONS.includes(requestedVersion) ? requestedVersion : LATEST_PROTOCOL_VERSION;
    const server = buildServer();
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      // Resumability (Last-Event-ID) and the priming event the SSE scenarios look for.
      eventStore: new MemoryEventStore(),
      retryInterval: RETRY_INTERVAL_MS,
      onsessioninitialized: (id) => void sessions.set(id, { transport, server, protocolVersion }),
    });
    transport.onclose = () => {
      if (transport.sessionId !== undefined) sessions.delete(transport.sessionId);
    };
    await server.connect(transport);
    return transport;
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (new URL(req.url ?? '/', 'http://upstream').pathname !== '/mcp') return sendJson(res, 404, rpcError(-32000, 'Not found'));
    if (!fromLoopback(req)) return sendJson(res, 403, rpcError(-32000, 'Forbidden: Host or Origin is not a loopback name'));
    const sessionHeader = req.headers['mcp-session-id'];
    const sessionId = Array.isArray(sessionHeader) ? sessionHeader[0] : sessionHeader;
    const session = sessionId === undefined ? undefined : sessions.get(sessionId);
    if (req.method === 'POST') {
      let body: unknown;
      try {
        body = await readJson(req);
      } catch (err) {
        if (err instanceof BodyTooLarge) return sendJson(res, 413, rpcError(-32000, 'Request body too large'));
        return sendJson(res, 400, rpcError(-32700, 'Parse error'));
      }
      if (session) {
        // The transport takes each POST's protocol version from its MCP-Protocol-Version header, and
        // offers closeSSEStream (and sends the priming event) only from 2025-11-25 on. The
        // server-sse-polling scenario sends 2025-03-26 there on a session that negotiated 2025-11-25;
        // this server goes by what the session negotiated, so the scenario's close-and-resume path runs.
        // (The transport reads the raw header list, so that is where the value is replaced.)
        for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
          if (req.rawHeaders[i]!.toLowerCase() === 'mcp-protocol-version') req.rawHeaders[i + 1] = session.protocolVersion;
        }
        return session.transport.handleRequest(req, res, body);
      }
      if (sessionId !== undefined) return sendJson(res, 404, rpcError(-32001, 'Session not found'));
      if (!isInitializeRequest(body))
        return sendJson(res, 400, rpcError(-32000, 'Bad Request: no session id and not an initialize request'));
      return (await newSession(body.params.protocolVersion)).handleRequest(req, res, body);
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
    handle(req, res).catch(() => sendJson(res, 500, rpcError(-32603, 'Internal error')));
  });
  httpServer.listen(0, '127.0.0.1');
  await once(httpServer, 'listening');
  const { port } = httpServer.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    async close() {
      const all = [...sessions.values()];
      sessions.clear();
      await Promise.allSettled(all.map(({ server }) => server.close()));
      const closed = new Promise<void>((resolve) => httpServer.close(() => resolve()));
      httpServer.closeAllConnections();
      await closed;
    },
  };
}
