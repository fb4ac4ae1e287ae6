// Argument conditions on policy rules: their validation (every problem named), each operator typed
// without coercion, JSON Pointer paths, a missing path, near spellings refused, the one parse of the body
// they read, list filtering with conditions, and explainCall naming the rule and the condition.

import { afterEach, describe, expect, it, vi } from 'vitest';
import { ConfigError, buildConfig } from '../../src/config/load.ts';
import { generateToken } from '../../src/model/credentials.ts';
import { enforcePolicy } from '../../src/policy/enforce.ts';
import { DEFAULT_JSONRPC_LIMITS, parseClientMessages } from '../../src/policy/jsonrpc.ts';
import { filterMessages } from '../../src/policy/list-filter.ts';
import { compilePolicy, decideCall, explainCall, type Policy, type PolicyPrincipal } from '../../src/policy/rules.ts';

function compile(input: unknown): Policy {
  const problems: string[] = [];
  const policy = compilePolicy(input, problems);
  expect(problems).toEqual([]);
  return policy!;
}

function problemsOf(rules: unknown[]): string {
  const problems: string[] = [];
  expect(compilePolicy({ default: 'allow', rules }, problems)).toBeUndefined();
  return problems.join('\n');
}

const alice: PolicyPrincipal = { kind: 'oauth', subject: 'alice', clientId: 'cli-1', scope: 'mcp' };
const call = (name: string, args?: unknown) => ({ method: 'tools/call', name, ...(args === undefined ? {} : { arguments: args }) });
const tools = { methods: ['tools/call'] };

/** One rule denying `t` when `condition` holds, the default allowing everything else. */
function denyWhen(condition: Record<string, unknown>): Policy {
  return compile({
    default: 'allow',
    rules: [{ name: 'r', effect: 'deny', requests: { ...tools, names: ['t'] }, arguments: [condition] }],
  });
}

const effect = (policy: Policy, args: unknown) => decideCall(policy, alice, call('t', args)).effect;

describe('argument conditions: validation', () => {
  it('each problem named by the rule and the condition', () => {
    const text = problemsOf([
      { name: 'a', effect: 'deny', requests: tools, arguments: [{ path: 'force', equals: true }] },
      { name: 'b', effect: 'deny', requests: tools, arguments: [{ path: '/x', equals: 1, in: [1] }] },
      { name: 'c', effect: 'deny', requests: tools, arguments: [{ path: '/x', above: 1 }] },
      { name: 'd', effect: 'deny', requests: tools, arguments: [{ path: '/x', greaterThan: '100' }] },
      { name: 'e', effect: 'deny', requests: tools, arguments: [{ path: '/x', in: [] }] },
      { name: 'f', effect: 'deny', requests: tools, arguments: [{ path: '/x', exists: 'yes' }] },
      { name: 'g', effect: 'deny', requests: tools, arguments: [] },
      { name: 'h', effect: 'deny', requests: { methods: ['tools/*'] }, arguments: [{ path: '/x', exists: true }] },
      { name: 'i', effect: 'deny', arguments: [{ path: '/x', prefix: '' }] },
      { name: 'j', effect: 'deny', requests: tools, arguments: [{ path: '/a~2b', exists: true }] },
    ]);
    expect(text).toMatch(/policy\.rules\[0\]\.arguments\[0\]\.path must be a JSON Pointer/);
    expect(text).toMatch(/policy\.rules\[1\]\.arguments\[0\] must name exactly one operator/);
    expect(text).toMatch(/policy\.rules\[2\]\.arguments\[0\]\.above is not a known field/);
    expect(text).toMatch(/policy\.rules\[3\]\.arguments\[0\]\.greaterThan must be a number/);
    expect(text).toMatch(/policy\.rules\[4\]\.arguments\[0\]\.in must be a non-empty list/);
    expect(text).toMatch(/policy\.rules\[5\]\.arguments\[0\]\.exists must be true or false/);
    expect(text).toMatch(/policy\.rules\[6\]\.arguments must be a non-empty list/);
    expect(text).toMatch(/policy\.rules\[7\] \("h"\): arguments are a tools\/call's, so requests\.methods must be \[tools\/call\]/);
    expect(text).toMatch(/policy\.rules\[8\] \("i"\): arguments are a tools\/call's/);
    expect(text).toMatch(/policy\.rules\[8\]\.arguments\[0\]\.prefix must be a non-empty string/);
    expect(text).toMatch(/policy\.rules\[9\]\.arguments\[0\]\.path must be a JSON Pointer/);
  });

  it('a rule whose only condition is on arguments still matches only when it holds (it is not unconditional)', () => {
    const policy = compile({
      default: 'allow',
      rules: [
        { name: 'deny-force', effect: 'deny', requests: tools, arguments: [{ path: '/force', equals: true }] },
        { name: 'later', effect: 'deny', requests: { ...tools, names: ['u'] } },
      ],
    });
    expect(effect(policy, { force: true })).toBe('deny');
    expect(effect(policy, { force: false })).toBe('allow');
  });

  it('in forward-auth mode a rule with arguments is a configuration error naming the rule', () => {
    const env = { BEARER_SECRET_MASTER: generateToken() };
    const rules = [{ name: 'no-force', effect: 'deny', requests: tools, arguments: [{ path: '/force', equals: true }] }];
    expect(buildConfig({ policy: { rules } }, env).policy.rules?.rules[0]?.arguments).toHaveLength(1);
    try {
      buildConfig({ proxy: { forwardAuth: true }, policy: { rules } }, env);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).problems.join('\n')).toMatch(/policy rule "no-force" has arguments, but proxy\.forwardAuth is on/);
    }
  });
});

