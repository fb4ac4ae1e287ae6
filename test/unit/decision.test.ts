// decide() called directly, with no listener: a ProxyContext on the memory store and a manual clock,
// requests built from raw headers (a body pushed in), and what comes back is the decision as a value:
// its outcome, the headers to set and remove, what it counts. /mcp (a body the sidecar holds) and /authz
// (the request an ingress holds) are decided by the same function; each case is checked for both
// where both apply.

import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { beforeEach, describe, expect, it } from 'vitest';
import { buildConfig } from '../../src/config/load.ts';
import { HttpError } from '../../src/http/errors.ts';
import { StoreUnavailableError } from '../../src/store/shared.ts';
import { ManualClock } from '../../src/model/clock.ts';
import { generateToken, type Principal } from '../../src/model/credentials.ts';
import { Metrics } from '../../src/observability/metrics.ts';
import { MIRROR_HEADERS_SINCE } from '../../src/policy/mirror-headers.ts';
import { policyGateFor } from '../../src/policy/wiring.ts';
import type { ProxyContext, UpstreamCredentialsOnProxy } from '../../src/proxy/context.ts';
import { admitByToken, decide, type Asked } from '../../src/proxy/decide.ts';
import { setDecidedHeaders, type Decision } from '../../src/proxy/decision.ts';
import { handleAuthz } from '../../src/proxy/forward-auth.ts';
import { MAX_HANDLES_PER_OWNER } from '../../src/proxy/handle-guard.ts';
import { handleDigest, handleOwner } from '../../src/proxy/handles.ts';
import { ProxyRequest } from '../../src/proxy/request.ts';
import { MemoryTokenStore } from '../../src/store/memory.ts';
import type { ConnectLinks } from '../../src/upstream-credentials/connect-links.ts';
import { CredentialRefreshUnavailable } from '../../src/upstream-credentials/idp-mode.ts';
import { MISSING, type CredentialHeader, type UpstreamCredentialDelivery } from '../../src/upstream-credentials/delivery.ts';
import { directProxyContext, HANDLE_IDLE_MS, requestsCounted, seedClientToken } from '../support/proxy-context.ts';

const PUBLIC_URL = 'https://mcp.example.test';
const HOST = 'mcp.example.test';
const CLIENT_ID = 'client-1';
const CREDENTIAL_HEADER = 'x-upstream-token';

let store: MemoryTokenStore;
let clock: ManualClock;
let metrics: Metrics;
let token: string;
/** What the fake delivery answers for every principal (an error: what it rejects with). */
let upstream: CredentialHeader | null | typeof MISSING | Error;
/** What the fake links answer when asked for a ticket. */
let ticket: () => Promise<string>;

const credentials: UpstreamCredentialsOnProxy = {
  delivery: {
    header: CREDENTIAL_HEADER,
    headerFor: () => (upstream instanceof Error ? Promise.reject(upstream) : Promise.resolve(upstream)),
    serviceHeader: () => null,
  } as unknown as UpstreamCredentialDelivery,
  links: {
    ticket: () => ticket(),
    mint: () => Promise.resolve({ link: 'the-link', linkId: 'the-link-id' }),
  } as unknown as ConnectLinks,
  what: 'connect your account',
};

function context(options: { policy?: boolean; credentials?: boolean } = {}): ProxyContext {
  const config = buildConfig(
    {
      masterToken: randomBytes(32).toString('hex'),
      store: 'memory',
      proxy: { publicUrl: PUBLIC_URL, forwardAuth: true },
      rateLimits: { failedAuthPerMinute: 0 },
      ...(options.policy
        ? { policy: { rules: [{ name: 'no-deletes', effect: 'deny', requests: { methods: ['tools/call'], names: ['delete_*'] } }] } }
        : {}),
    },
    {},
  );
  return directProxyContext({ config, store, clock, metrics, publicUrl: PUBLIC_URL }, ({ audit, addresses }) => ({
    policyGate: policyGateFor(config, { store, clock, metrics, audit, publicUrl: () => PUBLIC_URL, addresses }),
    upstreamCredentials: options.credentials ? credentials : undefined,
  }));
}

/** A request on /mcp (or the check request of /authz), with `body` already arrived. */
function request(method: string, headers: Array<[string, string]>, body?: string): ProxyRequest {
  const req = new ProxyRequest({ remoteAddress: '127.0.0.1' } as unknown as Socket);
  req.method = method;
  req.url = '/mcp';
  const all: Array<[string, string]> = [['Host', HOST], ['Authorization', `Bearer ${token}`], ...headers];
  if (body !== undefined) all.push(['Content-Type', 'application/json'], ['Content-Length', String(Buffer.byteLength(body))]);
  req.rawHeaders = all.flat();
  req.headers = Object.fromEntries(all.map(([name, value]) => [name.toLowerCase(), value]));
  if (body !== undefined) req.push(Buffer.from(body));
  req.push(null);
  return req;
}

