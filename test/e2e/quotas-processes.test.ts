// Quotas (policy.quotas) across two sidecar PROCESSES on one real Redis, in front of the reference
// upstream, each process started as production starts it (bin/mcp-bearer-proxy.js, port 0, the ports
// read from its output). One caller's tools/call, sent to both processes at once in random
// interleavings: exactly `limit` reach the upstream in a window, the rest get the tool error naming the
// window's end. A short window rolls at the reset time its refusal names (waited for, on the real
// clock the processes share). Redis stopped: both fail closed (503), and a call no quota counts still
// passes. The requests are what an MCP client of the 2026-07-28 revision POSTs (stateless: the
// envelope in _meta, Mcp-Method / Mcp-Name mirrored in headers).

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startUpstream, type RunningUpstream } from '../../examples/upstream/server.ts';
import { generateToken } from '../../src/model/credentials.ts';
import { startProcess, type Started } from '../support/process.ts';
import { startRedisServer, type RedisServer } from '../support/redis-server.ts';

const REVISION = '2026-07-28';
const ENVELOPE = { 'io.modelcontextprotocol/protocolVersion': REVISION, 'io.modelcontextprotocol/clientCapabilities': {} };
const AUTHORIZATION = 'io.modelcontextprotocol/authorization';

/** `echo`: counted per OAuth client in a window of the longest allowed length (31 days: no edge during a run). */
const LIMIT = 4;
const LONG_WINDOW_SECONDS = 31 * 24 * 3600;
/** `add`: counted per OAuth client in a window short enough to wait for its end. */
const ROLLING_LIMIT = 2;
const SHORT_WINDOW_SECONDS = 2;
const QUOTAS = [
  { name: 'echo-per-client', match: { tools: ['echo'] }, per: 'client', limit: LIMIT, windowSeconds: LONG_WINDOW_SECONDS },
  { name: 'add-per-client', match: { tools: ['add'] }, per: 'client', limit: ROLLING_LIMIT, windowSeconds: SHORT_WINDOW_SECONDS },
  // The master token has no client: its echo calls fall through to this rule.
  { name: 'echo-master', match: { tools: ['echo'] }, per: 'subject', limit: 1000, windowSeconds: 60 },
];

/** The end of the window of `windowSeconds` that `at` (epoch ms) falls in: what a refusal names. */
function windowEnd(at: number, windowSeconds: number): number {
  const ms = windowSeconds * 1000;
  return (Math.floor(at / ms) + 1) * ms;
}

interface Sidecar extends Started {
  proxyUrl: string;
  adminUrl: string;
}

/** `mcp-bearer-proxy` (the package's bin) with a config file of its own (YAML, written as JSON): the key prefix and the quotas. */
async function startSidecar(dir: string, name: string, env: NodeJS.ProcessEnv, prefix: string): Promise<Sidecar> {
  const configPath = join(dir, `${name}.yaml`);
  writeFileSync(configPath, `${JSON.stringify({ redis: { keyPrefix: prefix, commandTimeoutMs: 500 }, policy: { quotas: QUOTAS } })}\n`);
  const started = await startProcess([process.execPath, 'bin/mcp-bearer-proxy.js'], { ...env, MCP_AUTH_CONFIG: configPath }, [
    /proxy listening on (\S+)/,
    /admin listening on (\S+)/,
  ]);
  return {
    ...started,
    proxyUrl: /proxy listening on (\S+)/.exec(started.output())![1]!,
    adminUrl: /admin listening on (\S+)/.exec(started.output())![1]!,
  };
}

/** The JSON-RPC answer of a POST: a JSON body, or the last message of an SSE stream. */
function messageOf(text: string): any {
  if (text.startsWith('{')) return JSON.parse(text);
  const data = text
    .split('\n')
    .filter((l) => l.startsWith('data:'))
    .at(-1);
  return JSON.parse(data!.slice('data:'.length));
}

