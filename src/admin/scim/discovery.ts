// What a SCIM client reads to learn this server (RFC 7644 §4): ServiceProviderConfig, ResourceTypes
// and Schemas (RFC 7643 §5-7). Users only; PATCH and filters on; no bulk, sort, ETags or password change.

import { scimError } from './errors.ts';
import { ENTERPRISE_USER_SCHEMA, LIST_RESPONSE_SCHEMA, USER_SCHEMA } from './resource.ts';

/** The most resources a filtered list answers. */
export const MAX_RESULTS = 100;

export function serviceProviderConfig(base: string): Record<string, unknown> {
  return {
    schemas: ['urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig'],
    patch: { supported: true },
    bulk: { supported: false, maxOperations: 0, maxPayloadSize: 0 },
    filter: { supported: true, maxResults: MAX_RESULTS },
    changePassword: { supported: false },
    sort: { supported: false },
    etag: { supported: false },
    authenticationSchemes: [
      {
        type: 'oauthbearertoken',
        name: 'Bearer token',
        description: 'The SCIM token (SCIM_TOKEN) in Authorization: Bearer',
        primary: true,
      },
    ],
    meta: { resourceType: 'ServiceProviderConfig', location: `${base}/ServiceProviderConfig` },
  };
}

function userResourceType(base: string): Record<string, unknown> {
  return {
    schemas: ['urn:ietf:params:scim:schemas:core:2.0:ResourceType'],
    id: 'User',
    name: 'User',
    endpoint: '/Users',
    schema: USER_SCHEMA,
    schemaExtensions: [{ schema: ENTERPRISE_USER_SCHEMA, required: false }],
    meta: { resourceType: 'ResourceType', location: `${base}/ResourceTypes/User` },
  };
}

const attr = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  type: 'string',
  multiValued: false,
  required: false,
  caseExact: false,
  mutability: 'readWrite',
  returned: 'default',
  uniqueness: 'none',
  ...extra,
});

function userSchema(base: string): Record<string, unknown> {
  return {
    schemas: ['urn:ietf:params:scim:schemas:core:2.0:Schema'],
    id: USER_SCHEMA,
    name: 'User',
    description: 'A person of the directory',
    attributes: [
      attr('userName', { required: true, uniqueness: 'server' }),
      attr('name', { type: 'complex', subAttributes: ['formatted', 'familyName', 'givenName'].map((n) => attr(n)) }),
      attr('displayName'),
      attr('emails', {
        type: 'complex',
        multiValued: true,
        subAttributes: [attr('value'), attr('type'), attr('primary', { type: 'boolean' })],
      }),
      attr('active', { type: 'boolean' }),
    ],
    meta: { resourceType: 'Schema', location: `${base}/Schemas/${USER_SCHEMA}` },
  };
}

/** GET under /ResourceTypes and /Schemas: the list, or one by id (404 for another). */
export function discovery(kind: 'ResourceTypes' | 'Schemas', id: string | undefined, base: string): Record<string, unknown> {
  const one = kind === 'ResourceTypes' ? userResourceType(base) : userSchema(base);
  if (id !== undefined) {
    if (id !== one.id) throw scimError(404, `no such ${kind === 'ResourceTypes' ? 'resource type' : 'schema'}`);
    return one;
  }
  return { schemas: [LIST_RESPONSE_SCHEMA], totalResults: 1, startIndex: 1, itemsPerPage: 1, Resources: [one] };
}
