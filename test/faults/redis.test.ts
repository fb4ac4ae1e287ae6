// Redis faults with real processes on loopback: a private redis-server, a TCP fault proxy between it and
// the sidecar, the echo upstream counting what reaches it. For each fault: every request is answered 503
// within 2 s, nothing is forwarded, nothing hangs, and the sidecar recovers by
// itself once Redis is reachable again (no restart, no operator action).

import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import { startEchoUpstream, type FakeUpstream } from '../support/fake-upstreams.ts';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.ts';
import { startRedisServer, type RedisServer } from '../support/redis-server.ts';
import { rawRedis } from '../support/redis.ts';
import { postMcp } from '../support/http.ts';
import { startStack, type Stack } from '../support/stack.ts';

/** The rig's `redis.commandTimeoutMs`. */
const COMMAND_TIMEOUT_MS = 500;
/**
 * A request in the fault fails closed after at most one command timeout of its own, plus the wait for
 * its turn among the burst's requests: four timeouts' worth. The product's own promise (a 503 within 2 s
 * at the largest `commandTimeoutMs`, 1500) is the same rule at that setting.
 */
const BOUND_MS = 4 * COMMAND_TIMEOUT_MS;
/** Redis's socket timeout is twice the command timeout: a dead connection is replaced within a few of those. */
const RECONNECT_BOUND_MS = 10 * COMMAND_TIMEOUT_MS;

/** Resolves on the next `event` (unlike events.once, an 'error' in between does not reject it). */
function next(emitter: { once(event: string, fn: () => void): unknown }, event: string): Promise<void> {
  return new Promise((resolve) => emitter.once(event, () => resolve()));
}

interface Answer {
  status: number;
  body: any;
  retryAfter: string | null;
  ms: number;
}

async function mcp(stack: Stack, token: string): Promise<Answer> {
  const started = performance.now();
  const { status, headers, body } = await postMcp(stack.mcpUrl, token);
  return { status, body, retryAfter: headers.get('retry-after'), ms: performance.now() - started };
}

interface Rig {
  redis: RedisServer;
  fault: FaultProxy;
  echo: FakeUpstream;
  stack: Stack;
  token: string;
  clientId: string;
  client(): RedisTokenStore['client'];
  close(): Promise<void>;
}

async function rig(options: { commandTimeoutMs?: number; persist?: boolean; lookupCache?: 'off' } = {}): Promise<Rig> {
  // appendfsync always: a token written before the kill is still there after the restart.
  const redis = await startRedisServer(options.persist ? ['--appendonly', 'yes', '--appendfsync', 'always'] : []);
  const fault = await startFaultProxy({ host: '127.0.0.1', port: redis.port });
  const echo = await startEchoUpstream();
  const stack = await startStack({
    upstreamUrl: echo.url,
    redisUrl: fault.url('redis'),
    config: {
      redis: {
        commandTimeoutMs: options.commandTimeoutMs ?? COMMAND_TIMEOUT_MS,
        ...(options.lookupCache ? { lookupCache: options.lookupCache } : {}),
      },
    },
  });
  const { token, clientId } = await stack.issueOAuthToken();
  return {
    redis,
    fault,
    echo,
    stack,
    token,
    clientId,
    client: () => (stack.store as RedisTokenStore).client,
    async close() {
      await stack.close();
      await echo.close();
      await fault.close();
      await redis.stop();
    },
  };
}

/** Fires `n` requests at once while the fault holds: all 503 within the bound, none forwarded. */
async function expectFailClosed(r: Rig, n = 20): Promise<number> {
  const forwardedBefore = r.echo.seen.length;
  const answers = await Promise.all(Array.from({ length: n }, () => mcp(r.stack, r.token)));
  for (const a of answers) {
    expect(a.status).toBe(503);
    expect(a.body).toEqual({ error: 'temporarily_unavailable' });
    expect(a.retryAfter).toBe('2');
    expect(a.ms).toBeLessThan(BOUND_MS);
  }
  expect(r.echo.seen.length).toBe(forwardedBefore);
  expect(r.stack.sidecar.forwarder.inFlight()).toBe(0);
  return Math.max(...answers.map((a) => a.ms));
}

