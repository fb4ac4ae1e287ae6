// Mode `token-exchange` end to end against a real OpenID provider: oidc-provider with an RFC 8693 grant
// shaped as Keycloak's standard token exchange (test/support/exchange-idp.ts says where each rule comes
// from), the sidecar on real Redis signing users in through it, the reference upstream reporting the
// headers each tool call arrived with, and the official MCP SDK client. Each user's own exchanged token
// (a JWT of the IdP for the audience, naming that user) reaches the upstream; it is exchanged once per
// lifetime and again shortly before it expires; an exchange the IdP refuses, or an IdP that cannot be
// reached, forwards nothing and answers as docs/upstream-credentials.md says.

import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/model/clock.ts';
import { URL_ELICITATION_REQUIRED } from '../../src/policy/enforce.ts';
import { REFRESH_AHEAD_MS } from '../../src/upstream-credentials/idp-mode.ts';
import { startExchangeIdp, type ExchangeIdp } from '../support/exchange-idp.ts';
import {
  approveAndSignIn,
  authorizeUrl,
  CLIENT_REDIRECT,
  clientReceived,
  pkce,
  registerPublicClient,
  standardParams,
  tokenRequest,
} from '../support/sign-in.ts';
import { countedOnce } from '../support/requests-counted.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { UserAgent } from '../support/user-agent.ts';

const AUDIENCE = 'internal-api';
const LIFETIME_S = 300;
const USERS = { alice: { sub: 'alice-0001', email: 'alice@example.com' }, bob: { sub: 'bob-0002', email: 'bob@example.com' } };

let idp: ExchangeIdp;
let stack: Stack;
let base = '';
const clock = new ManualClock();
const tokens: Record<string, string> = {};
const clients: Client[] = [];
/** Reads of a user's kept exchanged token by the sidecar, when armed: resolves once `count` have completed. */
let loadsOfExchanged: { subject: string; count: number; done: () => void } | undefined;

