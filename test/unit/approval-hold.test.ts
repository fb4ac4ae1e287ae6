// Holding a call for approval, in-process on the memory store: validation of `approve` rules, who may
// approve, the answer per protocol revision and declared capability, the signed requestState, the
// forwarded retry without the sidecar's fields, a held call in a batch, and the audit trail.

import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ConfigError, buildConfig } from '../../src/config/load.ts';
import { ManualClock } from '../../src/model/clock.ts';
import { generateToken, type Principal } from '../../src/model/credentials.ts';
import { Audit } from '../../src/observability/audit.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { Metrics } from '../../src/observability/metrics.ts';
import { ApprovalHold } from '../../src/policy/approval-hold.ts';
import { mayApprove } from '../../src/policy/approval-settings.ts';
import { enforcePolicy, type PolicyAllowance } from '../../src/policy/enforce.ts';
import { DEFAULT_JSONRPC_LIMITS } from '../../src/policy/jsonrpc.ts';
import { compilePolicy, decide, explainCall, type Policy } from '../../src/policy/rules.ts';
import { MemoryTokenStore } from '../../src/store/memory.ts';

const RULE = {
  name: 'deletes',
  effect: 'approve',
  requests: { methods: ['tools/call'], names: ['delete_repo'] },
  approval: { approvers: { claims: { groups: ['sre'] } }, notSelf: true, ttlSeconds: 60 },
};

function compile(rules: unknown[]): Policy {
  const problems: string[] = [];
  const policy = compilePolicy({ default: 'allow', rules }, problems);
  expect(problems).toEqual([]);
  return policy!;
}

const ada: Principal = { kind: 'oauth', subject: 'ada', clientId: 'c-1' };

function setup() {
  const clock = new ManualClock(1_800_000_000_000);
  const store = new MemoryTokenStore({ clock });
  const lines: Array<{ audit?: { action: string } }> = [];
  const logger = createLogger('info', new Writable({ write: (c, _e, done) => (lines.push(JSON.parse(String(c))), done()) }), 'json');
  const audit = new Audit({ logger, store, clock, stream: false, maxLen: 100 });
  const requested: string[] = [];
  const hold = new ApprovalHold({
    store,
    clock,
    audit,
    metrics: new Metrics({ defaultMetrics: false }),
    publicUrl: () => 'https://mcp.example',
    masterToken: generateToken(),
    requested: (a, url) => void requested.push(url),
  });
  const policy = compile([RULE]);
  const allow = (body: unknown) =>
    enforcePolicy(
      policy,
      ada,
      Buffer.from(JSON.stringify(body)),
      { method: undefined, name: undefined },
      DEFAULT_JSONRPC_LIMITS,
    ) as PolicyAllowance;
  return { clock, store, hold, allow, lines, requested };
}

const call = (id: number, args: unknown, extra: Record<string, unknown> = {}) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name: 'delete_repo', arguments: args, ...extra },
});

