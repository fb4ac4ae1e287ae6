// SSE streams that are already open when their token stops being valid, through the real sidecar on
// real Redis to an SSE upstream on a real socket: each revocation path (admin revokeUserToken and
// deleteClient, RFC 7009 /revoke of an access or a refresh token) ends the stream cleanly, on the
// replica that holds it too; a hand edit in Redis ends it within the (test-short) re-check interval;
// expiry ends it when the injected clock passes expiresAt; a revocation sent while the notice
// connection is down is not lost; a stream of a token that is still valid keeps flowing.

import { createServer, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/model/clock.ts';
import { hashToken } from '../../src/model/credentials.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import { serveOnLoopback, startSseUpstream, type SseUpstream } from '../support/fake-upstreams.ts';
import { basic, postForm } from '../support/http.ts';
import { addressOf, startFaultProxy } from '../support/fault-proxy.ts';
import { openRedisStore, rawRedis, redisUrl } from '../support/redis.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { storeUserToken } from '../support/user-tokens.ts';

/** The client's side of one SSE response: text as it arrives, and how it ended. */
interface ClientStream {
  /** `clean`: the response ended normally (what a re-authenticating client sees); `broken`: cut. */
  ended: Promise<'clean' | 'broken'>;
  /** Resolves once `fragment` has arrived. */
  until(fragment: string): Promise<void>;
  /** The upstream's side: write events, and `closed` resolves when the sidecar tore it down. */
  upstream: Awaited<ReturnType<SseUpstream['nextStream']>>;
}

async function openStream(stack: Stack, upstream: SseUpstream, token: string, method: 'GET' | 'POST' = 'GET'): Promise<ClientStream> {
  const res = await fetch(stack.mcpUrl, {
    method,
    headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream, application/json', 'content-type': 'application/json' },
    body: method === 'POST' ? JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'slow' } }) : undefined,
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('text/event-stream');
  const upstreamSide = await upstream.nextStream();
  let text = '';
  let wake: (() => void) | undefined;
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  const ended = (async (): Promise<'clean' | 'broken'> => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return 'clean';
        text += value;
        wake?.();
      }
    } catch {
      return 'broken';
    } finally {
      wake?.();
    }
  })();
  let finished = false;
  void ended.then(() => (finished = true));
  return {
    ended,
    upstream: upstreamSide,
    async until(fragment) {
      while (!text.includes(fragment)) {
        if (finished) throw new Error(`stream ended before "${fragment}" arrived`);
        await new Promise<void>((r) => (wake = r));
      }
    },
  };
}

/** A fresh user-grade token stored the way the IdP exchange stores one. */
function userToken(stack: Stack, lifetimeMs = 3_600_000): Promise<string> {
  return storeUserToken(stack, 'user-7', { issuer: 'https://idp.example/', lifetimeMs });
}

/** The access-log lines of streams the sidecar ended, by why. */
function endedLines(stack: Stack, endedBy: 'revoked' | 'expired'): Array<Record<string, unknown>> {
  return stack.logs.map((l) => JSON.parse(l)).filter((l) => l.msg === 'request' && l.endedBy === endedBy);
}

async function endedCount(stack: Stack, reason: 'revoked' | 'expired'): Promise<number> {
  const metric = await stack.sidecar.metrics.streamsEnded.get();
  return metric.values.find((v) => v.labels.reason === reason)?.value ?? 0;
}

/** The other stream is untouched: an event written now still reaches its client. */
async function stillFlowing(s: ClientStream, marker: string): Promise<void> {
  s.upstream.res.write(`data: ${marker}\n\n`);
  await s.until(marker);
}

