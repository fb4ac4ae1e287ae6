// The sidecar as production builds it (createSidecar, Redis store from the config), in a process of
// its own so that its RSS and CPU are its alone. Configured by the parent through the environment;
// BENCH_SRC_DIR runs another copy of src/ (BENCH_BASELINE: an earlier commit, side by side).

import cluster from 'node:cluster';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { LogLevel } from '../src/config/load.ts';
import { serveChild } from './child-ipc.ts';

const env = process.env;
const src = env.BENCH_SRC_DIR ?? join(import.meta.dirname, '..', 'src');
/** A module of `src`, by its path now or, for a baseline from before the folders, its earlier one. */
const module = (now: string, before: string): string => pathToFileURL(join(src, existsSync(join(src, now)) ? now : before)).href;
const { createSidecar } = (await import(module('app.ts', 'app.ts'))) as typeof import('../src/app.ts');
const { buildConfig } = (await import(module('config/load.ts', 'config.ts'))) as typeof import('../src/config/load.ts');

const config = buildConfig(
  {
    masterToken: env.BENCH_MASTER_TOKEN,
    store: 'redis',
    // BENCH_LOOKUP_CACHE: off (strict, what bench/run.ts gives every target but the cache ones) or tracking.
    redis: { url: env.BENCH_REDIS_URL, ...(env.BENCH_LOOKUP_CACHE ? { lookupCache: env.BENCH_LOOKUP_CACHE } : {}) },
    // BENCH_ASSERTION=1: a signed caller assertion on every forwarded request (the sidecar-assertion target).
    upstream: { url: env.BENCH_UPSTREAM_URL, ...(env.BENCH_ASSERTION === '1' ? { assertion: true } : {}) },
    // BENCH_FORWARD_AUTH=1: /authz on, for nginx auth_request (the forward-auth targets). Set only when
    // asked, so that a baseline from before the key existed still starts.
    proxy: {
      host: '127.0.0.1',
      port: 0,
      workers: Number(env.BENCH_WORKERS ?? 1),
      shutdownGraceMs: 1000,
      // The ingress's address trusted, as docs/forward-auth.md has it: its X-Forwarded-For names the client.
      ...(env.BENCH_FORWARD_AUTH === '1' ? { forwardAuth: true, trustedProxies: ['127.0.0.1'] } : {}),
      // BENCH_FORWARD_AUTH_LOG_ALLOWED=1: an access log line for each allowed /authz check too (off by default).
      ...(env.BENCH_FORWARD_AUTH_LOG_ALLOWED === '1' ? { forwardAuthLogAllowed: true } : {}),
    },
    admin: { host: '127.0.0.1', port: 0 },
    // The rejected-token scenario sends a stream of bad tokens from one address on purpose: with the
    // limiter on, it would measure 429s after the first 120.
    rateLimits: { failedAuthPerMinute: 0 },
    logLevel: (env.BENCH_LOG_LEVEL ?? 'info') as LogLevel,
    // BENCH_POLICY: a per-tool policy as JSON (the policy scenario); absent, none.
    ...(env.BENCH_POLICY ? { policy: JSON.parse(env.BENCH_POLICY) as object } : {}),
  },
  {},
);
if (config.proxy.workers > 1 || cluster.isWorker) {
  // BENCH_WORKERS: src/entry/workers.ts as main.ts runs it; this process is the primary, billed with its workers.
  const { groupLogger, runPrimary, runWorker } = (await import(
    module('entry/workers.ts', 'workers.ts')
  )) as typeof import('../src/entry/workers.ts');
  const { openStore } = (await import(module('app.ts', 'app.ts'))) as typeof import('../src/app.ts');
  const { systemClock } = (await import(module('model/clock.ts', 'clock.ts'))) as typeof import('../src/model/clock.ts');
  const logger = groupLogger(config);
  const store = await openStore(config, systemClock, logger);
  if (cluster.isWorker) await runWorker(config, store, logger);
  else {
    const urls = await runPrimary(config, store, logger, config.proxy.workers);
    // The group's own graceful stop (SIGTERM) exits this process.
    serveChild(urls, () => new Promise(() => process.kill(process.pid, 'SIGTERM')));
  }
} else {
  const sidecar = await createSidecar({ config });
  const { proxyUrl, adminUrl } = await sidecar.listen();
  serveChild({ proxyUrl, adminUrl }, () => sidecar.shutdown(1000));
}
