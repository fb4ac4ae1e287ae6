// Argument conditions decide what the upstream will execute only if the upstream reads the arguments
// the way the policy did. Each body here spells a denied argument so that some parser might read it
// differently from the sidecar (a repeated key, a \u escape, a key in another case or folding to the
// path's through ſ, a near spelling of `arguments`, a string where a boolean is meant, a charset); the
// upstreams record the arguments they ran with, and the test checks that a forced push never ran:
// - the MCP TypeScript SDK's documented Express upstream (`createMcpExpressApp()`, a tool with a zod
//   input schema, as the SDK's README registers tools);
// - the Go upstream (test/support/go-upstream/main.go): encoding/json into a struct, which fills a
//   field from a key in any case (Unicode simple folding: `ſ` is `s`), the last such key winning.

import * as z from 'zod';
import { describe, expect, it } from 'vitest';
import { startGoUpstream } from '../support/go-upstream.ts';
import { policyStack, startSdkExpressUpstream } from '../support/policy-stack.ts';

const POLICY = {
  default: 'deny',
  rules: [
    {
      name: 'no-force-push',
      effect: 'deny',
      requests: { methods: ['tools/call'], names: ['git_push'] },
      arguments: [{ path: '/force', equals: true }],
    },
    {
      name: 'no-sudo',
      effect: 'deny',
      requests: { methods: ['tools/call'], names: ['git_push'] },
      arguments: [{ path: '/sudo', equals: true }],
    },
    { name: 'push', effect: 'allow', requests: { methods: ['tools/call'], names: ['git_push'] } },
  ],
};

/** The SDK's documented Express upstream with a typed git_push; `executed` records the arguments it ran with. */
const startGitUpstream = () =>
  startSdkExpressUpstream('git', (server, executed) => {
    server.registerTool(
      'git_push',
      { description: 'push', inputSchema: { force: z.boolean().optional(), sudo: z.boolean().optional(), branch: z.string().optional() } },
      async ({ force, sudo, branch }) => {
        executed.push(`git_push force=${force === true} sudo=${sudo === true} branch=${branch ?? ''}`);
        return { content: [{ type: 'text', text: 'pushed' }] };
      },
    );
  });

const push = (id: number, args: string, argumentsKey = 'arguments') =>
  `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"git_push","${argumentsKey}":${args}}}`;

/** Bodies some parser reads as a forced (or sudo) push; each is refused with 400 before the upstream. */
const REFUSED: [string, string, string?][] = [
  ['a repeated key (JavaScript and Go keep the last)', push(1, '{"force":false,"force":true}')],
  ['"Force" (Go fills force from it)', push(2, '{"Force":true}')],
  ['"FORCE" beside another argument', push(3, '{"branch":"main","FORCE":true}')],
  ['"\\u0046orce", an escaped capital', push(4, '{"\\u0046orce":true}')],
  ['"ſudo" (long s folds to s in Go)', push(5, '{"\\u017fudo":true}')],
  ['"Arguments" (Go reads it as arguments)', push(6, '{"force":true}', 'Arguments')],
  ['a lone surrogate in a key', push(7, '{"force":true,"\\ud800":1}')],
];

describe('argument conditions against the SDK upstream of createMcpExpressApp()', () => {
  const s = policyStack(startGitUpstream, POLICY);

  it('a push without force runs; a forced one, spelt plainly or escaped, is a tool error and never runs', async () => {
    const ok = await s.post(push(1, '{"force":false,"branch":"main"}'));
    expect(ok.text).toContain('pushed');
    for (const args of ['{"force":true}', '{"\\u0066orce":true}', '{"branch":"dev","force":true}']) {
      const res = await s.post(push(2, args));
      expect(res.status, args).toBe(200);
      expect(JSON.parse(res.text), args).toMatchObject({ result: { isError: true } });
    }
    expect(s.upstream.executed).toEqual(['git_push force=false sudo=false branch=main']);
  });

  it.each(REFUSED)('%s: refused with 400, nothing runs', async (_label, body) => {
    s.upstream.executed.length = 0;
    const res = await s.post(body);
    expect(res.status).toBe(400);
    expect(s.upstream.executed).toEqual([]);
  });

  it('charset=utf-7 hiding "force":true inside a string: refused', async () => {
    s.upstream.executed.length = 0;
    const res = await s.post(push(8, '{"x":"+ACIALAAi-force+ACIAOg-true"}'), 'application/json; charset=utf-7');
    expect(res.status).toBe(400);
    expect(s.upstream.executed).toEqual([]);
  });

  it('explainPolicy names the rule and the condition that decided, given the arguments', async () => {
    const explain = (args?: Record<string, unknown>) =>
      s.stack.admin('explainPolicy', { token: s.token, method: 'tools/call', name: 'git_push', ...(args ? { arguments: args } : {}) });
    expect((await explain({ force: true })).body).toMatchObject({
      effect: 'deny',
      rule: 'no-force-push',
      conditions: ['/force equals true'],
    });
    expect((await explain({ force: false })).body).toMatchObject({
      effect: 'allow',
      rule: 'push',
      passedOver: [
        { rule: 'no-force-push', condition: '/force equals true does not hold' },
        { rule: 'no-sudo', condition: '/sudo equals true does not hold' },
      ],
    });
    expect((await explain()).body).toMatchObject({ effect: 'allow', rule: 'push' });
    expect(await explain({ Force: true })).toMatchObject({ status: 400, body: { error: 'invalid_request' } });
  });

  it('"true" as a string is not true (no coercion): forwarded, and the typed upstream refuses it rather than force-pushing', async () => {
    s.upstream.executed.length = 0;
    const res = await s.post(push(9, '{"force":"true"}'));
    expect(res.status).toBe(200);
    expect(res.text).not.toContain('pushed');
    expect(s.upstream.executed).toEqual([]);
  });
});

describe('argument conditions against a Go upstream (encoding/json into a struct)', () => {
  const s = policyStack(startGoUpstream, POLICY, 120_000);

  it('a push without force runs as sent; a forced one is a tool error and never runs', async () => {
    const ok = await s.post(push(1, '{"force":false,"branch":"main"}'));
    expect(ok.text).toContain('ran git_push');
    const denied = await s.post(push(2, '{"\\u0066orce":true}'));
    expect(JSON.parse(denied.text)).toMatchObject({ result: { isError: true } });
    expect(s.upstream.argumentsRead()).toEqual(['git_push force=false sudo=false branch=main']);
  });

  it.each(REFUSED)('%s: refused with 400, Go never runs it', async (_label, body) => {
    const before = s.upstream.argumentsRead().length;
    const res = await s.post(body);
    expect(res.status).toBe(400);
    expect(s.upstream.argumentsRead().slice(before)).toEqual([]);
  });

  it('what Go would read without the sidecar: the same bodies force-push (the attacks are real)', async () => {
    const before = s.upstream.argumentsRead().length;
    for (const [, body] of REFUSED.slice(0, 6)) {
      await fetch(s.upstream.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    }
    const read = s.upstream.argumentsRead().slice(before);
    expect(read).toHaveLength(6);
    expect(read.every((line) => line.includes('force=true') || line.includes('sudo=true'))).toBe(true);
  });
});
