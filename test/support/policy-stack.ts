// The policy tests' parts, written once: an MCP upstream built the MCP TypeScript SDK's documented way
// (`createMcpExpressApp()`: express.json, whose body parser decodes the declared charset, with a
// stateless StreamableHTTPServerTransport answering JSON, as in the SDK's README), and a sidecar with a
// policy in front of an upstream that records what it ran, with a token to send bodies through it.

import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { afterAll, beforeAll } from 'vitest';
import { serveOnLoopback } from './fake-upstreams.ts';
import { startStack, type Stack } from './stack.ts';

export interface SdkExpressUpstream {
  url: string;
  close: () => Promise<void>;
  /** What the tools and resources `register` added wrote when they ran, in order. */
  executed: string[];
}

/**
 * The SDK's documented Express upstream, serving `name`: `register` adds the tools and resources to
 * each request's McpServer, recording in `executed` what runs.
 */
export async function startSdkExpressUpstream(
  name: string,
  register: (server: McpServer, executed: string[]) => void,
): Promise<SdkExpressUpstream> {
  const executed: string[] = [];
  const app = createMcpExpressApp();
  app.post('/mcp', async (req: IncomingMessage & { body?: unknown }, res: ServerResponse) => {
    const server = new McpServer({ name, version: '1.0.0' });
    register(server, executed);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  });
  const served = await serveOnLoopback(createServer(app));
  return { ...served, executed };
}

export interface PolicyStack<U> {
  upstream: U;
  stack: Stack;
  /** An OAuth access token of a fresh client (no scope). */
  token: string;
  /** A POST of `body` as it is to /mcp with the token: the status and the text of the answer. */
  post(body: string, contentType?: string): Promise<{ status: number; text: string }>;
}

/**
 * For the enclosing describe: before its tests, the upstream `start` gives and a sidecar with `policy`
 * in front of it, and a token; after them, both closed. The fields are set once its beforeAll ran.
 */
export function policyStack<U extends { url: string; close: () => Promise<void> }>(
  start: () => Promise<U>,
  policy: unknown,
  timeoutMs?: number,
): PolicyStack<U> {
  const s = {
    async post(body: string, contentType = 'application/json') {
      const res = await fetch(s.stack.mcpUrl, {
        method: 'POST',
        headers: { authorization: `Bearer ${s.token}`, 'content-type': contentType, accept: 'application/json, text/event-stream' },
        body,
      });
      return { status: res.status, text: await res.text() };
    },
  } as PolicyStack<U>;
  beforeAll(async () => {
    s.upstream = await start();
    s.stack = await startStack({ upstreamUrl: s.upstream.url, config: { policy } });
    ({ token: s.token } = await s.stack.issueOAuthToken());
  }, timeoutMs);
  afterAll(async () => {
    await s.stack?.close();
    await s.upstream?.close();
  });
  return s;
}
