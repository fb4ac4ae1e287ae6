// SCIM 2.0 on the admin listener (RFC 7643, RFC 7644): its own token, its error schema, Users and the
// discovery endpoints, over real HTTP to a sidecar on real Redis with a real OpenID provider
// (oidc-provider, in this process). The directories' documented sequences, and what a deactivation
// does to a person's access, are in test/integration/scim-directories.test.ts.

import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSignInStack, type SignInStack } from '../support/sign-in.ts';
import { startStack } from '../support/stack.ts';
import { directoryClient, ERROR_SCHEMA, PATCH_OP, scimRequest, USER_SCHEMA } from '../support/scim.ts';

const SCIM_TOKEN = randomBytes(32).toString('hex');
let s: SignInStack;
let scim: ReturnType<typeof directoryClient>;

beforeAll(async () => {
  s = await startSignInStack({ config: { scim: { token: SCIM_TOKEN }, admin: { maxBodyBytes: 4096 } } });
  scim = directoryClient(s.stack.adminUrl, SCIM_TOKEN);
});
afterAll(async () => {
  await s?.close();
});

const newUser = (userName: string, extra: Record<string, unknown> = {}) => ({ schemas: [USER_SCHEMA], userName, active: true, ...extra });

/** A SCIM error answer: the Error schema, `status` as a string, the scimType when given, as application/scim+json. */
function expectScimError(answer: { status: number; body: any; headers: Headers }, status: number, scimType?: string): void {
  expect(answer.status).toBe(status);
  expect(answer.headers.get('content-type')).toBe('application/scim+json');
  expect(answer.body.schemas).toEqual([ERROR_SCHEMA]);
  expect(answer.body.status).toBe(String(status));
  if (scimType !== undefined) expect(answer.body.scimType).toBe(scimType);
}