describe('approve rules: validation', () => {
  const problemsOf = (rule: Record<string, unknown>) => {
    const problems: string[] = [];
    compilePolicy({ default: 'allow', rules: [{ name: 'r', ...rule }] }, problems);
    return problems.join('\n');
  };
  const tools = { methods: ['tools/call'] };

  it('each problem named by the rule', () => {
    expect(problemsOf({ effect: 'approve', requests: tools })).toMatch(/policy\.rules\[0\]\.approval must be a mapping/);
    expect(problemsOf({ effect: 'approve', requests: tools, approval: { approvers: 'self', notSelf: true } })).toMatch(
      /leaves nobody to approve/,
    );
    expect(problemsOf({ effect: 'approve', requests: tools, approval: { approvers: 'someone' } })).toMatch(
      /approvers must be self, or \{claims/,
    );
    expect(problemsOf({ effect: 'approve', requests: tools, approval: { approvers: 'self', ttlSeconds: 5 } })).toMatch(
      /ttlSeconds must be an integer from 10/,
    );
    expect(problemsOf({ effect: 'approve', requests: tools, approval: { approvers: 'self', who: 1 } })).toMatch(
      /approval\.who is not a known field/,
    );
    expect(problemsOf({ effect: 'approve', requests: { methods: ['prompts/get'] }, approval: { approvers: 'self' } })).toMatch(
      /\("r"\): a call is held for approval only as a tools\/call/,
    );
    expect(problemsOf({ effect: 'deny', requests: tools, approval: { approvers: 'self' } })).toMatch(
      /\("r"\): approval goes with effect: approve/,
    );
  });

  it('in forward-auth mode an approve rule is a configuration error naming it', () => {
    try {
      buildConfig({ proxy: { forwardAuth: true }, policy: { rules: [RULE] } }, { BEARER_SECRET_MASTER: generateToken() });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).problems.join('\n')).toMatch(/policy rule "deletes" has effect: approve, but proxy\.forwardAuth is on/);
    }
  });

  it('the webhook goes with its secret (at least 32 characters), and must be an http(s) URL', () => {
    const env = { BEARER_SECRET_MASTER: generateToken() };
    const problems = (approval: Record<string, unknown>) => {
      try {
        buildConfig({ policy: { rules: [RULE], approval } }, env);
        return '';
      } catch (err) {
        return (err as ConfigError).problems.join('\n');
      }
    };
    expect(problems({ webhook: 'https://chat.example/hook' })).toMatch(/webhook and policy\.approval\.webhookSecret go together/);
    expect(problems({ webhook: 'https://chat.example/hook', webhookSecret: 'short' })).toMatch(
      /webhookSecret must be at least 32 characters/,
    );
    expect(problems({ webhook: 'ftp://chat.example/hook', webhookSecret: 'x'.repeat(32) })).toMatch(/policy\.approval\.webhook/);
    expect(problems({ webhook: 'https://chat.example/hook', webhookSecret: 'x'.repeat(32) })).toBe('');
  });

  it('lists show a tool an approve rule holds; explainCall names the rule that would hold it', () => {
    const policy = compile([RULE, { name: 'no', effect: 'deny', requests: { methods: ['tools/call'], names: ['delete_*'] } }]);
    expect(decide(policy, ada, { method: 'tools/call', name: 'delete_repo' }).effect).not.toBe('deny');
    expect(explainCall(policy, ada, { method: 'tools/call', name: 'delete_repo', arguments: {} })).toMatchObject({
      effect: 'approve',
      rule: 'deletes',
    });
  });
});

describe('who may approve', () => {
  const caller = { subject: 'ada', issuer: 'https://idp.example/' };
  const person = (subject: string, claims: Record<string, unknown>, issuer = 'https://idp.example/') => ({ subject, issuer, claims });

  it('self: the caller only (same issuer and subject)', () => {
    const self = { approvers: 'self' as const, notSelf: false };
    expect(mayApprove(self, caller, person('ada', {}))).toBe(true);
    expect(mayApprove(self, caller, person('ada', {}, 'https://other.example/'))).toBe(false);
    expect(mayApprove(self, caller, person('bob', { groups: ['sre'] }))).toBe(false);
  });

  it('claims: a string claim equal to a value, or a list claim holding one; notSelf excludes the caller', () => {
    const sre = { approvers: { claims: { groups: ['sre'] } }, notSelf: true };
    expect(mayApprove(sre, caller, person('bob', { groups: ['eng', 'sre'] }))).toBe(true);
    expect(mayApprove(sre, caller, person('bob', { groups: 'sre' }))).toBe(true);
    expect(mayApprove(sre, caller, person('bob', { groups: ['SRE'] }))).toBe(false);
    expect(mayApprove(sre, caller, person('bob', {}))).toBe(false);
    expect(mayApprove(sre, caller, person('ada', { groups: ['sre'] }))).toBe(false);
    expect(mayApprove({ ...sre, notSelf: false }, caller, person('ada', { groups: ['sre'] }))).toBe(true);
  });
});

