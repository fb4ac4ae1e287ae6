// A policy decides the calls in a POST's body; an upstream that ignores the method runs a call it finds
// in any body. The Go upstream (test/support/go-upstream/main.go: encoding/json, no method check, as a
// Go MCP server's handler may be written) runs a tools/call sent as PUT, PATCH, DELETE, GET or OPTIONS
// exactly as it runs a POST's. So under a policy a body on any method but POST is refused, in proxy mode
// (the sidecar sees the body's framing) and in forward-auth mode, where nginx's auth_request and Caddy's
// forward_auth pass neither Content-Length nor Transfer-Encoding to the check: there only POST, GET and
// DELETE are allowed, and those without body headers when the check shows them. A GET or DELETE whose
// body the check cannot see is refused by the ingress examples themselves, in either framing.

import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGoUpstream, type GoUpstream } from '../support/go-upstream.ts';
import { freePort, ingressAvailable, startIngress, type Ingress, type IngressKind } from '../support/ingress.ts';
import { policyStack } from '../support/policy-stack.ts';
import { startStack, type Stack } from '../support/stack.ts';

const POLICY = {
  default: 'deny',
  rules: [{ name: 'echo', effect: 'allow', requests: { methods: ['tools/call'], names: ['echo'] } }],
};

/** A call of the tool the policy denies everyone. */
const DENIED_CALL = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_repo"}}';

interface Answer {
  status: number;
  text: string;
}

/**
 * One request by node:http (fetch refuses a body on GET): the body with its Content-Length, or chunked
 * (Transfer-Encoding: chunked, as node:http frames a body written without a length).
 */
function send(url: string, method: string, headers: Record<string, string>, body?: { text: string; chunked: boolean }): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method, headers: body && !body.chunked ? { ...headers, 'content-length': String(Buffer.byteLength(body.text)) } : headers },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    if (body?.chunked) req.setHeader('transfer-encoding', 'chunked');
    if (body !== undefined) req.write(body.text);
    req.end();
  });
}

const METHODS = ['PUT', 'PATCH', 'DELETE', 'GET', 'OPTIONS'];
const FRAMINGS = [
  { framing: 'Content-Length', chunked: false },
  { framing: 'chunked', chunked: true },
];

describe('proxy mode: a tools/call body on a method other than POST', () => {
  const s = policyStack(startGoUpstream, POLICY, 120_000);

  it('the Go upstream runs what it is sent: an allowed POST runs echo', async () => {
    const res = await send(
      s.stack.mcpUrl,
      'POST',
      { authorization: `Bearer ${s.token}`, 'content-type': 'application/json' },
      { text: '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}', chunked: false },
    );
    expect(res.status).toBe(200);
    expect(s.upstream.executed()).toContain('tools/call echo');
  });

  describe.each(FRAMINGS)('body framed by $framing', ({ chunked }) => {
    it.each(METHODS)('%s: 400 with a clear error, and delete_repo never runs', async (method) => {
      const before = s.upstream.executed().length;
      const res = await send(
        s.stack.mcpUrl,
        method,
        { authorization: `Bearer ${s.token}`, 'content-type': 'application/json' },
        { text: DENIED_CALL, chunked },
      );
      expect(res.status, res.text).toBe(400);
      expect(JSON.parse(res.text)).toMatchObject({
        error: 'invalid_request',
        error_description: expect.stringMatching(/only a POST carries a body on \/mcp/),
      });
      expect(s.upstream.executed().slice(before)).toEqual([]);
    });
  });

  it('a GET with Content-Length: 0 and a DELETE without a body carry no call: forwarded', async () => {
    for (const method of ['GET', 'DELETE']) {
      const res = await send(s.stack.mcpUrl, method, { authorization: `Bearer ${s.token}`, 'content-length': '0' });
      // The Go upstream answers an empty body with its JSON error: the request reached it.
      expect(res.text, method).toMatch(/unexpected end of JSON input/);
    }
  });

  it('without a token the answer is still the 401, whatever the method', async () => {
    const res = await send(s.stack.mcpUrl, 'PUT', { 'content-type': 'application/json' }, { text: DENIED_CALL, chunked: false });
    expect(res.status).toBe(401);
  });
});

