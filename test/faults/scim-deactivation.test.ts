// A deactivation by the directory, across two sidecar processes on one Redis: the SCIM PATCH reaches
// replica A; a stream the person holds open through replica B ends, and every token of that person
// (issued by either replica) is refused by both, within one second of the PATCH being answered. Real
// processes (src/entry/main.ts), real Redis, an SSE upstream on a real socket, the IdP a JWKS on
// loopback whose JWTs the token exchange takes.

import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSseUpstream, type SseUpstream } from '../support/fake-upstreams.ts';
import { nodeTs } from '../support/node-ts.ts';
import { startSidecarProcess, type SidecarProcess } from '../support/process.ts';
import { directoryClient, PATCH_OP, USER_SCHEMA } from '../support/scim.ts';
import { startTestIdp, type TestIdp } from '../support/test-idp.ts';

const AUDIENCE = 'mcp-scim-replicas';
const SCIM_TOKEN = randomBytes(32).toString('hex');
let idp: TestIdp;
let upstream: SseUpstream;
let a: SidecarProcess;
let b: SidecarProcess;

beforeAll(async () => {
  idp = await startTestIdp({ alg: 'RS256' });
  upstream = await startSseUpstream();
  const env = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    HOST: '127.0.0.1',
    PORT: '0',
    ADMIN_PORT: '0',
    LOG_LEVEL: 'warn',
    LOG_FORMAT: 'json',
    UPSTREAM_URL: upstream.url,
    IDP_ISSUER: idp.issuer,
    IDP_JWKS_URL: idp.jwksUrl,
    IDP_AUDIENCE: AUDIENCE,
    SCIM_TOKEN,
  };
  // A re-check interval far beyond the test: only the revocation notices can end the stream in time.
  const argv = [...nodeTs('src/entry/main.ts'), '--proxy.streamRecheckMs', '3600000'];
  a = await startSidecarProcess('scim', argv, env);
  b = await startSidecarProcess('scim', argv, env, [], a);
}, 60_000);
afterAll(async () => {
  await a?.cleanup();
  await b?.cleanup();
  await upstream?.close();
  await idp?.close();
});

/** A user-grade token of `sub` from `sidecar`'s token exchange. */
async function exchange(sidecar: SidecarProcess, sub: string): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const jwt = await idp.sign({ iss: idp.issuer, aud: AUDIENCE, sub, iat: now, exp: now + 300 }, { typ: 'JWT' });
  const res = await fetch(`${sidecar.proxyUrl}/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
      subject_token: jwt,
      subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
    }),
  });
  const body = (await res.json()) as { access_token?: string; error?: string };
  if (res.status !== 200) throw new Error(`exchange: ${res.status} ${body.error}`);
  return body.access_token!;
}

/**
 * The status of a request with `token` through `sidecar`. The SSE upstream answers every request it
 * receives with a stream: one that got through is taken off its queue and ended here.
 */
async function mcpStatus(sidecar: SidecarProcess, token: string, subject: string): Promise<number> {
  const res = await fetch(`${sidecar.proxyUrl}/mcp`, { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } });
  if (res.status === 200) (await upstreamStreamOf(subject)).res.end();
  await res.body?.cancel();
  return res.status;
}

/** The next upstream stream of `subject` (the identity header the sidecar adds); others (start-up probes) are ended. */
async function upstreamStreamOf(subject: string): Promise<Awaited<ReturnType<SseUpstream['nextStream']>>> {
  for (;;) {
    const next = await upstream.nextStream();
    if (next.req.headers['x-mcp-auth-subject'] === subject) return next;
    next.res.end();
  }
}

/** A GET stream through `sidecar`: `ended` resolves (with the time) when the client's response ends. */
async function openStream(
  sidecar: SidecarProcess,
  token: string,
  subject: string,
): Promise<{ ended: Promise<number>; send(text: string): Promise<void> }> {
  const res = await fetch(`${sidecar.proxyUrl}/mcp`, { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } });
  expect(res.status).toBe(200);
  const upstreamSide = await upstreamStreamOf(subject);
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = '';
  let wake: (() => void) | undefined;
  let done = false;
  const ended = (async () => {
    try {
      for (;;) {
        const chunk = await reader.read();
        if (chunk.done) break;
        text += chunk.value;
        wake?.();
      }
    } catch {
      // a cut connection ends it too
    }
    done = true;
    wake?.();
    return Date.now();
  })();
  return {
    ended,
    /** Writes an event upstream and waits until the client has read it. */
    async send(marker) {
      upstreamSide.res.write(`data: ${marker}\n\n`);
      while (!text.includes(marker)) {
        if (done) throw new Error(`the stream ended before "${marker}" arrived`);
        await new Promise<void>((r) => (wake = r));
      }
    },
  };
}

describe('a deactivation by the directory, two sidecar processes, one Redis', () => {
  it('ends the stream held through the other replica and every token of the person within one second', async () => {
    const zoe = [await exchange(a, 'sub-zoe'), await exchange(b, 'sub-zoe')];
    const other = await exchange(b, 'sub-yann');
    for (const token of zoe) expect(await mcpStatus(b, token, 'sub-zoe')).toBe(200);
    expect(await mcpStatus(b, other, 'sub-yann')).toBe(200);
    const held = await openStream(b, zoe[0]!, 'sub-zoe');
    const kept = await openStream(b, other, 'sub-yann');
    await held.send('open');

    const scim = directoryClient(a.adminUrl, SCIM_TOKEN);
    const created = await scim('POST', '/Users', { schemas: [USER_SCHEMA], userName: 'sub-zoe', active: true });
    expect(created.status).toBe(201);
    const patched = await scim('PATCH', `/Users/${created.body.id}`, {
      schemas: [PATCH_OP],
      Operations: [{ op: 'replace', value: { active: false } }],
    });
    const answeredAt = Date.now();
    expect(patched.status).toBe(200);

    // The stream ended (a notice from A to B), well within a second of the answer.
    const endedAt = await held.ended;
    expect(endedAt - answeredAt).toBeLessThan(1000);
    // Every token of the person, at both replicas; by the time the answer came back, not a second later.
    for (const sidecar of [a, b]) for (const token of zoe) expect(await mcpStatus(sidecar, token, 'sub-zoe')).toBe(401);
    expect(Date.now() - answeredAt).toBeLessThan(1000);
    // Another person is untouched, and the person is refused at both replicas' token exchange.
    expect(await mcpStatus(a, other, 'sub-yann')).toBe(200);
    await expect(exchange(b, 'sub-zoe')).rejects.toThrow('exchange: 400 invalid_grant');
    await kept.send('still-flowing');
  });
});
