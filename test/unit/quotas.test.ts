// Quota rules as pure functions: validation of `policy.quotas` (every problem named by the rule's
// position), and which rule counts a request for which caller (first match, per subject, client or
// address).

import { describe, expect, it } from 'vitest';
import { buildConfig, ConfigError } from '../../src/config/load.ts';
import { generateToken } from '../../src/model/credentials.ts';
import {
  compileQuotas,
  MAX_QUOTA_LIMIT,
  MAX_QUOTA_WINDOW_SECONDS,
  quotaCounterName,
  quotaFor,
  type Quotas,
} from '../../src/policy/quotas.ts';
import type { PolicyPrincipal } from '../../src/policy/rules.ts';

function compile(input: unknown): Quotas {
  const problems: string[] = [];
  const quotas = compileQuotas(input, 'policy.quotas', problems);
  expect(problems).toEqual([]);
  return quotas!;
}

function problemsOf(input: unknown): string[] {
  const problems: string[] = [];
  expect(compileQuotas(input, 'policy.quotas', problems)).toBeUndefined();
  return problems;
}

const alice: PolicyPrincipal = { kind: 'oauth', subject: 'alice', clientId: 'cli-1', scope: 'mcp:read', groups: ['eng'] };
const bob: PolicyPrincipal = { kind: 'oauth', subject: 'bob', clientId: 'cli-1', scope: 'mcp:read' };
const user: PolicyPrincipal = { kind: 'user', subject: 'u-1' };
const ADDRESS = '192.0.2.7';

describe('quotas: validation names the rule', () => {
  const ok = { per: 'subject', limit: 10, windowSeconds: 60 };
  it.each([
    ['not a list', { per: 'subject' }, /policy\.quotas must be a non-empty list/],
    ['an empty list', [], /policy\.quotas must be a non-empty list/],
    ['a rule that is not a mapping', ['x'], /policy\.quotas\[0\] must be a mapping/],
    ['a zero limit', [ok, { ...ok, limit: 0 }], /policy\.quotas\[1\]\.limit must be an integer from 1 to 1000000000 \(got 0\)/],
    ['a negative limit', [{ ...ok, limit: -5 }], /policy\.quotas\[0\]\.limit must be an integer from 1 .* \(got -5\)/],
    ['an enormous limit', [{ ...ok, limit: MAX_QUOTA_LIMIT + 1 }], /policy\.quotas\[0\]\.limit must be an integer/],
    ['a fractional limit', [{ ...ok, limit: 1.5 }], /policy\.quotas\[0\]\.limit must be an integer/],
    ['a limit as text', [{ ...ok, limit: '10' }], /policy\.quotas\[0\]\.limit must be an integer .* \(got "10"\)/],
    [
      'a zero window',
      [ok, ok, { ...ok, name: 'w', windowSeconds: 0 }],
      /policy\.quotas\[2\]\.windowSeconds must be an integer from 1 to 2678400 \(got 0\)/,
    ],
    ['a negative window', [{ ...ok, windowSeconds: -60 }], /policy\.quotas\[0\]\.windowSeconds must be an integer/],
    [
      'an enormous window',
      [{ ...ok, windowSeconds: MAX_QUOTA_WINDOW_SECONDS + 1 }],
      /policy\.quotas\[0\]\.windowSeconds must be an integer/,
    ],
    ['a missing window', [{ per: 'subject', limit: 1 }], /policy\.quotas\[0\]\.windowSeconds must be an integer .* \(got nothing\)/],
    ['an unknown per', [{ ...ok, per: 'token' }], /policy\.quotas\[0\]\.per must be one of subject, client, address/],
    ['an unknown field', [{ ...ok, tools: ['x'] }], /policy\.quotas\[0\]\.tools is not a known field/],
    ['an unknown match field', [{ ...ok, match: { names: ['x'] } }], /policy\.quotas\[0\]\.match\.names is not a known field/],
    [
      'an unknown principal field',
      [{ ...ok, match: { principals: { group: ['x'] } } }],
      /policy\.quotas\[0\]\.match\.principals\.group is not a known field/,
    ],
    [
      'an impossible principal',
      [{ ...ok, match: { principals: { kinds: ['user'], clientIds: ['x'] } } }],
      /policy\.quotas\[0\] can never match: principals\.clientIds/,
    ],
    [
      'tools with methods that exclude tools/call',
      [{ ...ok, match: { tools: ['x'], methods: ['prompts/get'] } }],
      /policy\.quotas\[0\] can never match: match\.tools applies to tools\/call/,
    ],
    [
      'per client for user tokens only',
      [{ ...ok, per: 'client', match: { principals: { kinds: ['user'] } } }],
      /policy\.quotas\[0\] can never match: per client/,
    ],
    ['a bad name', [{ ...ok, name: 'has space' }], /policy\.quotas\[0\]\.name must be/],
    [
      'a duplicate name',
      [
        { ...ok, name: 'a' },
        { ...ok, name: 'a' },
      ],
      /policy\.quotas\[1\]: the name "a" is used by an earlier quota rule/,
    ],
    ['an empty tools list', [{ ...ok, match: { tools: [] } }], /policy\.quotas\[0\]\.match\.tools must be a non-empty list/],
  ])('%s', (_label, input, message) => {
    expect(problemsOf(input).join('\n')).toMatch(message);
  });

  it('several problems at once, each named by its rule', () => {
    const problems = problemsOf([
      { per: 'x', limit: 0, windowSeconds: 60 },
      { per: 'subject', limit: 1, windowSeconds: 0 },
    ]);
    expect(problems).toEqual([
      'policy.quotas[0].per must be one of subject, client, address',
      'policy.quotas[0].limit must be an integer from 1 to 1000000000 (got 0)',
      'policy.quotas[1].windowSeconds must be an integer from 1 to 2678400 (got 0)',
    ]);
  });

  it('in config.yaml: compiled, and problems reported with the rest by their path', () => {
    const env = { BEARER_SECRET_MASTER: generateToken() };
    expect(buildConfig({}, env).policy.quotas).toBeUndefined();
    const c = buildConfig(
      { policy: { quotas: [{ name: 'search', match: { tools: ['search'] }, per: 'subject', limit: 5, windowSeconds: 60 }, ok] } },
      env,
    );
    expect(c.policy.quotas?.rules.map((r) => r.label)).toEqual(['search', '#1']);
    try {
      buildConfig({ prot: 1, policy: { quotas: [ok, { ...ok, limit: 0 }] } }, env);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const problems = (err as ConfigError).problems.join('\n');
      expect(problems).toMatch(/policy\.quotas\[1\]\.limit must be an integer from 1/);
      expect(problems).toMatch(/unknown key "prot"/);
    }
  });
});

