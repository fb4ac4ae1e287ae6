// Client authentication at the token, revocation and introspection endpoints (RFC 6749 §2.3):
// `client_secret_basic`, `client_secret_post` or `private_key_jwt` (RFC 7523 §2.2), one at a time;
// secrets compared as SHA-256 digests in constant time; public clients identify themselves with
// `client_id` alone.

import type { Form } from '../http/body.ts';
import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { createLocalJWKSet, decodeJwt, jwtVerify, type JSONWebKeySet } from 'jose';
import type { Clock } from '../model/clock.ts';
import { hashToken } from '../model/credentials.ts';
import { checkKeySet } from '../model/client-metadata.ts';
import { isClientIdMetadataUrl, type CimdResolver, type ClientMetadataDocument, type ResolveOptions } from './cimd.ts';
import { HttpError, invalidClient } from '../http/errors.ts';
import type { Logger } from '../observability/logger.ts';
import type { ClientStorage, OneTimeValueStorage } from '../store/types.ts';
import type { ClientRecord } from '../model/records.ts';

/** RFC 7523 §2.2: the one `client_assertion_type` of private_key_jwt. */
export const JWT_BEARER_ASSERTION = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
/** Signature algorithms of client assertions: asymmetric only (never `none`, never HMAC). */
export const ASSERTION_ALGORITHMS = ['RS256', 'PS256', 'ES256'];
/** Clock skew allowed on `exp`, `iat` and `nbf`. */
const ASSERTION_SKEW_SECONDS = 30;
/** Longest lifetime (`exp` - `iat`) of an assertion: it is a one-time proof, not a credential. */
export const ASSERTION_MAX_LIFETIME_SECONDS = 300;
const MAX_ASSERTION_LENGTH = 8192;
const MAX_JTI_LENGTH = 256;

/** What client authentication needs besides the request: the store, the key sources, who this server is. */
export interface ClientAuthContext {
  readonly store: ClientStorage & OneTimeValueStorage;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Fetches the keys of metadata-document clients and `jwks_uri` registrations; undefined: documents are off. */
  readonly cimd?: CimdResolver | undefined;
  publicUrl(): string;
}

/** What one request adds to client authentication: how its fetches are admitted, and its rate limit. */
export interface ClientAuthRequest {
  /** Admission of a fetch of the client's document or key set for this request (see `fetchAdmission`). */
  readonly fetches?: ResolveOptions | undefined;
  /**
   * The request's rate limit, taken once its client is known and its credential checked, and before
   * anything of the request is remembered (an assertion's `jti`): a refused request leaves nothing in
   * the store. Called with null when the request named no client.
   */
  readonly limit?: ((client: AuthenticatedClient | null) => Promise<void>) | undefined;
}

export interface AuthenticatedClient {
  client: ClientRecord;
  /** false for a public client that only named itself. */
  confidential: boolean;
}

/** `Basic base64(urlencode(id):urlencode(secret))` (RFC 6749 §2.3.1), or null when it is anything else. */
export function decodeBasic(header: string): { id: string; secret: string } | null {
  const match = /^Basic ([A-Za-z0-9+/]+=*)$/i.exec(header);
  if (!match) return null;
  const text = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = text.indexOf(':');
  if (colon < 0) return null;
  try {
    // RFC 6749 §2.3.1: both parts are form-urlencoded before Base64.
    const decode = (s: string) => decodeURIComponent(s.replace(/\+/g, ' '));
    return { id: decode(text.slice(0, colon)), secret: decode(text.slice(colon + 1)) };
  } catch {
    return null;
  }
}

/**
 * What a request presents to identify its client, read once from the Authorization header and the
 * form. Nothing here is verified: `clientId` serves rate limits and the audit of refusals, and
 * authenticateClient decides. A new client authentication method adds what it reads here and its
 * check in authenticateClient.
 */
