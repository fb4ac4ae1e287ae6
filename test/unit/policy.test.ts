// The policy engine as a pure function: validation of config (every problem named), first-match
// decisions, globs, step-up scopes, JSON-RPC reading within bounds, and list filtering (JSON and SSE).

import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { Audit, REPEAT_WINDOW_MS } from '../../src/observability/audit.ts';
import { ManualClock } from '../../src/model/clock.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { denialAnswer, enforceCall, enforcePolicy, type PolicyDenial } from '../../src/policy/enforce.ts';
import { MemoryTokenStore } from '../../src/store/memory.ts';
import { checkBodyHeaders, checkMirrorHeaders, DEFAULT_JSONRPC_LIMITS, parseClientMessages } from '../../src/policy/jsonrpc.ts';
import { filterMessages, SseListRewriter } from '../../src/policy/list-filter.ts';
import { ConfigError, buildConfig } from '../../src/config/load.ts';
import { generateToken } from '../../src/model/credentials.ts';
import {
  compileGlobs,
  compilePolicy,
  decide,
  decideCall,
  explainCall,
  readingsOf,
  stepUpScope,
  type Policy,
  type PolicyPrincipal,
} from '../../src/policy/rules.ts';
import { createParser } from 'eventsource-parser';

function compile(input: unknown): Policy {
  const problems: string[] = [];
  const policy = compilePolicy(input, problems);
  expect(problems).toEqual([]);
  return policy!;
}

function problemsOf(input: unknown): string[] {
  const problems: string[] = [];
  expect(compilePolicy(input, problems)).toBeUndefined();
  return problems;
}

const alice: PolicyPrincipal = {
  kind: 'oauth',
  subject: 'alice',
  clientId: 'cli-1',
  scope: 'mcp:read',
  groups: ['eng'],
  email: 'alice@Example.com',
};
const ci: PolicyPrincipal = { kind: 'oauth', subject: 'ci-bot', clientId: 'ci-bot', scope: 'resources:read' };
const user: PolicyPrincipal = { kind: 'user', subject: 'u-1', groups: ['ops'], email: 'bob@other.org' };

const POLICY = {
  default: 'deny',
  rules: [
    { name: 'no-deletes', effect: 'deny', requests: { methods: ['tools/call'], names: ['delete_*'] } },
    { name: 'ci-reads', effect: 'allow', principals: { clientIds: ['ci-*'] }, requests: { methods: ['resources/read'] } },
    {
      name: 'eng-search',
      effect: 'allow',
      principals: { groups: ['eng'], emailDomains: ['example.com'] },
      requests: { methods: ['tools/call'], names: ['search', 'get_?'] },
    },
    {
      name: 'writers',
      effect: 'allow',
      principals: { kinds: ['oauth'], scopes: ['mcp:write'] },
      requests: { methods: ['tools/call'], names: ['write_*'] },
    },
  ],
};