const open = { destroyed: false } as ServerResponse;
const BY_TOKEN: Asked = { admission: admitByToken, knownMissing: false };
const checkOf = (method: string): Asked => ({ method, path: '/mcp', host: HOST });
const toolCall = (name: string) => JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name, arguments: {} } });
const POST_MCP: Array<[string, string]> = [['Accept', 'application/json, text/event-stream']];

/** The headers a decision leaves on a request that carried `sent`. */
function headersAfter(decision: Decision, sent: Record<string, string>): Record<string, string | string[] | undefined> {
  const headers: Record<string, string | string[] | undefined> = { ...sent };
  setDecidedHeaders(headers, decision);
  return headers;
}

const counted = (outcome: string, reason = ''): Promise<number> => requestsCounted(metrics, outcome, reason);

async function countedAtAll(): Promise<number> {
  return (await metrics.requests.get()).values.reduce((sum, v) => sum + v.value, 0);
}

beforeEach(async () => {
  clock = new ManualClock();
  store = new MemoryTokenStore({ clock });
  metrics = new Metrics({ defaultMetrics: false });
  upstream = { name: CREDENTIAL_HEADER, value: 'the-upstream-token' };
  ticket = () => Promise.resolve('the-ticket');
  token = await seedClientToken(store, clock, CLIENT_ID);
});

