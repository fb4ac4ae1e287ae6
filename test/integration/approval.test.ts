// Calls an `approve` rule holds, through the sidecar to the reference upstream (an SDK 2.x server) on a
// real Redis: never forwarded until approved; the answer in the form the caller's protocol reads (the
// official SDK clients of both lines on 2025-11-25 get -32042 and throw UrlElicitationRequiredError; a
// 2026-07-28 request gets `input_required` with a signed requestState; a client that declared no URL
// elicitation gets a tool error naming the link); an approval bound to the exact arguments, used once
// (also by two replicas racing), denied with the approver's reason, cancelled by offboarding.

import { Client as Client1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as Transport1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UrlElicitationRequiredError as UrlElicitationRequired1 } from '@modelcontextprotocol/sdk/types.js';
import {
  Client as Client2,
  StreamableHTTPClientTransport as Transport2,
  UrlElicitationRequiredError as UrlElicitationRequired2,
} from '@modelcontextprotocol/client';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateToken, hashToken } from '../../src/model/credentials.ts';
import { countedOnce } from '../support/requests-counted.ts';
import { startSignInStack, type SignInStack } from '../support/sign-in.ts';
import { startStack, type Stack } from '../support/stack.ts';

const POLICY = {
  default: 'allow',
  rules: [
    {
      name: 'loud-echo-needs-approval',
      effect: 'approve',
      requests: { methods: ['tools/call'], names: ['echo'] },
      arguments: [{ path: '/text', prefix: 'LOUD' }],
      approval: { approvers: 'self', ttlSeconds: 600 },
    },
  ],
};

const MODERN = '2026-07-28';
const ENVELOPE = {
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientCapabilities': { elicitation: { url: {} } },
};

function echo(id: number, text: string, extra: Record<string, unknown> = {}) {
  return JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { text }, ...extra } });
}

async function post(stack: Stack, token: string, body: string, headers: Record<string, string> = {}) {
  const res = await fetch(stack.mcpUrl, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...headers,
    },
    body,
  });
  return { status: res.status, json: (await res.json()) as any };
}

/** A 2026-07-28 request: stateless, the protocol in its header, URL elicitation declared in the envelope. */
const modern = (stack: Stack, token: string, id: number, text: string, extra: Record<string, unknown> = {}) =>
  post(stack, token, echo(id, text, { _meta: ENVELOPE, ...extra }), {
    'mcp-protocol-version': MODERN,
    'mcp-method': 'tools/call',
    'mcp-name': 'echo',
  });

/** The same, from a client that declared no URL elicitation: the link comes in a tool error's text. */
const plain = (stack: Stack, token: string, id: number, text: string) =>
  post(stack, token, echo(id, text, { _meta: { ...ENVELOPE, 'io.modelcontextprotocol/clientCapabilities': {} } }), {
    'mcp-protocol-version': MODERN,
    'mcp-method': 'tools/call',
    'mcp-name': 'echo',
  });

const approvalIdOf = (url: string) => new URL(url).pathname.split('/').at(-1)!;

