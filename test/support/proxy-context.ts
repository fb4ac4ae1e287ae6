// A ProxyContext on the memory store, for calling the proxy's handlers and decide() directly (no
// listener): quiet logs, the handle guard and DPoP verifier of the configuration, and a token of an
// OAuth client to present.

import { Writable } from 'node:stream';
import type { Config } from '../../src/config/load.ts';
import type { ManualClock } from '../../src/model/clock.ts';
import { generateToken, hashToken, MasterToken } from '../../src/model/credentials.ts';
import { defaultProfileRecords } from '../../src/model/profiles.ts';
import { dpopVerifierFor } from '../../src/oauth/dpop.ts';
import { Audit } from '../../src/observability/audit.ts';
import { createLogger } from '../../src/observability/logger.ts';
import type { Metrics } from '../../src/observability/metrics.ts';
import { clientAddresses } from '../../src/http/client-address.ts';
import { proxyContext, type ProxyContext, type ProxyDeps } from '../../src/proxy/context.ts';
import type { Forwarder } from '../../src/proxy/forwarder.ts';
import { HandleGuard } from '../../src/proxy/handle-guard.ts';
import type { MemoryTokenStore } from '../../src/store/memory.ts';

export const HANDLE_IDLE_MS = 60_000;

/** A context for `config`; `more` adds what the configuration would build (a policy gate, upstream credentials). */
export function directProxyContext(
  parts: { config: Config; store: MemoryTokenStore; clock: ManualClock; metrics: Metrics; publicUrl: string },
  more: (shared: { audit: Audit; addresses: ProxyDeps['addresses'] }) => Partial<ProxyDeps> = () => ({}),
): ProxyContext {
  const { config, store, clock, metrics, publicUrl } = parts;
  const logger = createLogger('warn', new Writable({ write: (_chunk, _enc, done) => done() }), 'json');
  const audit = new Audit({ logger, store, clock, stream: true, maxLen: 100 });
  const addresses = clientAddresses(config.proxy.trustedProxies);
  return proxyContext({
    config,
    store,
    clock,
    logger,
    metrics,
    masterToken: new MasterToken(config.masterToken),
    forwarder: {} as Forwarder,
    publicUrl: () => publicUrl,
    dpop: dpopVerifierFor(config, store, clock),
    addresses,
    handles: new HandleGuard({ store, clock, metrics, audit, logger, idleMs: HANDLE_IDLE_MS, limits: { maxBatch: 10, maxDepth: 10 } }),
    ...more({ audit, addresses }),
  });
}

/** Seeds the profiles and a confidential OAuth client; returns an access token of it (scope mcp:read, ten minutes). */
export async function seedClientToken(store: MemoryTokenStore, clock: ManualClock, clientId: string): Promise<string> {
  const token = generateToken();
  const now = clock.now();
  await store.seedProfiles(defaultProfileRecords(now));
  await store.createClient({
    clientId,
    redirectUris: [],
    profile: 'default',
    tokenEndpointAuthMethod: 'client_secret_basic',
    grantTypes: ['client_credentials'],
    source: 'admin',
    createdAt: now,
    clientSecretHash: hashToken(generateToken()),
  });
  const created = await store.createAccessToken({
    tokenHash: hashToken(token),
    clientId,
    scope: 'mcp:read',
    createdAt: now,
    expiresAt: now + 600_000,
  });
  if (created !== 'ok') throw new Error(`the token was not created: ${created}`);
  return token;
}

/** `mcp_auth_requests_total{outcome, reason}` as it stands. */
export async function requestsCounted(metrics: Metrics, outcome: string, reason = ''): Promise<number> {
  const values = (await metrics.requests.get()).values;
  return values.find((v) => v.labels.outcome === outcome && (v.labels.reason ?? '') === reason)?.value ?? 0;
}