describe('SCIM: its own token', () => {
  it('no token, a wrong token, or the master token: 401 in the SCIM error schema', async () => {
    expectScimError(await scimRequest(s.stack.adminUrl, undefined, 'GET', '/Users?filter=userName%20eq%20%22a%22'), 401);
    expectScimError(await scimRequest(s.stack.adminUrl, randomBytes(32).toString('hex'), 'GET', '/ServiceProviderConfig'), 401);
    expectScimError(await scimRequest(s.stack.adminUrl, s.stack.masterToken, 'GET', '/ServiceProviderConfig'), 401);
    expectScimError(await scimRequest(s.stack.adminUrl, s.stack.masterToken, 'POST', '/Users', newUser('master@example.com')), 401);
  });

  it('the SCIM token does not open the admin operations (header or body)', async () => {
    const viaHeader = await fetch(`${s.stack.adminUrl}/oauth/listClients`, {
      method: 'POST',
      headers: { authorization: `Bearer ${SCIM_TOKEN}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(viaHeader.status).toBe(401);
    const viaBody = await fetch(`${s.stack.adminUrl}/oauth/listClients`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ callerToken: SCIM_TOKEN }),
    });
    expect(viaBody.status).toBe(401);
    expect((await s.stack.admin('listClients')).status).toBe(200);
  });

  it('without SCIM_TOKEN, /scim/v2 answers 404 to any token', async () => {
    const off = await startStack({ store: 'memory' });
    try {
      expect((await scimRequest(off.adminUrl, off.masterToken, 'GET', '/ServiceProviderConfig')).status).toBe(404);
      expect((await scimRequest(off.adminUrl, SCIM_TOKEN, 'POST', '/Users', newUser('x@example.com'))).status).toBe(404);
    } finally {
      await off.close();
    }
  });

  it('configuration refuses a SCIM token equal to the master token, and a provider that is not configured', async () => {
    const token = randomBytes(32).toString('hex');
    await expect(startStack({ store: 'memory', config: { masterToken: token, scim: { token } } })).rejects.toThrow();
    const { buildConfig } = await import('../../src/config/load.ts');
    const problems = (() => {
      try {
        buildConfig(
          { masterToken: token, scim: { token: SCIM_TOKEN, provider: 'contractors' }, idp: { issuer: 'https://idp.example.com' } },
          {},
        );
        return '';
      } catch (err) {
        return (err as Error).message;
      }
    })();
    expect(problems).toContain('scim.provider "contractors"');
  });
});

describe('SCIM: bodies and errors', () => {
  it('a body over the admin bound: 413 in the SCIM error schema', async () => {
    expectScimError(await scim('POST', '/Users', newUser('big@example.com', { displayName: 'x'.repeat(5000) })), 413);
  });

  it('a body that is not SCIM JSON: 400 invalidSyntax; application/json is accepted', async () => {
    expectScimError(await scim('POST', '/Users', newUser('form@example.com'), 'application/x-www-form-urlencoded'), 400, 'invalidSyntax');
    expectScimError(await scim('POST', '/Users', '{"schemas":', 'application/scim+json'), 400, 'invalidSyntax');
    expectScimError(await scim('POST', '/Users', { userName: 'noschema@example.com' }), 400, 'invalidSyntax');
    expectScimError(await scim('POST', '/Users', { schemas: [USER_SCHEMA] }), 400, 'invalidValue');
    // Nested past the bound every JSON body has (a value nested some ten thousand levels, which the
    // default 64 KiB allows, would overflow the stack where the attributes are written back).
    const deep = `{"schemas":["${USER_SCHEMA}"],"userName":"deep@example.com","name":${'{"a":'.repeat(100)}1${'}'.repeat(100)}}`;
    expectScimError(await scim('POST', '/Users', deep, 'application/scim+json'), 400, 'invalidSyntax');
    expectScimError(await scim('POST', '/Users', newUser('bad@example.com', { active: 'maybe' })), 400, 'invalidValue');
    expect((await scim('POST', '/Users', newUser('json@example.com'), 'application/json; charset=utf-8')).status).toBe(201);
  });

  it('a second user with the same userName in any case: 409 uniqueness', async () => {
    expect((await scim('POST', '/Users', newUser('Twin@Example.com'))).status).toBe(201);
    expectScimError(await scim('POST', '/Users', newUser('twin@example.COM')), 409, 'uniqueness');
  });

  it('filters other than userName eq and externalId eq: 400 invalidFilter', async () => {
    for (const filter of ['displayName eq "x"', 'userName co "x"', 'userName eq "a" or userName eq "b"', 'userName eq x'])
      expectScimError(await scim('GET', `/Users?filter=${encodeURIComponent(filter)}`), 400, 'invalidFilter');
  });

  it('an unknown user or resource: 404; a method a path does not take: 405 with Allow', async () => {
    expectScimError(await scim('GET', '/Users/3f1c2a4e-0000-4000-8000-000000000000'), 404);
    expectScimError(await scim('GET', '/Users/not-an-id'), 404);
    expectScimError(
      await scim('PATCH', '/Users/3f1c2a4e-0000-4000-8000-000000000000', {
        schemas: [PATCH_OP],
        Operations: [{ op: 'replace', value: { active: false } }],
      }),
      404,
    );
    expectScimError(await scim('DELETE', '/Users/3f1c2a4e-0000-4000-8000-000000000000'), 404);
    expectScimError(await scim('GET', '/Groups'), 404);
    const wrong = await scim('DELETE', '/Users');
    expectScimError(wrong, 405);
    expect(wrong.headers.get('allow')).toBe('GET, POST');
  });

  it('the store unavailable: 503 with Retry-After in the SCIM error schema, counted as 503', async () => {
    const stack = await startStack({
      store: 'memory',
      config: {
        scim: { token: SCIM_TOKEN },
        idp: { issuer: 'https://idp.example.com', audience: 'mcp', jwksUrl: 'https://idp.example.com/jwks' },
      },
    });
    try {
      await stack.store.close();
      const answer = await scimRequest(stack.adminUrl, SCIM_TOKEN, 'GET', `/Users?filter=${encodeURIComponent('userName eq "a"')}`);
      expectScimError(answer, 503);
      expect(answer.headers.get('retry-after')).toBe('2');
      expect(await stack.sidecar.metrics.registry.getSingleMetricAsString('mcp_auth_scim_requests_total')).toContain(
        'mcp_auth_scim_requests_total{operation="findUsers",status="503"} 1',
      );
    } finally {
      await stack.close();
    }
  });

  it('a PATCH it cannot apply: 400 with the RFC 7644 scimType, the user unchanged', async () => {
    const created = await scim('POST', '/Users', newUser('patchy@example.com'));
    const path = `/Users/${created.body.id}`;
    const patch = (Operations: unknown) => scim('PATCH', path, { schemas: [PATCH_OP], Operations });
    expectScimError(await patch([{ op: 'move', path: 'active', value: false }]), 400, 'invalidSyntax');
    expectScimError(await patch([{ op: 'remove' }]), 400, 'noTarget');
    expectScimError(await patch([{ op: 'replace', path: 'id', value: 'other' }]), 400, 'mutability');
    expectScimError(await patch([{ op: 'replace', path: 'emails[type sw "w"].value', value: 'x' }]), 400, 'invalidPath');
    expectScimError(await patch([{ op: 'replace', path: 'active', value: 'nope' }]), 400, 'invalidValue');
    expectScimError(await scim('PATCH', path, { Operations: [{ op: 'replace', value: { active: false } }] }), 400, 'invalidSyntax');
    expect((await scim('GET', path)).body).toMatchObject({ active: true, meta: { version: 'W/"1"' } });
  });
});

describe('SCIM: discovery', () => {
  it('ServiceProviderConfig, ResourceTypes and Schemas describe Users with PATCH and filters', async () => {
    const config = await scim('GET', '/ServiceProviderConfig');
    expect(config.status).toBe(200);
    expect(config.headers.get('content-type')).toBe('application/scim+json');
    expect(config.body).toMatchObject({ patch: { supported: true }, filter: { supported: true }, bulk: { supported: false } });
    expect(config.body.authenticationSchemes[0].type).toBe('oauthbearertoken');
    const types = await scim('GET', '/ResourceTypes');
    expect(types.body).toMatchObject({ totalResults: 1, Resources: [{ id: 'User', endpoint: '/Users', schema: USER_SCHEMA }] });
    expect((await scim('GET', '/ResourceTypes/User')).body.id).toBe('User');
    expectScimError(await scim('GET', '/ResourceTypes/Group'), 404);
    const schemas = await scim('GET', '/Schemas');
    expect(schemas.body.Resources[0].id).toBe(USER_SCHEMA);
    expect((await scim('GET', `/Schemas/${USER_SCHEMA}`)).body.attributes.map((a: { name: string }) => a.name)).toContain('userName');
  });
});

describe('SCIM: Users', () => {
  it('create, get, find by userName and externalId, replace, patch, delete; the answers are SCIM resources', async () => {
    const created = await scim(
      'POST',
      '/Users',
      newUser('Grace@Example.com', { externalId: 'ext-grace', name: { givenName: 'Grace' }, password: 'never-kept' }),
    );
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    expect(created.headers.get('location')).toBe(`/scim/v2/Users/${id}`);
    expect(created.body).toMatchObject({
      schemas: [USER_SCHEMA],
      userName: 'Grace@Example.com',
      externalId: 'ext-grace',
      active: true,
      name: { givenName: 'Grace' },
      meta: { resourceType: 'User', location: `/scim/v2/Users/${id}`, version: 'W/"1"' },
    });
    expect(created.body.password).toBeUndefined();
    expect((await scim('GET', `/Users/${id}`)).body).toEqual(created.body);

    const byName = await scim('GET', `/Users?filter=${encodeURIComponent('USERNAME Eq "grace@example.com"')}`);
    expect(byName.body).toMatchObject({
      schemas: ['urn:ietf:params:scim:api:messages:2.0:ListResponse'],
      totalResults: 1,
      startIndex: 1,
      itemsPerPage: 1,
    });
    expect(byName.body.Resources[0].id).toBe(id);
    expect((await scim('GET', `/Users?filter=${encodeURIComponent('externalId eq "ext-grace"')}`)).body.Resources[0].id).toBe(id);
    expect((await scim('GET', `/Users?filter=${encodeURIComponent('externalId eq "EXT-GRACE"')}`)).body).toMatchObject({
      totalResults: 0,
      Resources: [],
    });

    const replaced = await scim('PUT', `/Users/${id}`, newUser('grace@example.com', { externalId: 'ext-grace', displayName: 'Grace H' }));
    expect(replaced.status).toBe(200);
    expect(replaced.body).toMatchObject({ id, userName: 'grace@example.com', displayName: 'Grace H', meta: { version: 'W/"2"' } });
    expect(replaced.body.name).toBeUndefined();

    const patched = await scim('PATCH', `/Users/${id}`, {
      schemas: [PATCH_OP],
      Operations: [
        { op: 'add', path: 'name.familyName', value: 'Hopper' },
        { op: 'Replace', path: 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department', value: 'Navy' },
      ],
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({
      name: { familyName: 'Hopper' },
      'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User': { department: 'Navy' },
    });
    expect(patched.body.schemas).toContain('urn:ietf:params:scim:schemas:extension:enterprise:2.0:User');

    const deleted = await scim('DELETE', `/Users/${id}`);
    expect(deleted.status).toBe(204);
    expect(deleted.body).toBeUndefined();
    expectScimError(await scim('GET', `/Users/${id}`), 404);
    expect((await scim('GET', `/Users?filter=${encodeURIComponent('userName eq "grace@example.com"')}`)).body.totalResults).toBe(0);
  });

  it('the SCIM operations are counted in the metrics and recorded in the audit trail', async () => {
    const created = await scim('POST', '/Users', newUser('audited@example.com'));
    const metrics = await (await fetch(`${s.stack.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/mcp_auth_scim_requests_total\{operation="createUser",status="201"\} \d+/);
    expect(metrics).toMatch(/mcp_auth_scim_requests_total\{operation="unknown",status="401"\} \d+/);
    const events = (await s.stack.admin('listAuditEvents', { count: 50 })).body.events as Array<Record<string, any>>;
    const event = events.find((e) => e.action === 'scim.createUser' && e.detail?.id === created.body.id);
    expect(event).toMatchObject({ who: 'scim', result: 'ok', detail: { status: 201, active: true } });
  });
});