describe('policy: decisions', () => {
  const policy = compile(POLICY);

  it.each([
    ['alice may search', alice, { method: 'tools/call', name: 'search' }, 'allow', 'eng-search'],
    ['? matches one character', alice, { method: 'tools/call', name: 'get_x' }, 'allow', 'eng-search'],
    ['? matches exactly one', alice, { method: 'tools/call', name: 'get_xy' }, 'deny', 'default'],
    [
      'the first matching rule decides: deletes are denied even for eng',
      alice,
      { method: 'tools/call', name: 'delete_repo' },
      'deny',
      'no-deletes',
    ],
    ['ci may read resources', ci, { method: 'resources/read', name: 'file:///a/b' }, 'allow', 'ci-reads'],
    ['ci may not call tools', ci, { method: 'tools/call', name: 'search' }, 'deny', 'default'],
    ['a user token from another domain may not search', user, { method: 'tools/call', name: 'search' }, 'deny', 'default'],
    ['write needs the scope', alice, { method: 'tools/call', name: 'write_file' }, 'deny', 'default'],
    [
      'with the scope, write is allowed',
      { ...alice, scope: 'mcp:read mcp:write' },
      { method: 'tools/call', name: 'write_file' },
      'allow',
      'writers',
    ],
  ] as const)('%s', (_label, principal, request, effect, rule) => {
    expect(decide(policy, principal, request)).toEqual({ effect, rule });
  });

  it.each(['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf'])(
    'a method named like a prototype member (%s) is decided by the rules, never always allowed',
    (method) => {
      // The key a plain-object method table's prototype would have made the call's "name" field.
      const key = String(({} as Record<string, unknown>)[method]);
      const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: { [key]: 'x' } }));
      const outcome = enforcePolicy(policy, alice, body, { method: undefined, name: undefined }, DEFAULT_JSONRPC_LIMITS);
      expect(outcome).toMatchObject({ denied: true, rule: 'default', call: { method } });
      expect(explainCall(policy, alice, { method })).toMatchObject({ effect: 'deny', decidedBy: 'default' });
    },
  );

  it('resource URIs are decided as sent and in the forms an upstream normalises them to', () => {
    const docs = compile({
      default: 'deny',
      rules: [
        { name: 'no-internal', effect: 'deny', requests: { methods: ['resources/read'], names: ['https://docs.example/internal/*'] } },
        {
          name: 'public',
          effect: 'allow',
          requests: { methods: ['resources/read'], names: ['https://docs.example/public/*', 'ref://hello/*'] },
        },
      ],
    });
    const read = (uri: string) => decideCall(docs, user, { method: 'resources/read', name: uri });
    expect(read('https://docs.example/public/readme')).toEqual({ effect: 'allow', rule: 'public' });
    expect(read('ref://hello/a%20b')).toEqual({ effect: 'allow', rule: 'public' });
    for (const uri of [
      'https://docs.example/public/../internal/secret',
      'https://docs.example/public/%2e%2e/internal/secret',
      'https://docs.example/public/%2E%2E/internal/secret',
      'https://docs.example/public/.%2E/internal/secret',
      'https://docs.example/public/..\\internal\\secret',
      'HTTPS://DOCS.EXAMPLE/public/../internal/secret',
      'https://docs.example/public/%2e%2e/%69nternal/secret',
    ]) {
      expect(read(uri).effect, uri).toBe('deny');
      // The plain decision (list filtering of the upstream's own entries) reads the URI as written.
      expect(decide(docs, user, { method: 'resources/read', name: uri }).rule, uri).not.toBe('no-internal');
    }
    expect(read('https://docs.example/public/%2E%2E/internal/secret')).toEqual({ effect: 'deny', rule: 'no-internal' });
    expect(explainCall(docs, user, { method: 'resources/read', name: 'https://docs.example/public/../internal/secret' })).toMatchObject({
      effect: 'deny',
      rule: 'no-internal',
    });
  });

  it('tool names are decided as sent and in their NFKC form without surrounding white space', () => {
    const open = compile({
      default: 'allow',
      rules: [{ name: 'no-deletes', effect: 'deny', requests: { methods: ['tools/call'], names: ['delete_*'] } }],
    });
    for (const name of ['ｄｅｌｅｔｅ_repo', ' delete_repo', 'delete_repo\u00a0']) {
      expect(decideCall(open, user, { method: 'tools/call', name }), name).toEqual({ effect: 'deny', rule: 'no-deletes' });
    }
    expect(readingsOf({ method: 'tools/call', name: 'search' })).toEqual(['search']);
    expect(decideCall(policy, alice, { method: 'tools/call', name: 'search' })).toEqual({ effect: 'allow', rule: 'eng-search' });
  });

  it('the default decides when nothing matches, both ways', () => {
    const open = compile({
      default: 'allow',
      rules: [{ name: 'deny-x', effect: 'deny', requests: { methods: ['tools/call'], names: ['x'] } }],
    });
    expect(decide(open, user, { method: 'tools/call', name: 'y' })).toEqual({ effect: 'allow', rule: 'default' });
    expect(decide(open, user, { method: 'tools/call', name: 'x' })).toEqual({ effect: 'deny', rule: 'deny-x' });
    const closed = compile({ rules: [{ name: 'a', effect: 'allow', principals: { kinds: ['master'] } }] });
    expect(closed.defaultEffect).toBe('deny');
  });

  it('globs: * spans slashes, regex metacharacters are literal', () => {
    const g = compileGlobs(['file:///docs/*', 'a.b', 'x(y)+']);
    expect(g.test('file:///docs/a/b/c.md')).toBe(true);
    expect(g.test('a.b')).toBe(true);
    expect(g.test('aXb')).toBe(false);
    expect(g.test('x(y)+')).toBe(true);
    expect(g.test('xyy')).toBe(false);
  });

  it('step-up: names the scope that would allow the call, keeping the ones held; none when no scope helps', () => {
    expect(stepUpScope(policy, alice, { method: 'tools/call', name: 'write_file' })).toBe('mcp:read mcp:write');
    expect(stepUpScope(policy, alice, { method: 'tools/call', name: 'delete_repo' })).toBeUndefined();
    expect(stepUpScope(policy, user, { method: 'tools/call', name: 'write_file' })).toBeUndefined();
  });

  it('explainCall: no policy, always allowed, a rule, the default', () => {
    expect(explainCall(undefined, alice, { method: 'tools/call', name: 'x' })).toMatchObject({ effect: 'allow', decidedBy: 'no policy' });
    expect(explainCall(policy, alice, { method: 'initialize' })).toMatchObject({ effect: 'allow', decidedBy: 'always allowed' });
    expect(explainCall(policy, alice, { method: 'tools/call', name: 'delete_x' })).toMatchObject({
      effect: 'deny',
      decidedBy: 'rule',
      rule: 'no-deletes',
    });
    expect(explainCall(policy, alice, { method: 'tools/call', name: 'write_x' })).toMatchObject({
      effect: 'deny',
      decidedBy: 'default',
      scope: 'mcp:read mcp:write',
    });
  });

  it('scopes_supported: every scope a rule names', () => {
    expect(policy.scopes).toEqual(['mcp:write']);
  });
});

