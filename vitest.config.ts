import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Real Sentinel and Cluster topologies: `npm run test:slow` (vitest.slow.config.ts).
    exclude: [...configDefaults.exclude, 'test/slow/**'],
    globalSetup: ['test/support/global-setup.ts'],
    // Safety nets only: nothing waits on a timer to decide a result.
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    reporters: ['default'],
  },
});
