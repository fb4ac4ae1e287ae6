// SCIM in process: the directory's pure rules (src/model/directory.ts), and the PATCH, filter and
// resource readers of src/admin/scim/, row by row, in the shapes Entra ID and Okta send (their
// documentation is cited in test/integration/scim-directories.test.ts).

import { describe, expect, it } from 'vitest';
import { HttpError } from '../../src/http/errors.ts';
import { directoryRefuses, leftInactive, planCreate, planDelete, planUpdate, type DirectoryUser } from '../../src/model/directory.ts';
import { parseUserFilter } from '../../src/admin/scim/filter.ts';
import { applyPatch } from '../../src/admin/scim/patch.ts';
import { readUserBody, scimBoolean } from '../../src/admin/scim/resource.ts';
import { buildConfig, ConfigError } from '../../src/config/load.ts';

const PATCH_OP = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';
const user: DirectoryUser = Object.freeze({
  id: '6c1f0a36-1d2b-4c1e-9a53-0f5f1b2a3c4d',
  provider: 'default',
  userName: 'ada@example.com',
  externalId: 'ext-ada',
  active: true,
  attributes: { name: { givenName: 'Ada' }, emails: [{ type: 'work', value: 'ada@example.com', primary: true }] },
  createdAt: 1000,
  updatedAt: 1000,
  version: 1,
});

const patch = (...Operations: unknown[]) => applyPatch(user, { schemas: [PATCH_OP], Operations });

/** The SCIM error a call throws: its status and scimType. */
function refusal(call: () => unknown): { status: number; scimType?: string } {
  try {
    call();
  } catch (err) {
    if (!(err instanceof HttpError) || err.body === undefined) throw err;
    const body = JSON.parse(err.body) as { scimType?: string };
    return { status: err.status, ...(body.scimType === undefined ? {} : { scimType: body.scimType }) };
  }
  throw new Error('no refusal');
}