describe('policy: validation reports every problem', () => {
  it.each([
    ['an unknown top-level field', { default: 'deny', rulez: [] }, /policy\.rulez is not a policy field/],
    ['no rules', { default: 'deny', rules: [] }, /non-empty list/],
    ['a bad default', { default: 'maybe', rules: [{ name: 'a', effect: 'allow' }] }, /policy\.default must be allow or deny/],
    ['an unknown rule field', { rules: [{ name: 'a', effect: 'allow', tool: 'x' }] }, /rules\[0\]\.tool is not a known field/],
    [
      'an unknown principal field',
      { rules: [{ name: 'a', effect: 'allow', principals: { group: ['x'] } }] },
      /principals\.group is not a known field/,
    ],
    [
      'an unknown request field',
      { rules: [{ name: 'a', effect: 'allow', requests: { tools: ['x'] } }] },
      /requests\.tools is not a known field/,
    ],
    ['a bad effect', { rules: [{ name: 'a', effect: 'permit' }] }, /effect must be allow, deny or approve/],
    ['a missing name', { rules: [{ effect: 'allow' }] }, /name must be/],
    [
      'a duplicate name',
      {
        rules: [
          { name: 'a', effect: 'deny', principals: { kinds: ['user'] } },
          { name: 'a', effect: 'allow', principals: { kinds: ['oauth'] } },
        ],
      },
      /used by an earlier rule/,
    ],
    ['an empty list', { rules: [{ name: 'a', effect: 'allow', principals: { kinds: [] } }] }, /non-empty list/],
    ['an unknown kind', { rules: [{ name: 'a', effect: 'allow', principals: { kinds: ['admin'] } }] }, /"admin" is not one of/],
    [
      'client ids on user tokens',
      { rules: [{ name: 'a', effect: 'allow', principals: { kinds: ['user'], clientIds: ['x'] } }] },
      /never match: principals\.clientIds needs kinds to include oauth/,
    ],
    [
      'scopes on master',
      { rules: [{ name: 'a', effect: 'allow', principals: { kinds: ['master'], scopes: ['x'] } }] },
      /never match: principals\.scopes/,
    ],
    [
      'groups on master',
      { rules: [{ name: 'a', effect: 'allow', principals: { kinds: ['master'], groups: ['x'] } }] },
      /never match: principals\.groups/,
    ],
    [
      'names on methods without names',
      { rules: [{ name: 'a', effect: 'allow', requests: { methods: ['completion/complete'], names: ['x'] } }] },
      /never match: requests\.names/,
    ],
    [
      'rules on always-allowed methods',
      { rules: [{ name: 'a', effect: 'deny', requests: { methods: ['initialize', 'tools/list'] } }] },
      /never match: initialize, ping/,
    ],
    [
      'a rule after a catch-all',
      {
        rules: [
          { name: 'all', effect: 'allow' },
          { name: 'later', effect: 'deny', principals: { kinds: ['user'] } },
        ],
      },
      /"later"\) can never match: rule "all"/,
    ],
    [
      'a scope that is not a scope token',
      { rules: [{ name: 'a', effect: 'allow', principals: { scopes: ['a b'] } }] },
      /not a scope token/,
    ],
  ])('%s', (_label, input, message) => {
    expect(problemsOf(input).join('\n')).toMatch(message);
  });

  it('several problems at once', () => {
    expect(
      problemsOf({
        rules: [
          { name: 'a', effect: 'x', foo: 1 },
          { name: 'b', effect: 'allow', principals: { kinds: ['nope'] } },
        ],
      }),
    ).toHaveLength(3);
  });
});