describe('quotas: two sidecar processes on one Redis', () => {
  let redis: RedisServer;
  let upstream: RunningUpstream;
  let dir: string;
  let master: string;
  const sidecars: Sidecar[] = [];

  beforeAll(async () => {
    redis = await startRedisServer();
    upstream = await startUpstream({ host: '127.0.0.1', port: 0 });
    dir = mkdtempSync(join(tmpdir(), 'mcp-bearer-proxy-quotas-'));
    master = generateToken();
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      HOST: '127.0.0.1',
      PORT: '0',
      ADMIN_PORT: '0',
      LOG_LEVEL: 'warn',
      UPSTREAM_URL: upstream.url,
      REDIS_URL: redis.url,
      BEARER_SECRET_MASTER: master,
    };
    // The Redis is this test's own: one fixed prefix, shared by the two processes as replicas share it.
    // One after the other: each prints its ports once it listens (port 0).
    sidecars.push(await startSidecar(dir, 'a', env, 'quotas-processes:mcpauth:'));
    sidecars.push(await startSidecar(dir, 'b', env, 'quotas-processes:mcpauth:'));
  }, 60_000);

  afterAll(async () => {
    for (const s of sidecars) {
      if (s.child.exitCode === null && s.child.signalCode === null) {
        s.child.kill('SIGKILL');
        await s.exit;
      }
    }
    await upstream?.close();
    await redis?.stop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  /** A fresh OAuth client and its access token (issued by either process: they share the store). */
  async function newCaller(via: Sidecar): Promise<string> {
    const admin = async (op: string, body: Record<string, unknown>) => {
      const res = await fetch(`${via.adminUrl}/oauth/${op}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${master}` },
        body: JSON.stringify(body),
      });
      expect(res.status).toBe(201);
      return (await res.json()) as Record<string, string>;
    };
    const { clientId } = await admin('createClient', { clientName: 'quotas-processes' });
    return (await admin('createAccessToken', { clientId, lifetimeSeconds: 3600 })).accessToken!;
  }

  /** A tools/call through one process; `sent`/`answered`: the test's clock around it (the processes share it). */
  async function call(via: Sidecar, token: string, id: number, name: string, args: Record<string, unknown>) {
    const sent = Date.now();
    const res = await fetch(`${via.proxyUrl}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': REVISION,
        'mcp-method': 'tools/call',
        'mcp-name': name,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args, _meta: ENVELOPE } }),
    });
    const text = await res.text();
    return { status: res.status, text, sent, answered: Date.now() };
  }

  /** The refusal's reset time (epoch ms), checked against its text; undefined for an answer of the upstream. */
  function refusalReset(answer: { status: number; text: string }, id: number): number | undefined {
    expect(answer.status, answer.text).toBe(200);
    const message = messageOf(answer.text);
    expect(message.id).toBe(id);
    if (message.result?.isError !== true) return undefined;
    const meta = message.result._meta[AUTHORIZATION];
    expect(meta).toMatchObject({ reason: 'quota_exceeded', remediation: 'unavailable' });
    expect(message.result.content[0].text).toContain(`It resets at ${meta.resetAt}`);
    return Date.parse(meta.resetAt);
  }

  async function refusalsCounted(rule: string): Promise<number> {
    let sum = 0;
    for (const s of sidecars) {
      const text = await (await fetch(`${s.adminUrl}/metrics`)).text();
      sum += Number(new RegExp(`^mcp_auth_quota_refusals_total\\{rule="${rule}"\\} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
    }
    return sum;
  }

  it('exactly `limit` calls of one caller pass in a window, however they interleave over the two processes; the rest get the tool error naming the window end', async () => {
    let refusedTotal = 0;
    await fc.assert(
      fc.asyncProperty(
        // Each call: which process, and which wave it is sent in (the calls of a wave are concurrent).
        fc.array(fc.record({ process: fc.integer({ min: 0, max: 1 }), wave: fc.integer({ min: 0, max: 2 }) }), {
          minLength: 1,
          maxLength: 3 * LIMIT,
        }),
        async (calls) => {
          // A caller of its own per run: its count starts at 0.
          const token = await newCaller(sidecars[calls.length % 2]!);
          const started = Date.now();
          const answers: Array<{ status: number; text: string; i: number }> = [];
          for (let wave = 0; wave <= 2; wave++) {
            const inWave = calls.map((c, i) => ({ ...c, i })).filter((c) => c.wave === wave);
            const answered = await Promise.all(
              inWave.map(async (c) => ({ ...(await call(sidecars[c.process]!, token, c.i, 'echo', { text: `call ${c.i}` })), i: c.i })),
            );
            answers.push(...answered);
          }
          const end = windowEnd(started, LONG_WINDOW_SECONDS);
          const resets = answers.map((answer) => refusalReset(answer, answer.i));
          refusedTotal += resets.filter((r) => r !== undefined).length;
          // The run fell within one window (a 31-day one: an edge in between discards the run).
          fc.pre(Date.now() < end);
          answers.forEach((answer, n) => {
            // Reached the upstream: its answer is the echo of this call. Refused: until the window's end.
            if (resets[n] === undefined) expect(messageOf(answer.text).result.content[0].text).toBe(`call ${answer.i}`);
            else expect(resets[n]).toBe(end);
          });
          expect(resets.filter((r) => r === undefined)).toHaveLength(Math.min(LIMIT, calls.length));
        },
      ),
      { numRuns: 15 },
    );
    // Each refusal counted once, by the process that refused it, under the rule's name.
    expect(await refusalsCounted('echo-per-client')).toBe(refusedTotal);
  }, 300_000);

  it('a short window rolls at the reset time its refusal names: the count starts again at 0 there', async () => {
    const token = await newCaller(sidecars[0]!);
    let id = 0;
    // Take the window until a call is refused (an edge met on the way starts a fresh count: keep going).
    let refused: { reset: number; sent: number; answered: number } | undefined;
    for (let i = 0; i < 10 * ROLLING_LIMIT && refused === undefined; i++) {
      const answer = await call(sidecars[i % 2]!, token, ++id, 'add', { a: i, b: 1 });
      const reset = refusalReset(answer, id);
      if (reset !== undefined) refused = { reset, sent: answer.sent, answered: answer.answered };
      else expect(messageOf(answer.text).result.content[0].text).toBe(String(i + 1));
    }
    expect(refused).toBeDefined();
    // The reset is the end of the window the refused call was decided in: a window edge after it was sent,
    // at most one window after it was answered.
    const windowMs = SHORT_WINDOW_SECONDS * 1000;
    expect(refused!.reset % windowMs).toBe(0);
    expect(refused!.reset).toBeGreaterThan(refused!.sent);
    expect(refused!.reset).toBeLessThanOrEqual(windowEnd(refused!.answered, SHORT_WINDOW_SECONDS));

    // Wait for the reset the refusal named (the processes read the same clock), then: a fresh count. Both
    // processes at once, one call more than the limit; repeated should the calls straddle the next edge.
    let rolled = false;
    for (let attempt = 0; attempt < 5 && !rolled; attempt++) {
      const at = attempt === 0 ? refused!.reset : windowEnd(Date.now(), SHORT_WINDOW_SECONDS);
      while (Date.now() < at) await delay(at - Date.now());
      const started = Date.now();
      const ids = Array.from({ length: ROLLING_LIMIT + 1 }, () => ++id);
      const answers = await Promise.all(ids.map((n, i) => call(sidecars[i % 2]!, token, n, 'add', { a: n, b: 0 })));
      if (windowEnd(started, SHORT_WINDOW_SECONDS) !== windowEnd(Date.now(), SHORT_WINDOW_SECONDS)) continue;
      const resets = answers.map((a, i) => refusalReset(a, ids[i]!));
      expect(resets.filter((r) => r === undefined)).toHaveLength(ROLLING_LIMIT);
      expect(resets.filter((r) => r !== undefined)).toEqual([windowEnd(started, SHORT_WINDOW_SECONDS)]);
      rolled = true;
    }
    expect(rolled).toBe(true);
  }, 60_000);

  it('Redis stopped: both processes answer 503 to a counted call and forward nothing; a call no quota counts still passes', async () => {
    // The master token needs no lookup: the quota's script is the only store call.
    for (const s of sidecars) {
      expect(refusalReset(await call(s, master, 1, 'echo', { text: 'before' }), 1)).toBeUndefined();
      expect(refusalReset(await call(s, master, 2, 'progress', { steps: 1, delayMs: 0 }), 2)).toBeUndefined();
    }
    // The upstream's last call was an uncounted one: a counted call forwarded now would show.
    expect(upstream.toolCalls.at(-1)).toBe('progress');
    await redis.kill();
    try {
      for (const s of sidecars) {
        const answer = await call(s, master, 2, 'echo', { text: 'during' });
        expect(answer.status).toBe(503);
        expect(JSON.parse(answer.text)).toEqual({ error: 'temporarily_unavailable' });
        expect(upstream.toolCalls.at(-1)).toBe('progress');
      }
      for (const s of sidecars) {
        const answer = await call(s, master, 3, 'progress', { steps: 1, delayMs: 0 });
        expect(answer.status, answer.text).toBe(200);
        expect(messageOf(answer.text).result.content[0].text).toBe('done 1');
      }
    } finally {
      await redis.restart();
    }
  }, 60_000);
});