export interface PresentedClient {
  /** `Authorization: Basic` was sent: a refusal then carries a Basic challenge (RFC 6749 §5.2). */
  readonly basic: boolean;
  /** The decoded Basic credentials; null when none were sent or they are malformed. */
  readonly basicCredentials: { id: string; secret: string } | null;
  readonly formClientId: string | undefined;
  readonly formClientSecret: string | undefined;
  /** RFC 7523 `client_assertion` and `client_assertion_type`, as sent. */
  readonly assertion: string | undefined;
  readonly assertionType: string | undefined;
  /** The client the request names (Basic first, else the form, else the assertion's `sub`), unverified. */
  readonly clientId: string | undefined;
}

/** The `sub` of an assertion, unverified (for the rate-limit key and the audit of a refusal only). */
function assertedSubject(assertion: string | undefined): string | undefined {
  if (assertion === undefined || assertion.length > MAX_ASSERTION_LENGTH) return undefined;
  try {
    const sub = decodeJwt(assertion).sub;
    return typeof sub === 'string' && sub.length <= 2048 ? sub : undefined;
  } catch {
    return undefined;
  }
}

export function presentedClient(req: IncomingMessage, form: Form): PresentedClient {
  const header = req.headers.authorization;
  const basic = typeof header === 'string' && /^basic /i.test(header);
  const basicCredentials = basic ? decodeBasic(header) : null;
  const formClientId = form.get('client_id');
  const assertion = form.get('client_assertion');
  return {
    basic,
    basicCredentials,
    formClientId,
    formClientSecret: form.get('client_secret'),
    assertion,
    assertionType: form.get('client_assertion_type'),
    clientId: basic ? basicCredentials?.id : (formClientId ?? assertedSubject(assertion)),
  };
}

/** `invalid_client` for this request, with the Basic challenge when it used Basic. */
export function clientRefused(presented: PresentedClient): HttpError {
  return invalidClient(presented.basic);
}

function secretMatches(client: ClientRecord, secret: string): boolean {
  const expected = client.clientSecretHash;
  const presented = Buffer.from(hashToken(secret), 'hex');
  // A dummy comparison for public clients keeps the timing of the two paths alike.
  const stored = expected && /^[0-9a-f]{64}$/.test(expected) ? Buffer.from(expected, 'hex') : Buffer.alloc(32);
  return timingSafeEqual(presented, stored) && expected !== undefined;
}

/**
 * Authenticates the client a request presents, or returns null when it carries no client
 * identification at all. Throws `invalid_client` for any failed attempt and `invalid_request` for
 * two methods at once. `request.limit` is taken on success, before an assertion's `jti` is recorded.
 */
export async function authenticateClient(
  presented: PresentedClient,
  ctx: ClientAuthContext,
  request: ClientAuthRequest = {},
): Promise<AuthenticatedClient | null> {
  const { usedAssertion } = checkOneMethod(presented);
  if (usedAssertion) return authenticateAssertion(presented, ctx, request);
  const client = await authenticateNamedClient(presented, ctx, request);
  await request.limit?.(client);
  return client;
}

function checkOneMethod(presented: PresentedClient): { usedAssertion: boolean } {
  const usedAssertion = presented.assertion !== undefined || presented.assertionType !== undefined;
  if ([presented.basic, presented.formClientSecret !== undefined, usedAssertion].filter(Boolean).length > 1) {
    throw new HttpError('invalid_request', 'use one client authentication method, not two');
  }
  return { usedAssertion };
}