describe('decide(): the decision as a value', () => {
  it('allow: /mcp forwards with the credential in place of the one the client sent; /authz allows with it, unlogged', async () => {
    const ctx = context({ credentials: true });
    const forwarded = await decide(ctx, request('GET', [[CREDENTIAL_HEADER, 'sent-by-the-client']]), open, BY_TOKEN);
    expect(forwarded).toMatchObject({ outcome: 'forward', counted: 'forwarded', removeHeader: CREDENTIAL_HEADER });
    expect(forwarded.principal?.clientId).toBe(CLIENT_ID);
    expect(forwarded.plan?.beforeResponse).toBeTypeOf('function');
    expect(forwarded.error).toBeUndefined();
    expect(headersAfter(forwarded, { [CREDENTIAL_HEADER]: 'sent-by-the-client' })).toEqual({ [CREDENTIAL_HEADER]: 'the-upstream-token' });
    expect(await counted('forwarded')).toBe(1);

    const req = request('GET', []);
    const allowed = await decide(ctx, req, open, checkOf('POST'));
    expect(allowed).toMatchObject({ outcome: 'forward', counted: 'allowed', unlogged: true, removeHeader: CREDENTIAL_HEADER });
    expect(headersAfter(allowed, {})).toEqual({ [CREDENTIAL_HEADER]: 'the-upstream-token' });
    expect(req.unlogged).toBe(true);
    expect(await counted('allowed')).toBe(1);
    expect(await countedAtAll()).toBe(2);
  });

  it('deny by policy: a call no scope lifts is answered (200, a tool error), counted once; a check about it is the 403', async () => {
    const ctx = context({ policy: true, credentials: true });
    const answered = await decide(ctx, request('POST', POST_MCP, toolCall('delete_repo')), open, BY_TOKEN);
    expect(answered).toMatchObject({ outcome: 'answer', answerForm: 'policy', counted: 'refused', reason: 'insufficient_authorization' });
    expect(JSON.parse(answered.answer!)).toMatchObject({ id: 7, result: { isError: true } });
    expect(answered.plan).toBeUndefined();
    // Nothing to set: the request goes nowhere.
    expect(headersAfter(answered, {})).toEqual({});
    expect(await counted('refused', 'insufficient_authorization')).toBe(1);

    const mirrored: Array<[string, string]> = [
      ['MCP-Protocol-Version', MIRROR_HEADERS_SINCE],
      ['Mcp-Method', 'tools/call'],
      ['Mcp-Name', 'delete_repo'],
    ];
    const checked = await decide(ctx, request('GET', mirrored), open, checkOf('POST'));
    expect(checked).toMatchObject({ outcome: 'refuse', counted: 'refused', reason: 'insufficient_scope' });
    expect(checked.error?.status).toBe(403);
    expect(headersAfter(checked, {})).toEqual({});
    expect(await counted('refused', 'insufficient_scope')).toBe(1);
    expect(await counted('forwarded')).toBe(0);
    expect(await countedAtAll()).toBe(2);
  });

  it('missing credential: a call that needs it gets the link (counted as missing); /authz refuses with a ticket, counted as handed on', async () => {
    upstream = MISSING;
    const ctx = context({ credentials: true });
    const answered = await decide(ctx, request('POST', POST_MCP, toolCall('search')), open, BY_TOKEN);
    expect(answered).toMatchObject({ outcome: 'answer', answerForm: 'link', counted: 'refused', reason: 'upstream_credential_missing' });
    expect(answered.answer).toContain(`${PUBLIC_URL}/connect/the-link`);
    expect(headersAfter(answered, { [CREDENTIAL_HEADER]: 'sent-by-the-client' })).toEqual({ [CREDENTIAL_HEADER]: 'sent-by-the-client' });
    expect(await counted('refused', 'upstream_credential_missing')).toBe(1);
    expect(await metrics.upstreamCredentialsMissing.get()).toMatchObject({ values: [{ value: 1 }] });

    // The handshake goes on without the user's credential (the service token: none here).
    const handshake = await decide(ctx, request('GET', [[CREDENTIAL_HEADER, 'sent-by-the-client']]), open, BY_TOKEN);
    expect(handshake).toMatchObject({ outcome: 'forward', counted: 'forwarded', credential: null });
    expect(headersAfter(handshake, { [CREDENTIAL_HEADER]: 'sent-by-the-client' })).toEqual({});

    const checked = await decide(ctx, request('GET', []), open, checkOf('POST'));
    expect(checked).toMatchObject({ outcome: 'refuse', counted: 'connect', ticket: 'the-ticket' });
    expect(checked.error?.code).toBe('invalid_token');
    expect(await counted('connect')).toBe(1);
    expect(await countedAtAll()).toBe(3);
  });

  it('session foreign: refused as the unknown session (404) before anything else, counted once as a foreign handle', async () => {
    const ctx = context({ credentials: true });
    const other: Principal = { kind: 'oauth', subject: 'client-2', clientId: 'client-2' };
    await store.bindHandle('session', handleDigest('s-1'), handleOwner(other), clock.now(), HANDLE_IDLE_MS, MAX_HANDLES_PER_OWNER, {
      urlElicitation: false,
    });
    for (const asked of [BY_TOKEN, checkOf('GET')]) {
      const req = request('GET', [['Mcp-Session-Id', 's-1']]);
      const refused = await decide(ctx, req, open, asked);
      expect(refused).toMatchObject({ outcome: 'refuse', counted: 'refused', reason: 'foreign_handle' });
      expect(refused.principal?.clientId).toBe(CLIENT_ID);
      expect(refused.error?.status).toBe(404);
      expect(JSON.parse(refused.error!.body!)).toMatchObject({ error: { message: 'Session not found' } });
      expect(headersAfter(refused, { [CREDENTIAL_HEADER]: 'sent-by-the-client' })).toEqual({ [CREDENTIAL_HEADER]: 'sent-by-the-client' });
      // Counted: the listener does not count its 404 again.
      expect(req.counted).toBe(true);
    }
    expect(await counted('refused', 'foreign_handle')).toBe(2);
    expect(await countedAtAll()).toBe(2);
    expect((await metrics.foreignHandles.get()).values).toEqual([expect.objectContaining({ labels: { handle: 'session' }, value: 2 })]);
  });

  it("the upstream credential's provider unreachable: 503 on /mcp and from /authz, each counted once, refused under its code", async () => {
    upstream = new CredentialRefreshUnavailable('the provider did not answer');
    const ctx = context({ credentials: true });
    for (const asked of [BY_TOKEN, checkOf('POST')]) {
      const refused = await decide(ctx, request('GET', []), open, asked);
      expect(refused).toMatchObject({ outcome: 'refuse', counted: 'refused', reason: 'temporarily_unavailable' });
      expect(refused.error?.status).toBe(503);
    }
    expect(await counted('refused', 'temporarily_unavailable')).toBe(2);
    expect(await countedAtAll()).toBe(2);
  });

  it('a refused token is a decision too: denied with its reason, logged with it', async () => {
    const ctx = context();
    token = generateToken();
    const req = request('GET', []);
    const refused = await decide(ctx, req, open, BY_TOKEN);
    expect(refused).toMatchObject({ outcome: 'refuse', principal: undefined, counted: 'denied', reason: 'unknown', denial: 'unknown' });
    expect(refused.error).toBeInstanceOf(HttpError);
    expect(req.denial).toBe('unknown');
    expect(await counted('denied', 'unknown')).toBe(1);
  });

  it('a store that fails while the ticket is signed is no decision: /authz counts nothing (the listener counts it unavailable)', async () => {
    upstream = MISSING;
    ticket = () => Promise.reject(new StoreUnavailableError('down'));
    const ctx = context({ credentials: true });
    const req = request('GET', []);
    req.headers['x-original-uri'] = '/mcp';
    req.headers['x-original-method'] = 'POST';
    req.rawHeaders.push('X-Original-URI', '/mcp', 'X-Original-Method', 'POST');
    await expect(handleAuthz(ctx, req, open, '/authz')).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await counted('connect')).toBe(0);
    expect(req.counted).toBe(false);
  });
});
