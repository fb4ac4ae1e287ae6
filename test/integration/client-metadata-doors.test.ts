// Client metadata comes in by three doors: the admin createClient, RFC 7591 POST /register and a
// Client ID Metadata Document. Each field is declared once (src/model/client-metadata.ts), so the same
// bad value is refused by each door, and each refusal names the same field (camelCase for the admin,
// the RFC 7591 name on the wire), in the one style `<field> must be <rule>` or `<field> <problem>`.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOperations, type AdminContext } from '../../src/admin/operations.ts';
import { HttpError } from '../../src/http/errors.ts';
import { parseClientMetadataDocument } from '../../src/oauth/cimd-document.ts';
import type { CimdResolver } from '../../src/oauth/cimd.ts';
import { startOAuthEndpoints, type OAuthEndpoints } from '../support/oauth-endpoints.ts';

const DOCUMENT_URL = 'https://client.example/metadata.json';
const REDIRECT = 'https://client.example/callback';
const PRIVATE_KEY_JWT = { token_endpoint_auth_method: 'private_key_jwt' };

/** RFC 7591 name -> the admin createClient's name. */
const ADMIN_NAMES: Record<string, string> = {
  client_name: 'clientName',
  redirect_uris: 'redirectUris',
  grant_types: 'grantTypes',
  scope: 'scope',
  token_endpoint_auth_method: 'tokenEndpointAuthMethod',
  jwks: 'jwks',
  jwks_uri: 'jwksUri',
};

/** [what, the field refused (RFC 7591 name), the bad metadata (RFC 7591 names)] */
const ROWS: Array<[string, string, Record<string, unknown>]> = [
  ['a name with a line feed', 'client_name', { client_name: 'ops\nbot' }],
  ['a name of 300 characters', 'client_name', { client_name: 'x'.repeat(300) }],
  ['a name that is not a string', 'client_name', { client_name: 7 }],
  ['a redirect URI with a fragment', 'redirect_uris', { redirect_uris: [`${REDIRECT}#frag`] }],
  ['a plain-http redirect URI off loopback', 'redirect_uris', { redirect_uris: ['http://client.example/callback'] }],
  ['redirect URIs that are not a list', 'redirect_uris', { redirect_uris: REDIRECT }],
  // Bounded at every door: 16 for a registration, 64 for a document (published for every server).
  ['100 redirect URIs', 'redirect_uris', { redirect_uris: Array.from({ length: 100 }, (_, i) => `${REDIRECT}/${i}`) }],
  ['a scope with a quote', 'scope', { scope: 'read "write"' }],
  ['an empty list of grant types', 'grant_types', { grant_types: [] }],
  ['an auth method that is not a string', 'token_endpoint_auth_method', { token_endpoint_auth_method: 7 }],
  ['a key set with a symmetric key', 'jwks', { ...PRIVATE_KEY_JWT, jwks: { keys: [{ kty: 'oct', k: 'c2VjcmV0' }] } }],
  ['a key set that is not one', 'jwks', { ...PRIVATE_KEY_JWT, jwks: { keys: 'none' } }],
  ['a plain-http jwks_uri', 'jwks_uri', { ...PRIVATE_KEY_JWT, jwks_uri: 'http://client.example/jwks.json' }],
];

let ep: OAuthEndpoints;

beforeAll(async () => {
  ep = await startOAuthEndpoints({ config: { oauth: { registrationRateLimitPerMinute: 100000 } } });
  // Documents on, so /register judges a jwks_uri by its rule; registration itself never fetches.
  const neverCalled = () => Promise.reject(new Error('registration does not fetch'));
  const resolver: CimdResolver = { resolve: neverCalled, keySet: neverCalled, refetchKeySet: neverCalled, refetchDocument: neverCalled };
  Object.assign(ep.ctx, { cimd: resolver });
});

afterAll(async () => {
  await ep?.close();
});

async function refusedByAdmin(metadata: Record<string, unknown>): Promise<HttpError> {
  const body = Object.fromEntries(Object.entries(metadata).map(([k, v]) => [ADMIN_NAMES[k] ?? k, v]));
  const ctx = { store: ep.store, clock: ep.clock } as unknown as AdminContext;
  // The body is read against the declaration before the handler runs: that refusal is thrown at once.
  const err = await Promise.resolve()
    .then(() => adminOperations.createClient!(ctx, { redirectUris: [REDIRECT], ...body }))
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  expect(err).toBeInstanceOf(HttpError);
  return err as HttpError;
}

async function refusedByRegistration(metadata: Record<string, unknown>): Promise<{ status: number; body: any }> {
  const res = await fetch(`${ep.url}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ redirect_uris: [REDIRECT], ...metadata }),
  });
  return { status: res.status, body: await res.json() };
}

function refusedAsDocument(metadata: Record<string, unknown>): HttpError {
  const doc = { client_id: DOCUMENT_URL, redirect_uris: [REDIRECT], ...metadata };
  try {
    parseClientMetadataDocument(DOCUMENT_URL, Buffer.from(JSON.stringify(doc)));
  } catch (err) {
    expect(err).toBeInstanceOf(HttpError);
    return err as HttpError;
  }
  throw new Error('the document was accepted');
}

describe('the same bad client metadata through each door', () => {
  it.each(ROWS)('%s: each door refuses it, naming %s', async (_what, field, metadata) => {
    const admin = await refusedByAdmin(metadata);
    expect([admin.code, admin.description?.startsWith(`${ADMIN_NAMES[field]} `)]).toEqual(['invalid_request', true]);

    const registered = await refusedByRegistration(metadata);
    expect(registered.status).toBe(400);
    expect(['invalid_client_metadata', 'invalid_redirect_uri']).toContain(registered.body.error);
    expect(registered.body.error_description).toMatch(new RegExp(`^${field} `));

    const document = refusedAsDocument(metadata);
    expect(document.code).toBe('invalid_client');
    expect(document.description).toMatch(new RegExp(`^the metadata document's ${field} `));

    expect((await ep.store.listClients()).length).toBe(0);
  });

  it('a bad redirect URI is invalid_redirect_uri at /register; a value that is not a list of URIs is invalid_client_metadata', async () => {
    expect((await refusedByRegistration({ redirect_uris: [`${REDIRECT}#frag`] })).body.error).toBe('invalid_redirect_uri');
    expect((await refusedByRegistration({ redirect_uris: REDIRECT })).body.error).toBe('invalid_client_metadata');
  });
});