/** A client that names itself (Basic, or `client_id` with or without `client_secret`). */
async function authenticateNamedClient(
  presented: PresentedClient,
  ctx: ClientAuthContext,
  request: ClientAuthRequest,
): Promise<AuthenticatedClient | null> {
  const { store } = ctx;
  const { basic: usedBasic, formClientId: postId, formClientSecret: postSecret } = presented;
  let id: string;
  let secret: string | undefined;
  if (usedBasic) {
    const decoded = presented.basicCredentials;
    if (!decoded) throw invalidClient(true);
    if (postId !== undefined && postId !== decoded.id)
      throw new HttpError('invalid_request', 'client_id does not match the Basic credentials');
    ({ id, secret } = decoded);
  } else if (postId !== undefined) {
    id = postId;
    secret = postSecret;
  } else {
    if (postSecret !== undefined) throw invalidClient(false);
    return null;
  }
  // Issued ids are short; a Client ID Metadata Document's id is its URL (at most 2048 characters).
  if (id.length === 0 || (id.length > 128 && !isClientIdMetadataUrl(id))) throw invalidClient(usedBasic);
  const client = await store.getClient(id);
  if (client === 'corrupt') {
    if (secret !== undefined) hashToken(secret);
    throw refused(ctx, id, 'the client record is unreadable', usedBasic);
  }
  if (!client || client.revokedAt !== undefined) {
    if (secret !== undefined) hashToken(secret); // same work whether or not the client exists
    throw invalidClient(usedBasic);
  }
  const method = await currentMethod(ctx, client, request, usedBasic);
  if (method === 'none') {
    if (secret !== undefined) throw invalidClient(usedBasic);
    return { client, confidential: false };
  }
  // A client that authenticates with its key must sign: its id alone (or a secret it has none of) is refused.
  if (method === 'private_key_jwt') {
    if (secret !== undefined) hashToken(secret);
    throw refused(ctx, client.clientId, 'a private_key_jwt client presented no client assertion', usedBasic);
  }
  if (secret === undefined || !secretMatches(client, secret)) throw invalidClient(usedBasic);
  return { client, confidential: true };
}

/**
 * How a client must authenticate now. A metadata-document client's method is its document's, read
 * (through the document cache, with its usual freshness) on every request: a document that moved to
 * private_key_jwt holds every code and refresh token issued before to it. With documents turned off,
 * no document can be read and the stored record's method stands (as at /authorize). A registered
 * client's is what it registered.
 */
async function currentMethod(ctx: ClientAuthContext, client: ClientRecord, request: ClientAuthRequest, basic: boolean): Promise<string> {
  if (client.source !== 'cimd' || !ctx.cimd) return client.tokenEndpointAuthMethod;
  let doc: ClientMetadataDocument;
  try {
    doc = await ctx.cimd.resolve(client.clientId, request.fetches);
  } catch (err) {
    if (!(err instanceof HttpError) || err.code !== 'invalid_client') throw err;
    throw refused(ctx, client.clientId, `the client's metadata document cannot be used: ${err.description ?? 'it is not valid'}`, basic);
  }
  return doc.tokenEndpointAuthMethod;
}

/** invalid_client, the reason in the log only: the answer never says which check failed. */
function refused(ctx: ClientAuthContext, clientId: string | undefined, reason: string, basic = false): HttpError {
  ctx.logger.info({ clientId: clientId?.slice(0, 200), reason }, 'client authentication refused');
  return invalidClient(basic);
}

/**
 * private_key_jwt (RFC 7523 §2.2, RFC 7521 §4.2): `client_assertion` is a JWT signed by one of the
 * client's keys (its metadata document's `jwks_uri` or `jwks`, or its registration's), with
 * `iss` = `sub` = the client id; `aud` this server's issuer or its token endpoint URL, a string or a
 * one-element array (an assertion made for several servers could be replayed by each of them); `exp`
 * and `iat` present, at most ASSERTION_MAX_LIFETIME_SECONDS apart, with ASSERTION_SKEW_SECONDS of
 * skew; RS256, PS256 or ES256; the key chosen by `kid` (required when the set has several keys that
 * fit); and a `jti` accepted once, remembered in the store until the assertion expires (every replica
 * sees it).
 */
