// GET /metrics on the admin listener (Prometheus text, unauthenticated), scraped
// after real traffic through a whole stack with a real Redis: every documented metric is there and
// the counters moved the way the traffic says they must.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request as httpRequest } from 'node:http';
import { createSidecar } from '../../src/app.ts';
import { InstrumentedStore, Metrics } from '../../src/observability/metrics.ts';
import { MemoryTokenStore } from '../../src/store/memory.ts';
import { ManualClock } from '../../src/model/clock.ts';
import { openRedisStore } from '../support/redis.ts';
import { rawSession } from '../support/sse.ts';
import { PING } from '../support/http.ts';
import { countedOnce, type CountedAs } from '../support/requests-counted.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { runTraffic, startTrafficStack, type TrafficResult, type TrafficStack } from '../support/traffic.ts';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

function parse(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, k, v] of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[k!] = v!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** The value of one series (0 when absent: a labelled counter that never moved has no series). */
function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return found.reduce((sum, s) => sum + s.value, 0);
}

async function scrape(adminUrl: string): Promise<{ text: string; samples: Sample[]; contentType: string | null }> {
  const res = await fetch(`${adminUrl}/metrics`);
  expect(res.status).toBe(200);
  const text = await res.text();
  return { text, samples: parse(text), contentType: res.headers.get('content-type') };
}

const DOCUMENTED = [
  'mcp_auth_requests_total',
  'mcp_auth_validation_seconds',
  'mcp_auth_store_errors_total',
  'mcp_auth_store_operation_seconds',
  'mcp_auth_store_operation_errors_total',
  'mcp_auth_store_up',
  'mcp_auth_upstream_responses_total',
  'mcp_auth_open_sse_streams',
  'mcp_auth_tokens_issued_total',
  'mcp_auth_tokens_revoked_total',
  'mcp_auth_admin_operations_total',
  'mcp_auth_revocation_waits_total',
  'mcp_auth_lookup_cache_lookups_total',
  'mcp_auth_lookup_cache_barriers_total',
  'mcp_auth_lookup_cache_invalidations_total',
  'mcp_auth_lookup_cache_drops_total',
  'mcp_auth_lookup_cache_live',
  'mcp_auth_lookup_cache_entries',
];