describe('calls held for approval', () => {
  let stack: Stack;
  let replica: Stack;
  let token: string;
  let clientId: string;

  beforeAll(async () => {
    stack = await startStack({ config: { policy: POLICY } });
    // A second sidecar on the same Redis and key prefix, as a second replica.
    replica = await startStack({ upstreamUrl: stack.upstream!.url, prefix: stack.prefix, config: { policy: POLICY } });
    ({ token, clientId } = await stack.issueOAuthToken());
  });
  afterAll(async () => {
    await replica?.close();
    await stack?.close();
  });

  const approve = (approvalId: string, decision = 'approve', reason?: string) =>
    stack.admin('decideApproval', { approvalId, decision, ...(reason ? { reason } : {}) });
  const ran = () => stack.upstream!.toolCalls.filter((t) => t === 'echo').length;

  for (const line of ['1.x', '2.x'] as const) {
    it(`SDK ${line} client declaring URL elicitation: -32042 with the approval link; after approval the same call runs once`, async () => {
      const capabilities = { capabilities: { elicitation: { url: {} } } };
      const headers = { requestInit: { headers: { authorization: `Bearer ${token}` } } };
      const client =
        line === '1.x'
          ? new Client1({ name: 'sdk1', version: '1' }, capabilities)
          : new Client2({ name: 'sdk2', version: '1' }, capabilities);
      const transport = line === '1.x' ? new Transport1(new URL(stack.mcpUrl), headers) : new Transport2(new URL(stack.mcpUrl), headers);
      await client.connect(transport as never);
      try {
        const before = ran();
        const Elicitation = line === '1.x' ? UrlElicitationRequired1 : UrlElicitationRequired2;
        const err = await client.callTool({ name: 'echo', arguments: { text: `LOUD ${line}` } }).then(
          () => expect.unreachable(),
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(Elicitation);
        const [only] = (err as InstanceType<typeof Elicitation>).elicitations;
        expect(only).toMatchObject({ mode: 'url', url: expect.stringMatching(/\/approve\/[0-9a-f]{32}$/) });
        expect(only!.elicitationId).toBe(approvalIdOf(only!.url));
        expect(only!.message).toContain(only!.url);
        // Quiet calls are not held; the held one never reached the upstream.
        expect(await client.callTool({ name: 'echo', arguments: { text: 'quiet' } })).toMatchObject({ content: [{ text: 'quiet' }] });
        expect(ran()).toBe(before + 1);
        expect(await approve(only!.elicitationId)).toMatchObject({ status: 200, body: { state: 'approved' } });
        expect(await client.callTool({ name: 'echo', arguments: { text: `LOUD ${line}` } })).toMatchObject({
          content: [{ text: `LOUD ${line}` }],
        });
        expect(ran()).toBe(before + 2);
        // Used once: the same call again is held again, under a new approval.
        const again = await client.callTool({ name: 'echo', arguments: { text: `LOUD ${line}` } }).catch((e: unknown) => e);
        expect(again).toBeInstanceOf(Elicitation);
        expect((again as InstanceType<typeof Elicitation>).elicitations[0]!.elicitationId).not.toBe(only!.elicitationId);
      } finally {
        await client.close();
      }
    });
  }

  it('a client that declared no URL elicitation: a tool error whose text names the link', async () => {
    const res = await plain(stack, token, 1, 'LOUD plain');
    expect(res.json.result.isError).toBe(true);
    expect(res.json.result.content[0].text).toMatch(/open http:\/\/\S+\/approve\/[0-9a-f]{32} in a browser, then retry/);
  });

  it('2026-07-28: input_required with a URL elicitation and a signed requestState; the approved retry runs, without the sidecar fields', async () => {
    const first = await modern(stack, token, 1, 'LOUD modern');
    expect(first.status).toBe(200);
    const { resultType, inputRequests, requestState } = first.json.result;
    expect(resultType).toBe('input_required');
    expect(inputRequests.approval).toMatchObject({
      method: 'elicitation/create',
      params: { mode: 'url', url: expect.stringContaining('/approve/') },
    });
    const url = inputRequests.approval.params.url as string;
    // A forged or altered state is refused.
    const forged = await modern(stack, token, 2, 'LOUD modern', { requestState: `${requestState}x`, inputResponses: {} });
    expect(forged.status).toBe(400);
    // The state of one call does not carry another's arguments.
    const substituted = await modern(stack, token, 3, 'LOUD other', { requestState, inputResponses: {} });
    expect(substituted.status).toBe(400);
    await approve(approvalIdOf(url));
    const before = ran();
    const headersBefore = stack.upstream!.seenHeaders.length;
    const retried = await modern(stack, token, 4, 'LOUD modern', {
      requestState,
      inputResponses: { approval: { action: 'accept' } },
    });
    expect(retried.json.result).toMatchObject({ content: [{ text: 'LOUD modern' }] });
    expect(ran()).toBe(before + 1);
    expect(stack.upstream!.seenHeaders.length).toBeGreaterThan(headersBefore);
  });

  it('bound to the arguments: an approval for one text does not let another through', async () => {
    const first = await plain(stack, token, 1, 'LOUD one');
    const link = /\/approve\/([0-9a-f]{32})/.exec(first.json.result.content[0].text)![1]!;
    await approve(link);
    const other = await plain(stack, token, 2, 'LOUD two');
    expect(other.json.result.content[0].text).toMatch(/needs a person's approval/);
    const before = ran();
    expect((await plain(stack, token, 3, 'LOUD one')).json.result.content[0].text).toBe('LOUD one');
    expect(ran()).toBe(before + 1);
  });

  it('two replicas racing the approved retry: exactly one forwards it', async () => {
    const first = await plain(stack, token, 1, 'LOUD race');
    await approve(/\/approve\/([0-9a-f]{32})/.exec(first.json.result.content[0].text)![1]!);
    const before = ran();
    const answers = await Promise.all(
      Array.from({ length: 6 }, (_, i) => plain(i % 2 === 0 ? stack : replica, token, 10 + i, 'LOUD race')),
    );
    const texts = answers.map((a) => a.json.result.content[0].text as string);
    expect(texts.filter((t) => t === 'LOUD race')).toHaveLength(1);
    expect(texts.filter((t) => /needs a person's approval/.test(t))).toHaveLength(5);
    expect(ran()).toBe(before + 1);
  });

  it("denied: a tool error with the approver's reason and the authorization context; nothing runs", async () => {
    const first = await plain(stack, token, 1, 'LOUD deny');
    const approvalId = /\/approve\/([0-9a-f]{32})/.exec(first.json.result.content[0].text)![1]!;
    expect(await approve(approvalId, 'deny', 'not on a Sunday')).toMatchObject({ body: { state: 'denied' } });
    const before = ran();
    const res = await plain(stack, token, 2, 'LOUD deny');
    expect(res.json.result).toMatchObject({
      isError: true,
      _meta: { 'io.modelcontextprotocol/authorization': { reason: 'insufficient_authorization', remediation: 'unavailable' } },
    });
    expect(res.json.result.content[0].text).toContain('"not on a Sunday"');
    expect(ran()).toBe(before);
  });

  it('each answer is one request outcome: a held call is refused for approval, a denied one as a denial, an approved one forwarded', async () => {
    const held = await countedOnce(stack.adminUrl, { outcome: 'refused', reason: 'approval_required' }, () =>
      plain(stack, token, 1, 'LOUD counted'),
    );
    const approvalId = /\/approve\/([0-9a-f]{32})/.exec(held.json.result.content[0].text)![1]!;
    // Asked again while it waits: the same answer, counted again.
    await countedOnce(stack.adminUrl, { outcome: 'refused', reason: 'approval_required' }, () => plain(stack, token, 2, 'LOUD counted'));
    await approve(approvalId);
    const ran = await countedOnce(stack.adminUrl, { outcome: 'forwarded' }, () => plain(stack, token, 3, 'LOUD counted'));
    expect(ran.json.result.content[0].text).toBe('LOUD counted');

    const refused = await plain(stack, token, 4, 'LOUD counted, then denied');
    await approve(/\/approve\/([0-9a-f]{32})/.exec(refused.json.result.content[0].text)![1]!, 'deny', 'no');
    const denied = await countedOnce(stack.adminUrl, { outcome: 'refused', reason: 'insufficient_authorization' }, () =>
      plain(stack, token, 5, 'LOUD counted, then denied'),
    );
    expect(denied.json.result.isError).toBe(true);
  });

  it('listApprovals shows them without their arguments; decideApproval refuses unknown and decided ones; revokeSubject cancels', async () => {
    const listed = await stack.admin('listApprovals', { subject: clientId });
    expect(listed.status).toBe(200);
    expect(listed.body.approvals.length).toBeGreaterThan(3);
    expect(listed.body.approvals[0]).toMatchObject({
      subject: clientId,
      clientId,
      tool: 'echo',
      argumentsDigest: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    expect(JSON.stringify(listed.body)).not.toContain('LOUD');
    const denied = (await stack.admin('listApprovals', { state: 'denied' })).body.approvals;
    expect(denied.every((a: { state: string }) => a.state === 'denied')).toBe(true);
    expect(await approve('0'.repeat(32))).toMatchObject({ status: 404 });
    expect(await approve(denied[0].approvalId)).toMatchObject({ status: 400 });
    const pending = (await stack.admin('listApprovals', { state: 'pending', subject: clientId })).body.approvals.length;
    expect(pending).toBeGreaterThan(0);
    const revoked = await stack.admin('revokeSubject', { subject: clientId });
    expect(revoked.body.approvalsCancelled).toBe(pending);
    expect((await stack.admin('listApprovals', { state: 'pending', subject: clientId })).body.approvals).toEqual([]);
  });
});

describe('held calls and quotas', () => {
  let stack: Stack;
  let token: string;

  beforeAll(async () => {
    stack = await startStack({
      config: { policy: { ...POLICY, quotas: [{ match: { tools: ['echo'] }, per: 'client', limit: 1, windowSeconds: 600 }] } },
    });
    ({ token } = await stack.issueOAuthToken());
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('an approval request takes nothing from a quota; the calls that run do', async () => {
    for (let i = 0; i < 3; i++)
      expect((await plain(stack, token, i, 'LOUD held')).json.result.content[0].text).toMatch(/needs a person's approval/);
    expect((await plain(stack, token, 10, 'quiet')).json.result.content[0].text).toBe('quiet');
    const over = await plain(stack, token, 11, 'quiet again');
    expect(over.json.result.isError).toBe(true);
    expect(over.json.result.content[0].text).not.toMatch(/approval/);
  });
});

describe('a held call of a user who has not connected their upstream account', () => {
  let s: SignInStack;

  beforeAll(async () => {
    s = await startSignInStack({
      config: {
        policy: POLICY,
        upstream: {
          credentials: {
            mode: 'oauth',
            key: randomBytes(32).toString('hex'),
            provider: {
              authorizationEndpoint: 'https://provider.example/authorize',
              tokenEndpoint: 'https://provider.example/token',
              clientId: 'third-party-app',
              clientSecret: 'provider-secret',
              scopes: 'repo',
            },
          },
        },
      },
    });
  });
  afterAll(async () => {
    await s?.close();
  });

  it('gets the link to connect first: no approval is asked (it would be spent on a call that cannot run)', async () => {
    const raw = generateToken();
    const now = s.stack.clock.now();
    await s.stack.store.putUserToken({
      tokenHash: hashToken(raw),
      subject: 'no-account-yet',
      issuer: s.idp.issuer,
      createdAt: now,
      expiresAt: now + 3_600_000,
    });
    const res = await plain(s.stack, raw, 1, 'LOUD before connecting');
    expect(res.json.result.content[0].text).toMatch(/\/connect\//);
    expect(res.json.result.content[0].text).not.toMatch(/\/approve\//);
    expect((await s.stack.admin('listApprovals', {})).body.approvals).toEqual([]);
  });
});
