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
  /** The client the request names (Basic first, else the form), unverified. */
  readonly clientId: string | undefined;
}

export function presentedClient(req: IncomingMessage, form: Form): PresentedClient {
  const header = req.headers.authorization;
  const basic = typeof header === 'string' && /^basic /i.test(header);
  const basicCredentials = basic ? decodeBasic(header) : null;
  const formClientId = form.get('client_id');
  return {
    basic,
    basicCredentials,
    formClientId,
    formClientSecret: form.get('client_secret'),
    clientId: basic ? basicCredentials?.id : formClientId,
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
 * two methods at once.
 */
export async function authenticateClient(presented: PresentedClient, store: ClientStorage): Promise<AuthenticatedClient | null> {
  const { basic: usedBasic, formClientId: postId, formClientSecret: postSecret } = presented;
  if (usedBasic && postSecret !== undefined) {
    throw new HttpError('invalid_request', 'use one client authentication method, not two');
  }
  let id: string;
  let secret: string | undefined;
  if (usedBasic) {
    const decoded = presented.basicCredentials;
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