describe('policy: JSON-RPC bodies', () => {
  const parse = (text: string) => parseClientMessages(Buffer.from(text));

  it('a single call, a batch, a notification and a response', () => {
    expect(parse('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{}}}')).toEqual({
      batch: false,
      messages: [{ call: { method: 'tools/call', name: 'search', arguments: {} }, id: 1 }],
      canonical: Buffer.from('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{}}}'),
    });
    const batch = parse(
      '[{"jsonrpc":"2.0","id":"a","method":"resources/read","params":{"uri":"file:///x"}},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":7,"result":{}}]',
    );
    expect(batch.batch).toBe(true);
    expect(batch.messages.map((m) => m.call)).toEqual([
      { method: 'resources/read', name: 'file:///x' },
      { method: 'notifications/initialized' },
      undefined,
    ]);
  });

  it.each([
    ['not JSON', '{"jsonrpc":', /not JSON/],
    ['not an object', '"hello"', /must be an object/],
    ['not JSON-RPC 2.0', '{"jsonrpc":"1.0","id":1,"method":"x"}', /jsonrpc must be "2.0"/],
    ['no method, result or error', '{"jsonrpc":"2.0","id":1}', /needs a method/],
    ['a method that is not a string', '{"jsonrpc":"2.0","id":1,"method":42}', /method must be a non-empty string/],
    ['an object id', '{"jsonrpc":"2.0","id":{},"method":"ping"}', /id must be a string or a number/],
    ['a tool call without a name', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}', /params\.name/],
    ['an empty batch', '[]', /empty JSON-RPC batch/],
    ['a duplicate id', '[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":1,"method":"ping"}]', /duplicate id/],
    ['too deep', `${'['.repeat(65)}${']'.repeat(65)}`, /nested deeper than 64/],
    [
      'a huge batch',
      JSON.stringify(Array.from({ length: 10_000 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'ping' }))),
      /at most 100 messages/,
    ],
    // What parsers disagree on (each kind of upstream that reads it otherwise is in test/hostile/policy-parsers.test.ts).
    ['a repeated key', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"delete_repo"}}', /same key twice/],
    ['a repeated key spelt with an escape', '{"jsonrpc":"2.0","id":1,"method":"ping","m\\u0065thod":"tools/call"}', /same key twice/],
    [
      'a repeated key deep in the arguments',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":[{"x":1,"x":2}]}}}',
      /same key twice/,
    ],
    [
      'case-variant keys in params',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","Name":"delete_repo"}}',
      /differ only in case/,
    ],
    ['case-variant method', '{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call"}', /differ only in case/],
    [
      'case-variant keys deep in the arguments',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"path":"a","PATH":"b"}}}',
      /differ only in case/,
    ],
    [
      'keys equal under Unicode case folding (long s)',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"s":1,"\u017f":2}}}',
      /differ only in case/,
    ],
    [
      'keys equal under Unicode case folding (Kelvin sign)',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"k":1,"\u212a":2}}}',
      /differ only in case/,
    ],
    [
      'a message member in another case, alone',
      '{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{"name":"delete_repo"},"result":{}}',
      /spelt other than "method"/,
    ],
    ['an id in another case', '{"jsonrpc":"2.0","ID":5,"method":"tools/list"}', /spelt other than "id"/],
    [
      'an escaped lone surrogate in a value',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo\\ud800"}}',
      /lone surrogate/,
    ],
    ['an escaped lone low surrogate in a key', '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"\\udc00":1}}', /lone surrogate/],
    ['an integer beyond 2^53', '{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}', /beyond 2\^53/],
    ['a number beyond a double', '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":1e400}}', /beyond 2\^53/],
  ])('%s is a 400', (_label, text, message) => {
    try {
      parse(text);
      expect.unreachable();
    } catch (err) {
      expect(err).toMatchObject({ status: 400, code: 'invalid_request' });
      expect((err as Error).message).toMatch(message);
    }
  });

  it.each([
    [
      'invalid UTF-8',
      Buffer.from([...Buffer.from('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo'), 0xff, ...Buffer.from('"}}')]),
    ],
    [
      'a UTF-8-encoded surrogate (CESU-8)',
      Buffer.from([
        ...Buffer.from('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo'),
        0xed,
        0xa0,
        0x80,
        ...Buffer.from('"}}'),
      ]),
    ],
    ['UTF-16', Buffer.from('{"jsonrpc":"2.0","id":1,"method":"ping"}', 'utf16le')],
  ])('%s is a 400', (_label, bytes) => {
    expect(() => parseClientMessages(bytes)).toThrow(
      expect.objectContaining({ status: 400, message: expect.stringMatching(/not valid UTF-8|not JSON/) }),
    );
  });

  it('the forwarded body is the parsed JSON re-serialised: escapes, whitespace and number spellings in one form', () => {
    const text =
      ' {\n "jsonrpc" : "2.0", "id" : 1.0, "method":"tools/call", "params":{"n\\u0061me":"\\u0065cho","arguments":{"x":1e2,"s":"caf\\u00e9 \\ud83d\\ude00"}}}\n';
    const { canonical, messages } = parse(text);
    expect(messages[0]!.call).toEqual({ method: 'tools/call', name: 'echo', arguments: { x: 100, s: 'café 😀' } });
    expect(canonical.toString('utf8')).toBe(
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"x":100,"s":"café 😀"}}}',
    );
  });

  it('Content-Type: application/json, with charset=utf-8 at most; no Content-Encoding', () => {
    for (const ok of [
      'application/json',
      'Application/JSON',
      'application/json; charset=utf-8',
      'application/json;charset="UTF-8"',
      'application/json; profile=x',
    ]) {
      expect(() => checkBodyHeaders(ok, undefined), ok).not.toThrow();
    }
    expect(() => checkBodyHeaders('application/json', 'identity')).not.toThrow();
    for (const bad of [
      'application/json; charset=utf-7',
      'application/json; charset=utf-16le',
      'application/json; charset=iso-8859-1',
      'application/json; charset',
      'application/json; charset=utf-8; charset=utf-7',
      'application/json; x="a;charset=utf-7"',
      'text/plain',
      'application/jsonx',
    ]) {
      expect(() => checkBodyHeaders(bad, undefined), bad).toThrow(expect.objectContaining({ status: 400 }));
    }
    expect(() => checkBodyHeaders(undefined, undefined)).toThrow(expect.objectContaining({ status: 400 }));
    expect(() => checkBodyHeaders(['application/json', 'application/json'], undefined)).toThrow(expect.objectContaining({ status: 400 }));
    for (const coding of ['gzip', 'deflate', 'br', 'identity, gzip']) {
      expect(() => checkBodyHeaders('application/json', coding), coding).toThrow(/Content-Encoding/);
    }
  });

  it('brackets inside strings do not count towards depth', () => {
    expect(
      parse(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"s":"${'[{'.repeat(100)}\\"]"}}}`).messages,
    ).toHaveLength(1);
  });

  it('Mcp-Method / Mcp-Name must mirror the body when present', () => {
    const { messages } = parse('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"café"}}');
    expect(() => checkMirrorHeaders(undefined, undefined, messages)).not.toThrow();
    expect(() => checkMirrorHeaders('tools/call', 'caf%C3%A9', messages)).not.toThrow();
    expect(() => checkMirrorHeaders('tools/call', 'café', messages)).not.toThrow();
    expect(() => checkMirrorHeaders('tools/list', undefined, messages)).toThrow(/Mcp-Method header does not match/);
    expect(() => checkMirrorHeaders('tools/call', 'other', messages)).toThrow(/Mcp-Name header does not match/);
    expect(() => checkMirrorHeaders('tools/call', '%E0%A4%A', messages)).toThrow(/Mcp-Name header does not match/);
    const ping = parse('{"jsonrpc":"2.0","id":1,"method":"ping"}').messages;
    expect(() => checkMirrorHeaders('ping', 'x', ping)).toThrow(/names no target/);
  });
});

