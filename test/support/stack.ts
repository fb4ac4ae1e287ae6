// A whole stack on loopback for integration and e2e tests: the reference upstream (or a given URL),
// a sidecar built exactly as production builds it (createSidecar), its logs captured line by line.

import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { createSidecar, lookupCacheOptions, type Sidecar } from '../../src/app.ts';
import type { LookupCacheOptions } from '../../src/store/redis-lookup-cache.ts';
import { ManualClock, type Clock } from '../../src/model/clock.ts';
import { buildConfig } from '../../src/config/load.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { MemoryTokenStore } from '../../src/store/memory.ts';
import type { CimdResolver } from '../../src/oauth/cimd.ts';
import type { TokenStore } from '../../src/store/types.ts';
import type { RunningUpstream } from '../../examples/upstream/server.ts';
import { deleteUnder, openRedisStore, rawRedis, redisUrl, uniquePrefix } from './redis.ts';
import { startEchoUpstream, type FakeUpstream } from './fake-upstreams.ts';

export interface Stack {
  sidecar: Sidecar;
  proxyUrl: string;
  adminUrl: string;
  mcpUrl: string;
  masterToken: string;
  store: TokenStore;
  clock: ManualClock;
  upstream: RunningUpstream | undefined;
  prefix: string;
  /** Every log line the sidecar wrote, raw (JSON text). */
  logs: string[];
  /** POST /oauth/<op> on the admin listener with the master token. */
  admin(op: string, body?: Record<string, unknown>): Promise<{ status: number; body: any }>;
  /** A fresh OAuth access token for a fresh client. */
  issueOAuthToken(lifetimeSeconds?: number): Promise<{ token: string; clientId: string }>;
  close(): Promise<void>;
}

export interface StackOptions {
  store?: 'redis' | 'memory';
  /** Point the sidecar at this upstream instead of starting the reference one. */
  upstreamUrl?: string;
  /** Redis URL for the sidecar's store (e.g. a private redis-server that a test kills). */
  redisUrl?: string;
  config?: Record<string, unknown>;
  clock?: ManualClock;
  /** Wraps the store the sidecar uses (e.g. to hold a lookup at a chosen point); `stack.store` stays the plain one. */
  wrapStore?: (store: TokenStore) => TokenStore;
  /** Share another stack's key prefix (two sidecars on one Redis, as two replicas are). */
  prefix?: string;
  /** Client ID Metadata Document resolver (e.g. one trusting a test CA). */
  cimd?: CimdResolver;
  /** With the lookup cache on (`auto`, the default, or `tracking`): settings over the configured ones (e.g. a test hook). */
  lookupCache?: Partial<LookupCacheOptions>;
  /** The `OTEL_*` variables the sidecar reads (tracing); default: none, tracing off. */
  env?: NodeJS.ProcessEnv;
}

export async function startStack(options: StackOptions = {}): Promise<Stack> {
  const clock = options.clock ?? new ManualClock();
  const masterToken = randomBytes(32).toString('hex');
  const prefix = options.prefix ?? uniquePrefix('stack');
  const upstream = options.upstreamUrl
    ? undefined
    : await (await import('../../examples/upstream/server.ts')).startUpstream({ host: '127.0.0.1', port: 0 });
  const upstreamUrl = options.upstreamUrl ?? upstream!.url;
  const extra = options.config ?? {};
  const config = buildConfig(
    {
      ...extra,
      masterToken,
      store: options.store ?? 'redis',
      redis: {
        url: options.redisUrl ?? redisUrl(),
        keyPrefix: prefix,
        commandTimeoutMs: 500,
        connectTimeoutMs: 5000,
        ...(extra.redis as object),
      },
      upstream: { url: upstreamUrl, ...(extra.upstream as object) },
      proxy: { host: '127.0.0.1', port: 0, ...(extra.proxy as object) },
      admin: { host: '127.0.0.1', port: 0, ...(extra.admin as object) },
      // Off unless a test turns them on: many tests fail authentication on purpose from one address.
      rateLimits: {
        failedAuthPerMinute: 0,
        tokenRequestsPerMinute: 0,
        revocationRequestsPerMinute: 0,
        introspectionRequestsPerMinute: 0,
        adminFailedAuthPerMinute: 0,
        ...(extra.rateLimits as object),
      },
      logLevel: 'debug',
    },
    {},
  );
  const logs: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) logs.push(line);
      done();
    },
  });
  const logger = createLogger('debug', destination);
  let store: TokenStore;
  if ((options.store ?? 'redis') === 'memory') store = new MemoryTokenStore({ clock, keyPrefix: prefix });
  else {
    // As production: the cache with `tracking` and with `auto` (the default), Cluster included.
    const cached = config.redis.lookupCache !== 'off';
    const lookupCache = cached ? { ...lookupCacheOptions(config, logger), ...options.lookupCache } : undefined;
    store = await openRedisStore(prefix, { url: config.redis.url, commandTimeoutMs: config.redis.commandTimeoutMs, lookupCache });
  }
  const sidecar = await createSidecar({
    config,
    store: options.wrapStore ? options.wrapStore(store) : store,
    clock: clock as Clock,
    logger,
    defaultMetrics: false,
    env: options.env ?? {},
    ...(options.cimd ? { cimd: options.cimd } : {}),
  });
  const { proxyUrl, adminUrl } = await sidecar.listen();

  const admin: Stack['admin'] = async (op, body = {}) => {
    const res = await fetch(`${adminUrl}/oauth/${op}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ callerToken: masterToken, ...body }),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };

  return {
    sidecar,
    proxyUrl,
    adminUrl,
    mcpUrl: `${proxyUrl}/mcp`,
    masterToken,
    store,
    clock,
    upstream,
    prefix,
    logs,
    admin,
    async issueOAuthToken(lifetimeSeconds = 3600) {
      const created = await admin('createClient', { clientName: 'test' });
      if (created.status !== 201) throw new Error(`createClient: ${created.status}`);
      const issued = await admin('createAccessToken', { clientId: created.body.clientId, lifetimeSeconds });
      if (issued.status !== 201) throw new Error(`createAccessToken: ${issued.status}`);
      return { token: issued.body.accessToken as string, clientId: created.body.clientId as string };
    },
    async close() {
      await sidecar.shutdown(1000);
      await upstream?.close();
      if ((options.store ?? 'redis') === 'redis' && !options.redisUrl) {
        const raw = await rawRedis();
        await deleteUnder(raw, prefix);
        await raw.quit();
      }
    },
  };
}

export interface EchoStack {
  echo: FakeUpstream;
  stack: Stack;
  /** An OAuth access token of a fresh client, and that client. */
  token: string;
  clientId: string;
  /** The proxy listener as a raw-socket test addresses it. */
  host: string;
  port: number;
  close(): Promise<void>;
}

/** A sidecar in front of an echo upstream, with one OAuth token: the set-up of the raw-socket header tests. */
export async function startEchoStack(options: Omit<StackOptions, 'upstreamUrl'> = {}): Promise<EchoStack> {
  const echo = await startEchoUpstream();
  const stack = await startStack({ ...options, upstreamUrl: echo.url });
  const { token, clientId } = await stack.issueOAuthToken();
  const url = new URL(stack.proxyUrl);
  return {
    echo,
    stack,
    token,
    clientId,
    host: url.host,
    port: Number(url.port),
    async close() {
      await stack.close();
      await echo.close();
    },
  };
}