describe('argument conditions: typed, no coercion', () => {
  it('equals: by JSON type and value; objects whatever their member order', () => {
    const p = denyWhen({ path: '/force', equals: true });
    expect(effect(p, { force: true })).toBe('deny');
    for (const v of ['true', 1, 'True', null, [true], { true: true }]) expect(effect(p, { force: v })).toBe('allow');
    const o = denyWhen({ path: '/target', equals: { repo: 'a', branch: 'main' } });
    expect(effect(o, { target: { branch: 'main', repo: 'a' } })).toBe('deny');
    expect(effect(o, { target: { branch: 'main', repo: 'a', x: 1 } })).toBe('allow');
    expect(effect(o, { target: [['repo', 'a']] })).toBe('allow');
  });

  it('in / notIn: membership by equals; notIn never matches a missing path', () => {
    const p = denyWhen({ path: '/branch', in: ['main', 'release'] });
    expect(effect(p, { branch: 'main' })).toBe('deny');
    expect(effect(p, { branch: 'Main' })).toBe('allow');
    expect(effect(p, { branch: ['main'] })).toBe('allow');
    const n = denyWhen({ path: '/env', notIn: ['dev', 'test'] });
    expect(effect(n, { env: 'prod' })).toBe('deny');
    expect(effect(n, { env: 'dev' })).toBe('allow');
    expect(effect(n, { env: 1 })).toBe('deny');
    expect(effect(n, {})).toBe('allow');
  });

  it('prefix: strings only', () => {
    const p = denyWhen({ path: '/sql', prefix: 'DROP ' });
    expect(effect(p, { sql: 'DROP TABLE x' })).toBe('deny');
    expect(effect(p, { sql: 'drop table x' })).toBe('allow');
    expect(effect(p, { sql: ['DROP TABLE x'] })).toBe('allow');
  });

  it('greaterThan / lessThan: numbers only ("100" is not greater than 99)', () => {
    const g = denyWhen({ path: '/amount', greaterThan: 99 });
    expect(effect(g, { amount: 100 })).toBe('deny');
    expect(effect(g, { amount: 99.5 })).toBe('deny');
    expect(effect(g, { amount: 99 })).toBe('allow');
    expect(effect(g, { amount: '100' })).toBe('allow');
    expect(effect(g, { amount: true })).toBe('allow');
    expect(effect(g, { amount: [100] })).toBe('allow');
    const l = denyWhen({ path: '/amount', lessThan: 0 });
    expect(effect(l, { amount: -1 })).toBe('deny');
    expect(effect(l, { amount: 0 })).toBe('allow');
    expect(effect(l, { amount: '-1' })).toBe('allow');
  });

  it('exists: a missing path matches only exists: false; null is a value that exists', () => {
    const yes = denyWhen({ path: '/x', exists: true });
    const no = denyWhen({ path: '/x', exists: false });
    expect([effect(yes, { x: null }), effect(no, { x: null })]).toEqual(['deny', 'allow']);
    expect([effect(yes, {}), effect(no, {})]).toEqual(['allow', 'deny']);
    expect([effect(yes, undefined), effect(no, undefined)]).toEqual(['allow', 'deny']);
    expect(effect(denyWhen({ path: '/x', equals: null }), {})).toBe('allow');
  });

  it('JSON Pointer: nested members, array indexes, ~1 and ~0, the whole arguments; inherited names are not members', () => {
    expect(effect(denyWhen({ path: '/options/force', equals: true }), { options: { force: true } })).toBe('deny');
    expect(effect(denyWhen({ path: '/refs/1', equals: 'main' }), { refs: ['dev', 'main'] })).toBe('deny');
    expect(effect(denyWhen({ path: '/refs/01', equals: 'main' }), { refs: ['dev', 'main'] })).toBe('allow');
    expect(effect(denyWhen({ path: '/refs/-', exists: true }), { refs: ['dev'] })).toBe('allow');
    expect(effect(denyWhen({ path: '/a~1b', equals: 1 }), { 'a/b': 1 })).toBe('deny');
    expect(effect(denyWhen({ path: '/a~0b', equals: 1 }), { 'a~b': 1 })).toBe('deny');
    expect(effect(denyWhen({ path: '', equals: { x: 1 } }), { x: 1 })).toBe('deny');
    expect(effect(denyWhen({ path: '/x/y', exists: true }), { x: 'y' })).toBe('allow');
    expect(effect(denyWhen({ path: '/toString', exists: true }), {})).toBe('allow');
    expect(effect(denyWhen({ path: '/__proto__', exists: false }), {})).toBe('deny');
    const parsed = JSON.parse('{"__proto__":{"admin":true}}') as unknown;
    expect(effect(denyWhen({ path: '/__proto__/admin', equals: true }), parsed)).toBe('deny');
  });

  it('every condition of a rule must hold', () => {
    const policy = compile({
      default: 'allow',
      rules: [
        {
          name: 'no-force-push-to-main',
          effect: 'deny',
          requests: { ...tools, names: ['git_push'] },
          arguments: [
            { path: '/force', equals: true },
            { path: '/branch', in: ['main', 'release'] },
          ],
        },
      ],
    });
    const push = (args: unknown) => decideCall(policy, alice, call('git_push', args)).effect;
    expect(push({ force: true, branch: 'main' })).toBe('deny');
    expect(push({ force: true, branch: 'dev' })).toBe('allow');
    expect(push({ force: false, branch: 'main' })).toBe('allow');
  });

  it('a key the policy reads spelt in another case is refused, not decided on one reading', () => {
    const p = denyWhen({ path: '/options/force', equals: true });
    expect(() => effect(p, { options: { Force: true } })).toThrow(/spelt in another case/);
    expect(() => effect(p, { OPTIONS: { force: true } })).toThrow(/spelt in another case/);
    // The Kelvin sign folds to k: Go's encoding/json reads "\u212aey" as the field "key".
    expect(() => effect(denyWhen({ path: '/key', exists: true }), { '\u212aey': 1 })).toThrow(/spelt in another case/);
    expect(effect(p, { options: { force: true } })).toBe('deny');
    expect(effect(p, { options: { forceful: true } })).toBe('allow');
  });
});

