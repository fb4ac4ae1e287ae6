// The /authz handler called directly, with no listener: a ProxyContext on the memory store and a manual
// clock, a request built from raw headers, and a response that records what is written. Allowed checks
// answer 200 with the identity headers; denied and refused ones throw the HttpError the listener maps.

import { randomBytes } from 'node:crypto';
import { IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { beforeEach, describe, expect, it } from 'vitest';
import { buildConfig } from '../../src/config/load.ts';
import { HttpError } from '../../src/http/errors.ts';
import { ManualClock } from '../../src/model/clock.ts';
import { generateToken } from '../../src/model/credentials.ts';
import { Metrics } from '../../src/observability/metrics.ts';
import type { ProxyContext } from '../../src/proxy/context.ts';
import { handleAuthz, isIdentityHeaderName } from '../../src/proxy/forward-auth.ts';
import { ProxyRequest } from '../../src/proxy/request.ts';
import { MemoryTokenStore } from '../../src/store/memory.ts';
import { forgedIdentityHeaderNames } from '../support/identity-spellings.ts';
import { directProxyContext, requestsCounted, seedClientToken } from '../support/proxy-context.ts';

const PUBLIC_URL = 'https://mcp.example.test';
const HOST = 'mcp.example.test';

interface Written {
  status: number | undefined;
  headers: Record<string, string> | undefined;
  ended: boolean;
}

let ctx: ProxyContext;
let store: MemoryTokenStore;
let clock: ManualClock;
let metrics: Metrics;
let token: string;
const CLIENT_ID = 'client-1';

function context(proxy: Record<string, unknown> = {}): ProxyContext {
  const config = buildConfig(
    {
      masterToken: randomBytes(32).toString('hex'),
      store: 'memory',
      proxy: { publicUrl: PUBLIC_URL, forwardAuth: true, ...proxy },
      rateLimits: { failedAuthPerMinute: 0 },
    },
    {},
  );
  return directProxyContext({ config, store, clock, metrics, publicUrl: PUBLIC_URL });
}

/** A check request as nginx's auth_request sends it: GET /authz, the original in X-Original-*, the client's headers. */
function checkRequest(headers: Array<[string, string]>, url = '/authz'): ProxyRequest {
  const socket = { remoteAddress: '127.0.0.1' } as unknown as Socket;
  const req = new ProxyRequest(socket);
  req.method = 'GET';
  req.url = url;
  const all: Array<[string, string]> = [['Host', HOST], ...headers];
  req.rawHeaders = all.flat();
  // As Node's parser sets them: by lowercase name (no name is sent twice here).
  req.headers = Object.fromEntries(all.map(([name, value]) => [name.toLowerCase(), value]));
  return req;
}

function response(): { res: ServerResponse; written: Written } {
  const written: Written = { status: undefined, headers: undefined, ended: false };
  const res = {
    writeHead(status: number, headers: Record<string, string>) {
      written.status = status;
      written.headers = { ...headers };
      return res;
    },
    end() {
      written.ended = true;
      return res;
    },
  };
  return { res: res as unknown as ServerResponse, written };
}

async function check(headers: Array<[string, string]>, url?: string) {
  const req = checkRequest(headers, url);
  const { res, written } = response();
  const path = (url ?? '/authz').split('?')[0]!;
  const error = await handleAuthz(ctx, req, res, path).then(
    () => undefined,
    (err: unknown) => err,
  );
  return { req, written, error };
}

const counted = (outcome: string, reason = ''): Promise<number> => requestsCounted(metrics, outcome, reason);

const original = (uri = '/mcp', method = 'POST'): Array<[string, string]> => [
  ['X-Original-URI', uri],
  ['X-Original-Method', method],
];

beforeEach(async () => {
  clock = new ManualClock();
  store = new MemoryTokenStore({ clock });
  metrics = new Metrics({ defaultMetrics: false });
  ctx = context();
  token = await seedClientToken(store, clock, CLIENT_ID);
});

describe('handleAuthz, called directly', () => {
  it('allows a valid token: 200, no body, the identity headers, counted as allowed, no access log line by default', async () => {
    const { req, written, error } = await check([...original('/mcp?x=1'), ['Authorization', `Bearer ${token}`]]);
    expect(error).toBeUndefined();
    expect(written).toEqual({
      status: 200,
      headers: {
        'cache-control': 'no-store',
        'content-length': '0',
        'x-mcp-auth-kind': 'oauth',
        'x-mcp-auth-subject': CLIENT_ID,
        'x-mcp-auth-client-id': CLIENT_ID,
        'x-mcp-auth-scope': 'mcp:read',
      },
      ended: true,
    });
    expect(req.principal?.clientId).toBe(CLIENT_ID);
    expect(req.unlogged).toBe(true);
    expect(await counted('allowed')).toBe(1);
  });

  it('with proxy.forwardAuthLogAllowed an allowed check keeps its access log line', async () => {
    ctx = context({ forwardAuthLogAllowed: true });
    const { req, written } = await check([...original(), ['Authorization', `Bearer ${token}`]]);
    expect(written.status).toBe(200);
    expect(req.unlogged).toBe(false);
  });

  it('Envoy: the original path appended to /authz, the method the check request has', async () => {
    const req = checkRequest([['Authorization', `Bearer ${token}`]], '/authz/mcp?x=1');
    req.method = 'DELETE';
    const { res, written } = response();
    await handleAuthz(ctx, req, res, '/authz/mcp');
    expect(written.status).toBe(200);
  });

  it('denies a missing, unknown, expired or revoked token with the 401 /mcp gives, counted by reason; nothing written', async () => {
    const missing = await check(original());
    expect(missing.error).toBeInstanceOf(HttpError);
    expect((missing.error as HttpError).status).toBe(401);
    expect((missing.error as HttpError).headers?.['www-authenticate']).toContain('resource_metadata=');

    const unknown = await check([...original(), ['Authorization', `Bearer ${generateToken()}`]]);
    expect((unknown.error as HttpError).code).toBe('invalid_token');
    expect(unknown.req.denial).toBe('unknown');
    expect(unknown.req.unlogged).toBe(false);

    clock.advance(600_000);
    const expired = await check([...original(), ['Authorization', `Bearer ${token}`]]);
    expect((expired.error as HttpError).code).toBe('invalid_token');
    expect(['expired', 'unknown']).toContain(expired.req.denial);

    for (const denied of [missing, unknown, expired]) {
      expect(denied.written).toEqual({ status: undefined, headers: undefined, ended: false });
      expect(denied.req.principal).toBeUndefined();
    }
    expect(await counted('denied', 'missing')).toBe(1);
    expect(await counted('denied', 'unknown')).toBeGreaterThanOrEqual(1);
    expect(await counted('allowed')).toBe(0);
  });

  it('refuses a client-sent identity header in any spelling before the token is looked up', async () => {
    for (const name of forgedIdentityHeaderNames()) {
      const { req, written, error } = await check([...original(), ['Authorization', `Bearer ${token}`], [name, 'admin']]);
      expect(error, name).toBeInstanceOf(HttpError);
      expect((error as HttpError).code, name).toBe('invalid_request');
      expect((error as HttpError).description, name).toContain('X-MCP-Auth-*');
      expect(req.principal, name).toBeUndefined();
      expect(written.status, name).toBeUndefined();
    }
    expect(await counted('allowed')).toBe(0);
  });

  it('passes names that only look alike: no refusal for X-MCP-Authz or X-MCP-Auth without the dash', async () => {
    for (const name of ['X-MCP-Authz', 'X-MCP-Auth', 'X-MCP_Authority', 'X.MCP.Authority', 'Mcp-Auth-Kind', 'X-Original-Auth-Kind']) {
      expect(isIdentityHeaderName(name), name).toBe(false);
      const { written } = await check([...original(), ['Authorization', `Bearer ${token}`], [name, 'x']]);
      expect(written.status, name).toBe(200);
    }
  });

  it('refuses an original request stated twice differently, or not stated; another original path is 404', async () => {
    const twice = await check([...original(), ['X-Forwarded-Uri', '/elsewhere'], ['Authorization', `Bearer ${token}`]]);
    expect((twice.error as HttpError).code).toBe('invalid_request');
    expect((twice.error as HttpError).description).toContain('stated twice');
    const agreeing = await check([...original(), ['X-Forwarded-Uri', ' /mcp '], ['Authorization', `Bearer ${token}`]]);
    expect(agreeing.written.status).toBe(200);
    const unstated = await check([['Authorization', `Bearer ${token}`]]);
    expect((unstated.error as HttpError).description).toContain('did not say which request');
    const noMethod = await check([
      ['X-Original-URI', '/mcp'],
      ['Authorization', `Bearer ${token}`],
    ]);
    expect((noMethod.error as HttpError).description).toContain('did not say which method');
    const elsewhere = await check([...original('/health'), ['Authorization', `Bearer ${token}`]]);
    expect((elsewhere.error as HttpError).code).toBe('not_found');
    expect(elsewhere.req.principal).toBeUndefined();
  });
});
