// The admin listener as the configuration sets it up.

import type { Server } from 'node:http';
import type { Config } from '../config/load.ts';
import type { FailedAuthLimiter } from '../http/rate-limits.ts';
import type { Clock } from '../model/clock.ts';
import { MasterToken } from '../model/credentials.ts';
import type { Audit } from '../observability/audit.ts';
import type { Logger } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import type { PolicyGate } from '../proxy/policy-gate.ts';
import type { TokenStore } from '../store/types.ts';
import type { CredentialVault } from '../upstream-credentials/vault.ts';
import { createAdminServer, type AdminOverrides } from './server.ts';
import { identityProviders, issuerOfProvider } from '../oauth/providers.ts';

/** The admin listener: every credential operation, behind the master token. */
export function adminServerFor(
  config: Config,
  shared: {
    store: TokenStore;
    clock: Clock;
    logger: Logger;
    metrics: Metrics;
    audit: Audit;
    masterToken: MasterToken;
    upstreamCredentials: CredentialVault | undefined;
  },
  extra: { policy: PolicyGate['policy'] | undefined; failures: FailedAuthLimiter | undefined; overrides: AdminOverrides | undefined },
): Server {
  return createAdminServer({
    ...shared,
    maxBodyBytes: config.admin.maxBodyBytes,
    policy: extra.policy,
    quotas: config.policy.quotas && { quotas: config.policy.quotas, ipv6PrefixLength: config.rateLimits.ipv6PrefixLength },
    profileLifetimes: config.oauth.profiles,
    people: { defaultIssuer: config.idp.issuer, issuers: identityProviders(config.idp).map((p) => p.issuer) },
    failures: extra.failures,
    scim:
      config.scim.token === ''
        ? undefined
        : {
            token: new MasterToken(config.scim.token),
            match: config.scim.match,
            provider: config.scim.provider,
            issuer: issuerOfProvider(config.idp, config.scim.provider),
          },
    ...extra.overrides,
  });
}