describe('argument conditions: read from the one parse of the body', () => {
  afterEach(() => vi.restoreAllMocks());
  const policy = denyWhen({ path: '/force', equals: true });
  const body = (text: string) => Buffer.from(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",${text}}}`);
  const limits = DEFAULT_JSONRPC_LIMITS;
  const mirror = { method: undefined, name: undefined };

  it('the body is parsed once, and its parsed arguments decide', () => {
    const parse = vi.spyOn(JSON, 'parse');
    expect(enforcePolicy(policy, alice, body('"arguments":{"force":true}'), mirror, limits).denied).toBe(true);
    expect(parse).toHaveBeenCalledTimes(1);
    expect(enforcePolicy(policy, alice, body('"arguments":{"force":false}'), mirror, limits).denied).toBe(false);
  });

  it('escapes are read as every parser reads them; a repeated key and a near spelling of arguments are refused', () => {
    expect(enforcePolicy(policy, alice, body('"arguments":{"\\u0066orce":true}'), mirror, limits).denied).toBe(true);
    expect(enforcePolicy(policy, alice, body('"arguments":{"force":"\\u0074rue"}'), mirror, limits).denied).toBe(false);
    expect(() => enforcePolicy(policy, alice, body('"arguments":{"force":false,"force":true}'), mirror, limits)).toThrow(/same key twice/);
    expect(() => enforcePolicy(policy, alice, body('"Arguments":{"force":true}'), mirror, limits)).toThrow(
      /params\.arguments spelt in another case/,
    );
  });

  it('arguments are carried for tools/call only', () => {
    const msg = (method: string) =>
      parseClientMessages(Buffer.from(`{"jsonrpc":"2.0","id":1,"method":"${method}","params":{"name":"t","arguments":{"a":1}}}`));
    expect(msg('tools/call').messages[0]!.call).toEqual({ method: 'tools/call', name: 't', arguments: { a: 1 } });
    expect(msg('prompts/get').messages[0]!.call).toEqual({ method: 'prompts/get', name: 't' });
  });
});

describe('argument conditions: lists and explanations', () => {
  const policy = compile({
    default: 'deny',
    rules: [
      { name: 'no-force', effect: 'deny', requests: { ...tools, names: ['git_push'] }, arguments: [{ path: '/force', equals: true }] },
      { name: 'small-payments', effect: 'allow', requests: { ...tools, names: ['pay'] }, arguments: [{ path: '/amount', lessThan: 100 }] },
      { name: 'git', effect: 'allow', requests: { ...tools, names: ['git_*'] } },
    ],
  });

  it('a list shows a tool some arguments may be allowed for, and hides one no rule allows', () => {
    const answer = {
      jsonrpc: '2.0',
      id: 1,
      result: { tools: [{ name: 'git_push' }, { name: 'pay' }, { name: 'other' }] },
    };
    const text = filterMessages(policy, alice, new Map([[1, 'tools/list']]), answer);
    expect((JSON.parse(text!) as { result: { tools: { name: string }[] } }).result.tools.map((t) => t.name)).toEqual(['git_push', 'pay']);
  });

  it('explainCall names the deciding rule, the conditions that held, and the rules a condition passed over', () => {
    expect(explainCall(policy, alice, call('git_push', { force: true }))).toMatchObject({
      effect: 'deny',
      rule: 'no-force',
      conditions: ['/force equals true'],
    });
    const passed = explainCall(policy, alice, call('git_push', { force: false }));
    expect(passed).toMatchObject({
      effect: 'allow',
      rule: 'git',
      passedOver: [{ rule: 'no-force', condition: '/force equals true does not hold' }],
    });
    expect(passed.conditions).toBeUndefined();
    expect(explainCall(policy, alice, call('pay', { amount: '5' }))).toMatchObject({
      effect: 'deny',
      decidedBy: 'default',
      passedOver: [{ rule: 'small-payments', condition: '/amount lessThan 100 does not hold' }],
    });
  });
});