describe('GET /metrics after real traffic', () => {
  let t: TrafficStack;
  let traffic: TrafficResult;
  let before: Sample[];
  let after: { text: string; samples: Sample[]; contentType: string | null };

  beforeAll(async () => {
    t = await startTrafficStack();
    before = (await scrape(t.stack.adminUrl)).samples;
    traffic = await runTraffic(t);
    after = await scrape(t.stack.adminUrl);
  });
  afterAll(async () => {
    await t?.close();
  });

  const moved = (name: string, labels: Record<string, string> = {}) => value(after.samples, name, labels) - value(before, name, labels);

  it('is Prometheus text, with HELP and TYPE for every documented metric', () => {
    expect(after.contentType).toContain('text/plain');
    for (const name of DOCUMENTED) {
      expect(after.text, name).toContain(`# HELP ${name} `);
      expect(after.text, name).toContain(`# TYPE ${name} `);
    }
  });

  it('requests by outcome and denial reason', () => {
    expect(moved('mcp_auth_requests_total', { outcome: 'forwarded' })).toBe(4); // oauth, admin-issued, user-grade, master
    expect(moved('mcp_auth_requests_total', { outcome: 'health', reason: '' })).toBeGreaterThanOrEqual(1);
    expect(moved('mcp_auth_requests_total', { outcome: 'oauth', reason: '' })).toBeGreaterThanOrEqual(5); // /token, /revoke, /introspect, /register
    for (const reason of ['missing', 'malformed', 'unknown', 'revoked']) {
      expect(moved('mcp_auth_requests_total', { outcome: 'denied', reason }), reason).toBeGreaterThanOrEqual(1);
    }
  });

  it('validation latency histogram and store operation latency by operation', () => {
    expect(moved('mcp_auth_validation_seconds_count')).toBeGreaterThanOrEqual(5);
    expect(moved('mcp_auth_validation_seconds_bucket', { le: '+Inf' })).toBe(moved('mcp_auth_validation_seconds_count'));
    expect(moved('mcp_auth_store_operation_seconds_count', { operation: 'lookupToken' })).toBeGreaterThanOrEqual(5);
    expect(moved('mcp_auth_store_operation_seconds_count', { operation: 'issueTokens' })).toBeGreaterThanOrEqual(2);
    expect(moved('mcp_auth_store_operation_seconds_count', { operation: 'appendAudit' })).toBeGreaterThanOrEqual(10);
    expect(value(after.samples, 'mcp_auth_store_up')).toBe(1);
    // A standalone Redis has no replica to wait for (test/slow/sentinel.test.ts counts real WAITs).
    expect(value(after.samples, 'mcp_auth_revocation_waits_total', { result: 'acknowledged' })).toBe(0);
    expect(value(after.samples, 'mcp_auth_revocation_waits_total', { result: 'unacknowledged' })).toBe(0);
    expect(value(after.samples, 'mcp_auth_store_operation_errors_total')).toBe(0);
  });

  it('upstream status codes', () => {
    expect(moved('mcp_auth_upstream_responses_total', { status: '2xx' })).toBe(4);
  });

  it('tokens issued and revoked by kind', () => {
    expect(moved('mcp_auth_tokens_issued_total', { kind: 'oauth_access' })).toBe(4); // 2 client_credentials, 1 refresh, 1 admin (grace-window answers issue nothing new)
    expect(moved('mcp_auth_tokens_issued_total', { kind: 'oauth_refresh' })).toBe(3);
    expect(moved('mcp_auth_refresh_grace_reuses_total')).toBe(2);
    expect(moved('mcp_auth_tokens_issued_total', { kind: 'user' })).toBe(2);
    expect(moved('mcp_auth_tokens_revoked_total', { kind: 'user' })).toBe(2); // admin revokeUserToken + /revoke
    expect(moved('mcp_auth_tokens_revoked_total', { kind: 'oauth_access' })).toBeGreaterThanOrEqual(1);
    expect(moved('mcp_auth_tokens_revoked_total', { kind: 'oauth_refresh_family' })).toBe(1); // the reuse
  });

  it('admin operations by operation and status', () => {
    expect(moved('mcp_auth_admin_operations_total', { operation: 'createClient', status: '201' })).toBe(1);
    expect(moved('mcp_auth_admin_operations_total', { operation: 'listClients', status: '401' })).toBe(1);
    expect(moved('mcp_auth_admin_operations_total', { operation: 'deleteClient', status: '200' })).toBe(1);
  });

  it('holds no secret, no token hash and no client id', () => {
    for (const secret of traffic.secrets) expect(after.text.includes(secret)).toBe(false);
    for (const hash of traffic.hashes) expect(after.text.includes(hash.slice(0, 8))).toBe(false);
    expect(after.text.includes(traffic.clientId)).toBe(false);
  });

  it('open SSE streams: the gauge counts a standalone GET stream while it is open', async () => {
    const { stack } = t;
    const session = await rawSession(stack.mcpUrl, { authorization: `Bearer ${stack.masterToken}` });
    const controller = new AbortController();
    const stream = await fetch(stack.mcpUrl, { headers: session.headers({ accept: 'text/event-stream' }), signal: controller.signal });
    try {
      expect(stream.status).toBe(200);
      expect(stream.headers.get('content-type')).toContain('text/event-stream');
      expect(value((await scrape(stack.adminUrl)).samples, 'mcp_auth_open_sse_streams')).toBeGreaterThanOrEqual(1);
    } finally {
      controller.abort();
      await stream.body?.cancel().catch(() => undefined);
    }
  });
});