/**
 * Waits (on events, not timers) until the connections a request depends on are ready, the main one and
 * the token lookups' one (each reconnects on its own backoff), then expects a normal answer.
 */
async function expectRecovered(r: Rig): Promise<void> {
  const client = r.client();
  if (client.status !== 'ready') await next(client, 'ready');
  const lookups = (r.stack.store as RedisTokenStore).lookupClient;
  if (lookups !== undefined && lookups.status !== 'ready') await next(lookups, 'ready');
  const forwardedBefore = r.echo.seen.length;
  const ok = await mcp(r.stack, r.token);
  expect(ok.status).toBe(200);
  expect(r.echo.seen.length).toBe(forwardedBefore + 1);
  // The admin listener's transaction connection recovers too (it is re-created on demand).
  const listed = await r.stack.admin('listClients');
  expect(listed.status).toBe(200);
  const ready = await fetch(`${r.stack.adminUrl}/readyz`);
  expect(ready.status).toBe(200);
}

describe('Redis faults: fail closed within the bound, recover by itself', () => {
  let r: Rig | undefined;
  afterEach(async () => {
    await r?.close();
    r = undefined;
  });

  it('redis-server killed (SIGKILL) and restarted: 503 while down, the same token works again after', async () => {
    r = await rig({ persist: true });
    expect((await mcp(r.stack, r.token)).status).toBe(200);
    await r.redis.kill();
    await expectFailClosed(r);
    // Admin operations and readiness say so too, as fast.
    for (const [op, body] of [
      ['createClient', { clientName: 'x' }],
      ['deleteClient', { clientId: r.clientId }],
      ['deleteClient', { clientId: r.clientId }],
    ] as const) {
      const started = performance.now();
      expect((await r.stack.admin(op, body)).status).toBe(503);
      expect(performance.now() - started).toBeLessThan(BOUND_MS);
    }
    expect((await fetch(`${r.stack.adminUrl}/readyz`)).status).toBe(503);
    // The master token is checked without the store, so it keeps working while Redis is down.
    const master = await mcp(r.stack, r.stack.masterToken);
    expect(master.status).toBe(200);
    await r.redis.restart();
    await expectRecovered(r);
  });

  it('connection refused (nothing listens) and back: 503 while refused, recovers', async () => {
    r = await rig();
    await r.fault.setMode('down');
    await expectFailClosed(r);
    await r.fault.setMode('pass');
    await expectRecovered(r);
  });

  it('every connection reset, new ones too: 503, recovers', async () => {
    r = await rig();
    await r.fault.setMode('reset');
    await expectFailClosed(r);
    await r.fault.setMode('pass');
    await expectRecovered(r);
  });

  it('slow Redis (500 ms per reply) past redis.commandTimeoutMs (250): 503 within the bound, recovers', async () => {
    r = await rig({ commandTimeoutMs: 250 });
    await r.fault.setMode('slow', { slowMs: 500 });
    await expectFailClosed(r);
    await r.fault.setMode('pass');
    // The replies to the timed-out commands are still on their way (as on a real link, in order, ahead
    // of any new reply); until they are in, a new command waits behind them past the 250 ms bound.
    await r.fault.whenDelivered();
    await expectRecovered(r);
  });

  it('slow Redis (500 ms per reply) within redis.commandTimeoutMs (1500): slow but correct answers', async () => {
    r = await rig({ commandTimeoutMs: 1500 });
    await r.fault.setMode('slow', { slowMs: 500 });
    const forwardedBefore = r.echo.seen.length;
    const answers = await Promise.all(Array.from({ length: 5 }, () => mcp(r!.stack, r!.token)));
    for (const a of answers) expect(a.status).toBe(200);
    expect(r.echo.seen.length).toBe(forwardedBefore + 5);
    // A revoked token is still refused while Redis is slow.
    await r.fault.setMode('pass');
    expect((await r.stack.admin('deleteClient', { clientId: r.clientId })).status).toBe(200);
    await r.fault.setMode('slow', { slowMs: 500 });
    expect((await mcp(r.stack, r.token)).status).toBe(401);
    expect(r.echo.seen.length).toBe(forwardedBefore + 5);
  });

  it('blackholed (open and new connections accepted, nothing answers): 503 within the bound, recovers when it heals', async () => {
    // Strict: the recovery awaited below is the main connection's (ready, then a normal answer). With
    // the lookup cache the first wave is read on the cache's connections, the main connection's own
    // socket timeout fires later, and it can cut the main connection just after it reported ready.
    r = await rig({ lookupCache: 'off' });
    await r.fault.setMode('blackhole');
    await expectFailClosed(r);
    // Still nothing; a second wave is as bounded as the first.
    await expectFailClosed(r);
    await r.fault.setMode('pass');
    await expectRecovered(r);
  });

  it('the open connection blackholed for good (peer host gone, no FIN/RST), new connections fine: recovers by reconnecting', async () => {
    // Strict: the token lookups' connection's own detection is what is tested (one timer for every
    // lookup in flight, not ioredis's socket timeout), and only the strict mode reads tokens on it.
    // With the lookup cache (the default) lookups run on the cache's connections, whose silence its
    // PING detects (test/integration/lookup-cache.test.ts, "connections silent").
    r = await rig({ lookupCache: 'off' });
    // The first lookup opens the lookups' connection.
    expect((await mcp(r.stack, r.token)).status).toBe(200);
    const client = (r.stack.store as RedisTokenStore).lookupClient;
    if (client === undefined) throw new Error('the lookups connection is not open');
    const started = performance.now();
    const replaced = async (c: Redis | RedisTokenStore['client']) => {
      await next(c, 'close');
      await next(c, 'ready');
      return performance.now() - started;
    };
    // The lookups' connection is replaced, and the main one, asked to prove itself then, too.
    const reconnected = Promise.all([replaced(client), replaced(r.client())]).then((ms) => Math.max(...ms));
    r.fault.freezeOpenLinks();
    await expectFailClosed(r, 5);
    // Nothing but the sidecar's own detection of the dead connection (redis socket timeout: twice the
    // 500 ms command timeout here) gets it out of this: the kernel would take minutes.
    const window = await reconnected;
    expect(window).toBeLessThan(RECONNECT_BOUND_MS);
    await expectRecovered(r);
  });
});

