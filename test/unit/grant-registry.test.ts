// The grant registry (src/oauth/grants/index.ts) and what each grant declares: the form parameters it
// reads (checked against the reads in its module's source, both ways), and its client rule
// (requireClient, the one place that asks whether the client holds the grant).

import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import * as grantTypes from '../../src/model/grant-types.ts';
import type { AuthenticatedClient, PresentedClient } from '../../src/oauth/client-auth.ts';
import { requireClient, TOKEN_PARAMETERS, type Grant, type TokenRequest } from '../../src/oauth/grants/grant.ts';
import { GRANTS } from '../../src/oauth/grants/index.ts';
import { HttpError } from '../../src/http/errors.ts';
import { Form } from '../../src/http/body.ts';
import type { ClientRecord } from '../../src/model/records.ts';

const GRANTS_DIR = new URL('../../src/oauth/grants/', import.meta.url);
const SRC = new URL('../../src/', import.meta.url);

/** The names of the form parameters a source text reads (`form.get('x')`, `form.has('x')`). */
function formReads(source: string): string[] {
  return [...new Set([...source.matchAll(/\bform\.(?:get|has)\('([^']+)'\)/g)].map((m) => m[1]!))].sort();
}

/** Each grant module's source, keyed by the grant it exports. */
async function grantSources(): Promise<Map<Grant, string>> {
  const sources = new Map<Grant, string>();
  for (const file of readdirSync(GRANTS_DIR).filter((f) => f.endsWith('.ts') && f !== 'grant.ts' && f !== 'index.ts')) {
    const mod = (await import(new URL(file, GRANTS_DIR).href)) as Record<string, unknown>;
    for (const value of Object.values(mod)) {
      if (GRANTS.includes(value as Grant)) sources.set(value as Grant, readFileSync(new URL(file, GRANTS_DIR), 'utf8'));
    }
  }
  return sources;
}

describe('grant registry', () => {
  it('lists every grant module once, each answering a grant type of src/model/grant-types.ts', async () => {
    const sources = await grantSources();
    expect(sources.size).toBe(GRANTS.length);
    expect(new Set(GRANTS.map((g) => g.grantType)).size).toBe(GRANTS.length);
    expect(GRANTS.map((g) => g.grantType).sort()).toEqual(Object.values(grantTypes).sort());
  });

  it('each grant declares exactly the form parameters its module reads', async () => {
    for (const [grant, source] of await grantSources()) {
      const reads = formReads(source);
      expect(reads.length, grant.grantType).toBeGreaterThan(0);
      expect(reads, `${grant.grantType}: parameters`).toEqual([...grant.parameters].sort());
      for (const name of grant.parameters) expect(TOKEN_PARAMETERS, grant.grantType).not.toContain(name);
    }
  });

  it('the parameters the token endpoint reads for every grant are those of the token endpoint and client authentication', () => {
    const read = formReads(['oauth/token.ts', 'oauth/client-auth.ts'].map((f) => readFileSync(new URL(f, SRC), 'utf8')).join('\n'));
    expect(read).toEqual([...TOKEN_PARAMETERS].sort());
  });

  it('the reader of form parameters finds get and has, and nothing else', () => {
    expect(formReads("form.get('a'); request.form.has('b'); form.get(name); format('c'); form.get('a')")).toEqual(['a', 'b']);
  });
});

describe('requireClient', () => {
  const presented: PresentedClient = {
    basic: true,
    basicCredentials: null,
    formClientId: undefined,
    formClientSecret: undefined,
    assertion: undefined,
    assertionType: undefined,
    clientId: undefined,
  };
  const client = (grants: string[], confidential: boolean): AuthenticatedClient =>
    ({ client: { clientId: 'mcp_c', grantTypes: grants } as unknown as ClientRecord, confidential }) as AuthenticatedClient;
  const request = (c: AuthenticatedClient | null): TokenRequest => ({
    req: {} as TokenRequest['req'],
    form: Form.of([]),
    presented,
    client: c,
  });
  const G = grantTypes.GRANT_CLIENT_CREDENTIALS;
  const refusal = (f: () => unknown): string | undefined => {
    try {
      f();
      return undefined;
    } catch (err) {
      return err instanceof HttpError ? `${err.code} ${err.status}` : 'other';
    }
  };

  it.each<[string, AuthenticatedClient | null, Parameters<typeof requireClient>[2], string | undefined]>([
    ['no client', null, {}, 'invalid_client 401'],
    ['no client, optional', null, { optional: true }, undefined],
    ['a client without the grant', client(['refresh_token'], true), {}, 'unauthorized_client 400'],
    ['a client without the grant, optional', client([], true), { optional: true }, 'unauthorized_client 400'],
    ['a public client holding the grant', client([G], false), {}, undefined],
    [
      'a public client, confidential only (unauthorized_client)',
      client([G], false),
      { confidential: 'unauthorized_client' },
      'unauthorized_client 400',
    ],
    ['a public client, confidential only (invalid_client)', client([G], false), { confidential: 'invalid_client' }, 'invalid_client 401'],
    [
      'a public client without the grant, confidential only (invalid_client)',
      client([], false),
      { confidential: 'invalid_client' },
      'invalid_client 401',
    ],
    ['a confidential client holding the grant', client([G], true), { confidential: 'invalid_client' }, undefined],
  ])('%s: %s', (_label, c, rule, expected) => {
    expect(refusal(() => requireClient(request(c), G, rule))).toBe(expected);
  });

  it('returns the client, or null when none is required and none came', () => {
    const c = client([G], true);
    expect(requireClient(request(c), G)).toBe(c);
    expect(requireClient(request(null), G, { optional: true })).toBeNull();
  });

  it('an invalid_client refusal of a request that used Basic carries the Basic challenge', () => {
    try {
      requireClient(request(null), G);
      expect.unreachable();
    } catch (err) {
      expect((err as HttpError).headers).toMatchObject({ 'www-authenticate': expect.stringMatching(/^Basic /) });
    }
  });
});