describe('revocation reaches open streams (one sidecar, Redis)', () => {
  let upstream: SseUpstream;
  let stack: Stack;

  beforeAll(async () => {
    upstream = await startSseUpstream();
    // A re-check interval far beyond the test: only notices can end these streams.
    stack = await startStack({ upstreamUrl: upstream.url, config: { proxy: { streamRecheckMs: 3_600_000 } } });
  });
  afterAll(async () => {
    await stack.close();
    await upstream.close();
  });

  it('admin revokeUserToken ends the stream cleanly and tears down its upstream request; another token’s stream keeps flowing', async () => {
    const revoked = await userToken(stack);
    const other = (await stack.issueOAuthToken()).token;
    const a = await openStream(stack, upstream, revoked);
    const b = await openStream(stack, upstream, other);
    a.upstream.res.write('data: before\n\n');
    await a.until('before');

    expect((await stack.admin('revokeUserToken', { tokenHash: hashToken(revoked) })).status).toBe(200);
    expect(await a.ended).toBe('clean');
    await a.upstream.closed;
    await stillFlowing(b, 'after-revocation');
    expect(endedLines(stack, 'revoked')).toHaveLength(1);
    expect(endedLines(stack, 'revoked')[0]).toMatchObject({
      method: 'GET',
      path: '/mcp',
      status: 200,
      authKind: 'user',
      subject: 'user-7',
    });
    expect(endedLines(stack, 'revoked')[0]!.aborted).toBeUndefined();
    expect(await endedCount(stack, 'revoked')).toBe(1);
    b.upstream.res.end();
    expect(await b.ended).toBe('clean');
  });

  it('deleteClient ends every stream of the client: a GET stream and a POST answered with SSE', async () => {
    const { token, clientId } = await stack.issueOAuthToken();
    const get = await openStream(stack, upstream, token);
    const post = await openStream(stack, upstream, token, 'POST');
    expect((await stack.admin('deleteClient', { clientId })).status).toBe(200);
    expect(await get.ended).toBe('clean');
    expect(await post.ended).toBe('clean');
    await get.upstream.closed;
    await post.upstream.closed;
  });

  it('RFC 7009 /revoke of an access token, and of a refresh token (its family’s access token), end their streams', async () => {
    const created = await stack.admin('createClient', { clientName: 'streaming machine' });
    const client = { id: created.body.clientId as string, secret: created.body.clientSecret as string };
    const first = await postForm(`${stack.proxyUrl}/token`, { grant_type: 'client_credentials' }, basic(client.id, client.secret));
    const second = await postForm(`${stack.proxyUrl}/token`, { grant_type: 'client_credentials' }, basic(client.id, client.secret));
    expect([first.status, second.status]).toEqual([200, 200]);
    const byAccess = await openStream(stack, upstream, first.body.access_token);
    const byFamily = await openStream(stack, upstream, second.body.access_token);

    expect((await postForm(`${stack.proxyUrl}/revoke`, { token: first.body.access_token }, basic(client.id, client.secret))).status).toBe(
      200,
    );
    expect(await byAccess.ended).toBe('clean');
    await stillFlowing(byFamily, 'family-still-valid');

    expect(
      (
        await postForm(
          `${stack.proxyUrl}/revoke`,
          { token: second.body.refresh_token, token_type_hint: 'refresh_token' },
          basic(client.id, client.secret),
        )
      ).status,
    ).toBe(200);
    expect(await byFamily.ended).toBe('clean');
    await byFamily.upstream.closed;
  });

  it('the master token’s streams are never watched (it is neither revoked nor expired through the store)', async () => {
    const before = stack.sidecar.streams.size;
    const s = await openStream(stack, upstream, stack.masterToken);
    expect(stack.sidecar.streams.size).toBe(before);
    await stillFlowing(s, 'master');
    s.upstream.res.end();
    expect(await s.ended).toBe('clean');
  });
});

describe('revocation on one replica ends a stream held by another (two sidecars, one Redis)', () => {
  let upstream: SseUpstream;
  let a: Stack;
  let b: Stack;

  beforeAll(async () => {
    upstream = await startSseUpstream();
    a = await startStack({ upstreamUrl: upstream.url, config: { proxy: { streamRecheckMs: 3_600_000 } } });
    b = await startStack({ upstreamUrl: upstream.url, prefix: a.prefix, config: { proxy: { streamRecheckMs: 3_600_000 } } });
  });
  afterAll(async () => {
    await b.close();
    await a.close();
    await upstream.close();
  });

  it('revokeUserToken through sidecar A ends the stream open through sidecar B', async () => {
    const token = await userToken(a);
    const held = await openStream(b, upstream, token);
    expect((await a.admin('revokeUserToken', { tokenHash: hashToken(token) })).status).toBe(200);
    expect(await held.ended).toBe('clean');
    await held.upstream.closed;
    expect(endedLines(b, 'revoked')).toHaveLength(1);
    expect(endedLines(a, 'revoked')).toHaveLength(0);
  });

  it('deleteClient through sidecar B ends the stream open through sidecar A', async () => {
    const { token, clientId } = await a.issueOAuthToken();
    const held = await openStream(a, upstream, token);
    expect((await b.admin('deleteClient', { clientId })).status).toBe(200);
    expect(await held.ended).toBe('clean');
  });
});

describe('memory store: the same notices, in process', () => {
  it('admin revokeUserToken and deleteClient end open streams', async () => {
    const upstream = await startSseUpstream();
    const stack = await startStack({ store: 'memory', upstreamUrl: upstream.url, config: { proxy: { streamRecheckMs: 3_600_000 } } });
    try {
      const user = await userToken(stack);
      const { token, clientId } = await stack.issueOAuthToken();
      const u = await openStream(stack, upstream, user);
      const o = await openStream(stack, upstream, token);
      expect((await stack.admin('revokeUserToken', { tokenHash: hashToken(user) })).status).toBe(200);
      expect(await u.ended).toBe('clean');
      await stillFlowing(o, 'oauth-still-valid');
      expect((await stack.admin('deleteClient', { clientId })).status).toBe(200);
      expect(await o.ended).toBe('clean');
    } finally {
      await stack.close();
      await upstream.close();
    }
  });
});