async function authenticateAssertion(
  presented: PresentedClient,
  ctx: ClientAuthContext,
  request: ClientAuthRequest,
): Promise<AuthenticatedClient> {
  const { assertion, assertionType } = presented;
  const claimed = presented.clientId;
  if (assertionType !== JWT_BEARER_ASSERTION) throw refused(ctx, claimed, 'client_assertion_type is not jwt-bearer');
  if (assertion === undefined || assertion.length === 0 || assertion.length > MAX_ASSERTION_LENGTH)
    throw refused(ctx, claimed, 'client_assertion missing or too long');
  let unverified;
  try {
    unverified = decodeJwt(assertion);
  } catch {
    throw refused(ctx, claimed, 'client_assertion is not a JWT');
  }
  const id = unverified.sub;
  if (typeof id !== 'string' || id.length === 0 || unverified.iss !== id)
    throw refused(ctx, claimed, 'client_assertion iss and sub must both be the client id');
  if (presented.formClientId !== undefined && presented.formClientId !== id)
    throw refused(ctx, claimed, 'client_id differs from the assertion subject');
  if (id.length > 128 && !isClientIdMetadataUrl(id)) throw refused(ctx, id, 'unknown client');
  const client = await ctx.store.getClient(id);
  if (client === 'corrupt') throw refused(ctx, id, 'the client record is unreadable');
  if (!client || client.revokedAt !== undefined) throw refused(ctx, id, 'unknown or deleted client');
  // A metadata-document client's method is what its document says now (it may have added keys since
  // its record was made); a registered client's is what it registered.
  if (client.tokenEndpointAuthMethod !== 'private_key_jwt' && client.source !== 'cimd') {
    throw refused(ctx, id, `the client authenticates with ${client.tokenEndpointAuthMethod}, not private_key_jwt`);
  }
  const keyProblem = (err: unknown): HttpError => {
    // Ours to answer as such (503 at capacity), or the address's (429 over its fetch budget or lockout).
    if (err instanceof HttpError && (err.code === 'temporarily_unavailable' || err.code === 'too_many_requests')) return err;
    return refused(ctx, id, `the client's keys could not be had: ${err instanceof HttpError ? err.description : (err as Error).message}`);
  };
  let keys: JSONWebKeySet;
  try {
    keys = await keysOf(ctx, client, request.fetches);
  } catch (err) {
    throw keyProblem(err);
  }
  const issuer = ctx.publicUrl();
  const audiences = [issuer, `${issuer}/token`];
  const aud = unverified.aud;
  const audience = Array.isArray(aud) && aud.length === 1 ? aud[0] : aud;
  if (typeof audience !== 'string' || !audiences.includes(audience))
    throw refused(ctx, id, 'client_assertion aud is not this server (its issuer or token endpoint), or names several audiences');
  const verify = (set: JSONWebKeySet) =>
    jwtVerify(assertion, createLocalJWKSet(set), {
      algorithms: ASSERTION_ALGORITHMS,
      issuer: id,
      subject: id,
      audience: audiences,
      clockTolerance: ASSERTION_SKEW_SECONDS,
      currentDate: new Date(ctx.clock.now()),
      requiredClaims: ['exp', 'iat', 'jti'],
    });
  const notAccepted = (err: unknown) =>
    refused(ctx, id, `client_assertion not accepted: ${(err as { code?: string }).code ?? (err as Error).message}`);
  let payload;
  try {
    ({ payload } = await verify(keys));
  } catch (err) {
    if ((err as { code?: string }).code !== 'ERR_JWKS_NO_MATCHING_KEY') throw notAccepted(err);
    // No key for its kid: the client may have rotated one in. Its keys are fetched again, at most once
    // per cooldown per URL; the set fetched replaces the cached one, so a key removed is gone too.
    let newer: JSONWebKeySet | undefined;
    try {
      newer = await refetchKeysOf(ctx, client, request.fetches);
    } catch (refetchErr) {
      throw keyProblem(refetchErr);
    }
    if (newer === undefined) throw notAccepted(err);
    try {
      ({ payload } = await verify(newer));
    } catch (again) {
      throw notAccepted(again);
    }
  }
  const { exp, iat, jti } = payload as { exp: number; iat: number; jti: unknown };
  const now = ctx.clock.now() / 1000;
  if (iat > now + ASSERTION_SKEW_SECONDS) throw refused(ctx, id, 'client_assertion iat is in the future');
  if (exp - iat > ASSERTION_MAX_LIFETIME_SECONDS)
    throw refused(ctx, id, `client_assertion lives longer than ${ASSERTION_MAX_LIFETIME_SECONDS} s`);
  if (typeof jti !== 'string' || jti.length === 0 || jti.length > MAX_JTI_LENGTH)
    throw refused(ctx, id, 'client_assertion jti missing or too long');
  const authenticated: AuthenticatedClient = { client, confidential: true };
  // The limit first, the jti last: only an assertion that verified and was let through is remembered,
  // so refused requests (over the limit, bad signature) add nothing to the store.
  await request.limit?.(authenticated);
  // Names are digests: a client id and a jti are attacker-chosen text.
  const fresh = await ctx.store.useOnce(`client-assertion:${hashToken(id)}:${hashToken(jti)}`, (exp + ASSERTION_SKEW_SECONDS) * 1000);
  if (!fresh) throw refused(ctx, id, 'client_assertion replayed (jti seen before)');
  return authenticated;
}