describe('quotas: the first matching rule counts a request', () => {
  const quotas = compile([
    { name: 'search-per-user', match: { tools: ['search*'] }, per: 'subject', limit: 5, windowSeconds: 60 },
    { name: 'prompts-per-client', match: { methods: ['prompts/*'] }, per: 'client', limit: 10, windowSeconds: 3600 },
    { name: 'eng-per-address', match: { principals: { groups: ['eng'] } }, per: 'address', limit: 100, windowSeconds: 60 },
  ]);

  it('by tool name: per subject, callers apart', () => {
    const m = quotaFor(quotas, { principal: alice, address: ADDRESS }, { method: 'tools/call', name: 'search_docs' });
    expect(m?.rule.label).toBe('search-per-user');
    expect(m?.who).toBe('subject:oauth:alice');
    expect(quotaFor(quotas, { principal: bob, address: ADDRESS }, { method: 'tools/call', name: 'search' })?.who).toBe('subject:oauth:bob');
    expect(quotaCounterName(m!)).toBe('search-per-user:60:subject:oauth:alice');
  });

  it('a tool name in another reading (full-width letters) is counted as the upstream reads it', () => {
    expect(quotaFor(quotas, { principal: bob, address: ADDRESS }, { method: 'tools/call', name: 'ｓｅａｒｃｈ' })?.rule.label).toBe(
      'search-per-user',
    );
  });

  it('tools match only tools/call', () => {
    expect(quotaFor(quotas, { principal: bob, address: ADDRESS }, { method: 'prompts/get', name: 'search' })?.rule.label).toBe(
      'prompts-per-client',
    );
  });

  it('per client: OAuth principals by client id; a user token has none, and the next rule decides', () => {
    expect(quotaFor(quotas, { principal: bob, address: ADDRESS }, { method: 'prompts/get', name: 'p' })?.who).toBe('client:cli-1');
    expect(quotaFor(quotas, { principal: user, address: ADDRESS }, { method: 'prompts/get', name: 'p' })).toBeUndefined();
  });

  it('per address, by principal conditions; no rule: not counted', () => {
    expect(quotaFor(quotas, { principal: alice, address: ADDRESS }, { method: 'resources/read', name: 'file:///x' })?.who).toBe(
      `address:${ADDRESS}`,
    );
    expect(quotaFor(quotas, { principal: bob, address: ADDRESS }, { method: 'resources/read', name: 'file:///x' })).toBeUndefined();
  });

  it('a rule with no match counts every request', () => {
    const all = compile([{ per: 'subject', limit: 1, windowSeconds: 1 }]);
    expect(quotaFor(all, { principal: user, address: ADDRESS }, { method: 'ping' })?.rule.label).toBe('#0');
  });
});

describe('quotas: explain-policy on the command line', () => {
  it('takes --address, and prints the quota and what is left', async () => {
    const { ADMIN_OPERATIONS } = await import('../../src/admin/declarations.ts');
    const { parseAdminArgs } = await import('../../src/entry/cli.ts');
    const parsed = parseAdminArgs([
      'explain-policy',
      '--token-hash',
      'a'.repeat(64),
      '--method',
      'tools/call',
      '--name',
      'search',
      '--address',
      '192.0.2.7',
    ]);
    expect(parsed).toMatchObject({ name: 'explainPolicy', body: { address: '192.0.2.7' } });
    const render = ADMIN_OPERATIONS.explainPolicy.render!;
    const text = render({
      effect: 'allow',
      decidedBy: 'default',
      reason: "no rule matches; the policy's default is allow",
      quota: {
        rule: 'search-per-user',
        per: 'subject',
        limit: 100,
        windowSeconds: 3600,
        used: 37,
        remaining: 63,
        resetAt: '2026-11-27T20:00:00.000Z',
      },
    });
    expect(text).toBe(
      `ALLOW: no rule matches; the policy's default is allow\nquota "search-per-user": 100 per 3600 s per subject, 63 left until 2026-11-27T20:00:00.000Z\n`,
    );
  });
});
