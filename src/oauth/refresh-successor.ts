// The pair a refresh token was rotated to, kept on the rotated token so that every presentation of
// it within the grace window gets that SAME pair again (parallel sessions sharing one credentials
// file converge on one token instead of forking the family). Sealed as a JWE (`dir`, A256GCM, by
// jose) under a key derived with HKDF-SHA256 from the raw rotated token, which is never stored: the
// store holds only its hash, so Redis alone cannot open it; whoever presents the token can.

import { hkdfSync } from 'node:crypto';
import { CompactEncrypt, compactDecrypt } from 'jose';

/** What a replay within the window is answered with. */
export interface SealedPair {
  access_token: string;
  refresh_token: string;
  scope?: string;
  /** Epoch ms the access token expires at (the answer's expires_in is what is left of it). */
  accessExpiresAt: number;
}

const INFO = 'mcp-bearer-proxy refresh-token successor v1';
const MAX_SEALED_LENGTH = 4096;

function keyOf(rawToken: string): Uint8Array {
  return new Uint8Array(hkdfSync('sha256', rawToken, '', INFO, 32));
}

export async function sealSuccessor(rawToken: string, pair: SealedPair): Promise<string> {
  return new CompactEncrypt(new TextEncoder().encode(JSON.stringify(pair)))
    .setProtectedHeader({ alg: 'dir', enc: 'A256GCM' })
    .encrypt(keyOf(rawToken));
}

/** The sealed pair, or undefined when it cannot be opened with this token or is not one (fail closed). */
export async function openSuccessor(rawToken: string, sealed: string): Promise<SealedPair | undefined> {
  if (sealed.length > MAX_SEALED_LENGTH) return undefined;
  try {
    const { plaintext } = await compactDecrypt(sealed, keyOf(rawToken), {
      keyManagementAlgorithms: ['dir'],
      contentEncryptionAlgorithms: ['A256GCM'],
    });
    const pair = JSON.parse(new TextDecoder().decode(plaintext)) as Partial<SealedPair>;
    if (typeof pair.access_token !== 'string' || typeof pair.refresh_token !== 'string' || !Number.isSafeInteger(pair.accessExpiresAt))
      return undefined;
    if (pair.scope !== undefined && typeof pair.scope !== 'string') return undefined;
    return pair as SealedPair;
  } catch {
    return undefined;
  }
}