describe('holding a call', () => {
  it('2025-11-25 with URL elicitation declared for the session: -32042; the webhook hook is told; audited', async () => {
    const { hold, allow, requested, lines } = setup();
    const held = allow(call(7, { repo: 'a' }));
    const out = await hold.hold(held.held!, { principal: ada, protocolVersion: '2025-11-25', urlElicitation: true }, held.body);
    const answer = JSON.parse((out as { answer: string }).answer);
    expect(answer).toMatchObject({ id: 7, error: { code: -32042, data: { elicitations: [{ mode: 'url' }] } } });
    expect(requested).toEqual([answer.error.data.elicitations[0].url]);
    expect(lines.map((l) => l.audit?.action)).toContain('approval_requested');
  });

  it('without URL elicitation: a tool error; 2026-07-28 without it on the request: a tool error too', async () => {
    const { hold, allow } = setup();
    const held = allow(call(1, { repo: 'a' }));
    for (const caller of [
      { principal: ada, protocolVersion: '2025-06-18', urlElicitation: false },
      { principal: ada, protocolVersion: '2026-07-28', urlElicitation: true },
    ]) {
      const answer = JSON.parse(((await hold.hold(held.held!, caller, held.body)) as { answer: string }).answer);
      expect(answer.result.isError).toBe(true);
      expect(answer.result.content[0].text).toMatch(/https:\/\/mcp\.example\/approve\/[0-9a-f]{32}/);
    }
  });

  it('the approved 2026-07-28 retry is forwarded without requestState and inputResponses, once', async () => {
    const { hold, allow, store, clock } = setup();
    const meta = { _meta: { 'io.modelcontextprotocol/clientCapabilities': { elicitation: { url: {} } } } };
    const caller = { principal: ada, protocolVersion: '2026-07-28', urlElicitation: false };
    const first = allow(call(1, { repo: 'a' }, meta));
    const answer = JSON.parse(((await hold.hold(first.held!, caller, first.body)) as { answer: string }).answer);
    expect(answer.result).toMatchObject({ resultType: 'input_required', inputRequests: { approval: { params: { mode: 'url' } } } });
    const { requestState } = answer.result;
    const approvalId = new URL(answer.result.inputRequests.approval.params.url).pathname.split('/').at(-1)!;
    await store.decideApproval(approvalId, clock.now(), { approve: true, by: 'bob' });
    const retry = allow(call(2, { repo: 'a' }, { ...meta, requestState, inputResponses: { approval: { action: 'accept' } } }));
    const out = (await hold.hold(retry.held!, caller, retry.body)) as { forward: Buffer };
    expect(JSON.parse(out.forward.toString())).toEqual(call(2, { repo: 'a' }, meta));
    const again = await hold.hold(retry.held!, caller, retry.body);
    expect(again).toHaveProperty('answer');
  });

  it('a requestState altered, or from a call with other arguments, is refused', async () => {
    const { hold, allow } = setup();
    const caller = { principal: ada, protocolVersion: '2026-07-28', urlElicitation: true };
    const meta = { _meta: { 'io.modelcontextprotocol/clientCapabilities': { elicitation: { url: {} } } } };
    const first = allow(call(1, { repo: 'a' }, meta));
    const { requestState } = JSON.parse(((await hold.hold(first.held!, caller, first.body)) as { answer: string }).answer).result;
    const [id, at, mac] = (requestState as string).split('.');
    for (const [state, args] of [
      [`${id}.${Number(at) + 1}.${mac}`, { repo: 'a' }],
      [requestState, { repo: 'b' }],
      ['x'.repeat(600), { repo: 'a' }],
    ] as const) {
      const retry = allow(call(2, args, { ...meta, requestState: state }));
      await expect(hold.hold(retry.held!, caller, retry.body)).rejects.toThrow(/requestState does not verify/);
    }
  });

  it("an approval is the person's: the same sub at another identity provider is held anew", async () => {
    const { hold, allow, store, clock } = setup();
    const atEntra: Principal = { ...ada, issuer: 'https://login.microsoftonline.example/t/v2.0' };
    const atOkta: Principal = { ...ada, issuer: 'https://acme.okta.example' };
    const as = (principal: Principal) => ({ principal, protocolVersion: '2025-11-25', urlElicitation: true });
    const held = allow(call(1, { repo: 'a' }));
    const first = JSON.parse(((await hold.hold(held.held!, as(atEntra), held.body)) as { answer: string }).answer);
    const approvalId = new URL(first.error.data.elicitations[0].url).pathname.split('/').at(-1)!;
    await store.decideApproval(approvalId, clock.now(), { approve: true, by: 'bob' });
    const other = await hold.hold(held.held!, as(atOkta), held.body);
    expect(JSON.parse((other as { answer: string }).answer).error).toMatchObject({ code: -32042 });
    expect(await hold.hold(held.held!, as(atEntra), held.body)).toHaveProperty('forward');
  });

  it('a held call in a batch, or as a notification, is refused', () => {
    const { allow } = setup();
    expect(() => allow([call(1, {}), { jsonrpc: '2.0', id: 2, method: 'ping' }])).toThrow(/must be sent alone/);
    const { id: _, ...notification } = call(1, {});
    expect(() => allow(notification)).toThrow(/a request with an id/);
  });
});