describe('forward-auth: /authz for a method other than POST', () => {
  let stack: Stack;
  let token: string;
  let authz: string;

  beforeAll(async () => {
    stack = await startStack({ config: { proxy: { forwardAuth: true }, policy: POLICY } });
    ({ token } = await stack.issueOAuthToken());
    authz = `${stack.proxyUrl}/authz`;
  });
  afterAll(async () => {
    await stack?.close();
  });

  /** nginx's form of the question: the original method and URI in X-Original-Method / X-Original-URI. */
  const ask = (method: string, headers: Record<string, string> = {}, body?: { text: string; chunked: boolean }) =>
    send(authz, 'GET', { authorization: `Bearer ${token}`, 'x-original-uri': '/mcp', 'x-original-method': method, ...headers }, body);

  it('GET and DELETE without body headers (the stream, ending a session): allowed', async () => {
    for (const method of ['GET', 'DELETE', 'get']) expect((await ask(method)).status, method).toBe(200);
    // Content-Length: 0 is no body.
    expect((await ask('GET', { 'content-length': '0' })).status).toBe(200);
  });

  it.each(['PUT', 'PATCH', 'OPTIONS', 'HEAD', 'TRACE', 'PROPFIND'])('%s: refused whether or not the check shows a body', async (method) => {
    const res = await ask(method);
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text)).toMatchObject({
      error: 'invalid_request',
      error_description: `with a per-tool policy /mcp answers POST, GET and DELETE only behind an ingress: ${method} is refused`,
    });
  });

  // An ingress that passes the client's framing headers to the check (Envoy's ext_authz with the body
  // buffered, a custom one): a GET or DELETE that states a body is refused.
  it.each(FRAMINGS)('GET and DELETE whose check shows a body ($framing): refused', async ({ chunked }) => {
    for (const method of ['GET', 'DELETE']) {
      const res = await ask(method, {}, { text: DENIED_CALL, chunked });
      expect(res.status, method).toBe(400);
      expect(JSON.parse(res.text).error_description).toBe(
        `with a per-tool policy only a POST carries a body on /mcp: a ${method} with a body is refused`,
      );
    }
  });

  it('an unauthenticated PUT is still the 401', async () => {
    expect((await send(authz, 'GET', { 'x-original-uri': '/mcp', 'x-original-method': 'PUT' })).status).toBe(401);
  });
});

const KINDS: IngressKind[] = ['nginx', 'caddy'];

describe.each(KINDS)('forward-auth behind %s, the Go upstream behind it', (kind) => {
  const available = ingressAvailable(kind);
  let upstream: GoUpstream;
  let stack: Stack;
  let ingress: Ingress;
  let token: string;

  beforeAll(async () => {
    if (!available) return;
    upstream = await startGoUpstream();
    const port = await freePort();
    stack = await startStack({
      upstreamUrl: upstream.url,
      config: { proxy: { forwardAuth: true, trustedProxies: ['127.0.0.1'], publicUrl: `http://127.0.0.1:${port}` }, policy: POLICY },
    });
    ({ token } = await stack.issueOAuthToken());
    ingress = await startIngress(kind, { port, sidecar: stack.proxyUrl, upstream: upstream.url });
  }, 120_000);
  afterAll(async () => {
    await ingress?.stop();
    await stack?.close();
    await upstream?.close();
  });

  it.skipIf(!available).each(['PUT', 'PATCH', 'OPTIONS'])(
    '%s with a tools/call body: refused at the ingress, delete_repo never runs',
    async (method) => {
      for (const { chunked } of FRAMINGS) {
        const before = upstream.executed().length;
        const res = await send(
          `${ingress.url}/mcp`,
          method,
          { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          { text: DENIED_CALL, chunked },
        );
        expect(res.status, `${res.text}\n${ingress.log()}`).toBe(400);
        expect(upstream.executed().slice(before)).toEqual([]);
      }
    },
  );

  it.skipIf(!available).each(['GET', 'DELETE'])(
    '%s with a tools/call body: refused at the ingress (the check cannot see it), delete_repo never runs',
    async (method) => {
      for (const { framing, chunked } of FRAMINGS) {
        const before = upstream.executed().length;
        const res = await send(
          `${ingress.url}/mcp`,
          method,
          { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          { text: DENIED_CALL, chunked },
        );
        expect(res.status, `${framing}: ${res.text}\n${ingress.log()}`).toBe(400);
        expect(JSON.parse(res.text)).toMatchObject({ error: 'invalid_request', error_description: 'only a POST carries a body on /mcp' });
        expect(upstream.executed().slice(before)).toEqual([]);
      }
    },
  );

  it.skipIf(!available)('a GET without a body still reaches the upstream', async () => {
    const res = await send(`${ingress.url}/mcp`, 'GET', { authorization: `Bearer ${token}` });
    expect(res.text).toMatch(/unexpected end of JSON input/);
    // Content-Length: 0 is no body, for DELETE (ending a session) too.
    const ended = await send(`${ingress.url}/mcp`, 'DELETE', { authorization: `Bearer ${token}`, 'content-length': '0' });
    expect(ended.text).toMatch(/unexpected end of JSON input/);
  });
});