/** The public keys of a private_key_jwt client: from its metadata document (cached), or its registration. */
async function keysOf(ctx: ClientAuthContext, client: ClientRecord, fetches: ResolveOptions | undefined): Promise<JSONWebKeySet> {
  if (client.source === 'cimd') {
    if (!ctx.cimd) throw new Error('client metadata documents are turned off');
    const doc = await ctx.cimd.resolve(client.clientId, fetches);
    if (doc.jwks !== undefined) return doc.jwks;
    if (doc.jwksUri !== undefined) return ctx.cimd.keySet(doc.jwksUri, fetches);
    throw new Error('the metadata document no longer asks for private_key_jwt');
  }
  if (client.jwks !== undefined) {
    const set = checkKeySet(JSON.parse(client.jwks));
    if (set === undefined) throw new Error('the stored key set is not usable');
    return set;
  }
  if (client.jwksUri !== undefined) {
    if (!ctx.cimd) throw new Error('jwks_uri needs outbound fetches, which are off with client metadata documents');
    return ctx.cimd.keySet(client.jwksUri, fetches);
  }
  throw new Error('the client has no keys');
}

/**
 * The client's keys fetched again after an assertion's kid was not among them: from its `jwks_uri`
 * (its document's or its registration's), or its document when the keys are inline in it. Undefined
 * when there is nothing to fetch again (keys stored with the registration) or it was fetched within
 * the refetch cooldown.
 */
async function refetchKeysOf(
  ctx: ClientAuthContext,
  client: ClientRecord,
  fetches: ResolveOptions | undefined,
): Promise<JSONWebKeySet | undefined> {
  if (!ctx.cimd) return undefined;
  if (client.source === 'cimd') {
    const doc = await ctx.cimd.resolve(client.clientId, fetches);
    if (doc.jwksUri !== undefined) return ctx.cimd.refetchKeySet(doc.jwksUri, fetches);
    const newer = await ctx.cimd.refetchDocument(client.clientId, fetches);
    if (newer === undefined) return undefined;
    if (newer.jwks !== undefined) return newer.jwks;
    if (newer.jwksUri !== undefined) return ctx.cimd.keySet(newer.jwksUri, fetches);
    throw new Error('the metadata document no longer asks for private_key_jwt');
  }
  if (client.jwks === undefined && client.jwksUri !== undefined) return ctx.cimd.refetchKeySet(client.jwksUri, fetches);
  return undefined;
}