describe('policy: filtered lists', () => {
  const policy = compile(POLICY);
  const tools = {
    tools: [{ name: 'search' }, { name: 'delete_repo' }, { name: 'write_file' }, { description: 'no name' }],
    nextCursor: 'c2',
  };

  it('JSON: removes what the principal may not call, keeps the cursor, touches no other response', () => {
    const lists = new Map<string | number, string>([[3, 'tools/list']]);
    const text = filterMessages(policy, alice, lists, { jsonrpc: '2.0', id: 3, result: structuredClone(tools) });
    expect(JSON.parse(text!)).toEqual({ jsonrpc: '2.0', id: 3, result: { tools: [{ name: 'search' }], nextCursor: 'c2' } });
    expect(filterMessages(policy, alice, lists, { jsonrpc: '2.0', id: 4, result: structuredClone(tools) })).toBeUndefined();
    expect(filterMessages(policy, alice, lists, { jsonrpc: '2.0', id: 3, error: { code: -1, message: 'x' } })).toBeUndefined();
  });

  it('SSE: the list answer is rewritten wherever the chunks split it; other events pass with their line endings as LF', async () => {
    const lists = new Map<string | number, string>([['L', 'tools/list']]);
    const stream = [
      'event: message\r\nid: 1\r\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"p":1}}\r\n\r\n',
      `event: message\nid: 2\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: 'L', result: tools })}\n\n`,
      ': keep-alive\n\n',
    ].join('');
    for (const size of [1, 7, 64, stream.length]) {
      const chunks: Buffer[] = [];
      for (let i = 0; i < stream.length; i += size) chunks.push(Buffer.from(stream.slice(i, i + size)));
      const rewriter = new SseListRewriter(policy, alice, lists);
      let out = '';
      for (const c of chunks) out += rewriter.feed(c);
      out += rewriter.end();
      const events = out.split('\n\n');
      expect(events[0]).toBe('event: message\nid: 1\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"p":1}}');
      expect(events[1]).toBe(
        `event: message\nid: 2\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: 'L', result: { tools: [{ name: 'search' }], nextCursor: 'c2' } })}`,
      );
      expect(events[2]).toBe(': keep-alive');
    }
  });

  it('SSE with lone-CR line endings (valid SSE): the client reads the same events the filter decided, so the list reaches it filtered', () => {
    // The SSE parser the MCP SDK's client uses (eventsource-parser) ends a line at CRLF, LF or a lone CR.
    const lists = new Map<string | number, string>([['L', 'tools/list']]);
    const list = JSON.stringify({ jsonrpc: '2.0', id: 'L', result: tools });
    const streams = [
      `event: message\rdata: ${list}\r\rdata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"p":1}}\n\n`,
      `data: ${list}\r\n\rdata: {}\r\r`,
      `data: ${list}\r`,
    ];
    for (const stream of streams) {
      for (const size of [1, 2, 5, stream.length]) {
        const rewriter = new SseListRewriter(policy, alice, lists);
        let out = '';
        for (let i = 0; i < stream.length; i += size) out += rewriter.feed(Buffer.from(stream.slice(i, i + size)));
        out += rewriter.end();
        const seen: string[] = [];
        const parser = createParser({ onEvent: (e) => seen.push(e.data) });
        parser.feed(out.endsWith('\n\n') ? out : `${out}\n\n`);
        const listAnswers = seen.filter((d) => d.includes('"tools"'));
        expect(listAnswers, `${JSON.stringify(stream)} in chunks of ${size}`).toHaveLength(1);
        expect(JSON.parse(listAnswers[0]!).result.tools).toEqual([{ name: 'search' }]);
      }
    }
  });

  it('replayed (a GET stream): every response holding a list is filtered, whatever its id; requests, notifications and other results pass', () => {
    const filtered = { tools: [{ name: 'search' }], nextCursor: 'c2' };
    for (const id of [3, 'unseen', null, undefined]) {
      const text = filterMessages(policy, alice, 'replayed', { jsonrpc: '2.0', id, result: structuredClone(tools) });
      expect(JSON.parse(text!).result, String(id)).toEqual(filtered);
    }
    // A batch, and a result holding two lists (each is filtered as its own list).
    const batch = [
      { jsonrpc: '2.0', id: 1, result: structuredClone(tools) },
      { jsonrpc: '2.0', id: 2, result: { tools: [{ name: 'delete_repo' }], prompts: [{ name: 'p' }] } },
    ];
    expect(JSON.parse(filterMessages(policy, alice, 'replayed', batch)!)).toEqual([
      { jsonrpc: '2.0', id: 1, result: filtered },
      { jsonrpc: '2.0', id: 2, result: { tools: [], prompts: [] } },
    ]);
    expect(
      filterMessages(policy, alice, 'replayed', { jsonrpc: '2.0', id: 5, result: { content: [{ type: 'text', text: 'tools' }] } }),
    ).toBeUndefined();
    expect(
      filterMessages(policy, alice, 'replayed', {
        jsonrpc: '2.0',
        id: 6,
        method: 'sampling/createMessage',
        params: { tools: [{ name: 'delete_repo' }] },
      }),
    ).toBeUndefined();
    expect(filterMessages(policy, alice, 'replayed', { jsonrpc: '2.0', method: 'notifications/tools/list_changed' })).toBeUndefined();
  });

  it('replayed over SSE: the replayed list answer is rewritten, a priming event and a server request pass byte for byte', () => {
    const stream = [
      'id: 1_s\ndata: \n\n',
      `id: 2_s\nevent: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: 9, result: tools })}\n\n`,
      'event: message\ndata: {"jsonrpc":"2.0","id":0,"method":"roots/list"}\n\n',
    ].join('');
    const rewriter = new SseListRewriter(policy, alice, 'replayed');
    const events = (rewriter.feed(Buffer.from(stream)) + rewriter.end()).split('\n\n');
    expect(events[0]).toBe('id: 1_s\ndata: ');
    expect(events[1]).toBe(
      `id: 2_s\nevent: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: 9, result: { tools: [{ name: 'search' }], nextCursor: 'c2' } })}`,
    );
    expect(events[2]).toBe('event: message\ndata: {"jsonrpc":"2.0","id":0,"method":"roots/list"}');
  });
});

