// No sequence of requests lets a denied call through: fast-check generates single messages, batches,
// duplicate ids, wrong or missing mirror headers and garbage, sent with tokens of different scopes; a
// recording upstream keeps every body it receives, and each one is checked against the policy itself.
// Method names include those of Object.prototype (`__proto__`, `constructor`, ...), with params under the
// keys a prototype lookup would stringify to: the oracle's list of always-allowed methods is its own.

import { createServer } from 'node:http';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildConfig } from '../../src/config/load.ts';
import { generateToken } from '../../src/model/credentials.ts';
import { decide, NAME_BEARING_METHODS, policyOf, type PolicyPrincipal } from '../../src/policy/rules.ts';
import { serveOnLoopback } from '../support/fake-upstreams.ts';
import { startStack, type Stack } from '../support/stack.ts';

const POLICY = {
  default: 'deny',
  rules: [
    { name: 'never-big', effect: 'deny', requests: { methods: ['tools/call'], names: ['big*'] } },
    { name: 'echo', effect: 'allow', requests: { methods: ['tools/call'], names: ['echo'] } },
    { name: 'math', effect: 'allow', principals: { scopes: ['mcp:math'] }, requests: { methods: ['tools/call'], names: ['add'] } },
    { name: 'hello', effect: 'allow', requests: { methods: ['resources/read'], names: ['ref://hello'] } },
  ],
};
const policy = (() => {
  const c = buildConfig({ policy: POLICY }, { BEARER_SECRET_MASTER: generateToken() });
  return policyOf(c.policy.default, c.policy.rules!);
})();

const RUNS = 300;

/** Never decided by rules (docs/policy.md), written out here so the oracle does not share the code under test. */
const ALWAYS_ALLOWED = new Set(['initialize', 'ping', 'tools/list', 'prompts/list', 'resources/list', 'resources/templates/list']);
const alwaysAllowed = (method: string) => ALWAYS_ALLOWED.has(method) || method.startsWith('notifications/');
/** Methods named like Object.prototype's members. */
const PROTOTYPE_METHODS = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf'];
/** The key `params[table[method]]` reads when a plain object table's prototype answers for `method`. */
const prototypeKey = (method: string) => String(({} as Record<string, unknown>)[method]);
const targetField = (method: string) =>
  PROTOTYPE_METHODS.includes(method) ? prototypeKey(method) : NAME_BEARING_METHODS.get(method) === 'uri' ? 'uri' : 'name';

describe('policy under generated traffic', () => {
  const received: Array<{ body: string; scope: string | undefined; clientId: string }> = [];
  let close: () => Promise<void>;
  let stack: Stack;
  const tokens: Array<{ token: string; scope: string | undefined }> = [];

  beforeAll(async () => {
    const upstream = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({
          body: Buffer.concat(chunks).toString('utf8'),
          scope: req.headers['x-mcp-auth-scope'] as string | undefined,
          clientId: String(req.headers['x-mcp-auth-client-id']),
        });
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"jsonrpc":"2.0","id":0,"result":{}}');
      });
    });
    const served = await serveOnLoopback(upstream);
    close = served.close;
    stack = await startStack({ upstreamUrl: served.url, config: { policy: POLICY } });
    for (const scope of [undefined, 'mcp:math', 'mcp:other']) {
      const { clientId } = await stack.issueOAuthToken();
      const issued = await stack.admin('createAccessToken', { clientId, lifetimeSeconds: 600, ...(scope ? { scope } : {}) });
      tokens.push({ token: issued.body.accessToken, scope });
    }
  });
  afterAll(async () => {
    await stack?.close();
    await close?.();
  });

  const method = fc.constantFrom(
    'tools/call',
    'prompts/get',
    'resources/read',
    'resources/subscribe',
    'initialize',
    'ping',
    'notifications/initialized',
    'tools/list',
    'completion/complete',
    'tools/call ',
    ...PROTOTYPE_METHODS,
  );
  const name = fc.constantFrom('echo', 'add', 'big', 'bigger', 'ref://hello', 'ref://other', 'ECHO', 'echo\u0000', '');
  /** `undefined` `weight` times as often as a value of `arb`. */
  const sometimes = <T>(arb: fc.Arbitrary<T>, weight: number) =>
    fc.oneof({ arbitrary: fc.constant(undefined), weight }, { arbitrary: arb, weight: 1 });
  const message = fc.record({
    id: sometimes(fc.oneof(fc.integer({ min: 0, max: 9 }), fc.constantFrom('a', 'b')), 1),
    method,
    name: sometimes(name, 1),
    // Mostly the field the method names its target by (for a prototype's name: the key a prototype
    // lookup would read); sometimes another one.
    field: sometimes(fc.constantFrom('name', 'uri'), 3),
  });
  const request = fc.record({
    messages: fc.array(message, { minLength: 1, maxLength: 3 }),
    batch: fc.boolean(),
    token: fc.integer({ min: 0, max: 2 }),
    mirrorMethod: sometimes(method, 3),
    mirrorName: sometimes(name, 3),
    garbage: sometimes(
      fc.constantFrom(
        '{',
        '[]',
        'null',
        '{"jsonrpc":"2.0","method":1}',
        '[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big"}}',
      ),
      8,
    ),
  });

  it(`${RUNS} generated requests: every call the upstream received is one the policy allows for its token`, async () => {
    let forwarded = 0;
    await fc.assert(
      fc.asyncProperty(request, async (r) => {
        const messages = r.messages.map((m) => ({
          jsonrpc: '2.0',
          ...(m.id !== undefined ? { id: m.id } : {}),
          method: m.method,
          ...(m.name !== undefined ? { params: { [m.field ?? targetField(m.method)]: m.name } } : {}),
        }));
        const body = r.garbage ?? JSON.stringify(r.batch || messages.length > 1 ? messages : messages[0]);
        const headers: Record<string, string> = { authorization: `Bearer ${tokens[r.token]!.token}`, 'content-type': 'application/json' };
        if (r.mirrorMethod !== undefined) headers['mcp-method'] = r.mirrorMethod;
        if (r.mirrorName !== undefined) headers['mcp-name'] = encodeURIComponent(r.mirrorName);
        const res = await fetch(stack.mcpUrl, { method: 'POST', headers, body });
        const text = await res.text();
        expect([200, 400, 403]).toContain(res.status);
        // A 200 is the upstream's answer, or the sidecar's own to a denial no scope would lift.
        if (res.status === 200 && !text.includes('"insufficient_authorization"')) forwarded++;
      }),
      { numRuns: RUNS, seed: 20261123 },
    );
    // The oracle: the policy itself, applied to what actually arrived.
    for (const got of received) {
      const principal: PolicyPrincipal = { kind: 'oauth', subject: got.clientId, clientId: got.clientId, scope: got.scope };
      const parsed = JSON.parse(got.body) as unknown;
      for (const m of (Array.isArray(parsed) ? parsed : [parsed]) as Array<{ method: string; params?: Record<string, unknown> }>) {
        if (alwaysAllowed(m.method)) continue;
        const field = NAME_BEARING_METHODS.get(m.method);
        const target = field === undefined ? undefined : (m.params?.[field] as string);
        expect(decide(policy, principal, { method: m.method, name: target }), got.body).toMatchObject({ effect: 'allow' });
      }
    }
    expect(received.length).toBe(forwarded);
    // The generator reaches both sides: some forwarded, some refused.
    expect(forwarded).toBeGreaterThan(10);
    expect(forwarded).toBeLessThan(RUNS);
    expect(stack.logs.filter((l) => l.includes('unexpected error'))).toEqual([]);
  }, 120_000);
});

