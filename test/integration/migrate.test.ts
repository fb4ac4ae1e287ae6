// `mcp-bearer-proxy migrate` on a store written by the layout-1 code (test/support/layout-1.ts checks
// that code out of git and runs it): 40 clients with 3 token pairs each, a user-grade token each, some
// revoked; the layout-1 sidecar serving under load during a migration killed at a random point and
// run again; the current sidecar after it. The 100,000-record run is test/slow/migrate-100k.test.ts.

import { describe, expect, it } from 'vitest';
import { runMigrationScenario } from '../support/migration.ts';

describe('mcp-bearer-proxy migrate (layout 1 to the bucketed layout)', () => {
  it('moves a live store while the previous version serves it: valid stays valid, revoked stays revoked; killed and resumed; idempotent', async () => {
    const run = await runMigrationScenario({ clients: 40, pairs: 3, killWithinMs: 50, checkAll: true });
    console.log(`migration: ${run.loadRequests} requests under load during it; resumed run printed:\n${run.outputs[1]}`);
    expect(run.loadRequests).toBeGreaterThan(0);
    expect(run.loadMismatches).toBe(0);
    // The resumed run moved what the interrupted one had not; the third found nothing left to add.
    expect(run.outputs[1]).toMatch(/moved \d+ records to layout 2/);
    expect(run.outputs[2]).toContain('moved 0 records to layout 2');
    // 40 clients x 3 pairs, and the pair each first refresh token was rotated into.
    expect(run.outputs[2]).toMatch(/oauthAccessTokens\s+scanned 160, copied 0, merged 0, unchanged 160/);
  }, 180_000);
});
