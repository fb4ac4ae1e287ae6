// A policy decides what the upstream will execute only if the upstream cannot read the decided body
// differently. Each attack here is a body the sidecar once read one way and a real upstream parser read
// another way; each upstream records what it executes, and the test checks that the denied tool never
// ran and a disguised tools/list never came back unfiltered:
// - an upstream built the MCP TypeScript SDK's documented way, `createMcpExpressApp()` (express.json,
//   whose body parser decodes the declared charset, UTF-7 included) with a stateless
//   StreamableHTTPServerTransport, as in the SDK's README;
// - a Go upstream (test/support/go-upstream/main.go, built here with Debian's golang-go): encoding/json
//   into structs, which matches keys to fields case-insensitively (Unicode folding, last one wins).

import { describe, expect, it } from 'vitest';
import { startGoUpstream } from '../support/go-upstream.ts';
import { policyStack, startSdkExpressUpstream } from '../support/policy-stack.ts';

const POLICY = {
  default: 'deny',
  rules: [
    { name: 'no-internal', effect: 'deny', requests: { methods: ['resources/*'], names: ['https://docs.example/internal/*'] } },
    { name: 'echo', effect: 'allow', requests: { methods: ['tools/call'], names: ['echo'] } },
    { name: 'public-docs', effect: 'allow', requests: { methods: ['resources/*'], names: ['https://docs.example/public/*'] } },
  ],
};

const RESOURCES = ['https://docs.example/public/readme', 'https://docs.example/internal/secret'];

/** The SDK's documented Express upstream (stateless, JSON answers); `executed` records each call it ran. */
const startDocsUpstream = () =>
  startSdkExpressUpstream('docs', (server, executed) => {
    for (const name of ['echo', 'delete_repo']) {
      server.registerTool(name, { description: name }, async () => {
        executed.push(`tools/call ${name}`);
        return { content: [{ type: 'text', text: `ran ${name}` }] };
      });
    }
    for (const uri of RESOURCES) {
      server.registerResource(uri, uri, {}, async (read) => {
        executed.push(`resources/read ${read.href}`);
        return { contents: [{ uri: read.href, text: `the text of ${read.href}` }] };
      });
    }
  });

function toolNames(text: string): string[] {
  return (JSON.parse(text) as { result: { tools: Array<{ name: string }> } }).result.tools.map((t) => t.name).sort();
}