// The arguments a policy decides on, under generated spellings: a deny rule on `echo` with `force:
// true`; bodies written as raw JSON text with the key spelt plainly, \u-escaped, in other cases,
// repeated, under an `arguments` member spelt in other cases, with values of other types. The oracle
// reads what the upstream received the way a case-folding Go server would (any key equal under
// folding) as well as exactly: no forwarded call may carry a true `force` in either reading.
describe('argument conditions under generated spellings', () => {
  const ARG_POLICY = {
    default: 'allow',
    rules: [
      {
        name: 'no-force',
        effect: 'deny',
        requests: { methods: ['tools/call'], names: ['echo'] },
        arguments: [{ path: '/force', equals: true }],
      },
    ],
  };
  const received: string[] = [];
  let close: () => Promise<void>;
  let stack: Stack;
  let token: string;

  beforeAll(async () => {
    const upstream = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push(Buffer.concat(chunks).toString('utf8'));
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"jsonrpc":"2.0","id":0,"result":{}}');
      });
    });
    const served = await serveOnLoopback(upstream);
    close = served.close;
    stack = await startStack({ upstreamUrl: served.url, config: { policy: ARG_POLICY } });
    ({ token } = await stack.issueOAuthToken());
  });
  afterAll(async () => {
    await stack?.close();
    await close?.();
  });

  /** Go's encoding/json folds ASCII case, and `ſ` to `s`, `K` (Kelvin) to `k`. */
  const goFold = (key: string) => key.toUpperCase().toLowerCase();
  const keySpelling = fc.constantFrom('"force"', '"\\u0066orce"', '"Force"', '"FORCE"', '"fOrce"', '"forc\\u0065"', '"other"');
  const value = fc.constantFrom('true', 'false', '"true"', '1', 'null', '{"x":true}', '[true]');
  const argumentsKey = fc.constantFrom('"arguments"', '"arguments"', '"Arguments"', '"\\u0061rguments"', '"ARGUMENTS"');
  const body = fc.record({
    members: fc.array(fc.tuple(keySpelling, value), { minLength: 0, maxLength: 3 }),
    argumentsKey,
  });

  it(`${RUNS} generated argument spellings: no forwarded call carries force: true in any reading`, async () => {
    let forwarded = 0;
    await fc.assert(
      fc.asyncProperty(body, async (b) => {
        const args = `{${b.members.map(([k, v]) => `${k}:${v}`).join(',')}}`;
        const text = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo",${b.argumentsKey}:${args}}}`;
        const res = await fetch(stack.mcpUrl, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: text,
        });
        const answer = await res.text();
        expect([200, 400]).toContain(res.status);
        if (res.status === 200 && !answer.includes('"insufficient_authorization"')) forwarded++;
      }),
      { numRuns: RUNS, seed: 20261206 },
    );
    for (const got of received) {
      const params = (JSON.parse(got) as { params: Record<string, unknown> }).params;
      for (const [key, args] of Object.entries(params)) {
        if (goFold(key) !== 'arguments' || typeof args !== 'object' || args === null) continue;
        for (const [name, v] of Object.entries(args)) expect(goFold(name) === 'force' && v === true, got).toBe(false);
      }
    }
    expect(received.length).toBe(forwarded);
    expect(forwarded).toBeGreaterThan(10);
    expect(forwarded).toBeLessThan(RUNS);
  }, 120_000);
});
