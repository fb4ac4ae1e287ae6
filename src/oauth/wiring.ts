// The proxy listener's routes besides /mcp, as the configuration turns them on.

import type { SigningKeys } from '../assertion/keys.ts';
import { jwksRoute } from '../assertion/jwks.ts';
import type { Config } from '../config/load.ts';
import type { Route } from '../http/serve.ts';
import type { Clock } from '../model/clock.ts';
import type { Logger } from '../observability/logger.ts';
import type { UpstreamCredentials } from '../upstream-credentials/wiring.ts';
import { createCimdResolver, type CimdResolver } from './cimd.ts';
import type { OAuthContext } from './context.ts';
import { createIdJagVerifier, createIdpVerifier } from './idp.ts';
import { directoryGateFor } from './directory-gate.ts';
import { oauthRoutes } from './routes.ts';

/** The proxy listener's routes besides /mcp: the assertion keys, the connect pages, the OAuth endpoints and sign-in. */
export function proxyRoutesFor(
  ctx: Omit<OAuthContext, 'idp' | 'idJag' | 'keepIdpTokens' | 'cimd' | 'directory'>,
  parts: {
    /** A resolver to use instead of the configured one (tests: a test CA). */
    cimd: CimdResolver | undefined;
    assertions: { keys: SigningKeys } | undefined;
    onProxy: UpstreamCredentials | undefined;
  },
): Route[] {
  const { assertions, onProxy } = parts;
  return [
    ...(assertions ? [jwksRoute(assertions.keys)] : []),
    ...(onProxy?.routes ?? []),
    ...oauthRoutes({
      ...ctx,
      idp: createIdpVerifier(ctx.config.idp),
      idJag: createIdJagVerifier(ctx.config.idp),
      keepIdpTokens: onProxy?.keepIdpTokens,
      directory: directoryGateFor(ctx.config, ctx.store, ctx.clock),
      cimd: parts.cimd ?? cimdResolverFor(ctx.config, ctx.clock, ctx.logger),
    }),
  ];
}

/** Client ID Metadata Documents, as configured (only browser sign-in uses them). */
export function cimdResolverFor(config: Config, clock: Clock, logger: Logger): CimdResolver | undefined {
  const c = config.oauth.clientMetadataDocuments;
  if (!c.enabled) return undefined;
  return createCimdResolver({
    timeoutMs: c.timeoutMs,
    maxBytes: c.maxBytes,
    cacheTtlMs: c.cacheTtlSeconds * 1000,
    maxCacheEntries: c.cacheMaxEntries,
    maxConcurrentFetches: c.maxConcurrentFetches,
    maxConcurrentFetchesPerAddress: c.maxConcurrentFetchesPerAddress,
    failureCacheMs: c.failureCacheSeconds * 1000,
    refetchCooldownMs: c.keySetRefetchCooldownSeconds * 1000,
    allowPrivateAddresses: c.allowPrivateAddresses,
    clock,
    logger,
  });
}