async function signIn(name: keyof typeof USERS): Promise<string> {
  idp.signInAs(name);
  const clientId = await registerPublicClient(base);
  const p = pkce();
  const hop = await approveAndSignIn(new UserAgent(), base, authorizeUrl(base, standardParams(base, clientId, p)));
  const res = await tokenRequest(base, {
    grant_type: 'authorization_code',
    code: clientReceived(hop).get('code')!,
    redirect_uri: CLIENT_REDIRECT,
    client_id: clientId,
    code_verifier: p.verifier,
  });
  if (res.status !== 200) throw new Error(`token: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.access_token as string;
}

async function connect(token: string): Promise<Client> {
  // Declares URL-mode elicitation (MCP 2025-11-25): a user without a usable credential gets -32042.
  const client = new Client({ name: 'token-exchange-test', version: '1' }, { capabilities: { elicitation: { url: {} } } });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
  );
  clients.push(client);
  return client;
}

/** The Authorization the upstream received with this tool call. */
async function upstreamAuthorization(client: Client): Promise<string> {
  const result = (await client.callTool({ name: 'headers', arguments: {} })) as { content: Array<{ type: string; text: string }> };
  return (JSON.parse(result.content[0]!.text) as Record<string, string>).authorization ?? '';
}

beforeAll(async () => {
  const clientId = 'mcp-bearer-proxy';
  const clientSecret = randomBytes(32).toString('hex');
  idp = await startExchangeIdp({
    clientId,
    clientSecret,
    redirectUris: () => [`${base}/oauth/callback`, `${base}/connect/callback`],
    users: USERS,
    audiences: { [AUDIENCE]: { lifetimeSeconds: LIFETIME_S } },
  });
  stack = await startStack({
    clock,
    wrapStore: (store) =>
      new Proxy(store, {
        get(target, name) {
          if (name === 'getUpstreamCredential')
            return async (subject: string, issuer: string, provider: string) => {
              const read = await target.getUpstreamCredential(subject, issuer, provider);
              const armed = loadsOfExchanged;
              if (armed && subject === armed.subject && provider === `exchange:${AUDIENCE}` && --armed.count === 0) armed.done();
              return read;
            };
          const value = Reflect.get(target, name, target) as unknown;
          return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
        },
      }),
    config: {
      idp: { issuer: idp.issuer, clientId, clientSecret, requestTimeoutMs: 10_000 },
      upstream: { credentials: { mode: 'token-exchange', key: randomBytes(32).toString('hex'), audience: AUDIENCE } },
    },
  });
  base = stack.sidecar.publicUrl();
  tokens.alice = await signIn('alice');
  tokens.bob = await signIn('bob');
});
afterAll(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await stack?.close();
  await idp?.close();
});

describe('mode token-exchange against a real OpenID provider', () => {
  let alice: Client;
  let bob: Client;
  const first: Record<string, string> = {};

  it("two users at once: each one's tool call reaches the upstream with a token the IdP minted for the audience and that user", async () => {
    [alice, bob] = await Promise.all([connect(tokens.alice!), connect(tokens.bob!)]);
    const [a, b] = await Promise.all([upstreamAuthorization(alice), upstreamAuthorization(bob)]);
    const jwks = createRemoteJWKSet(new URL(idp.jwksUri));
    for (const [name, header] of [
      ['alice', a],
      ['bob', b],
    ] as const) {
      expect(header).toMatch(/^Bearer \S+$/);
      const exchanged = header.slice('Bearer '.length);
      expect(exchanged).not.toBe(tokens[name]);
      const { payload } = await jwtVerify(exchanged, jwks, { issuer: idp.issuer, audience: AUDIENCE });
      expect(payload.sub).toBe(USERS[name].sub);
      first[name] = exchanged;
      // Never in a log line.
      expect(stack.logs.join('\n')).not.toContain(exchanged);
    }
    expect(idp.exchanges(USERS.alice.sub)).toBe(1);
    expect(idp.exchanges(USERS.bob.sub)).toBe(1);
  });

  it('cached: no second exchange within the lifetime; a new one once it is within a minute of expiry', async () => {
    for (let i = 0; i < 3; i++) {
      expect(await upstreamAuthorization(alice)).toBe(`Bearer ${first.alice}`);
      expect(await upstreamAuthorization(bob)).toBe(`Bearer ${first.bob}`);
    }
    expect(idp.exchangeRequests()).toBe(2);
    clock.advance(LIFETIME_S * 1000 - REFRESH_AHEAD_MS - 1000);
    expect(await upstreamAuthorization(alice)).toBe(`Bearer ${first.alice}`);
    expect(idp.exchangeRequests()).toBe(2);
    clock.advance(2000);
    const renewed = await upstreamAuthorization(alice);
    expect(renewed).toMatch(/^Bearer \S+$/);
    expect(renewed).not.toBe(`Bearer ${first.alice}`);
    expect(idp.exchanges(USERS.alice.sub)).toBe(2);
    // Kept again: the next call is no exchange.
    expect(await upstreamAuthorization(alice)).toBe(renewed);
    expect(idp.exchanges(USERS.alice.sub)).toBe(2);
  });

  it("one user's calls that all find the exchange due make one exchange, not one each", async () => {
    clock.advance(LIFETIME_S * 1000);
    const before = idp.exchanges(USERS.alice.sub);
    const burst = 5;
    // The IdP answers no exchange until every call has read the (due) kept token: without one exchange
    // at a time per user, each of them would ask the IdP.
    const release = idp.holdExchanges();
    const allRead = new Promise<void>((done) => (loadsOfExchanged = { subject: USERS.alice.sub, count: burst, done }));
    const calls = Promise.all(Array.from({ length: burst }, () => upstreamAuthorization(alice)));
    await allRead;
    loadsOfExchanged = undefined;
    release();
    const seen = await calls;
    expect(new Set(seen).size).toBe(1);
    expect(seen[0]).toMatch(/^Bearer \S+$/);
    expect(idp.exchanges(USERS.alice.sub)).toBe(before + 1);
  });

  it('the IdP cannot be reached when an exchange is due: 503 with Retry-After, nothing forwarded', async () => {
    clock.advance(LIFETIME_S * 1000);
    const calls = stack.upstream!.toolCalls.length;
    idp.setDown(true);
    try {
      const err = await upstreamAuthorization(bob).then(
        () => undefined,
        (e: unknown) => e as Error & { code?: number },
      );
      // The SDK's StreamableHTTPError: the HTTP status as its code, the sidecar's answer in the message.
      expect(err?.code).toBe(503);
      expect(err?.message).toContain('temporarily_unavailable');
      // The same request without the SDK, to see the status and header it got: one request outcome,
      // refused under the 503's code.
      const res = await countedOnce(stack.adminUrl, { outcome: 'refused', reason: 'temporarily_unavailable' }, () =>
        fetch(`${base}/mcp`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${tokens.bob}`,
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
          },
          body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'headers', arguments: {} } }),
        }),
      );
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('5');
      await res.text();
    } finally {
      idp.setDown(false);
    }
    expect(stack.upstream!.toolCalls.length).toBe(calls);
    // Back up: the exchange happens and the call goes through.
    expect(await upstreamAuthorization(bob)).toMatch(/^Bearer \S+$/);
    expect(stack.upstream!.toolCalls.length).toBe(calls + 1);
  });

  it('an exchange the IdP refuses (the subject token revoked: invalid_grant) asks the user to sign in again (-32042), nothing forwarded', async () => {
    clock.advance(LIFETIME_S * 1000);
    expect(await idp.revokeTokensOf(USERS.alice.sub)).toBeGreaterThan(0);
    const before = idp.exchangeRequests();
    const answered = idp.exchanges(USERS.alice.sub);
    const calls = stack.upstream!.toolCalls.length;
    const err = await upstreamAuthorization(alice).then(
      () => undefined,
      (e: unknown) => e as Error & { code?: number },
    );
    expect(err?.code).toBe(URL_ELICITATION_REQUIRED);
    expect(err?.message).toContain(`${base}/connect/`);
    expect(idp.exchangeRequests()).toBe(before + 1);
    expect(idp.exchanges(USERS.alice.sub)).toBe(answered);
    expect(stack.upstream!.toolCalls.length).toBe(calls);
    // Bob is not affected.
    expect(await upstreamAuthorization(bob)).toMatch(/^Bearer \S+$/);
  });
});