describe('policy: in config.yaml', () => {
  const env = { BEARER_SECRET_MASTER: generateToken() };

  it('absent: no policy; present: compiled with the default and bounds', () => {
    expect(buildConfig({}, env).policy.rules).toBeUndefined();
    const c = buildConfig({ policy: { default: 'allow', maxBatch: 5, rules: POLICY.rules } }, env);
    expect(c.policy.rules?.rules.map((r) => r.name)).toEqual(['no-deletes', 'ci-reads', 'eng-search', 'writers']);
    expect(c.policy.default).toBe('allow');
    expect(c.policy.maxBatch).toBe(5);
  });

  it('problems in the rules are reported with the rest, named by their path', () => {
    try {
      buildConfig(
        {
          prot: 1,
          policy: {
            rules: [
              { name: 'a', effect: 'allow', principals: { kinds: ['user'], clientIds: ['x'] } },
              { name: 'b', effect: 'maybe' },
            ],
            defualt: 'deny',
          },
        },
        env,
      );
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const problems = (err as ConfigError).problems.join('\n');
      expect(problems).toMatch(/policy\.rules\[0\] can never match: principals\.clientIds/);
      expect(problems).toMatch(/policy\.rules\[1\]\.effect must be allow, deny or approve/);
      expect(problems).toMatch(/unknown key "policy\.defualt" \(did you mean "policy\.default"\?\)/);
      expect(problems).toMatch(/unknown key "prot"/);
    }
  });
});

