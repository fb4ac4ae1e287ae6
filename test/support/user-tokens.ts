// A person's user-grade token (the subject at an identity provider), stored the way the IdP token
// exchange stores one: for the tests that need a person's token without a sign-in.

import { generateToken, hashToken, TTL_7_DAYS } from '../../src/model/credentials.ts';
import type { Clock } from '../../src/model/clock.ts';
import type { TokenStore } from '../../src/store/types.ts';

/** Stores a user-grade token of `subject` at `issuer` (default https://idp.example), valid `lifetimeMs` (7 days) from the stack's clock; the raw token. */
export async function storeUserToken(
  stack: { store: TokenStore; clock: Clock },
  subject: string,
  options: { issuer?: string; lifetimeMs?: number } = {},
): Promise<string> {
  const token = generateToken();
  const now = stack.clock.now();
  await stack.store.putUserToken({
    tokenHash: hashToken(token),
    subject,
    issuer: options.issuer ?? 'https://idp.example',
    createdAt: now,
    expiresAt: now + (options.lifetimeMs ?? TTL_7_DAYS),
  });
  return token;
}
