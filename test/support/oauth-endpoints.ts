// The OAuth endpoints alone, in process, on the memory store and a manual clock: the route table the
// proxy listener serves (oauthRoutes), behind the same serve() boundary, without the proxy, the
// upstream or Redis. A grant's change gets a loop of seconds, not the minutes of the full stacks.

import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { Audit } from '../../src/observability/audit.ts';
import { ManualClock } from '../../src/model/clock.ts';
import { buildConfig, type Config } from '../../src/config/load.ts';
import { MasterToken } from '../../src/model/credentials.ts';
import { serve } from '../../src/http/serve.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { Metrics } from '../../src/observability/metrics.ts';
import type { OAuthContext } from '../../src/oauth/context.ts';
import { createIdJagVerifier, createIdpVerifier } from '../../src/oauth/idp.ts';
import type { IdpSignIn } from '../../src/oauth/oidc-client.ts';
import { oauthRoutes } from '../../src/oauth/routes.ts';
import { dpopVerifierFor } from '../../src/oauth/dpop.ts';
import { clientAddresses } from '../../src/http/client-address.ts';
import { MemoryTokenStore } from '../../src/store/memory.ts';
import { defaultProfileRecords } from '../../src/model/profiles.ts';
import type { ClientRecord } from '../../src/model/records.ts';
import { hashToken } from '../../src/model/credentials.ts';

export const PUBLIC_URL = 'https://mcp.example.test';

export interface OAuthEndpoints {
  url: string;
  ctx: OAuthContext;
  store: MemoryTokenStore;
  clock: ManualClock;
  logs: string[];
  /** The audit events written to the log, in order. */
  auditEvents(): Array<Record<string, any>>;
  /** POST /token with a form body. */
  token(params: Record<string, string>, headers?: Record<string, string>): Promise<{ status: number; headers: Headers; body: any }>;
  /** A client stored directly (as createClient would store it); its secret, unless public. */
  client(fields: Partial<ClientRecord> & { grantTypes: string[] }): Promise<{ clientId: string; clientSecret: string | undefined }>;
  close(): Promise<void>;
}

/**
 * Browser sign-in switched on for the token endpoint's sake: the authorization_code grant only needs
 * it to be configured; /authorize, which would call it, is not driven here.
 */
const SIGN_IN_CONFIGURED: IdpSignIn = {
  issuer: 'https://idp.example.test',
  providers: [{ name: 'default', issuer: 'https://idp.example.test', domains: [] }],
  start: () => Promise.reject(new Error('/authorize is not driven by the handler tests')),
  finish: () => Promise.reject(new Error('/authorize is not driven by the handler tests')),
  refresh: () => Promise.reject(new Error('IdP refresh is not driven by the handler tests')),
  check: () => Promise.resolve(),
};

export async function startOAuthEndpoints(options: { config?: Record<string, unknown>; signIn?: boolean } = {}): Promise<OAuthEndpoints> {
  const clock = new ManualClock();
  const logs: string[] = [];
  const logger = createLogger(
    'debug',
    new Writable({
      write(chunk, _enc, done) {
        logs.push(String(chunk));
        done();
      },
    }),
    'json',
  );
  const config: Config = buildConfig(
    {
      masterToken: randomBytes(32).toString('hex'),
      store: 'memory',
      proxy: { publicUrl: PUBLIC_URL },
      rateLimits: { failedAuthPerMinute: 0, tokenRequestsPerMinute: 0, revocationRequestsPerMinute: 0, introspectionRequestsPerMinute: 0 },
      ...options.config,
    },
    {},
  );
  const store = new MemoryTokenStore({ clock });
  await store.seedProfiles(defaultProfileRecords(clock.now()));
  const metrics = new Metrics({ defaultMetrics: false });
  const audit = new Audit({ logger, store, clock, stream: true, maxLen: 1000 });
  const ctx: OAuthContext = {
    config,
    store,
    clock,
    logger,
    metrics,
    audit,
    masterToken: new MasterToken(config.masterToken),
    idp: createIdpVerifier(config.idp),
    idJag: createIdJagVerifier(config.idp),
    signIn: options.signIn ? SIGN_IN_CONFIGURED : undefined,
    dpop: dpopVerifierFor(config, store, clock),
    addresses: clientAddresses(config.proxy.trustedProxies),
    publicUrl: () => PUBLIC_URL,
  };
  const server = serve({ name: 'proxy', routes: oauthRoutes(ctx), logger, http: {}, onStoreUnavailable: () => {} });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    ctx,
    store,
    clock,
    logs,
    auditEvents: () =>
      logs
        .map((l) => JSON.parse(l))
        .filter((l) => l.audit !== undefined)
        .map((l) => l.audit),
    async token(params, headers = {}) {
      const res = await fetch(`${url}/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body: new URLSearchParams(params).toString(),
      });
      const text = await res.text();
      return { status: res.status, headers: res.headers, body: text === '' ? undefined : JSON.parse(text) };
    },
    async client(fields) {
      const clientId = `mcp_${randomBytes(16).toString('hex')}`;
      const isPublic = fields.tokenEndpointAuthMethod === 'none';
      const clientSecret = isPublic ? undefined : randomBytes(32).toString('hex');
      await store.createClient({
        clientId,
        redirectUris: [],
        profile: 'default',
        tokenEndpointAuthMethod: 'client_secret_basic',
        source: 'admin',
        createdAt: clock.now(),
        ...(clientSecret !== undefined ? { clientSecretHash: hashToken(clientSecret) } : {}),
        ...fields,
      });
      return { clientId, clientSecret };
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
