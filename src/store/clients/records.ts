// Clients and their profiles as hash fields and back.

import { parseEpochMs } from '../../model/credentials.ts';
import { type Fields, SECONDS_PATTERN, SHA256_HEX_PATTERN, strictStringArray } from '../codec.ts';
import type { ClientRecord, ProfileRecord, TokenEndpointAuthMethod } from '../../model/records.ts';

export function clientFields(c: ClientRecord): Fields {
  const f: Fields = {
    clientId: c.clientId,
    redirectUris: JSON.stringify(c.redirectUris),
    grantTypes: JSON.stringify(c.grantTypes),
    profile: c.profile,
    tokenEndpointAuthMethod: c.tokenEndpointAuthMethod,
    source: c.source,
    createdAt: String(c.createdAt),
  };
  if (c.clientSecretHash !== undefined) f.clientSecretHash = c.clientSecretHash;
  if (c.jwks !== undefined) f.jwks = c.jwks;
  if (c.jwksUri !== undefined) f.jwksUri = c.jwksUri;
  if (c.clientName !== undefined) f.clientName = c.clientName;
  if (c.scope !== undefined) f.scope = c.scope;
  if (c.revokedAt !== undefined) f.revokedAt = String(c.revokedAt);
  return f;
}

const AUTH_METHODS: ReadonlySet<string> = new Set<TokenEndpointAuthMethod>([
  'client_secret_basic',
  'client_secret_post',
  'private_key_jwt',
  'none',
]);
const CLIENT_SOURCES: ReadonlySet<string> = new Set<ClientRecord['source']>(['admin', 'dcr', 'cimd']);

/**
 * A stored client, or `'corrupt'` when a field every use of it reads is missing or unreadable: its
 * id, redirect URIs and grant types (JSON lists of strings), profile, authentication method, source
 * (which decides whether it expires unused), createdAt, a revokedAt or secret hash that is present
 * but malformed. Nothing is filled in with a default: an unreadable client is refused.
 */
export function clientFromFields(f: Fields): ClientRecord | 'corrupt' {
  const redirectUris = strictStringArray(f.redirectUris);
  const grantTypes = strictStringArray(f.grantTypes);
  const createdAt = parseEpochMs(f.createdAt);
  const revokedAt = parseEpochMs(f.revokedAt);
  if (!f.clientId || redirectUris === undefined || grantTypes === undefined || !f.profile || createdAt === undefined) return 'corrupt';
  if (!AUTH_METHODS.has(f.tokenEndpointAuthMethod ?? '') || !CLIENT_SOURCES.has(f.source ?? '')) return 'corrupt';
  if (f.revokedAt !== undefined && revokedAt === undefined) return 'corrupt';
  if (f.clientSecretHash !== undefined && !SHA256_HEX_PATTERN.test(f.clientSecretHash)) return 'corrupt';
  const c: ClientRecord = {
    clientId: f.clientId,
    redirectUris,
    grantTypes,
    profile: f.profile,
    tokenEndpointAuthMethod: f.tokenEndpointAuthMethod as TokenEndpointAuthMethod,
    source: f.source as ClientRecord['source'],
    createdAt,
  };
  if (f.clientSecretHash !== undefined) c.clientSecretHash = f.clientSecretHash;
  if (f.jwks !== undefined) c.jwks = f.jwks;
  if (f.jwksUri !== undefined) c.jwksUri = f.jwksUri;
  if (f.clientName !== undefined) c.clientName = f.clientName;
  if (f.scope !== undefined) c.scope = f.scope;
  if (revokedAt !== undefined) c.revokedAt = revokedAt;
  return c;
}

export function profileFields(p: ProfileRecord): Fields {
  return {
    name: p.name,
    description: p.description,
    accessTokenLifetimeSeconds: String(p.accessTokenLifetimeSeconds),
    refreshTokenLifetimeSeconds: String(p.refreshTokenLifetimeSeconds),
    grantTypes: JSON.stringify(p.grantTypes),
    createdAt: String(p.createdAt),
  };
}

/**
 * A stored profile, or `'corrupt'` when it lacks a field or holds one unreadable: its name, a
 * description, both lifetimes (whole seconds), its grant types (a JSON list of strings), createdAt.
 * Nothing is filled in with a default: an unreadable profile gives its clients nothing.
 */
export function profileFromFields(f: Fields): ProfileRecord | 'corrupt' {
  const grantTypes = strictStringArray(f.grantTypes);
  const createdAt = parseEpochMs(f.createdAt);
  const access = f.accessTokenLifetimeSeconds ?? '';
  const refresh = f.refreshTokenLifetimeSeconds ?? '';
  if (!f.name || f.description === undefined || grantTypes === undefined || createdAt === undefined) return 'corrupt';
  if (!SECONDS_PATTERN.test(access) || !SECONDS_PATTERN.test(refresh)) return 'corrupt';
  return {
    name: f.name,
    description: f.description,
    accessTokenLifetimeSeconds: Number(access),
    refreshTokenLifetimeSeconds: Number(refresh),
    grantTypes,
    createdAt,
  };
}
