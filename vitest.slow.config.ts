import { defineConfig } from 'vitest/config';

// The slow tests (`npm run test:slow`): real Redis Sentinel and Redis Cluster topologies started on
// loopback, and the official MCP conformance suite through the sidecar (test/slow/). Not part of
// `npm test`; CI runs both (.ci/run).
export default defineConfig({
  test: {
    include: ['test/slow/**/*.test.ts'],
    // Same global setup as `npm test`: the shared helpers (test/support/redis.ts) take their key
    // prefix from it. The HA topologies themselves are started by each test file.
    globalSetup: ['test/support/global-setup.ts'],
    // Safety nets only: every wait is a bounded poll on a real condition.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    reporters: ['default'],
  },
});
