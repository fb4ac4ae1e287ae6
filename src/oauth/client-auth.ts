// Client authentication at the token, revocation and introspection endpoints (RFC 6749 §2.3):
// `client_secret_basic` or `client_secret_post`, never both; secrets compared as SHA-256 digests in
// constant time; public clients identify themselves with `client_id` alone.

import type { Form } from '../body.ts';
import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { hashToken } from '../credentials.ts';
import { isClientIdMetadataUrl } from './cimd.ts';
import { HttpError, invalidClient } from '../errors.ts';
import type { ClientRecord, ClientStorage } from '../store/types.ts';

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

/** The client_id a token request names (Basic or form), without authenticating it; for rate limits. */
export function presentedClientId(req: IncomingMessage, form: Form): string | undefined {
  const header = req.headers.authorization;
  if (typeof header === 'string' && /^basic /i.test(header)) return decodeBasic(header)?.id;
  return form.get('client_id');
}

function secretMatches(client: ClientRecord, secret: string): boolean {
  const expected = client.clientSecretHash;
  const presented = Buffer.from(hashToken(secret), 'hex');
  // A dummy comparison for public clients keeps the timing of the two paths alike.
  const stored = expected && /^[0-9a-f]{64}$/.test(expected) ? Buffer.from(expected, 'hex') : Buffer.alloc(32);
  return timingSafeEqual(presented, stored) && expected !== undefined;
}

/**
 * Authenticates the client of a request, or returns null when the request carries no client
 * identification at all. Throws `invalid_client` for any failed attempt and `invalid_request` for
 * two methods at once. `authorization` is the request's Authorization header (only Basic is read).
 */
export async function authenticateClient(
  req: IncomingMessage,
  form: Form,
  store: ClientStorage,
): Promise<AuthenticatedClient | null> {
  const header = req.headers.authorization;
  const usedBasic = typeof header === 'string' && /^basic /i.test(header);
  const postId = form.get('client_id');
  const postSecret = form.get('client_secret');
  if (usedBasic && postSecret !== undefined) {
    throw new HttpError('invalid_request', 'use one client authentication method, not two');
  }
  let id: string;
  let secret: string | undefined;
  if (usedBasic) {
    const decoded = decodeBasic(header);
    if (!decoded) throw invalidClient(true);
    if (postId !== undefined && postId !== decoded.id) throw new HttpError('invalid_request', 'client_id does not match the Basic credentials');
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
  if (!client || client.revokedAt !== undefined) {
    if (secret !== undefined) hashToken(secret); // same work whether or not the client exists
    throw invalidClient(usedBasic);
  }
  if (client.tokenEndpointAuthMethod === 'none') {
    if (secret !== undefined) throw invalidClient(usedBasic);
    return { client, confidential: false };
  }
  if (secret === undefined || !secretMatches(client, secret)) throw invalidClient(usedBasic);
  return { client, confidential: true };
}
