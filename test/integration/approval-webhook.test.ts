// The approval webhook, received by a real HTTP server: one signed POST per held call (`X-Signature:
// sha256=<hex HMAC-SHA-256 of the body>`, the shape GitHub's webhooks use), naming the call and the
// link but never its arguments; a webhook that fails is logged and counted; one that hangs never holds
// up the caller's answer, and a graceful stop waits for a notice still on its way.

import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.ts';

const SECRET = 'a-webhook-secret-of-at-least-32-characters';
const MODERN = '2026-07-28';

interface Received {
  headers: IncomingMessage['headers'];
  body: string;
}

/** A webhook receiver whose answer each test chooses; resolves `next()` with each request it gets. */
async function startReceiver() {
  const received: Received[] = [];
  let answer: (res: ServerResponse) => void = (res) => res.end();
  const waiters: Array<(r: Received) => void> = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      const r = { headers: req.headers, body };
      received.push(r);
      waiters.shift()?.(r);
      answer(res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks/approvals`,
    received,
    next: () => new Promise<Received>((resolve) => waiters.push(resolve)),
    answerWith(a: (res: ServerResponse) => void) {
      answer = a;
    },
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function heldCall(stack: Stack, token: string, text: string) {
  const res = await fetch(stack.mcpUrl, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': MODERN,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'echo', arguments: { text }, _meta: { 'io.modelcontextprotocol/clientCapabilities': {} } },
    }),
  });
  return ((await res.json()) as { result: { content: { text: string }[] } }).result.content[0]!.text;
}

async function webhookFailures(stack: Stack): Promise<number> {
  const text = await (await fetch(`${stack.adminUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('mcp_auth_approvals_total{') && l.includes('outcome="webhook_failed"'));
  return line === undefined ? 0 : Number(line.split(' ').at(-1));
}

/** Calls of `echo` whose text starts with LOUD are held for approval; the webhook is told of each. */
function policyWith(webhook: string) {
  return {
    default: 'allow' as const,
    rules: [
      {
        name: 'loud',
        effect: 'approve' as const,
        requests: { methods: ['tools/call'], names: ['echo'] },
        arguments: [{ path: '/text', prefix: 'LOUD' }],
        approval: { approvers: 'self' },
      },
    ],
    approval: { webhook, webhookSecret: SECRET },
  };
}

describe('the approval webhook', () => {
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let stack: Stack;
  let token: string;
  let clientId: string;

  beforeAll(async () => {
    receiver = await startReceiver();
    stack = await startStack({ config: { policy: policyWith(receiver.url) } });
    ({ token, clientId } = await stack.issueOAuthToken());
  });
  afterAll(async () => {
    await stack?.close();
    await receiver?.close();
  });

  it('one signed POST per held call: the call, the caller, the client and the link, never the arguments', async () => {
    const delivered = receiver.next();
    const text = await heldCall(stack, token, 'LOUD secret-argument');
    const link = /(http\S+\/approve\/[0-9a-f]{32})/.exec(text)![1]!;
    const r = await delivered;
    expect(r.headers['content-type']).toBe('application/json');
    const expected = `sha256=${createHmac('sha256', SECRET).update(r.body).digest('hex')}`;
    const signature = String(r.headers['x-signature']);
    expect(signature.length).toBe(expected.length);
    expect(timingSafeEqual(Buffer.from(signature), Buffer.from(expected))).toBe(true);
    const body = JSON.parse(r.body) as Record<string, unknown>;
    expect(body).toMatchObject({ tool: 'echo', caller: clientId, client: clientId, url: link, approvalId: link.split('/').at(-1) });
    expect(body.text).toContain(link);
    expect(r.body).not.toContain('secret-argument');
  });

  it('a webhook answering 500 is counted and logged; the call is still held and answered', async () => {
    receiver.answerWith((res) => {
      res.statusCode = 500;
      res.end();
    });
    const before = await webhookFailures(stack);
    const delivered = receiver.next();
    expect(await heldCall(stack, token, 'LOUD two')).toMatch(/needs a person's approval/);
    await delivered;
    await expect.poll(() => webhookFailures(stack)).toBe(before + 1);
    expect(stack.logs.some((l) => l.includes('approval webhook failed') && l.includes('answered 500') && !l.includes(SECRET))).toBe(true);
  });

  it('a webhook that never answers does not hold up the caller', async () => {
    let open: ServerResponse | undefined;
    receiver.answerWith((res) => (open = res));
    const delivered = receiver.next();
    const started = performance.now();
    const answered = heldCall(stack, token, 'LOUD three');
    await delivered;
    // The caller has its answer while the webhook's request is still open: well before the webhook's
    // 5 s timeout would give up on it (an answer that waited for the webhook would come after that).
    expect(await answered).toMatch(/needs a person's approval/);
    expect(performance.now() - started).toBeLessThan(4000);
    expect(open!.destroyed).toBe(false);
    open!.end();
  });
});

describe('a graceful stop', () => {
  it('waits for an approval notice still being delivered (bounded by the notice timeout of its own)', async () => {
    const receiver = await startReceiver();
    const stack = await startStack({ config: { policy: policyWith(receiver.url) } });
    try {
      const { token } = await stack.issueOAuthToken();
      const order: string[] = [];
      // Never answered: the sidecar gives the notice up at its own timeout and closes the connection.
      receiver.answerWith((res) => res.on('close', () => order.push('notice ended')));
      const delivered = receiver.next();
      expect(await heldCall(stack, token, 'LOUD four')).toMatch(/needs a person's approval/);
      await delivered;
      await stack.close();
      order.push('stopped');
      expect(order).toEqual(['notice ended', 'stopped']);
    } finally {
      await receiver.close();
    }
  });
});
