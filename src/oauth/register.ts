// POST /register: RFC 7591 dynamic client registration. `open` (the default, as MCP clients expect) or
// `protected` (the initial access token is the master token). Metadata is snake_case on the wire and
// validated by the same provisioning code as the admin `createClient`; the server picks the client_id,
// generates the secret (returned once, stored hashed). Which grants a registration may get is each
// grant's own rule (src/oauth/grants: admin-only ones never, the others while enabled).
// Registrations that are never used expire (oauth.unusedClientTtlSeconds).

import type { IncomingMessage, ServerResponse } from 'node:http';
import { readBody, parseJsonObject } from '../http/body.ts';
import { hasControlCharacter, provisionClient } from '../model/clients.ts';
import { HttpError, writeJson } from '../http/errors.ts';
import { GRANT_AUTHORIZATION_CODE } from '../model/grant-types.ts';
import { callerIsMaster, type OAuthContext } from './context.ts';
import { GRANT_TYPES, registrationRefusal } from './grants/index.ts';

export const REGISTRATION_MAX_BODY_BYTES = 16 * 1024;

/**
 * Every string of the metadata, whether this server keeps the field or not (RFC 7591 lets servers
 * ignore fields, and a later version may keep them): a CR/LF stored today is a header or log line
 * injected tomorrow.
 */
function refuseControlCharacters(body: Record<string, unknown>): void {
  for (const [field, value] of Object.entries(body)) {
    const strings =
      typeof value === 'string' ? [value] : Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
    if (!strings.some(hasControlCharacter)) continue;
    const name = field.slice(0, 64).replace(/[^\x21-\x7e]/g, '?');
    if (field === 'redirect_uris') throw new HttpError('invalid_redirect_uri', 'a redirect URI contains a control character');
    throw new HttpError('invalid_client_metadata', `${name} contains a control character`);
  }
}

export async function handleRegister(ctx: OAuthContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (ctx.config.oauth.registration === 'protected' && !callerIsMaster(ctx, req)) {
    throw new HttpError('invalid_token', 'registration needs an initial access token', {
      headers: { 'www-authenticate': 'Bearer realm="mcp", error="invalid_token"' },
    });
  }
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json') throw new HttpError('invalid_client_metadata', 'the body must be application/json');
  let body: Record<string, unknown>;
  try {
    body = parseJsonObject(await readBody(req, REGISTRATION_MAX_BODY_BYTES));
  } catch (err) {
    if (err instanceof HttpError && err.code === 'invalid_request')
      throw new HttpError('invalid_client_metadata', err.description ?? 'the body must be a JSON object');
    throw err;
  }

  if (body.client_id !== undefined || body.client_secret !== undefined)
    throw new HttpError('invalid_client_metadata', 'client_id and client_secret are assigned by the server');
  refuseControlCharacters(body);
  const grantTypes = body.grant_types;
  // RFC 7591 §2.1: response_types and grant_types must agree; `code` is the only response type.
  const responseTypes = body.response_types;
  if (responseTypes !== undefined && responseTypes !== null) {
    if (!Array.isArray(responseTypes) || !responseTypes.every((t) => t === 'code'))
      throw new HttpError('invalid_client_metadata', 'response_types may only contain "code"');
    if (responseTypes.length > 0 && !(Array.isArray(grantTypes) && grantTypes.includes(GRANT_AUTHORIZATION_CODE))) {
      throw new HttpError('invalid_client_metadata', 'response_types "code" needs the authorization_code grant');
    }
  }
  // A jwks_uri is fetched when an assertion is checked, by the metadata documents' fetcher (its SSRF
  // guard and bounds); with documents off there is none, and such a client could never authenticate.
  if (body.jwks_uri !== undefined && body.jwks_uri !== null && !ctx.cimd) {
    throw new HttpError(
      'invalid_client_metadata',
      'jwks_uri needs outbound fetches, which are off on this server (oauth.clientMetadataDocuments.enabled); give the public keys inline as jwks',
    );
  }
  const { client, clientSecret } = await provisionClient(
    ctx.store,
    ctx.clock,
    {
      clientName: body.client_name,
      redirectUris: body.redirect_uris,
      grantTypes,
      scope: body.scope,
      tokenEndpointAuthMethod: body.token_endpoint_auth_method,
      jwks: body.jwks,
      jwksUri: body.jwks_uri,
    },
    'dcr',
    GRANT_TYPES,
    // Each grant's own rule: admin-only grants, and grants this configuration does not enable, are refused.
    (grantType, asked) => registrationRefusal(ctx, grantType, asked),
  );
  // Registrations that are never used (a client that registers anew on every sign-in) go quickly.
  await ctx.store.touchClient(
    client.clientId,
    Math.min(ctx.config.oauth.neverUsedClientTtlSeconds, ctx.config.oauth.unusedClientTtlSeconds) * 1000,
  );
  await ctx.audit.record({
    who: ctx.config.oauth.registration === 'protected' ? 'master' : 'anonymous',
    action: 'register',
    result: 'ok',
    clientId: client.clientId,
    detail: { grantTypes: client.grantTypes.join(' '), public: clientSecret === undefined },
  });

  const answer: Record<string, unknown> = {
    client_id: client.clientId,
    client_id_issued_at: Math.floor(client.createdAt / 1000),
    redirect_uris: client.redirectUris,
    grant_types: client.grantTypes,
    token_endpoint_auth_method: client.tokenEndpointAuthMethod,
  };
  if (client.grantTypes.includes(GRANT_AUTHORIZATION_CODE)) answer.response_types = ['code'];
  if (clientSecret !== undefined) {
    answer.client_secret = clientSecret;
    answer.client_secret_expires_at = 0;
  }
  if (client.clientName !== undefined) answer.client_name = client.clientName;
  if (client.scope !== undefined) answer.scope = client.scope;
  if (client.jwks !== undefined) answer.jwks = JSON.parse(client.jwks) as unknown;
  if (client.jwksUri !== undefined) answer.jwks_uri = client.jwksUri;
  writeJson(res, 201, answer, { pragma: 'no-cache' });
}
