// A failure is answered as what it is, on every listener: a bug (a TypeError thrown under a handler)
// is a 500 with an error log line, never a 503 that would pass it off as a store outage; a store that
// cannot answer (StoreUnavailableError) is a 503 with Retry-After. Real HTTP, a real Redis store whose
// methods throw what the test injects.

import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/store/shared.ts';
import type { TokenStore } from '../../src/store/types.ts';
import { postForm, postJson, postMcp } from '../support/http.ts';
import { startStack, type Stack } from '../support/stack.ts';

const FAULTY = ['lookupToken', 'getClient', 'listClients', 'createClient'] as const;

let stack: Stack;
let fault: Error | undefined;
let clientId: string;

/** Makes `methods` of `store` throw `fault` while it is set (installed before the sidecar first calls them). */
function injectFaults(store: TokenStore, methods: readonly (typeof FAULTY)[number][]): void {
  for (const name of methods) {
    const original = (store[name] as (...args: unknown[]) => Promise<unknown>).bind(store);
    Object.defineProperty(store, name, {
      configurable: true,
      writable: true,
      value: async (...args: unknown[]) => {
        if (fault) throw fault;
        return original(...args);
      },
    });
  }
}

beforeAll(async () => {
  stack = await startStack();
  injectFaults(stack.store, FAULTY);
  ({ clientId } = await stack.issueOAuthToken());
});
afterAll(async () => {
  await stack.close();
});
afterEach(() => {
  fault = undefined;
});

function tokenRequest() {
  return postForm(`${stack.proxyUrl}/token`, { grant_type: 'client_credentials', client_id: clientId, client_secret: 'f'.repeat(64) });
}

function registerRequest() {
  return postJson(`${stack.proxyUrl}/register`, {
    client_name: 'x',
    redirect_uris: ['https://client.example/cb'],
    token_endpoint_auth_method: 'none',
  });
}

function mcpRequest() {
  return postMcp(stack.mcpUrl, randomBytes(32).toString('hex'), { body: '{}' });
}

function listClientsRequest() {
  return postJson(`${stack.adminUrl}/oauth/listClients`, {}, { authorization: `Bearer ${stack.masterToken}` });
}

async function storeErrorCount(): Promise<number> {
  return (await stack.sidecar.metrics.storeErrors.get()).values[0]?.value ?? 0;
}

function errorLines(message: string): Array<Record<string, any>> {
  return stack.logs.map((l) => JSON.parse(l) as Record<string, any>).filter((l) => l.level === 50 && l.msg === message);
}

const REQUESTS = {
  'POST /token (OAuth)': { send: tokenRequest, listener: 'proxy' },
  'POST /register (OAuth)': { send: registerRequest, listener: 'proxy' },
  'POST /mcp (token lookup)': { send: mcpRequest, listener: 'proxy' },
  'POST /oauth/listClients (admin)': { send: listClientsRequest, listener: 'admin' },
} as const;

describe('a bug is a 500, not a store outage', () => {
  for (const [name, { send: request, listener }] of Object.entries(REQUESTS)) {
    it(`${name}: a TypeError under the handler answers 500 server_error and logs it at error`, async () => {
      const storeErrors = await storeErrorCount();
      const logged = errorLines(`unexpected error on the ${listener} listener: answering 500`).length;
      fault = new TypeError('Cannot read properties of undefined (reading "clientId")');
      const res = await request();
      expect([res.status, res.body]).toEqual([500, { error: 'server_error' }]);
      const lines = errorLines(`unexpected error on the ${listener} listener: answering 500`);
      expect(lines.length).toBe(logged + 1);
      expect(lines.at(-1)!.err.message).toContain('reading "clientId"');
      expect(lines.at(-1)!.err.stack).toContain('TypeError');
      expect(await storeErrorCount()).toBe(storeErrors);
    });
  }
});

describe('a store that cannot answer is a 503 with Retry-After', () => {
  for (const [name, { send: request }] of Object.entries(REQUESTS)) {
    it(`${name}: StoreUnavailableError answers 503 temporarily_unavailable`, async () => {
      const storeErrors = await storeErrorCount();
      fault = new StoreUnavailableError('redis command timed out');
      const res = await request();
      expect([res.status, res.body]).toEqual([503, { error: 'temporarily_unavailable' }]);
      expect(res.headers.get('retry-after')).toBe('2');
      expect(await storeErrorCount()).toBe(storeErrors + 1);
    });
  }
});

it('a refused OAuth request is audited with the answer it got, a bug included', async () => {
  fault = new TypeError('boom');
  expect((await tokenRequest()).status).toBe(500);
  const audit = stack.logs
    .map((l) => JSON.parse(l) as Record<string, any>)
    .filter((l) => l.msg === 'audit' && l.audit.action === 'token.client_credentials')
    .at(-1);
  expect(audit?.audit).toMatchObject({ who: 'anonymous', result: 'server_error', detail: { status: 500 } });
});