describe('policy: the answer to a denial', () => {
  const policy = compile(POLICY);
  const CONTEXT = {
    'io.modelcontextprotocol/authorization': {
      reason: 'insufficient_authorization',
      remediation: 'unavailable',
      authorizationContextId: 'ctx-1',
    },
  };

  function denied(body: unknown, who: PolicyPrincipal = alice): PolicyDenial {
    const outcome = enforcePolicy(
      policy,
      who,
      Buffer.from(JSON.stringify(body)),
      { method: undefined, name: undefined },
      DEFAULT_JSONRPC_LIMITS,
    );
    expect(outcome.denied).toBe(true);
    return outcome as PolicyDenial;
  }
  const toolCall = (id: unknown, name: string) => ({
    jsonrpc: '2.0',
    ...(id === undefined ? {} : { id }),
    method: 'tools/call',
    params: { name },
  });

  it("a scope would lift it: 403 with the JSON-RPC error (the step-up challenge is the caller's)", () => {
    const d = denied(toolCall(7, 'write_file'));
    expect(d.scope).toBe('mcp:read mcp:write');
    expect(denialAnswer(d, 'ctx-1')).toEqual({
      status: 403,
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 7,
        error: { code: -32003, message: 'tools/call write_file is not allowed for this token' },
      }),
    });
  });

  it('nothing would lift it, one tools/call: 200, a tool error with the authorization context in _meta', () => {
    const d = denied(toolCall('a', 'delete_repo'));
    expect(d.scope).toBeUndefined();
    const answer = denialAnswer(d, 'ctx-1');
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toEqual({
      jsonrpc: '2.0',
      id: 'a',
      result: {
        isError: true,
        content: [
          { type: 'text', text: expect.stringMatching(/^The tool "delete_repo" is not available to you: .*\(Reference: ctx-1\)$/) },
        ],
        _meta: CONTEXT,
      },
    });
    // The rule's name never reaches the client.
    expect(answer.body).not.toContain('no-deletes');
  });

  it('nothing would lift it, one request of another method: 200, a JSON-RPC error with the context in data', () => {
    const answer = denialAnswer(denied({ jsonrpc: '2.0', id: 3, method: 'resources/read', params: { uri: 'file:///x' } }), 'ctx-1');
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toEqual({
      jsonrpc: '2.0',
      id: 3,
      error: {
        code: -32003,
        message: 'resources/read file:///x is not allowed for this token, and no other authorization would allow it',
        data: CONTEXT,
      },
    });
  });

  it.each([
    ['a batch', [toolCall(1, 'search'), toolCall(2, 'delete_repo')], [1, 2]],
    ['a one-message batch', [toolCall(1, 'delete_repo')], [1]],
  ])('nothing would lift it, %s: 403, each request its JSON-RPC error with the context', (_label, body, ids) => {
    const answer = denialAnswer(denied(body), 'ctx-1');
    expect(answer.status).toBe(403);
    expect(JSON.parse(answer.body)).toEqual(
      ids.map((id) => ({
        jsonrpc: '2.0',
        id,
        error: { code: -32003, message: expect.stringContaining('no other authorization'), data: CONTEXT },
      })),
    );
  });

  it.each([
    ['a notification (no id)', toolCall(undefined, 'delete_repo')],
    ['id null', toolCall(null, 'delete_repo')],
  ])('nothing would lift it, %s: 403 with a JSON-RPC error answering id null (nothing to attach a result to)', (_label, body) => {
    const answer = denialAnswer(denied(body), 'ctx-1');
    expect(answer.status).toBe(403);
    expect(JSON.parse(answer.body)).toMatchObject({ id: null, error: { data: CONTEXT } });
  });

  it('forward-auth (the body unseen): 403 with id null, the context in data', () => {
    const outcome = enforceCall(policy, alice, { method: 'tools/call', name: 'delete_repo' });
    expect(outcome.denied).toBe(true);
    const answer = denialAnswer(outcome as PolicyDenial, 'ctx-1');
    expect(answer.status).toBe(403);
    expect(JSON.parse(answer.body)).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32003, data: CONTEXT } });
  });
});

