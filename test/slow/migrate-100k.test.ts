// `mcp-bearer-proxy migrate` on 100,000 records written by the layout-1 code (test/support/layout-1.ts):
// 7,200 clients with 3 token pairs each (one rotated) and a user-grade token each, 14 keys per client;
// the layout-1 sidecar serving under load during the migration, which is killed at a random point
// and run again; then the current sidecar (a sample of every 97th token checked, and the operations
// that reach layout-1 records). The same scenario on a small store runs in test/integration/migrate.test.ts.

import { describe, expect, it } from 'vitest';
import { runMigrationScenario } from '../support/migration.ts';

describe('mcp-bearer-proxy migrate on 100,000 records', () => {
  it('moves them while the previous version serves under load; killed at a random point and resumed; idempotent', async () => {
    const started = performance.now();
    const run = await runMigrationScenario({ clients: 7200, pairs: 3, killWithinMs: 3000, checkAll: false });
    console.log(
      `migration of ${run.written} keys: ${run.loadRequests} requests under load, ${run.loadMismatches} mismatches, ${Math.round((performance.now() - started) / 1000)} s in all\ninterrupted run:\n${run.outputs[0].slice(-1500)}\nresumed run:\n${run.outputs[1]}`,
    );
    expect(run.written).toBeGreaterThanOrEqual(100_000);
    expect(run.loadRequests).toBeGreaterThan(0);
    expect(run.loadMismatches).toBe(0);
    expect(run.outputs[2]).toContain('moved 0 records to layout 2');
  }, 1_800_000);
});
