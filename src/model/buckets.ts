// Which Cluster bucket (hash tag `{oauth:<bucket>}`) an OAuth record belongs to: the rule the store's
// key names (store/key-layout.ts) and the minting of tokens (credentials.ts) share.

import { createHash } from 'node:crypto';

/** How many Cluster buckets a client's records are spread over (two hex digits name one). */
export const OAUTH_BUCKETS = 256;

/**
 * The bucket of a client: the first two hex digits of SHA-256(clientId). A client's record, its token
 * set, its refresh families, and the tokens and codes minted for it share the bucket's hash tag
 * `{oauth:<bucket>}`: deleteClient, issuance, rotation and redemption each stay in one slot.
 */
export function clientBucket(clientId: string): string {
  return createHash('sha256').update(clientId).digest('hex').slice(0, 2);
}

/**
 * The bucket of a token (access, refresh) or authorization code, read from its SHA-256 alone: its
 * first two hex digits. The sidecar mints a client's tokens so that this is the client's bucket
 * (generateTokenFor), so a lookup finds the record from the presented token in one read.
 */
export function hashBucket(hexDigest: string): string {
  return hexDigest.slice(0, 2);
}
