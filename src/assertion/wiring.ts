// Caller assertions for the upstream (upstream.assertion) as the configuration sets them up.

import type { Config } from '../config/load.ts';
import type { Clock } from '../model/clock.ts';
import type { Logger } from '../observability/logger.ts';
import type { TokenStore } from '../store/types.ts';
import { parseSigningKey, signingKeyText, SigningKeys } from './keys.ts';
import { AssertionSigner } from './signer.ts';

/**
 * Caller assertions, when `upstream.assertion` is on: the first signing key is published before the
 * listeners open (a store that cannot take it stops the start-up).
 */
export async function assertionsFor(config: Config, store: TokenStore, clock: Clock, logger: Logger, publicUrl: () => string) {
  const { upstream } = config;
  if (!upstream.assertion) return undefined;
  const given = signingKeyText(upstream);
  if (given?.error !== undefined) throw new Error(given.error);
  const keys = new SigningKeys({
    store,
    clock,
    logger,
    assertionLifetimeMs: upstream.assertionLifetimeSeconds * 1000,
    rotationMs: upstream.assertionKeyRotationSeconds * 1000,
    pinned: given === undefined ? undefined : await parseSigningKey(given.text),
  });
  await keys.start();
  const signer = new AssertionSigner({
    keys,
    clock,
    issuer: publicUrl,
    audience: upstream.assertionAudience ?? new URL(upstream.url).origin,
    lifetimeSeconds: upstream.assertionLifetimeSeconds,
  });
  return { keys, signer };
}
