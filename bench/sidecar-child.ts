// The sidecar as production builds it (createSidecar, Redis store from the config), in a process of
// its own so that its RSS and CPU are its alone. Configured by the parent through the environment;
// BENCH_SRC_DIR runs another copy of src/ (BENCH_BASELINE: an earlier commit, side by side).

import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { LogLevel } from '../src/config.ts';
import { serveChild } from './child-ipc.ts';

const env = process.env;
const src = env.BENCH_SRC_DIR ?? join(import.meta.dirname, '..', 'src');
const { createSidecar } = (await import(pathToFileURL(join(src, 'app.ts')).href)) as typeof import('../src/app.ts');
const { buildConfig } = (await import(pathToFileURL(join(src, 'config.ts')).href)) as typeof import('../src/config.ts');

const config = buildConfig(
  {
    masterToken: env.BENCH_MASTER_TOKEN,
    store: 'redis',
    redis: { url: env.BENCH_REDIS_URL },
    upstream: { url: env.BENCH_UPSTREAM_URL },
    proxy: { host: '127.0.0.1', port: 0 },
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
const sidecar = await createSidecar({ config });
const { proxyUrl, adminUrl } = await sidecar.listen();
serveChild({ proxyUrl, adminUrl }, () => sidecar.shutdown(1000));