describe('policy against the SDK upstream of createMcpExpressApp()', () => {
  const s = policyStack(startDocsUpstream, POLICY);

  it('the allowed tool runs and tools/list is filtered (charset=utf-8 is fine)', async () => {
    const call = await s.post(
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}',
      'application/json; charset=utf-8',
    );
    expect(call.status).toBe(200);
    expect(call.text).toContain('ran echo');
    const list = await s.post('{"jsonrpc":"2.0","id":2,"method":"tools/list"}');
    expect(toolNames(list.text)).toEqual(['echo']);
    expect(s.upstream.executed).toEqual(['tools/call echo']);
  });

  // UTF-7 spells `","name":"delete_repo` inside what UTF-8 reads as one string: `+ACIALAAi-` is `","`,
  // `+ACIAOgAi-` is `":"`. express decodes the declared charset; the second "name" wins in JSON.parse.
  it('charset=utf-7: a call of echo that UTF-7 reads as delete_repo is refused; nothing runs', async () => {
    s.upstream.executed.length = 0;
    const res = await s.post(
      '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"arguments":{},"name":"echo","x":"+ACIALAAi-name+ACIAOgAi-delete_repo"}}',
      'application/json; charset=utf-7',
    );
    expect(res.status).toBe(400);
    expect(res.text).toMatch(/charset other than utf-8/);
    expect(s.upstream.executed).toEqual([]);
  });

  // Here UTF-7 reads `{..."method":"ping","params":{"x":""},"method":"tools/list","params":{"x":""}}`.
  it('charset=utf-7: a ping that UTF-7 reads as tools/list is refused, never answered unfiltered', async () => {
    const disguised = '+ACIAfQ-,+ACI-method+ACI-:+ACI-tools/list+ACI-,+ACI-params+ACI-:+AHsAIg-x+ACI-:+ACI-';
    const res = await s.post(`{"jsonrpc":"2.0","id":4,"method":"ping","params":{"x":"${disguised}"}}`, 'application/json; charset=UTF-7');
    expect(res.status).toBe(400);
    expect(res.text).not.toContain('delete_repo');
  });

  // McpServer reads a resource by `new URL(uri).toString()`: dot segments, `%2e%2e` in any case and `\`
  // are resolved before it looks the resource up.
  it('resources/read: the public resource is read; every spelling that resolves to the internal one is refused', async () => {
    s.upstream.executed.length = 0;
    const read = (id: number, uri: string) => s.post(JSON.stringify({ jsonrpc: '2.0', id, method: 'resources/read', params: { uri } }));
    const ok = await read(10, 'https://docs.example/public/readme');
    expect(ok.status).toBe(200);
    expect(ok.text).toContain('the text of https://docs.example/public/readme');
    const disguised = [
      'https://docs.example/public/../internal/secret',
      'https://docs.example/public/%2e%2e/internal/secret',
      'https://docs.example/public/%2E%2E/internal/secret',
      'https://docs.example/public/.%2e/internal/secret',
      'https://docs.example/public/..\\internal\\secret',
    ];
    for (const [i, uri] of disguised.entries()) {
      const res = await read(11 + i, uri);
      // No scope would allow it: the sidecar's own JSON-RPC error, at 200.
      expect(res.status, uri).toBe(200);
      expect(JSON.parse(res.text), uri).toMatchObject({
        id: 11 + i,
        error: { code: -32003, data: { 'io.modelcontextprotocol/authorization': { remediation: 'unavailable' } } },
      });
      expect(res.text, uri).not.toContain('the text of');
    }
    expect(s.upstream.executed).toEqual(['resources/read https://docs.example/public/readme']);
  });

  it.each(['utf-16le', 'utf-16', '"utf-7"'])('charset=%s is refused', async (charset) => {
    const res = await s.post('{"jsonrpc":"2.0","id":5,"method":"ping"}', `application/json; charset=${charset}`);
    expect(res.status).toBe(400);
  });
});

describe('policy against a Go upstream (encoding/json, case-insensitive keys)', () => {
  const s = policyStack(startGoUpstream, POLICY, 120_000);

  it('the allowed tool runs and tools/list is filtered', async () => {
    const call = await s.post('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}');
    expect(call.status).toBe(200);
    expect(call.text).toContain('ran echo');
    const list = await s.post('{"jsonrpc":"2.0","id":2,"method":"tools/list"}');
    expect(toolNames(list.text)).toEqual(['echo']);
    expect(s.upstream.executed()).toEqual(['tools/call echo']);
  });

  it.each([
    ['"Name" beside "name"', '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","Name":"delete_repo"}}'],
    ['"NAME" beside "name"', '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","NAME":"delete_repo"}}'],
    ['"Method" beside a ping', '{"jsonrpc":"2.0","id":3,"method":"ping","Method":"tools/call","params":{"name":"delete_repo"}}'],
    [
      '"Method" in a message JavaScript reads as a response',
      '{"jsonrpc":"2.0","id":3,"Method":"tools/call","params":{"name":"delete_repo"},"result":{}}',
    ],
    [
      '"paramſ" (long s folds to s) after the params',
      '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo"},"param\\u017f":{"name":"delete_repo"}}',
    ],
  ])('%s: refused, and delete_repo never runs', async (_label, body) => {
    const before = s.upstream.executed().length;
    const res = await s.post(body);
    expect(res.status).toBe(400);
    expect(res.text).not.toContain('ran delete_repo');
    expect(s.upstream.executed().slice(before)).toEqual([]);
  });

  it.each([
    ['"Method":"tools/list" beside a ping', '{"jsonrpc":"2.0","id":4,"method":"ping","Method":"tools/list"}'],
    ['"ID" on a tools/list JavaScript reads as a notification', '{"jsonrpc":"2.0","method":"tools/list","ID":5}'],
  ])('%s: refused, never answered unfiltered', async (_label, body) => {
    const res = await s.post(body);
    expect(res.status).toBe(400);
    expect(res.text).not.toContain('delete_repo');
  });
});