describe('PATCH as the directories send it', () => {
  it.each([
    ['Okta: no path, a value object', { op: 'replace', value: { active: false } }],
    ['Entra: path active, the string "False"', { op: 'Replace', path: 'active', value: 'False' }],
    ['Entra: the string in another case', { op: 'replace', path: 'active', value: 'false' }],
    ['a JSON boolean with a path', { op: 'replace', path: 'ACTIVE', value: false }],
    ['add instead of replace', { op: 'add', value: { active: false } }],
  ])('%s makes the user inactive', (_name, operation) => {
    expect(patch(operation).active).toBe(false);
  });

  it('"True" makes the user active again', () => {
    expect(
      applyPatch({ ...user, active: false }, { schemas: [PATCH_OP], Operations: [{ op: 'Replace', path: 'active', value: 'True' }] })
        .active,
    ).toBe(true);
  });

  it('sub-attributes, filtered multi-valued attributes and extension paths', () => {
    const next = patch(
      { op: 'Replace', path: 'emails[type eq "work"].value', value: 'ada@new.example' },
      { op: 'Replace', path: 'name.familyName', value: 'Lovelace' },
      { op: 'Add', path: 'phoneNumbers[type eq "mobile"].value', value: '+1 555' },
      { op: 'replace', path: 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:manager', value: { value: 'm-1' } },
      { op: 'replace', value: { 'name.givenName': 'Augusta', displayName: 'A. Lovelace' } },
    );
    expect(next.attributes).toEqual({
      name: { givenName: 'Augusta', familyName: 'Lovelace' },
      emails: [{ type: 'work', value: 'ada@new.example', primary: true }],
      phoneNumbers: [{ type: 'mobile', value: '+1 555' }],
      'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User': { manager: { value: 'm-1' } },
      displayName: 'A. Lovelace',
    });
    expect(user.attributes.name).toEqual({ givenName: 'Ada' });
  });

  it('remove: an attribute, a filtered element, a sub-attribute; userName, externalId and active by path', () => {
    expect(patch({ op: 'remove', path: 'name.givenName' }).attributes.name).toEqual({});
    expect(patch({ op: 'remove', path: 'emails[type eq "work"]' }).attributes.emails).toEqual([]);
    expect(patch({ op: 'remove', path: 'externalId' }).externalId).toBeUndefined();
    expect(patch({ op: 'replace', path: 'userName', value: 'ada@lovelace.example' }).userName).toBe('ada@lovelace.example');
  });

  it.each([
    ['an unknown op', [{ op: 'move', path: 'active', value: false }], 'invalidSyntax'],
    ['remove without a path', [{ op: 'remove' }], 'noTarget'],
    ['a path with an unsupported filter', [{ op: 'replace', path: 'emails[value co "x"].value', value: 'x' }], 'invalidPath'],
    ['a path that is not one', [{ op: 'replace', path: 'a b', value: 'x' }], 'invalidPath'],
    ['changing id', [{ op: 'replace', path: 'id', value: 'other' }], 'mutability'],
    ['changing meta', [{ op: 'replace', path: 'meta', value: {} }], 'mutability'],
    ['active not a boolean', [{ op: 'replace', path: 'active', value: 'yes' }], 'invalidValue'],
    ['removing userName', [{ op: 'remove', path: 'userName' }], 'invalidValue'],
    ['no path and no object', [{ op: 'replace', value: false }], 'invalidSyntax'],
    ['no operations', [], 'invalidSyntax'],
    ['too many operations', Array.from({ length: 101 }, () => ({ op: 'replace', value: { active: true } })), 'invalidSyntax'],
  ])('%s: 400 %s', (_name, operations, scimType) => {
    expect(refusal(() => applyPatch(user, { schemas: [PATCH_OP], Operations: operations }))).toEqual({ status: 400, scimType });
  });

  it('a body without the PatchOp schema: 400 invalidSyntax', () => {
    expect(refusal(() => applyPatch(user, { Operations: [{ op: 'replace', value: { active: false } }] }))).toEqual({
      status: 400,
      scimType: 'invalidSyntax',
    });
  });
});

describe('filters', () => {
  it.each([
    ['userName eq "ada@example.com"', { index: 'userName', value: 'ada@example.com' }],
    ['USERNAME EQ "a\\"b"', { index: 'userName', value: 'a"b' }],
    [' externalId eq "00ujl29u0le5T6Aj10h7" ', { index: 'externalId', value: '00ujl29u0le5T6Aj10h7' }],
  ])('%s', (filter, expected) => {
    expect(parseUserFilter(filter)).toEqual(expected);
  });

  it.each([
    'emails[type eq "work"].value eq "a"',
    'userName sw "a"',
    'userName eq "a" and active eq true',
    'userName eq a',
    'x'.repeat(2000),
  ])('%s: 400 invalidFilter', (filter) => {
    expect(refusal(() => parseUserFilter(filter))).toEqual({ status: 400, scimType: 'invalidFilter' });
  });
});

describe('a User body', () => {
  it('keeps the attributes sent, never a password; active defaults to true; the string booleans of Entra', () => {
    expect(
      readUserBody({
        schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'],
        userName: 'a',
        password: 'p',
        id: 'x',
        meta: {},
        title: 'T',
      }),
    ).toEqual({
      userName: 'a',
      active: true,
      attributes: { title: 'T' },
    });
    expect(scimBoolean('TRUE', 'active')).toBe(true);
    expect(refusal(() => scimBoolean(0, 'active'))).toEqual({ status: 400, scimType: 'invalidValue' });
    expect(refusal(() => readUserBody({ schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'], userName: 'x'.repeat(257) }))).toEqual({
      status: 400,
      scimType: 'invalidValue',
    });
  });
});

describe('the directory rules (src/model/directory.ts)', () => {
  const tombstone = { ...user, active: false, deletedAt: 2000 };

  it('create: a live holder of the name is a conflict, a corrupt one too (fail closed); a tombstone gives its name up', () => {
    const candidate = { ...user, id: 'new' };
    expect(planCreate(candidate, user).outcome).toBe('conflict');
    expect(planCreate(candidate, 'corrupt').outcome).toBe('conflict');
    expect(planCreate(candidate, tombstone)).toMatchObject({ outcome: 'written', write: { dropUser: user.id } });
  });

  it('update: a change to nothing writes nothing; a deleted user is deleted_before; an unknown one not_found', () => {
    const same = planUpdate(
      user,
      (u) => ({ ...u }),
      () => null,
      5000,
    );
    expect(same).toMatchObject({ outcome: 'written', after: { version: 1, updatedAt: 1000 } });
    expect(
      planUpdate(
        tombstone,
        (u) => u,
        () => null,
        5000,
      ).outcome,
    ).toBe('deleted_before');
    expect(
      planUpdate(
        null,
        (u) => u,
        () => null,
        5000,
      ).outcome,
    ).toBe('not_found');
    expect(
      planUpdate(
        user,
        (u) => ({ ...u, userName: 'B@x' }),
        () => ({ ...user, id: 'other', userName: 'b@x' }),
        5000,
      ).outcome,
    ).toBe('conflict');
  });

  it('who is left inactive: a deactivation, its retry, a delete and its retry; never an active user', () => {
    const deactivated = planUpdate(
      user,
      (u) => ({ ...u, active: false }),
      () => null,
      5000,
    );
    expect(leftInactive(deactivated)?.id).toBe(user.id);
    expect(
      leftInactive(
        planUpdate(
          { ...user, active: false },
          (u) => u,
          () => null,
          6000,
        ),
      )?.id,
    ).toBe(user.id);
    expect(leftInactive(planDelete(user, 7000))?.deletedAt).toBe(7000);
    expect(leftInactive(planDelete(tombstone, 8000))?.id).toBe(user.id);
    expect(
      leftInactive(
        planUpdate(
          user,
          (u) => ({ ...u, attributes: { title: 'x' } }),
          () => null,
          5000,
        ),
      ),
    ).toBeUndefined();
  });

  it('sign-in: refused when the user the name leads to is inactive or deleted, or unreadable; sub exactly, email ignoring case', () => {
    const inactive = { ...user, active: false };
    expect(directoryRefuses(inactive, 'email', 'ADA@example.com')).toBe(true);
    expect(directoryRefuses(tombstone, 'email', 'ada@example.com')).toBe(true);
    expect(directoryRefuses(user, 'email', 'ada@example.com')).toBe(false);
    expect(directoryRefuses(null, 'email', 'ada@example.com')).toBe(false);
    expect(directoryRefuses('corrupt', 'sub', 'x')).toBe(true);
    expect(directoryRefuses({ ...inactive, userName: 'Sub-1' }, 'sub', 'sub-1')).toBe(false);
    expect(directoryRefuses({ ...inactive, userName: 'sub-1' }, 'sub', 'sub-1')).toBe(true);
  });
});

describe('configuration', () => {
  const master = 'a3f1c9e27b4d8a6f0c1e2d3b4a5f6e7d8c9b0a1f2e3d4c5b6a7f8e9d0c1b2a3f';
  const problems = (
    scim: Record<string, unknown>,
    idp: Record<string, unknown> = { issuer: 'https://idp.example.com', audience: 'mcp', jwksUrl: 'https://idp.example.com/jwks' },
  ) => {
    try {
      buildConfig({ masterToken: master, scim, idp }, {});
      return [];
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      return err.problems;
    }
  };

  it('SCIM_TOKEN: 64 random hex, not the master token; an identity provider to match against', () => {
    expect(problems({ token: 'abc' }).join('\n')).toContain('SCIM_TOKEN must be exactly 64 lowercase hex characters');
    expect(problems({ token: '0'.repeat(64) }).join('\n')).toContain('SCIM_TOKEN is not a random secret');
    expect(problems({ token: master }).join('\n')).toContain('SCIM_TOKEN must differ from BEARER_SECRET_MASTER');
    expect(problems({ token: 'b'.repeat(31) + 'c9e27b4d8a6f0c1e2d3b4a5f6e7d8c9b0' }, {}).join('\n')).toContain(
      'no identity provider is configured',
    );
    expect(problems({ token: '7c2e9a41f08b3d56e1a4c7f2b9d03e68a5f1c4b7e2d9a06f3b8c1e5d4a7f2b90' })).toEqual([]);
  });
});
