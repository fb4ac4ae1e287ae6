// Tracing on (an OTLP endpoint named), against an OTLP/HTTP receiver started here: the exporter of
// @opentelemetry/exporter-trace-otlp-http POSTs JSON to /v1/traces (ExportTraceServiceRequest in the
// OTLP/JSON encoding: ids as hex strings). One tool call is one trace: the sidecar's server span, its
// children (token lookup, policy decision, quota, the upstream request), continued from the client's
// `traceparent` header or `params._meta.traceparent`, the upstream seeing the same trace id. A malformed
// `traceparent` is ignored. No token, hash or secret appears anywhere in what is exported.

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashToken } from '../../src/model/credentials.ts';
import { startEchoUpstream, type FakeUpstream } from '../support/fake-upstreams.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { startTestIdp, TOKEN_EXCHANGE, type TestIdp } from '../support/test-idp.ts';

interface ExportedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
}

/** OTLP SpanKind values (opentelemetry-proto trace.proto). */
const SERVER = 2;
const CLIENT = 3;
const INTERNAL = 1;

const CLIENT_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_SPAN = '00f067aa0ba902b7';
const META_TRACE = '0af7651916cd43dd8448eb211c80319c';
const META_SPAN = 'b7ad6b7169203331';
const EXCHANGE_TRACE = '5b8aa5a2d2c872e8321cf37308d69df2';

function attributesOf(list: Array<{ key: string; value: Record<string, unknown> }> | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { key, value } of list ?? []) out[key] = value.stringValue ?? value.intValue ?? value.boolValue ?? value.doubleValue;
  return out;
}