describe('metrics of one sidecar process', () => {
  it('default process metrics are served when on (as in production)', async () => {
    const t = await startTrafficStack();
    const store = await openRedisStore(t.stack.prefix);
    const sidecar = await createSidecar({ config: t.stack.sidecar.config, store, logger: t.stack.sidecar.logger, defaultMetrics: true });
    try {
      const { adminUrl } = await sidecar.listen();
      const { samples, text } = await scrape(adminUrl);
      for (const name of [
        'process_cpu_user_seconds_total',
        'process_resident_memory_bytes',
        'nodejs_heap_size_used_bytes',
        'nodejs_eventloop_lag_seconds',
      ]) {
        expect(text, name).toContain(`# TYPE ${name} `);
      }
      expect(value(samples, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    } finally {
      await sidecar.shutdown(1000);
      await t.close();
    }
  });

  it('a failing store operation is counted by operation and timed', async () => {
    const metrics = new Metrics({ defaultMetrics: false });
    const memory = new MemoryTokenStore({ clock: new ManualClock() });
    const store = new InstrumentedStore(memory, metrics);
    await store.ping();
    await memory.close();
    await expect(store.lookupToken('0'.repeat(64))).rejects.toThrow();
    const samples = parse(await metrics.registry.metrics());
    expect(value(samples, 'mcp_auth_store_operation_errors_total', { operation: 'lookupToken' })).toBe(1);
    expect(value(samples, 'mcp_auth_store_operation_seconds_count', { operation: 'lookupToken' })).toBe(1);
    expect(value(samples, 'mcp_auth_store_operation_seconds_count', { operation: 'ping' })).toBe(1);
  });
});

describe('mcp_auth_requests_total counts every refusal of /mcp, /health and /authz', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ config: { proxy: { maxBodyBytes: 1024, forwardAuth: true } } });
  });
  afterAll(async () => {
    await stack?.close();
  });

  /** One request with exactly these headers (node:http sends a Host and a Transfer-Encoding as given). */
  function send(path: string, method: string, headers: Record<string, string>, body?: string): Promise<number> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(`${stack.proxyUrl}${path}`, { method, headers }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      });
      req.on('error', reject);
      req.end(body);
    });
  }

  it.each<[string, number, string, () => Promise<number>]>([
    [
      'a Transfer-Encoding other than chunked',
      400,
      'invalid_request',
      () => send('/mcp', 'POST', { 'transfer-encoding': 'gzip, chunked' }, '0\r\n\r\n'),
    ],
    [
      'an Origin the sidecar does not serve',
      403,
      'forbidden',
      () => send('/mcp', 'POST', { origin: 'https://elsewhere.example', 'content-type': 'application/json' }, PING),
    ],
    [
      'a Host the sidecar does not answer for',
      421,
      'misdirected_request',
      () => send('/mcp', 'POST', { host: 'elsewhere.example', 'content-type': 'application/json' }, PING),
    ],
    ['a method /health does not take', 405, 'method_not_allowed', () => send('/health', 'POST', {})],
    [
      'a body over proxy.maxBodyBytes',
      413,
      'payload_too_large',
      () => send('/mcp', 'POST', { authorization: `Bearer ${stack.masterToken}`, 'content-type': 'application/json' }, 'x'.repeat(2048)),
    ],
    [
      'an /authz request for another path',
      404,
      'not_found',
      () => send('/authz', 'GET', { 'x-original-method': 'GET', 'x-original-uri': '/elsewhere' }),
    ],
    ['no token', 401, 'missing', () => send('/mcp', 'GET', {})],
    ['an unknown token', 401, 'unknown', () => send('/mcp', 'GET', { authorization: `Bearer ${'0'.repeat(64)}` })],
  ])('%s: %i, counted once, under its code', async (_label, status, code, request) => {
    const outcome: CountedAs =
      code === 'not_found'
        ? { outcome: 'not_found' }
        : code === 'missing' || code === 'unknown'
          ? { outcome: 'denied', reason: code }
          : { outcome: 'refused', reason: code };
    // Once: moved by one under its outcome, no other outcome moved with it.
    expect(await countedOnce(stack.adminUrl, outcome, request)).toBe(status);
    // Counted once: never also as a refused token or an outage.
    expect(value((await scrape(stack.adminUrl)).samples, 'mcp_auth_requests_total', { outcome: 'refused', reason: 'not_found' })).toBe(0);
  });

  it.each<[string, number, CountedAs, () => Promise<number>]>([
    [
      'a client that fails to authenticate at /token',
      401,
      { outcome: 'oauth', reason: '' },
      () =>
        send('/token', 'POST', { 'content-type': 'application/x-www-form-urlencoded' }, 'grant_type=client_credentials&client_id=nobody'),
    ],
    ['a method /token does not take', 405, { outcome: 'oauth', reason: '' }, () => send('/token', 'GET', {})],
    [
      'a protocol upgrade on a path no route has',
      400,
      { outcome: 'refused', reason: 'invalid_request' },
      () => send('/elsewhere', 'GET', { connection: 'upgrade', upgrade: 'websocket' }),
    ],
  ])('%s: %i, counted once', async (_label, status, outcome, request) => {
    expect(await countedOnce(stack.adminUrl, outcome, request)).toBe(status);
  });
});