describe('policy: the audit event of a denial names itself', () => {
  const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

  function audit() {
    const lines: Array<{ audit: Record<string, unknown> }> = [];
    const logger = createLogger(
      'info',
      new Writable({ write: (chunk, _e, done) => (lines.push(JSON.parse(String(chunk))), done()) }),
      'json',
    );
    const clock = new ManualClock(1_800_000_000_000);
    const store = new MemoryTokenStore({ clock });
    return { lines, clock, store, audit: new Audit({ logger, store, clock, stream: true, maxLen: 100 }) };
  }
  const denial = (name: string) => ({
    who: 'client:c',
    action: 'policy.deny',
    result: 'insufficient_authorization',
    subject: 's',
    detail: { method: 'tools/call', name, rule: 'r' },
  });

  it('recordRepeated returns the id of the event that records the denial: logged and in the stream', async () => {
    const { lines, store, audit: a } = audit();
    const id = a.recordRepeated(denial('x'), 'warn');
    expect(id).toMatch(UUID);
    await a.flushRepeated();
    expect(lines.filter((l) => l.audit !== undefined).map((l) => l.audit)).toEqual([
      expect.objectContaining({ eventId: id, action: 'policy.deny' }),
    ]);
    expect((await store.listAuditEvents(10)).map((e) => e.eventId)).toEqual([id]);
  });

  it("repeats within the window share the first event's id; the closing count is an event of its own naming it", async () => {
    const { lines, clock, audit: a } = audit();
    const first = a.recordRepeated(denial('x'), 'warn');
    expect(a.recordRepeated(denial('x'), 'warn')).toBe(first);
    expect(a.recordRepeated(denial('x'), 'warn')).toBe(first);
    const other = a.recordRepeated(denial('y'), 'warn');
    expect(other).not.toBe(first);
    clock.advance(REPEAT_WINDOW_MS);
    await a.flushRepeated(clock.now());
    const events = lines.filter((l) => l.audit !== undefined).map((l) => l.audit);
    const closing = events.find((e) => (e.detail as Record<string, unknown>).repeated === 2)!;
    expect(closing.eventId).toMatch(UUID);
    expect(closing.eventId).not.toBe(first);
    expect(closing.detail).toMatchObject({ name: 'x', repeated: 2, firstEventId: first });
    // After the window a repeat starts a new one, with a new id.
    expect(a.recordRepeated(denial('x'), 'warn')).not.toBe(first);
  });

  it('every other event gets an id of its own', async () => {
    const { lines, audit: a } = audit();
    await a.record({ who: 'master', action: 'createClient', result: 'ok' });
    await a.record({ who: 'master', action: 'createClient', result: 'ok' });
    const ids = lines.filter((l) => l.audit !== undefined).map((l) => l.audit.eventId);
    expect(ids).toHaveLength(2);
    expect(ids[0]).toMatch(UUID);
    expect(ids[1]).not.toBe(ids[0]);
  });
});