describe('a stream whose upstream answers after the revocation went by', () => {
  it('is ended as it opens, not a re-check interval later (memory store: the notice is delivered before the admin call returns)', async () => {
    // Holds each request's response headers until the test releases them.
    const held: Array<{ res: ServerResponse; closed: Promise<void> }> = [];
    let arrived: (() => void) | undefined;
    const server = createServer((req, res) => {
      req.resume();
      held.push({ res, closed: new Promise<void>((r) => res.once('close', () => r())) });
      arrived?.();
    });
    const slow = await serveOnLoopback(server);
    const stack = await startStack({ store: 'memory', upstreamUrl: slow.url, config: { proxy: { streamRecheckMs: 3_600_000 } } });
    try {
      const token = await userToken(stack);
      const responded = fetch(stack.mcpUrl, { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } });
      while (held.length === 0) await new Promise<void>((r) => (arrived = r));
      expect((await stack.admin('revokeUserToken', { tokenHash: hashToken(token) })).status).toBe(200);
      const upstreamSide = held[0]!;
      upstreamSide.res.writeHead(200, { 'content-type': 'text/event-stream' });
      upstreamSide.res.write('data: too late\n\n');
      const res = await responded;
      expect(res.status).toBe(200);
      // The response ends (cleanly) without anything more; the upstream request is torn down.
      await res.body?.pipeTo(new WritableStream());
      await upstreamSide.closed;
      expect(endedLines(stack, 'revoked')).toHaveLength(1);
    } finally {
      await stack.close();
      await slow.close();
    }
  });
});

describe('revocations no notice announces', () => {
  let upstream: SseUpstream;

  beforeAll(async () => {
    upstream = await startSseUpstream();
  });
  afterAll(async () => {
    await upstream.close();
  });

  it('a hand edit (HSET … revoked true) ends the stream within proxy.streamRecheckMs; a valid stream survives the re-checks', async () => {
    const stack = await startStack({ upstreamUrl: upstream.url, config: { proxy: { streamRecheckMs: 100 } } });
    const raw = await rawRedis();
    try {
      const edited = await userToken(stack);
      const valid = await userToken(stack);
      const e = await openStream(stack, upstream, edited);
      const v = await openStream(stack, upstream, valid);
      await raw.hset(`${stack.prefix}userBearerTokens:${hashToken(edited)}`, 'revoked', 'true');
      expect(await e.ended).toBe('clean');
      await e.upstream.closed;
      expect(endedLines(stack, 'revoked')).toHaveLength(1);
      // A full re-check with the valid stream in it, then it still flows.
      await stack.sidecar.streams.recheck();
      await stillFlowing(v, 'survived-recheck');
    } finally {
      await raw.quit();
      await stack.close();
    }
  });

  it('expiry: the stream ends when the injected clock reaches expiresAt, not before (no sleeping)', async () => {
    const clock = new ManualClock();
    const stack = await startStack({ upstreamUrl: upstream.url, clock, config: { proxy: { streamRecheckMs: 3_600_000 } } });
    try {
      const { token } = await stack.issueOAuthToken(60);
      const s = await openStream(stack, upstream, token);
      clock.advance(59_999);
      await stillFlowing(s, 'not-yet');
      clock.advance(1);
      expect(await s.ended).toBe('clean');
      await s.upstream.closed;
      expect(endedLines(stack, 'expired')).toHaveLength(1);
      expect(await endedCount(stack, 'expired')).toBe(1);
    } finally {
      await stack.close();
    }
  });

  it('a revocation sent while the notice connection was down is not lost: the reconnect re-checks every open stream', async () => {
    const redis = await startFaultProxy(addressOf(redisUrl()));
    const stack = await startStack({
      upstreamUrl: upstream.url,
      redisUrl: redis.url('redis'),
      config: { proxy: { streamRecheckMs: 3_600_000 } },
    });
    // Revoked through another sidecar's store, straight on Redis: its notice goes out while this
    // sidecar's connections are down, and nobody of this sidecar hears it.
    const elsewhere: RedisTokenStore = await openRedisStore(stack.prefix);
    try {
      const revoked = await userToken(stack);
      const valid = await userToken(stack);
      const r = await openStream(stack, upstream, revoked);
      const v = await openStream(stack, upstream, valid);
      await redis.setMode('down');
      expect(await elsewhere.revokeUserToken(hashToken(revoked))).toBe(true);
      await redis.setMode('pass');
      expect(await r.ended).toBe('clean');
      expect(endedLines(stack, 'revoked')).toHaveLength(1);
      await stillFlowing(v, 'survived-reconnect');
    } finally {
      await elsewhere.close();
      await stack.close();
      await redis.close();
    }
  });
});