describe('tracing: OTLP/HTTP export of proxy requests', () => {
  let receiver: Server;
  const bodies: string[] = [];
  const contentTypes: string[] = [];
  let echo: FakeUpstream;
  let idp: TestIdp;
  let idToken: string;
  let exchangeStatus: number;
  let stack: Stack;
  let token: string;
  let clientSecret: string;
  let exchangedToken = '';
  let masterToken: string;
  const upstreamTraceparents: Record<string, string | undefined> = {};
  let spans: ExportedSpan[] = [];
  const statuses: Record<string, number> = {};

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (req.url === '/v1/traces') {
          bodies.push(Buffer.concat(chunks).toString('utf8'));
          contentTypes.push(req.headers['content-type'] ?? '');
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{}');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    const endpoint = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/v1/traces`;
    echo = await startEchoUpstream();
    idp = await startTestIdp();
    stack = await startStack({
      upstreamUrl: echo.url,
      env: { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: endpoint, OTEL_SERVICE_NAME: 'sidecar-under-test' },
      config: {
        policy: { quotas: [{ name: 'calls', match: { tools: ['search'] }, per: 'subject', limit: 100, windowSeconds: 60 }] },
        idp: { issuer: idp.issuer, audience: 'mcp-tracing-test', jwksUrl: idp.jwksUrl },
      },
    });
    masterToken = stack.masterToken;
    const created = await stack.admin('createClient', { clientName: 'traced' });
    clientSecret = created.body.clientSecret;
    token = (await stack.admin('createAccessToken', { clientId: created.body.clientId, lifetimeSeconds: 600 })).body.accessToken;

    // Each request as a Streamable HTTP client POSTs it; the label travels as the JSON-RPC id.
    const send = async (label: string, headers: Record<string, string>, meta?: Record<string, string>) => {
      const before = echo.seen.length;
      const res = await fetch(stack.mcpUrl, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...headers,
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: label,
          method: 'tools/call',
          params: { name: 'search', arguments: { q: label }, ...(meta ? { _meta: meta } : {}) },
        }),
      });
      await res.text();
      statuses[label] = res.status;
      upstreamTraceparents[label] = echo.seen.length > before ? (echo.seen.at(-1)!.headers.traceparent as string | undefined) : undefined;
    };
    await send('header', { traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01` });
    await send('meta', {}, { traceparent: `00-${META_TRACE}-${META_SPAN}-01` });
    await send('malformed', { traceparent: `00-${'z'.repeat(32)}-${CLIENT_SPAN}-01` });
    await send('none', {});
    // A refused token: its trace too, with no token in it.
    await fetch(stack.mcpUrl, {
      method: 'POST',
      headers: { authorization: `Bearer ${'ab'.repeat(32)}`, 'content-type': 'application/json' },
      body: '{}',
    });
    // An RFC 8693 exchange of an IdP token: the /token request's trace holds the IdP call.
    const now = Math.floor(stack.clock.now() / 1000);
    idToken = await idp.sign({ iss: idp.issuer, aud: 'mcp-tracing-test', sub: 'traced-user', iat: now, exp: now + 300 });
    const exchanged = await fetch(`${stack.proxyUrl}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', traceparent: `00-${EXCHANGE_TRACE}-${CLIENT_SPAN}-01` },
      body: new URLSearchParams({
        grant_type: TOKEN_EXCHANGE,
        subject_token: idToken,
        subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
      }),
    });
    exchangeStatus = exchanged.status;
    exchangedToken = ((await exchanged.json()) as { access_token?: string }).access_token ?? '';
    // Shutting down exports what is buffered.
    await stack.close();
    spans = bodies.flatMap((text) =>
      (JSON.parse(text).resourceSpans as Array<{ scopeSpans: Array<{ spans: Array<Record<string, any>> }> }>).flatMap((rs) =>
        rs.scopeSpans.flatMap((ss) =>
          ss.spans.map((s) => ({
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId || undefined,
            name: s.name,
            kind: s.kind,
            attributes: attributesOf(s.attributes),
          })),
        ),
      ),
    );
  }, 60_000);
  afterAll(async () => {
    await echo?.close();
    await idp?.close();
    await new Promise<void>((r) => receiver?.close(() => r()));
  });

  /** The trace of the request labelled `label`: its server span, and the spans under it. */
  function traceOf(traceId: string) {
    const inTrace = spans.filter((s) => s.traceId === traceId);
    const root = inTrace.find((s) => s.kind === SERVER)!;
    return { root, children: inTrace.filter((s) => s.parentSpanId === root?.spanId) };
  }

  it('exports JSON to /v1/traces with the service name', () => {
    expect(bodies.length).toBeGreaterThan(0);
    expect(contentTypes.every((t) => t.startsWith('application/json'))).toBe(true);
    expect(bodies.join('')).toContain('sidecar-under-test');
  });

  it('continues a client traceparent header: one server span, its children, the upstream in the same trace', () => {
    expect(statuses.header).toBe(200);
    const { root, children } = traceOf(CLIENT_TRACE);
    expect(root).toMatchObject({ name: 'POST /mcp', kind: SERVER, parentSpanId: CLIENT_SPAN });
    expect(root.attributes).toMatchObject({
      'http.request.method': 'POST',
      'http.route': '/mcp',
      'http.response.status_code': 200,
      'mcp.method.name': 'tools/call',
      'gen_ai.tool.name': 'search',
    });
    expect(children.map((c) => c.name).sort()).toEqual(['POST', 'policy decision', 'quota', 'token lookup']);
    for (const c of children) expect(c.kind).toBe(c.name === 'POST' ? CLIENT : INTERNAL);
    const upstream = children.find((c) => c.name === 'POST')!;
    expect(upstream.attributes).toMatchObject({
      'http.request.method': 'POST',
      'server.address': '127.0.0.1',
      'http.response.status_code': 200,
    });
    // The upstream is told the sidecar's client span as its parent, in the client's trace.
    expect(upstreamTraceparents.header).toBe(`00-${CLIENT_TRACE}-${upstream.spanId}-01`);
    expect(spans.filter((s) => s.traceId === CLIENT_TRACE)).toHaveLength(5);
  });

  it('continues params._meta.traceparent when no header carries one', () => {
    const { root, children } = traceOf(META_TRACE);
    expect(root).toMatchObject({ name: 'POST /mcp', parentSpanId: META_SPAN });
    const upstream = children.find((c) => c.name === 'POST')!;
    expect(upstreamTraceparents.meta).toBe(`00-${META_TRACE}-${upstream.spanId}-01`);
  });

  it('ignores a malformed traceparent: the request is served, a new trace starts, the upstream gets a valid one', () => {
    expect(statuses.malformed).toBe(200);
    const sent = upstreamTraceparents.malformed!;
    expect(sent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    const traceId = sent.split('-')[1]!;
    expect(traceId).not.toBe(CLIENT_TRACE);
    const { root, children } = traceOf(traceId);
    expect(root.parentSpanId).toBeUndefined();
    expect(children.find((c) => c.name === 'POST')?.spanId).toBe(sent.split('-')[2]);
  });

  it('starts a trace of its own without a traceparent, and traces refused requests too', () => {
    expect(upstreamTraceparents.none).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    const refused = spans.find((s) => s.kind === SERVER && s.attributes['http.response.status_code'] === 401);
    expect(refused?.name).toBe('POST /mcp');
    const lookup = spans.find((s) => s.parentSpanId === refused?.spanId && s.name === 'token lookup');
    expect(lookup?.attributes['mcp_auth.outcome']).toBe('unknown');
  });

  it('traces an OAuth request with its IdP call as a child (an RFC 8693 exchange of an IdP token)', () => {
    expect(exchangeStatus).toBe(200);
    const { root, children } = traceOf(EXCHANGE_TRACE);
    expect(root).toMatchObject({ name: 'POST /token', kind: SERVER, parentSpanId: CLIENT_SPAN });
    expect(root.attributes['http.response.status_code']).toBe(200);
    expect(children.find((c) => c.name === 'IdP token verification')?.attributes['mcp_auth.idp.ok']).toBe(true);
  });

  it('exports no token, token hash or secret in any attribute', () => {
    const exported = bodies.join('\n');
    expect(exchangedToken).toMatch(/^[0-9a-f]{64}$/);
    for (const part of idToken.split('.')) expect(exported).not.toContain(part);
    const secrets = [
      exchangedToken,
      hashToken(exchangedToken),
      token,
      hashToken(token),
      clientSecret,
      hashToken(clientSecret),
      masterToken,
      hashToken(masterToken),
      'ab'.repeat(32),
      hashToken('ab'.repeat(32)),
    ];
    for (const secret of secrets) expect(exported).not.toContain(secret);
    // Nor the first 8 hex of a hash, as audit events name tokens.
    for (const secret of [token, 'ab'.repeat(32)]) expect(exported).not.toContain(hashToken(secret).slice(0, 8));
    for (const s of spans) for (const value of Object.values(s.attributes)) expect(String(value)).not.toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('tracing without a policy or quotas: the body read for its task ids tells the trace', () => {
  const HEADER_TRACE = '6e0c63257de34c926f9efcd03899e5a6';
  const BODY_TRACE = 'a3ce929d0e0e47364bf92f3577b34da6';
  const TASK_TRACE = '8448eb211c80319c0af7651916cd43dd';
  const SPAN = '53995c3f42cd8ad8';
  let receiver: Server;
  const bodies: string[] = [];
  let echo: FakeUpstream;
  let stack: Stack;
  const upstreamTraceparents: Record<string, string | undefined> = {};
  let spans: ExportedSpan[] = [];

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (req.url === '/v1/traces') bodies.push(Buffer.concat(chunks).toString('utf8'));
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{}');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    echo = await startEchoUpstream();
    stack = await startStack({
      upstreamUrl: echo.url,
      env: { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/v1/traces` },
    });
    // As a Streamable HTTP client POSTs them (MCP 2025-11-25 `_meta.traceparent`, as the OpenTelemetry MCP conventions place it).
    const send = async (label: string, message: Record<string, unknown>, headers: Record<string, string> = {}) => {
      const before = echo.seen.length;
      const res = await fetch(stack.mcpUrl, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${stack.masterToken}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...headers,
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: label, ...message }),
      });
      await res.text();
      expect(res.status).toBe(200);
      expect(echo.seen.length).toBe(before + 1);
      upstreamTraceparents[label] = echo.seen.at(-1)!.headers.traceparent as string | undefined;
    };
    const meta = (trace: string) => ({ _meta: { traceparent: `00-${trace}-${SPAN}-01` } });
    await send('body', { method: 'tools/call', params: { name: 'search', arguments: {}, ...meta(BODY_TRACE) } });
    // A header's traceparent comes first, as with a policy.
    await send(
      'both',
      { method: 'tools/call', params: { name: 'search', arguments: {}, ...meta(BODY_TRACE) } },
      {
        traceparent: `00-${HEADER_TRACE}-${SPAN}-01`,
      },
    );
    // A body parsed for the task it names: the same single parse tells the trace.
    await send('task', { method: 'tasks/get', params: { taskId: 'never-made', ...meta(TASK_TRACE) } });
    await stack.close();
    spans = bodies.flatMap((text) =>
      (JSON.parse(text).resourceSpans as Array<{ scopeSpans: Array<{ spans: Array<Record<string, any>> }> }>).flatMap((rs) =>
        rs.scopeSpans.flatMap((ss) =>
          ss.spans.map((s) => ({
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId || undefined,
            name: s.name,
            kind: s.kind,
            attributes: attributesOf(s.attributes),
          })),
        ),
      ),
    );
  }, 60_000);
  afterAll(async () => {
    await echo?.close();
    await new Promise<void>((r) => receiver?.close(() => r()));
  });

  it('continues params._meta.traceparent with no policy reading the body, and names the method and tool', () => {
    const roots = spans.filter((s) => s.traceId === BODY_TRACE && s.kind === SERVER);
    expect(roots).toHaveLength(1);
    expect(roots[0]).toMatchObject({ name: 'POST /mcp', parentSpanId: SPAN });
    expect(roots[0]!.attributes).toMatchObject({ 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'search' });
    const upstream = spans.find((s) => s.parentSpanId === roots[0]!.spanId && s.kind === CLIENT)!;
    expect(upstreamTraceparents.body).toBe(`00-${BODY_TRACE}-${upstream.spanId}-01`);
  });

  it("a traceparent header wins over the body's", () => {
    expect(upstreamTraceparents.both!.split('-')[1]).toBe(HEADER_TRACE);
    expect(spans.find((s) => s.traceId === HEADER_TRACE && s.kind === SERVER)?.parentSpanId).toBe(SPAN);
  });

  it('continues it from a body read for the task it names', () => {
    expect(upstreamTraceparents.task!.split('-')[1]).toBe(TASK_TRACE);
    expect(spans.find((s) => s.traceId === TASK_TRACE && s.kind === SERVER)?.attributes['mcp.method.name']).toBe('tasks/get');
  });
});
