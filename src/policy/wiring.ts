// The per-tool policy gate as the configuration sets it up.

import type { Config } from '../config/load.ts';
import { limitKey } from '../model/net-address.ts';
import type { Clock } from '../model/clock.ts';
import { resourceMetadataUrl } from '../oauth/resource-metadata.ts';
import type { Audit } from '../observability/audit.ts';
import type { Metrics } from '../observability/metrics.ts';
import type { ClientAddresses } from '../http/client-address.ts';
import type { ApprovalStorage, QuotaStorage } from '../store/types.ts';
import type { Logger } from '../observability/logger.ts';
import { ApprovalHold, type ApprovalHoldOptions } from './approval-hold.ts';
import { ApprovalWebhook } from './approval-webhook.ts';
import { createPolicyGate, type PolicyGate } from '../proxy/policy-gate.ts';
import { policyOf } from './rules.ts';

/**
 * The per-tool policy gate, when `policy.rules` or `policy.quotas` is configured. Quotas without rules
 * need the body read too: every call is then allowed, and only counted.
 */
export function policyGateFor(
  config: Config,
  shared: {
    store: QuotaStorage & ApprovalStorage;
    clock: Clock;
    metrics: Metrics;
    audit: Audit;
    publicUrl: () => string;
    addresses: ClientAddresses;
    logger?: Logger;
  },
): PolicyGate | undefined {
  const { store, clock, metrics, audit, publicUrl, addresses } = shared;
  const { rules, quotas, maxBodyBytes, maxBatch, maxDepth } = config.policy;
  if (rules === undefined && quotas === undefined) return undefined;
  const holds = rules?.rules.some((r) => r.effect === 'approve') === true;
  return createPolicyGate({
    approvals: holds
      ? new ApprovalHold({ store, clock, metrics, audit, publicUrl, masterToken: config.masterToken, requested: notifier(config, shared) })
      : undefined,
    policy: rules === undefined ? policyOf('allow', { rules: [], scopes: [] }) : policyOf(config.policy.default, rules),
    quotas:
      quotas === undefined
        ? undefined
        : {
            quotas,
            store,
            clock,
            addressOf: (req) => limitKey(addresses.client(req), config.rateLimits.ipv6PrefixLength),
            defaultIssuer: config.idp.issuer,
          },
    limits: { maxBatch, maxDepth },
    maxBodyBytes,
    metrics,
    audit,
    resourceMetadataUrl: () => resourceMetadataUrl(publicUrl()),
  });
}

/** The approval webhook's notice, when one is configured (its secret goes with it: checked with the configuration). */
function notifier(config: Config, shared: { metrics: Metrics; logger?: Logger | undefined }): ApprovalHoldOptions['requested'] {
  const { webhook, webhookSecret } = config.policy.approval;
  if (webhook === undefined || webhookSecret === undefined || shared.logger === undefined) return undefined;
  const hook = new ApprovalWebhook({ url: webhook, secret: webhookSecret, logger: shared.logger, metrics: shared.metrics });
  return (approval, url) => hook.notify(approval, url);
}