describe("Redis fault: connection cut during deleteClient's MULTI/EXEC", () => {
  let redis: RedisServer;
  let fault: FaultProxy;
  let echo: FakeUpstream;
  let stack: Stack;
  let raw: Redis;

  beforeAll(async () => {
    redis = await startRedisServer();
    fault = await startFaultProxy({ host: '127.0.0.1', port: redis.port });
    echo = await startEchoUpstream();
    stack = await startStack({ upstreamUrl: echo.url, redisUrl: fault.url('redis') });
    raw = await rawRedis(redis.url); // direct, not through the fault proxy
  });
  afterAll(async () => {
    fault.intercept(undefined);
    await raw.quit();
    await stack.close();
    await echo.close();
    await fault.close();
    await redis.stop();
  });

  const EXEC = /\*1\r\n\$4\r\nexec\r\n/i;
  const MULTI = /\*1\r\n\$5\r\nmulti\r\n/i;

  /** A client with 3 access tokens and a refresh token (client_credentials with a refresh grant). */
  async function clientWithTokens(): Promise<{ clientId: string; tokens: string[] }> {
    const { token, clientId } = await stack.issueOAuthToken();
    const tokens = [token];
    for (let i = 0; i < 2; i++) {
      const issued = await stack.admin('createAccessToken', { clientId, lifetimeSeconds: 3600 });
      expect(issued.status).toBe(201);
      tokens.push(issued.body.accessToken);
    }
    return { clientId, tokens };
  }

  async function statuses(tokens: string[]): Promise<number[]> {
    return Promise.all(tokens.map(async (t) => (await mcp(stack, t)).status));
  }

  /** revokedAt of the client and of each token key of the client, read straight from Redis. */
  async function revocationState(clientId: string): Promise<{ client: string | null; tokens: Array<string | null> }> {
    const keys = (stack.store as RedisTokenStore).keys;
    const client = await raw.hget(keys.client(clientId), 'revokedAt');
    const all = await raw.keys(keys.accessTokenPattern());
    const mine: Array<string | null> = [];
    for (const k of all) if ((await raw.hget(k, 'clientId')) === clientId) mine.push(await raw.hget(k, 'revokedAt'));
    return { client, tokens: mine };
  }

  const cuts: Array<[string, (chunk: Buffer) => { forward: Buffer; then: 'cut' | 'drop-replies' } | undefined, 'nothing' | 'all']> = [
    [
      'cut in the middle of the queued commands',
      (chunk) => {
        const m = MULTI.exec(chunk.toString('latin1'));
        if (!m) return undefined;
        const e = EXEC.exec(chunk.toString('latin1'));
        const end = e ? e.index : chunk.length;
        return { forward: chunk.subarray(0, m.index + Math.floor((end - m.index) / 2)), then: 'cut' };
      },
      'nothing',
    ],
    [
      'cut right before EXEC',
      (chunk) => {
        const text = chunk.toString('latin1');
        if (!MULTI.test(text)) return undefined;
        const e = EXEC.exec(text);
        if (!e) throw new Error('MULTI and EXEC were not written together');
        return { forward: chunk.subarray(0, e.index), then: 'cut' };
      },
      'nothing',
    ],
    [
      'EXEC delivered, its reply lost',
      (chunk) => (EXEC.test(chunk.toString('latin1')) ? { forward: chunk, then: 'drop-replies' } : undefined),
      'all',
    ],
  ];

  it.each(cuts)('%s: all revoked or nothing, and the retry is idempotent', async (_name, interceptor, expected) => {
    const { clientId, tokens } = await clientWithTokens();
    expect(await statuses(tokens)).toEqual([200, 200, 200]);
    // One cut; any later EXEC is counted: ioredis must not replay the transaction on a new
    // connection (without the WATCH that guarded it) behind the caller's back.
    let fired = 0;
    let replayed = 0;
    fault.intercept((chunk) => {
      if (fired > 0) {
        if (EXEC.test(chunk.toString('latin1'))) replayed++;
        return undefined;
      }
      const d = interceptor(chunk);
      if (d) fired++;
      return d;
    });
    const first = await stack.admin('deleteClient', { clientId });
    fault.intercept(undefined);
    expect(fired).toBe(1);
    expect(replayed).toBe(0);
    expect(first.status).toBe(503);

    const state = await revocationState(clientId);
    expect(state.tokens).toHaveLength(3);
    if (expected === 'nothing') {
      expect(state.client).toBeNull();
      expect(state.tokens).toEqual([null, null, null]);
      expect(await statuses(tokens)).toEqual([200, 200, 200]);
    } else {
      expect(state.client).not.toBeNull();
      expect(state.tokens).toEqual([state.client, state.client, state.client]);
      expect(await statuses(tokens)).toEqual([401, 401, 401]);
    }

    // The retry: revokes everything (or finds it done), with the same revokedAt on a second retry.
    const retry = await stack.admin('deleteClient', { clientId });
    expect(retry.status).toBe(200);
    expect(retry.body.accessTokensRevoked).toBe(expected === 'nothing' ? 3 : 0);
    const after = await revocationState(clientId);
    expect(after.client).toBe(String(retry.body.revokedAt));
    expect(after.tokens).toEqual([after.client, after.client, after.client]);
    expect(await statuses(tokens)).toEqual([401, 401, 401]);
    const again = await stack.admin('deleteClient', { clientId });
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ ...retry.body, accessTokensRevoked: 0, refreshTokensRevoked: 0 });
    // No token can be created for it any more.
    expect((await stack.admin('createAccessToken', { clientId, lifetimeSeconds: 60 })).status).toBe(400);
  });
});
